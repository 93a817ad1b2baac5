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

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import projection
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

from . import cache
from .kube import describe, now_iso

log = logging.getLogger(__name__)

# What the converge runs in the controller pod (_slurm.SCONTROL): epoch times, one line per node.
SHOW_NODES = ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "node", "-o"]


def _ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((pod or {}).get("status") or {}).get("conditions") or ())


def status_changes(nodesets, statefulsets, pods, slurm):
    """([(NodeSet name, counts)], [(pod name, condition)]) that differ from what the objects say now. Pure."""
    counts_to_write = []
    for ns in nodesets:
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
        if sts_name not in sets or names.ordinal(name, sts_name) is None or pod["metadata"].get("deletionTimestamp"):
            continue
        desired = projection.pod_condition(slurm.get(name))
        if not projection.same_condition(projection.live_condition(pod), desired):
            conditions.append((name, desired))
    return counts_to_write, conditions


class SlurmStatus:
    def __init__(self, kube, controller, period):
        self.kube, self.controller, self.period = kube, controller, period

    def start(self):
        threading.Thread(target=self._loop, daemon=True, name="slurm-status").start()

    def _loop(self):
        while not self.controller._stopping.wait(self.period):
            for cluster in self.controller.informers[names.CLUSTER_KIND].store.list():
                try:
                    self.refresh(cluster)
                except Exception as exc:  # noqa: BLE001  the next period tries again; the converge does the same
                    log.warning("Slurm status of %s/%s: %s", cluster["metadata"].get("namespace"),
                                cluster["metadata"]["name"], describe(exc))

    def _cached(self, kind, namespace, cluster_name):
        informer = self.controller.owned.get(kind)
        if informer is None:
            return {}
        return dict((o["metadata"]["name"], o) for o in informer.store.list(
            namespace, lambda o: cache.cluster_of(o, names.LABEL_CLUSTER) == cluster_name))

    def refresh(self, cluster):
        namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        pods = self._cached("Pod", namespace, name)
        controller_pod = names.controller_pod(name)
        if not _ready(pods.get(controller_pod)) or (cluster.get("spec") or {}).get("maintenance"):
            return
        rc, out, err = self.kube.exec_argv(namespace, controller_pod, "slurmctld", SHOW_NODES)
        if rc != 0:
            log.info("Slurm status of %s/%s: scontrol exited %s: %s", namespace, name, rc, err.strip()[:200])
            return
        slurm = scontrol.parse_show_node(out)
        nodesets = [ns for ns in self.controller.informers[names.NODESET_KIND].store.list(namespace)
                    if ((ns.get("spec") or {}).get("clusterRef") or {}).get("name") == name
                    and not ns["metadata"].get("deletionTimestamp")]
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
