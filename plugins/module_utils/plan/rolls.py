# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling updates of the workers: outdated pods replaced one drained node at a time. Pure.

Worker StatefulSets are ``OnDelete``. A pod on an older template revision is drained (``soperator: update``),
deleted once its Slurm node is idle (its UID as a precondition) and its node resumed when the new pod's slurmd
answers; ``updateStrategy.maxUnavailable`` nodes of a NodeSet at a time. Its jobs are waited for as long as they run,
unless ``updateStrategy.proceedAfter`` says how long (then a ``DrainTimeoutExpired`` Event); ``drainTimeout`` is not
a roll's: an upgrade rolls every worker.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Collection, Mapping, Optional, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains, projection
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_DRAINING, REQUEUE_PROGRESSING, REQUEUE_SLURM_UNREACHABLE, REVISION_LABEL, Context, Draft, Waiting, labels,
    name, pod_ready, replicas, revision_seen, template_hash,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan.scale import Rolling
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet


def update_timeout(nodeset: NodeSet) -> float | None:
    """Seconds after which a rolling update gives up on a drained node's jobs; None (the default): never.

    Not ``drainTimeout``: a collection upgrade rolls every worker, and a timeout meant for a scale-in someone asked for
    would kill every job longer than it, one ``maxUnavailable`` batch at a time."""
    after = (nodeset["spec"].get("updateStrategy") or {}).get("proceedAfter")
    return durations.seconds(after) if after else None


def _drained_since(node: SlurmNode | None, now: int) -> int:
    """Epoch seconds of the drain Slurm recorded (scontrol's Reason time), ``now`` when not known (drained now)."""
    when = None if node is None else node.get("reason_time")
    return when if isinstance(when, int) else now


def _waiting(node: str, since: int, timeout: float | None) -> Waiting:
    """A node a rolling update waits for: drained ``since`` (epoch seconds), replaced at ``proceedAt`` with its jobs
    (None: never); ``jobs`` are filled in by the adapter (None: not known)."""
    return {"node": node, "since": since, "proceedAt": None if timeout is None else since + int(timeout),
            "jobs": None}


def _legacy_timeout_note(nodeset: NodeSet, waiting: Sequence[Waiting], timeout: float | None, now: int) -> str | None:
    """Before rolling updates had their own setting they ended at drainTimeout (onDrainTimeout: Proceed, the
    default). A NodeSet that may count on that, and waits past it, is told why the roll still waits (not silently)."""
    spec = nodeset["spec"]
    if timeout is not None or spec.get("onDrainTimeout") != "Proceed" or not waiting:
        return None
    if all(now - w["since"] < durations.seconds(spec["drainTimeout"]) for w in waiting):
        return None
    return ("waiting past spec.drainTimeout (%s), which no longer ends a rolling update: set "
            "spec.updateStrategy.proceedAfter to replace a node with its jobs after a time" % spec["drainTimeout"])


def roll(p: Draft, nodeset: NodeSet, sts_name: str, sts: KubeObject, count: int, pods: Mapping[str, KubeObject],
         slurm: Mapping[str, SlurmNode] | None, now: int) -> tuple[int, int] | tuple[None, None]:
    """The rolling update of one NodeSet's workers (their StatefulSet is OnDelete): an outdated pod is one of another
    template revision than the StatefulSet's update revision; :func:`roll_pods` replaces them, highest ordinal first
    (the StatefulSet's own order). Returns (updated, outdated) pod counts."""
    set_name = name(nodeset)
    revision = (sts.get("status") or {}).get("updateRevision")
    order = [names.pod_name(sts_name, o) for o in reversed(range(min(count, replicas(sts))))]
    mine = dict((n, pods.get(n)) for n in order)
    if not revision_seen(sts):
        # The StatefulSet controller has not seen the latest template yet; its status update brings the next pass.
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: waiting for the StatefulSet's new revision" % set_name)
        return None, None
    updated = set(n for n, pod in mine.items() if pod is not None and labels(pod).get(REVISION_LABEL) == revision)
    return roll_pods(p, nodeset, order, mine, updated, slurm, now)


