# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every-node NodeSets (``spec.placement.everyNode``): one worker on every matching Kubernetes node. Pure.

What a DaemonSet does, with Slurm's rules. A node matches when its labels (and name) satisfy the NodeSet's merged
placement (nodeSelector, required node affinity: ``pins.matches``) and the worker tolerates its NoSchedule and
NoExecute taints (the placement's tolerations and the DaemonSet's own, ``render/worker.EVERY_NODE_TOLERATIONS``: a
cordon is no reason to go). Its worker is one Pod named :func:`names.every_node_worker` (pod = hostname = Slurm node,
a dynamic ``slurmd -Z`` node as a StatefulSet's) and bound by ``spec.nodeName``: no scheduler is asked, so a worker
deleted on a cordoned node comes back there (Slinky's #259: a DaemonSet-like pod never made again on a cordoned node).

* a matching node without its worker gets one (not during maintenance; within what ``spec.slurm.maxNodeCount``
  leaves beside the other NodeSets: Slurm refuses a dynamic node past it);
* a worker whose node no longer matches (unlabelled, a taint) or is gone is removed as a scale-in removes one: drained
  (``soperator: scale-in``), its pod deleted once idle (or past ``drainTimeout`` with ``onDrainTimeout: Proceed``,
  with the ``DrainTimeoutExpired`` Event), its Slurm record deleted once its pod is gone (no ghost in sinfo); a node
  that matches again before that is resumed;
* a cordoned node keeps its worker; ``spec.healthChecks.kubernetesNodes.drainCordoned`` drains it (projection.py);
* a changed pod template rolls like a StatefulSet's (``rolls.roll_pods``: drained, replaced once idle, resumed);
* a worker's pod that failed (the kubelet refused it: not enough CPU or memory on the node) is deleted and made again,
  its reason in the NodeSet's status; with backoff (:func:`retry_delay`): the first failure is replaced at once, each
  next one in a row waits twice as long, up to ``RETRY_CAP``, the failed pod kept (its reason to see) until then. The
  failures in a row are counted in the NodeSet's ``status.podBackoff`` (a pass has no other memory), and forgotten
  once the worker's pod is ready or its node no longer wants one.

The Kubernetes nodes are read by the converge (a list: cluster-scoped, the opt-in ``operator_read_nodes``); without
them nothing is made or removed and the NodeSet's status says why. Removals need Slurm (to drain first).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Collection, Mapping, Optional, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations, values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains, projection, rolls
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_DRAINING, REQUEUE_PROGRESSING, REQUEUE_SLURM_UNREACHABLE, Context, NodeFacts, NodeSetFacts, Draft, deleting,
    drain_timeout, name, nodeset_pods, pod_ready,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan.pins import matches
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import PodRenderer
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import merge_placement
from ansible_collections.soperator.slurm.plugins.module_utils.render.worker import EVERY_NODE_TOLERATIONS
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, Spec

# Taint effects that keep a pod off a node (PreferNoSchedule only steers the scheduler, which is not asked here).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
FAILED_NAMED = 5  # failed pods a NodeSet's status names
UNMATCHED = "every-node NodeSet (its Kubernetes node no longer matches)"  # the DrainTimeoutExpired Event's words
# A failed worker pod is made again at once, then after 10 s, 20 s, ... at most 5 min while its pods keep failing:
# a node that cannot take the worker (its CPU or memory taken) is not asked every pass.
RETRY_FIRST = 10
RETRY_CAP = 300


def node_facts(node: KubeObject) -> NodeFacts:
    """What the planners read of a Kubernetes Node (the converge's ``k8s_nodes`` values)."""
    spec = node.get("spec") or {}
    ready = readiness.condition(node, readiness.READY) or {}
    return {"unschedulable": bool(spec.get("unschedulable")),
            "labels": dict((node.get("metadata") or {}).get("labels") or {}),
            "taints": [dict(t) for t in spec.get("taints") or ()],
            "conditions": dict((c.get("type"), c.get("status"))
                               for c in (node.get("status") or {}).get("conditions") or ()),
            "ready_since": durations.epoch_of(ready.get("lastTransitionTime"))}


def tolerates(toleration: Mapping[str, object], taint: Mapping[str, object]) -> bool:
    """Whether a pod's toleration tolerates a node's taint, as Kubernetes judges it."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"  # an empty key with Exists tolerates every taint
    if toleration["key"] != taint.get("key"):
        return False
    return operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or "")


def eligible(node_name: str, node: NodeFacts, placement: KubeObject) -> bool:
    """Whether an every-node worker with the merged ``placement`` belongs on Kubernetes node ``node_name`` (``node``
    as the converge reads it: ``labels``, ``taints``)."""
    if not matches(node_name, node.get("labels"), placement):
        return False
    tolerations = list(placement.get("tolerations") or ()) + list(EVERY_NODE_TOLERATIONS)
    return all(any(tolerates(t, taint) for t in tolerations) for taint in node.get("taints") or ()
               if taint.get("effect") in BLOCKING_EFFECTS)


def wanted(cluster_name: str, cluster_placement: Spec | None, nodeset: NodeSet,
           k8s_nodes: Mapping[str, NodeFacts]) -> dict[str, str]:
    """``{worker name: Kubernetes node}`` of the nodes an every-node NodeSet has a worker on."""
    placement = merge_placement(cluster_placement, nodeset["spec"].get("placement"))
    return dict((names.every_node_worker(cluster_name, name(nodeset), node), node)
                for node in sorted(k8s_nodes) if eligible(node, k8s_nodes[node], placement))


def own_pods(ctx: Context, nodeset: NodeSet) -> dict[str, KubeObject]:
    """``{name: pod}`` of a NodeSet's worker pods (by their labels: every-node workers have no ordinal)."""
    return nodeset_pods(ctx.pods, name(nodeset))


def own_slurm_nodes(ctx: Context, nodeset: NodeSet) -> list[str]:
    """The Slurm nodes that are (or were) workers of an every-node NodeSet: named ``<cluster>-<set>-...`` with no
    ordinal, and with the NodeSet's feature (every worker registers with it; another NodeSet's name is no feature)."""
    prefix = names.worker_name(ctx.name, name(nodeset)) + "-"
    return sorted(n for n, node in (ctx.slurm or {}).items()
                  if n.startswith(prefix) and names.ordinal(n, names.statefulset_of(n)) is None
                  and name(nodeset) in (node.get("features") or ()))


def _failed(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def retry_delay(failures: int) -> int:
    """Seconds a worker whose pods failed ``failures`` times in a row waits before its next pod: 0 after the first
    failure, then RETRY_FIRST doubling, at most RETRY_CAP."""
    if failures <= 1:
        return 0
    return min(RETRY_CAP, RETRY_FIRST * 2 ** min(failures - 2, 16))


def backoff(entry: KubeObject | None, pod: KubeObject, now: int) -> KubeObject:
    """The ``status.podBackoff`` entry of a worker whose pod ``pod`` failed, given its ``entry`` before (None: no
    failure in a row): a failure counted once per pod (by its uid), whichever pass sees it first."""
    uid = pod["metadata"].get("uid")
    if entry and entry.get("uid") == uid and durations.epoch_of(entry.get("retryAt")) is not None:
        return entry
    failures = int((entry or {}).get("failures") or 0) + 1
    return {"failures": failures, "retryAt": durations.iso(now + retry_delay(failures)), "uid": uid}


def _template_hash(pod: KubeObject) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_TEMPLATE_HASH)


def room(ctx: Context) -> int:
    """How many Slurm node names the every-node NodeSets may take together: ``spec.slurm.maxNodeCount`` less every
    other NodeSet's (their replicas, an elastic set's maxNodes; values.nodeset_size)."""
    taken = sum(values.nodeset_size(v.nodeset["spec"]) for v in ctx.views if not v.leaving)  # every-node: 0
    return max(0, int(ctx.spec["slurm"]["maxNodeCount"]) - taken)


def remove(p: Draft, ctx: Context, nodeset: NodeSet, pod_name: str, pod: KubeObject, why: str) -> str | None:
    """A worker that goes (its node no longer matches, is gone, or the NodeSet goes): drained first, its pod deleted
    once idle (``drains.plan_node``, as a scale-in). Returns the node's name while it still waits, else None."""
    if ctx.slurm is None:
        return pod_name
    node = ctx.slurm.get(pod_name)
    action, removable, expired = drains.plan_node(node, now=ctx.now, drain_timeout=drain_timeout(nodeset))
    if action == drains.DRAIN:
        p.drain_node(pod_name, names.REASON_SCALE_IN)
        return pod_name
    if not removable:
        return pod_name
    p.delete_pods.append((pod_name, pod["metadata"].get("uid")))
    if expired:
        p.give_up_node(nodeset, pod_name, why, "spec.drainTimeout", nodeset["spec"]["drainTimeout"],
                       drains.drain_time(node), down_reason=names.REASON_SCALE_IN)
    return None


def forget(p: Draft, ctx: Context, nodeset: NodeSet, keep: Collection[str]) -> list[str]:
    """Slurm records of the NodeSet's workers whose pods are gone for good (not in ``keep``, no pod): deleted once no
    job runs on them. Returns the busy ones."""
    slurm = drains.answered(ctx.slurm)
    busy = []
    for node_name in own_slurm_nodes(ctx, nodeset):
        if node_name in keep or node_name in ctx.pods:
            continue
        if slurm[node_name]["busy"]:
            busy.append(node_name)
        elif node_name not in p.delete_nodes:
            p.delete_nodes.append(node_name)
            if node_name in p.resume:
                p.resume.remove(node_name)
    return busy


def facts(want: Mapping[str, Optional[str]], pods: Mapping[str, KubeObject], slurm: Mapping[str, SlurmNode] | None,
          problem: str | None = None, failed: Sequence[str] = (),
          retries: dict[str, KubeObject] | None = None) -> NodeSetFacts:
    """A NodeSet's status facts (see scale.nodeset_facts) for an every-node set; ``retries``: its podBackoff."""
    live = [pods[n] for n in sorted(pods) if not deleting(pods[n])]
    counts, serving = projection.node_counts(sorted(set(want) | set(pods)), slurm or {})
    result: NodeSetFacts = {
        "statefulset": None, "everyNode": True, "leaving": False, "nodes": sorted(set(want) | set(pods)),
        "replicas": len(live), "currentReplicas": len(live), "desired": len(want),
        "readyReplicas": len([pod for pod in live if pod_ready(pod)]), "serving": serving,
        "workerNodes": dict((n, (pods[n].get("spec") or {}).get("nodeName") or want.get(n)) for n in pods)}
    result["workerNodes"].update((n, host) for n, host in want.items() if n not in pods)
    if slurm is not None:
        for key in projection.COUNT_KEYS:
            result[key] = counts[key]
    if problem:  # keeps the NodeSet from Ready, said in its message (status.nodeset_status)
        result["problem"] = problem
    if failed:
        result["unschedulable"] = list(failed)[:FAILED_NAMED]
    if retries is not None:
        result["podBackoff"] = retries
    return result


def plan_set(p: Draft, ctx: Context, nodeset: NodeSet, template_hash: str, render_pod: PodRenderer, budget: int) -> int:
    """One valid every-node NodeSet; ``budget``: Slurm node names still free (:func:`room`). Returns what is left of
    the budget."""
    set_name = name(nodeset)
    pods = own_pods(ctx, nodeset)
    k8s_nodes = ctx.observed.get("k8s_nodes")
    if k8s_nodes is None:
        why = ctx.observed.get("k8s_nodes_error")
        problem = None
        if why:  # asked and refused (the operator's cache check does not ask: silent there)
            problem = ("spec.placement.everyNode: %s: no worker is made or removed (the operator needs "
                       "operator_read_nodes)" % why)
            p.deferred.append("NodeSet %s: %s" % (set_name, problem))
        p.nodesets[set_name] = facts(dict((n, None) for n in pods), pods, ctx.slurm, problem)
        return budget
    want = wanted(ctx.name, ctx.spec.get("placement"), nodeset, k8s_nodes)
    # Within maxNodeCount: workers that run keep their names first, then the nodes in name order.
    order = sorted(want, key=lambda n: (n not in pods, want[n]))
    over = order[budget:]
    want = dict((n, want[n]) for n in order[:budget])
    budget -= len(want)
    maintenance = ctx.spec["maintenance"]
    failed: list[str] = []
    moving: list[str] = []
    waiting: list[str] = []
    before = (nodeset.get("status") or {}).get("podBackoff") or {}
    retries: dict[str, KubeObject] = {}
    retry_in: list[int] = []
    for pod_name, node in sorted(want.items()):
        pod = pods.get(pod_name)
        if before.get(pod_name) and not (pod is not None and pod_ready(pod)):
            retries[pod_name] = before[pod_name]  # failures in a row, until a pod of it is ready
        if pod is None:
            if not maintenance:
                p.create_pods.append(render_pod(nodeset, node))
                moving.append(pod_name)
        elif deleting(pod):
            moving.append(pod_name)
        elif _failed(pod) and not maintenance:
            status = pod.get("status") or {}
            entry = retries[pod_name] = backoff(before.get(pod_name), pod, ctx.now)
            retry_at = durations.epoch_of(entry["retryAt"])
            left = 0 if retry_at is None else retry_at - ctx.now  # backoff's entries always have a time
            failed.append("%s: %s" % (pod_name, (status.get("message") or status.get("reason") or "failed")[:200])
                          + ("; made again in %d s (%d failures in a row)" % (round(left), entry["failures"])
                             if left > 0 else ""))
            if left > 0:
                retry_in.append(left)  # the failed pod is kept until then: its reason stays to see
            else:
                p.delete_pods.append((pod_name, pod["metadata"].get("uid")))  # made again on a later pass
    for pod_name, pod in sorted(pods.items()):
        if pod_name in want or maintenance:  # in maintenance every worker goes anyway (maintenance)
            continue
        if deleting(pod):
            moving.append(pod_name)
        elif remove(p, ctx, nodeset, pod_name, pod, UNMATCHED) is not None:
            waiting.append(pod_name)
        else:
            moving.append(pod_name)  # deleted now: its Slurm record goes once the pod is gone (a later pass)
    if ctx.slurm is not None and not maintenance:
        # A node that matches again before its worker went: the scale-in is cancelled.
        for pod_name in sorted(want):
            node_now = ctx.slurm.get(pod_name)
            if node_now and node_now["drain"] and node_now["reason"] == names.REASON_SCALE_IN and pod_name in pods \
                    and pod_name not in p.resume:
                p.resume.append(pod_name)
    if ctx.slurm is not None:
        waiting += forget(p, ctx, nodeset, want)
    problem = None
    if over:
        problem = ("%d matching node(s) get no worker: spec.slurm.maxNodeCount (%d) is reached (%s)"
                   % (len(over), ctx.spec["slurm"]["maxNodeCount"], ", ".join(over[:5])))
        p.deferred.append("NodeSet %s: %s" % (set_name, problem))
    p.nodesets[set_name] = facts(want, pods, ctx.slurm, problem, failed, retries if retries or before else None)
    if not maintenance:
        mine = dict((n, pods.get(n)) for n in want)
        updated = set(n for n, pod in mine.items() if pod is not None and _template_hash(pod) == template_hash)
        up, out = rolls.roll_pods(p, nodeset, sorted(want), mine, updated, ctx.slurm, ctx.now)
        p.nodesets[set_name].update({"updatedReplicas": up, "outdatedReplicas": out})
    if waiting:
        p.wait(REQUEUE_SLURM_UNREACHABLE if ctx.slurm is None else REQUEUE_DRAINING,
               "NodeSet %s: %s leave (their Kubernetes nodes no longer match): %s" % (
                   set_name, ", ".join(sorted(waiting)),
                   "waiting for slurmctld to answer (to drain first)" if ctx.slurm is None else "draining"))
    if failed:
        # Looked at again when the first retry is due, or soon after a failed pod deleted now (made again then).
        due = [max(1, round(left)) for left in retry_in] + ([REQUEUE_DRAINING] if len(retry_in) < len(failed) else [])
        p.wait(min(due), "NodeSet %s: pods failed: %s" % (set_name, "; ".join(failed[:FAILED_NAMED])))
    elif moving:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: workers being made or replaced: %s" % (
            set_name, ", ".join(sorted(moving))))
    return budget


