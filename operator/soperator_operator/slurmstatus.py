"""Slurm's node states into Kubernetes between role runs. Jobs start and end without any Kubernetes event, so the
caches cannot tell the runtime that a NodeSet's counts or a worker pod's SlurmNodeReady condition went stale; every
``--status-period`` this asks each cluster's slurmctld for its nodes (one exec of ``scontrol show node -o`` in the
controller pod, the command the converge runs) and writes only what changed: the NodeSets' counts (status subresource)
and the worker pods' conditions (pods/status). The collection's pure core decides (``scontrol.parse_show_node``,
``projection``), as in the converge, so both write the same values. Nothing is drained or resumed here: that is the
converge's, which runs on its own triggers.
"""

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ansible_collections.soperator.slurm.plugins.module_utils import names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api import values as api_values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import elastic, model, projection
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

from . import cache, workqueue
from .kube import describe, now_iso

if TYPE_CHECKING:
    from .kube import Kube
    from .metrics import OperatorMetrics

log = logging.getLogger(__name__)

# What the converge runs in the controller pod: epoch times, one line per node.
SHOW_NODES = scontrol.SHOW_NODES
# How often a cluster with an elastic NodeSet is asked (seconds): a powered-up node's job waits for its pod.
ELASTIC_PERIOD = 2.0

# Slurm's view of a cluster: ``{node name: node}`` as ``scontrol.parse_show_node`` returns it.
Slurm = Mapping[str, SlurmNode]


def status_changes(nodesets: Sequence[KubeObject], statefulsets: Mapping[str, KubeObject],
                   pods: Mapping[str, KubeObject],
                   slurm: Slurm) -> tuple[list[tuple[str, dict[str, int]]], list[tuple[str, model.PodCondition]]]:
    """([(NodeSet name, counts)], [(pod name, condition)]) that differ from what the objects say now. Pure."""
    counts_to_write: list[tuple[str, dict[str, int]]] = []
    bound: set[str] = set()  # the workers of every-node NodeSets (no StatefulSet, no ordinal: found by their labels)
    for ns in nodesets:
        if api_values.every_node(ns.get("spec") or {}):
            own = sorted(model.nodeset_pods(pods, ns["metadata"]["name"]))
            bound.update(own)
            counts, _serving = projection.node_counts(own, slurm)
        else:
            sts = statefulsets.get(names.worker_name(ns["spec"]["clusterRef"]["name"], ns["metadata"]["name"]))
            if sts is None:
                continue
            counts, _serving = projection.nodeset_counts(sts["metadata"]["name"],
                                                         int((sts.get("spec") or {}).get("replicas") or 0), slurm)
        status = ns.get("status") or {}
        if any(status.get(k) != v for k, v in counts.items()):
            counts_to_write.append((ns["metadata"]["name"], counts))
    conditions = []
    sets = set(s for s in statefulsets if ((statefulsets[s]["metadata"].get("labels") or {}).get(
        names.LABEL_COMPONENT) == names.COMPONENT_WORKER))
    for name, pod in sorted(pods.items()):
        sts_name = names.statefulset_of(name)
        if name not in bound and (sts_name not in sets or names.ordinal(name, sts_name) is None) or \
                pod["metadata"].get("deletionTimestamp"):
            continue
        desired = projection.pod_condition(slurm.get(name))
        if not projection.same_condition(projection.live_condition(pod), desired):
            conditions.append((name, desired))
    return counts_to_write, conditions


def elastic_counts(cluster_name: str, nodesets: Sequence[KubeObject], slurm: Slurm) -> dict[str, dict[str, int]]:
    """``{nodeset name: {state: count}}`` of the elastic NodeSets (plan/elastic.node_state). Pure."""
    counts = {}
    for ns in nodesets:
        elastic_spec = (ns.get("spec") or {}).get("elastic")
        if elastic_spec and isinstance(elastic_spec.get("maxNodes"), int):
            prefix = names.worker_name(cluster_name, ns["metadata"]["name"])
            found = dict((state, 0) for state in (elastic.UP, elastic.POWERING_UP, elastic.DOWN, elastic.FAILED))
            for i in range(elastic_spec["maxNodes"]):
                found[elastic.node_state(slurm.get(names.pod_name(prefix, i)))] += 1
            counts[ns["metadata"]["name"]] = found
    return counts