def roll_pods(p: Draft, nodeset: NodeSet, order: Sequence[str], mine: Mapping[str, Optional[KubeObject]],
              updated: Collection[str], slurm: Mapping[str, SlurmNode] | None, now: int) -> tuple[int, int]:
    """Replace a NodeSet's outdated worker pods: ``order`` the worker names in the order to replace them, ``mine``
    ``{name: pod or None}``, ``updated`` the names whose pods are on the current template (a pod not in it is
    outdated). An outdated pod is replaced only once its Slurm node is drained (REASON_UPDATE) and idle, or drained for
    longer than ``updateStrategy.proceedAfter`` when that is set; at most ``maxUnavailable`` nodes of the set are
    drained or replaced at a time; a replaced node is resumed once its new pod is ready (its slurmd registered and
    answering). The drained nodes with jobs go to the NodeSet's facts (``waitingFor``, for its status). Returns
    (updated, outdated) pod counts."""
    set_name = name(nodeset)
    updated = [n for n in order if n in updated and mine.get(n) is not None]
    outdated = [n for n in order if mine.get(n) is not None and n not in updated]
    if slurm is None:
        if outdated:
            p.wait(REQUEUE_SLURM_UNREACHABLE, "NodeSet %s: %d outdated nodes wait for slurmctld to answer (to drain "
                                              "first)" % (set_name, len(outdated)))
        return len(updated), len(outdated)
    in_flight: set[str] = set()
    for node_name in reversed(order):
        pod = mine.get(node_name)
        node = slurm.get(node_name)
        ours = node is not None and (node["drain"] or node["down"]) and node["reason"] == names.REASON_UPDATE
        if pod is None or pod["metadata"].get("deletionTimestamp") or ours:
            in_flight.add(node_name)
        # Set DOWN by us when it went with its jobs: its new slurmd registered (ReturnToService 0 or 1 keeps it down)
        answering = projection.up(node) or (ours and node is not None and node["down"]
                                            and "NOT_RESPONDING" not in node["flags"])
        if ours and node_name in updated and pod is not None and pod_ready(pod) and answering:
            p.resume.append(node_name)  # replaced: its new pod's slurmd answers
            in_flight.discard(node_name)
    facts = p.nodesets[set_name]
    facts["waitingFor"] = []
    if not outdated:
        return len(updated), 0
    budget = nodeset["spec"]["updateStrategy"]["maxUnavailable"] - len(in_flight)
    timeout = update_timeout(nodeset)
    draining: list[str] = []
    blocked: list[str] = []
    for node_name in outdated:
        pod = mine[node_name]
        node = slurm.get(node_name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):  # None: never (outdated pods are there)
            continue
        action, removable, expired = drains.plan_node(node, now=now, drain_timeout=timeout)
        if node_name not in in_flight:
            if budget <= 0:
                continue
            budget -= 1
            if action == drains.DRAIN:
                p.drain_node(node_name, names.REASON_UPDATE)
                draining.append(node_name)
                if node is not None and node["busy"]:  # (drains.DRAIN: a node Slurm knows)
                    facts["waitingFor"].append(_waiting(node_name, now, timeout))
                continue
        if removable:
            p.delete_pods.append((node_name, pod["metadata"].get("uid")))
            if expired:
                # Set DOWN first (give_up_node): its jobs end as on a node failure, requeued where their policy
                # says so, instead of staying RUNNING under the node's new slurmd (SLURM.jobs_outlive_their_slurmd).
                p.give_up_node(nodeset, node_name, "rolling update", "spec.updateStrategy.proceedAfter",
                               nodeset["spec"]["updateStrategy"]["proceedAfter"], drains.drain_time(node),
                               down_reason=names.REASON_UPDATE, pod_uid=pod["metadata"].get("uid"))
        elif action == drains.BLOCKED:
            blocked.append(node_name)  # drained by someone else, with jobs: theirs to finish
        else:
            draining.append(node_name)
            facts["waitingFor"].append(_waiting(node_name, _drained_since(node, now), timeout))
    facts["waitingFor"].sort(key=lambda w: w["node"])
    why = "NodeSet %s: rolling update, %d/%d nodes updated" % (set_name, len(updated), len(mine))
    if draining:
        why += "; waiting for %s to drain" % ", ".join(sorted(draining))
    for entry in facts["waitingFor"]:
        why += "; %s runs jobs, drained since %s, %s" % (
            entry["node"], durations.iso(entry["since"]), "no time limit" if entry["proceedAt"] is None else
            "replaced with its jobs at %s (spec.updateStrategy.proceedAfter)" % durations.iso(entry["proceedAt"]))
    facts["note"] = _legacy_timeout_note(nodeset, facts["waitingFor"], timeout, now)
    if facts["note"]:
        why += "; " + facts["note"]
    if blocked:
        why += "; %s drained by an admin, with jobs" % ", ".join(sorted(blocked))
    requeue = REQUEUE_DRAINING if draining or blocked else REQUEUE_PROGRESSING
    soonest = [w["proceedAt"] - now for w in facts["waitingFor"] if w["proceedAt"] is not None]
    p.wait(max(1, min([requeue] + soonest)), why)
    return len(updated), len(outdated)


def plan_rolls(p: Draft, ctx: Context, rolling: Sequence[Rolling]) -> None:
    """The rolling updates of the NodeSets in ``rolling`` (``scale.Replicas.rolling``) against the manifests this
    pass renders (``p.manifests``): a set whose template changes now waits for its new revision first. Writes
    ``p.drain`` (update), ``p.resume``, ``p.delete_pods``, ``p.give_up``, the sets' ``updatedReplicas``,
    ``outdatedReplicas``, ``waitingFor`` and ``note`` facts, and the waits."""
    hashes = dict((m["metadata"]["name"], template_hash(m)) for m in p.manifests if m["kind"] == "StatefulSet")
    for ns, sts_name, sts, count in rolling:
        set_name = name(ns)
        if hashes.get(sts_name) != template_hash(sts):
            # This pass applies a new pod template: the StatefulSet's new revision shows in a later pass.
            p.wait(REQUEUE_PROGRESSING, "NodeSet %s: new pod template; its rolling update follows" % set_name)
            continue
        if not ctx.observed.get("worker_pods_read", True):
            # Not read: every worker StatefulSet is settled (model.worker_pods_needed), so its pods are all made,
            # ready and on the update revision, and Slurm is not there to drain any.
            p.nodesets[set_name].update({"updatedReplicas": min(count, replicas(sts)), "outdatedReplicas": 0})
            continue
        updated, outdated = roll(p, ns, sts_name, sts, count, ctx.pods, ctx.slurm, ctx.now)
        if updated is not None and outdated is not None:  # (both or neither)
            p.nodesets[set_name].update({"updatedReplicas": updated, "outdatedReplicas": outdated})