def leave(p: Draft, ctx: Context, nodeset: NodeSet) -> None:
    """An every-node NodeSet being deleted: every worker drained and removed as a scale-in; released once no pod and
    no Slurm record of it is left."""
    set_name = name(nodeset)
    pods = own_pods(ctx, nodeset)
    waiting = [n for n, pod in sorted(pods.items())
               if deleting(pod) or remove(p, ctx, nodeset, n, pod, "removal") is not None]
    p.nodesets[set_name] = left = facts({}, pods, ctx.slurm)
    left["leaving"] = True
    if ctx.slurm is None:
        p.wait(REQUEUE_SLURM_UNREACHABLE, "NodeSet %s: its removal waits for slurmctld to answer" % set_name)
        return
    forget(p, ctx, nodeset, ())
    records = own_slurm_nodes(ctx, nodeset)
    if not pods and not records:
        p.release.append(set_name)
    else:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: waiting for %s to go" % (set_name, ", ".join(waiting or records)))


def maintenance(p: Draft, ctx: Context, nodeset: NodeSet) -> list[str]:
    """``spec.maintenance`` for an every-node NodeSet (``modes.EveryNode``): each worker drained (``soperator:
    maintenance``) and its pod deleted once idle (the StatefulSets go to zero then); returns the workers maintenance
    still waits for. Their Slurm records stay, and the same names come back when maintenance ends."""
    slurm = drains.answered(ctx.slurm)
    waiting = []
    for pod_name, pod in sorted(own_pods(ctx, nodeset).items()):
        waiting.append(pod_name)
        if deleting(pod):
            continue
        action, removable, dummy = drains.plan_node(slurm.get(pod_name), now=ctx.now,
                                                    drain_timeout=drain_timeout(nodeset))
        if action == drains.DRAIN:
            p.drain_node(pod_name, names.REASON_MAINTENANCE)
        elif removable:
            p.delete_pods.append((pod_name, pod["metadata"].get("uid")))
    return waiting


def plan_every_node(p: Draft, ctx: Context, template_hashes: Mapping[str, str], render_pod: PodRenderer) -> None:
    """Decide every every-node NodeSet of ``ctx``: writes ``p.create_pods`` (``render_pod(nodeset, Kubernetes
    node)``), ``p.delete_pods``, ``p.drain`` (scale-in), ``p.resume``, ``p.delete_nodes``, ``p.give_up``,
    ``p.release``, ``p.nodesets`` (facts: ``workerNodes``) and the waits. ``template_hashes``: ``{nodeset name:
    hash}`` of the rendered pods."""
    for nodeset in ctx.of(values.EVERY_NODE, leaving=True):
        leave(p, ctx, nodeset)
    budget = room(ctx)
    for nodeset in sorted(ctx.of(values.EVERY_NODE), key=name):
        budget = plan_set(p, ctx, nodeset, template_hashes[name(nodeset)], render_pod, budget)