def elastic_mismatch(cluster_name: str, nodesets: Sequence[KubeObject], pods: Mapping[str, KubeObject],
                     slurm: Slurm) -> list[str]:
    """Node names of the elastic NodeSets whose pods do not match Slurm's power states (a run is due). Pure."""
    found = []
    for ns in nodesets:
        elastic_spec = (ns.get("spec") or {}).get("elastic")
        if elastic_spec and isinstance(elastic_spec.get("maxNodes"), int):
            prefix = names.worker_name(cluster_name, ns["metadata"]["name"])
            all_names = [names.pod_name(prefix, i) for i in range(elastic_spec["maxNodes"])]
            found += elastic.mismatched(all_names, slurm, pods)
    return found


def has_elastic(controller: cache.Caches, cluster: KubeObject) -> bool:
    namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    return any(((ns.get("spec") or {}).get("clusterRef") or {}).get("name") == name and (ns.get("spec") or {}).get(
        "elastic") for ns in controller.informers[names.NODESET_KIND].store.list(namespace))


class SlurmStatus:
    def __init__(self, kube: "Kube", controller: cache.Caches, period: float,
                 elastic_period: float = ELASTIC_PERIOD) -> None:
        self.kube, self.controller, self.period = kube, controller, period
        self.elastic_period = min(period, elastic_period)

    def start(self) -> None:
        threading.Thread(target=self._loop, daemon=True, name="slurm-status").start()

    def _loop(self) -> None:
        # Clusters with an elastic NodeSet are asked every elastic_period: Slurm powers a node up for a job with no
        # Kubernetes event, and the job waits for its pod. The others every period.
        last_full = 0.0
        while not self.controller._stopping.wait(self.elastic_period):
            full = time.monotonic() - last_full >= self.period
            if full:
                last_full = time.monotonic()
            for cluster in self.controller.informers[names.CLUSTER_KIND].store.list():
                if not full and not has_elastic(self.controller, cluster):
                    continue
                try:
                    self.refresh(cluster)
                except Exception as exc:  # noqa: BLE001  the next period tries again; the converge does the same
                    log.warning("Slurm status of %s/%s: %s", cluster["metadata"].get("namespace"),
                                cluster["metadata"]["name"], describe(exc))

    def _cached(self, kind: str, namespace: str, cluster_name: str) -> dict[str, KubeObject]:
        informer = self.controller.owned.get(kind)
        if informer is None:
            return {}
        return dict((o["metadata"]["name"], o) for o in informer.store.list(
            namespace, lambda o: cache.cluster_of(o, names.LABEL_CLUSTER) == cluster_name))

    def refresh(self, cluster: KubeObject) -> None:
        namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        pods = self._cached("Pod", namespace, name)
        controller_pod = names.controller_pod(name)
        if not readiness.ready(pods.get(controller_pod)) or (cluster.get("spec") or {}).get("maintenance"):
            return
        rc, out, err = self.kube.exec_argv(namespace, controller_pod, "slurmctld", SHOW_NODES)
        if rc != 0:
            log.info("Slurm status of %s/%s: scontrol exited %s: %s", namespace, name, rc, err.strip()[:200])
            return
        slurm = scontrol.parse_show_node(out)
        nodesets = [ns for ns in self.controller.informers[names.NODESET_KIND].store.list(namespace)
                    if ((ns.get("spec") or {}).get("clusterRef") or {}).get("name") == name
                    and not ns["metadata"].get("deletionTimestamp")]
        mismatch = elastic_mismatch(name, nodesets, pods, slurm)
        metrics: OperatorMetrics | None = getattr(self.controller, "metrics", None)
        if metrics is not None:
            for set_name, by_state in elastic_counts(name, nodesets, slurm).items():
                for state, count in by_state.items():
                    metrics.elastic_nodes.set(count, namespace=namespace, cluster=name, nodeset=set_name, state=state)
            if mismatch:
                metrics.elastic_resyncs.inc(namespace=namespace, cluster=name)
        if mismatch:
            log.info("elastic nodes of %s/%s powered up or down by Slurm: %s; reconciling", namespace, name,
                     ", ".join(mismatch[:10]))
            self.controller.queue.add((names.CLUSTER_KIND, namespace, name), reason=workqueue.REQUEUE)
        counts, conditions = status_changes(nodesets, self._cached("StatefulSet", namespace, name), pods, slurm)
        now = now_iso()
        for nodeset, values in counts:
            self.kube.patch_nodeset_counts(namespace, nodeset, values)
        for pod, condition in conditions:
            live = projection.live_condition(pods[pod])
            since = now if live is None or live.get("status") != condition["status"] else \
                live.get("lastTransitionTime") or now
            self.kube.patch_pod_condition(namespace, pod, dict(condition, lastTransitionTime=since))
        if counts or conditions:
            log.debug("Slurm status of %s/%s: %d NodeSet(s), %d pod condition(s) updated", namespace, name,
                      len(counts), len(conditions))
