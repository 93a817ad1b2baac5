# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scale and drains: how many workers each NodeSet's StatefulSet gets now, and which Slurm node records go. Pure.

A NodeSet that shrinks keeps the pods whose Slurm nodes are not drained and idle yet (StatefulSets remove their
highest ordinals first); its victims are drained with ``soperator: scale-in``, and a scale-in cancelled before they
went is resumed. A NodeSet being deleted (our finalizer holds it) shrinks to zero the same way, its objects kept from
pruning until nothing of it is left, then it is released. A Slurm node whose pod is gone for good is forgotten (no
ghost in sinfo) once no job runs on it. Nothing is decided without Slurm: a shrink waits for slurmctld to answer.

:func:`scale_outs` is the operator runtime's shortcut for the one change that needs neither Slurm nor a drain: a
worker StatefulSet that only grows is applied at once, before the role's run (which still follows and finds it in
sync).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Collection, Iterable, Mapping, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains, projection
from ansible_collections.soperator.slurm.plugins.module_utils.plan.decided import Plan
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_DRAINING, REQUEUE_PROGRESSING, REQUEUE_SLURM_UNREACHABLE, Context, NodeSetFacts, Draft, deleting,
    drain_timeout, labels, name, replicas, revision_seen,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet

# A NodeSet whose pods a rolling update may replace: (nodeset, its StatefulSet's name, the live StatefulSet, replicas).
Rolling = Tuple[NodeSet, str, KubeObject, int]


class Replicas(object):
    """What :func:`plan_replicas` decided: ``render`` ``{nodeset name: replicas}`` of the valid NodeSets (what the
    renderer gives their StatefulSets), ``rolling`` ``[(nodeset, StatefulSet name, live StatefulSet, replicas)]``
    of the sets whose pods a rolling update may replace, ``kept`` ``{worker StatefulSet: pods that stay}``."""

    render: dict[str, int]
    rolling: list[Rolling]
    kept: dict[str, int]

    def __init__(self) -> None:
        self.render = {}
        self.rolling = []
        self.kept = {}


def give_up_expired(p: Draft, nodeset: NodeSet, entries: Iterable[drains.Victim], slurm: Mapping[str, SlurmNode],
                    why: str, down_reason: str | None = None) -> None:
    """The entries (of ``drains.plan_scale_in``) that go with their jobs because their drain is older than
    drainTimeout: recorded for the Event, and set DOWN with ``down_reason`` when given (``Draft.give_up_node``)."""
    for entry in entries:
        if entry["expired"]:
            p.give_up_node(nodeset, entry["name"], why, "spec.drainTimeout", nodeset["spec"]["drainTimeout"],
                           drains.drain_time(slurm[entry["name"]]), down_reason=down_reason)


def resume_ours(p: Draft, slurm: Mapping[str, SlurmNode] | None, node_names: Iterable[str],
                reasons: Collection[str]) -> None:
    """Resume those of ``node_names`` drained (or down) with one of ``reasons``."""
    for node_name in node_names:
        node = (slurm or {}).get(node_name)
        if node and (node["drain"] or node["down"]) and node["reason"] in reasons:
            p.resume.append(node_name)


def shrink(p: Draft, slurm: Mapping[str, SlurmNode] | None, nodeset: NodeSet, statefulset: str, current: int,
           target: int, now: int, reason: str, label: str) -> int:
    """Replicas to render for a StatefulSet going from ``current`` to ``target`` pods, draining the victims
    (``reason``); writes ``p.drain``, ``p.give_up`` and a wait while victims drain."""
    if target >= current:
        return target
    if slurm is None:
        p.wait(REQUEUE_SLURM_UNREACHABLE, "%s: %d -> %d waits for slurmctld to answer (to drain first)"
               % (label, current, target))
        return current
    victims = drains.scale_in_victims(current, target, statefulset)
    entries = drains.plan_scale_in(slurm, victims, now=now, drain_timeout=drain_timeout(nodeset))
    for entry in entries:
        if entry["action"] == drains.DRAIN:
            p.drain_node(entry["name"], reason)
    removable = drains.removable_replicas(entries)
    give_up_expired(p, nodeset, entries[:removable], slurm, "removal" if deleting(nodeset) else "scale-in",
                    down_reason=reason)
    result = current - removable
    if result > target:
        busy = [e["name"] for e in entries if not e["removable"]]
        p.wait(REQUEUE_DRAINING, "%s: %d -> %d waits for %s to drain" % (label, current, target, ", ".join(busy)))
    return result


def keep_worker_objects(p: Draft, sts_name: str) -> None:
    p.keep += [("StatefulSet", sts_name), ("Service", sts_name), ("PodDisruptionBudget", sts_name)]


def nodeset_facts(statefulset: str, count: int, target: int, sts: KubeObject | None,
                  slurm: Mapping[str, SlurmNode] | None) -> NodeSetFacts:
    """What a NodeSet's status reports: pods, Slurm node states, progress."""
    facts: NodeSetFacts = {"statefulset": statefulset, "replicas": count, "desired": target,
                           "readyReplicas": int(((sts or {}).get("status") or {}).get("readyReplicas") or 0),
                           "currentReplicas": int(((sts or {}).get("status") or {}).get("replicas") or 0)}
    counts, serving = projection.nodeset_counts(statefulset, count, slurm or {})
    facts["serving"] = serving
    if slurm is not None:
        for key in projection.COUNT_KEYS:
            facts[key] = counts[key]
    return facts


def leave(p: Draft, nodeset: NodeSet, sts_name: str, sts: KubeObject | None, count: int, pods: Iterable[str],
          slurm: Mapping[str, SlurmNode] | None) -> None:
    """A NodeSet being deleted: scale its live StatefulSet down as drains allow; release it once no pod and
    no Slurm node of it is left (its objects then go with it: they are owned by the NodeSet)."""
    set_name = name(nodeset)
    left_pods = [n for n in pods if names.ordinal(n, sts_name) is not None]
    left_nodes = drains.statefulset_nodes(slurm, sts_name) if slurm is not None else None
    if sts is not None:
        if replicas(sts) != count:
            p.scale[sts_name] = count
        keep_worker_objects(p, sts_name)
    if count == 0 and not left_pods and left_nodes == []:
        p.release.append(set_name)
    elif count == 0 and not left_pods and left_nodes:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: forgetting its Slurm nodes" % set_name)
    elif count == 0:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: waiting for its pods to go" % set_name)


def plan_replicas(p: Draft, ctx: Context, maintenance_ready: bool) -> Replicas:
    """Replicas to render now for every NodeSet (see :class:`Replicas`). Writes ``p.drain`` (scale-in),
    ``p.resume`` (a cancelled scale-in), ``p.scale``/``p.keep``/``p.release`` (NodeSets being deleted),
    ``p.nodesets`` (their facts) and the waits; the objects of invalid NodeSets are kept as they are."""
    decided = Replicas()
    for ns in ctx.workers:
        set_name = name(ns)
        is_leaving = ns in ctx.leaving
        sts_name = ctx.worker_statefulset(ns)
        sts = ctx.statefulsets.get(sts_name)
        target = 0 if is_leaving else ns["spec"]["replicas"]
        if sts is None or maintenance_ready:
            count = target
        else:
            current = replicas(sts)
            count = shrink(p, ctx.slurm, ns, sts_name, current, target, ctx.now, names.REASON_SCALE_IN,
                           "NodeSet %s" % set_name)
            if target >= current and ctx.slurm is not None:
                resume_ours(p, ctx.slurm, [names.pod_name(sts_name, o) for o in range(target)],
                            (names.REASON_SCALE_IN,))
        decided.kept[sts_name] = max(count, replicas(sts)) if maintenance_ready and sts else count
        p.nodesets[set_name] = nodeset_facts(sts_name, count, target, sts, ctx.slurm)
        p.nodesets[set_name]["leaving"] = is_leaving
        if sts is not None and not is_leaving and not ctx.spec["maintenance"]:
            decided.rolling.append((ns, sts_name, sts, count))
        if is_leaving:
            leave(p, ns, sts_name, sts, count, ctx.pods, ctx.slurm)
        else:
            decided.render[set_name] = count
    # NodeSets that failed validation keep their live objects untouched: not rendered, not pruned.
    for set_name in ctx.invalid:
        keep_worker_objects(p, names.worker_name(ctx.name, set_name))
    return decided


def beyond(pod: str, kept: Mapping[str, int], cluster_name: str | None = None) -> bool:
    """Whether ``pod`` (a pod or a Slurm node) is a worker past what its StatefulSet keeps: an ordinal at or above
    the replicas that stay, or (given ``cluster_name``) a worker of a NodeSet this cluster no longer has."""
    sts_name = names.statefulset_of(pod)
    ordinal = names.ordinal(pod, sts_name)
    if ordinal is None:
        return False
    if sts_name in kept:
        return ordinal >= kept[sts_name]
    if cluster_name is None:
        return False
    return sts_name.startswith(cluster_name + "-") and sts_name not in (names.controller_name(cluster_name),
                                                                        names.login_name(cluster_name))


def plan_node_records(p: Draft, ctx: Context, kept: Mapping[str, int]) -> None:
    """Slurm node records of pods that are gone for good (no ghosts in sinfo): ``p.delete_nodes`` (and no resume
    of them). Maintenance keeps every record (the same pods come back); a NodeSet that failed validation keeps its
    own. A removal is done only when the pods are gone AND Slurm has forgotten their nodes: until then it is under
    way (a pod's end is seen through the pod watch, a node record's only through Slurm)."""
    kept = dict(kept)
    for set_name in ctx.invalid:
        sts_name = names.worker_name(ctx.name, set_name)
        kept[sts_name] = replicas(ctx.statefulsets.get(sts_name)) if sts_name in ctx.statefulsets else 0
    going = sorted(n for n in ctx.pods if beyond(n, kept))
    if going:
        p.wait(REQUEUE_PROGRESSING, "pods going: %s" % ", ".join(going))
    if ctx.slurm is None:
        return
    for node_name, node in sorted(ctx.slurm.items()):
        if node_name in ctx.pods or not beyond(node_name, kept, ctx.name):
            continue
        if node["busy"]:
            p.wait(REQUEUE_DRAINING, "%s: its pod is gone but Slurm still counts a job on it" % node_name)
            continue
        p.delete_nodes.append(node_name)
    for node_name in p.delete_nodes:
        if node_name in p.resume:
            p.resume.remove(node_name)
    if p.delete_nodes:
        p.wait(REQUEUE_PROGRESSING, "forgetting removed nodes: %s" % ", ".join(p.delete_nodes))


# --- the operator's scale-out shortcut --------------------------------------------------------------------------
REPLICAS_FIELD = ("spec", "replicas")


def scale_out_now(desired: KubeObject, live: KubeObject | None) -> int | None:
    """The replica count a worker StatefulSet may be given at once, ahead of a full converge, or None.

    Only a growth whose every other field is what was last applied: ``desired`` (the rendered StatefulSet) with
    the live replica count is in sync with ``live`` by the apply's own rule (``objects.in_sync``: the applied-hash
    annotation proves that nothing else of the manifest changed), more replicas are wanted than live, and the
    StatefulSet is settled enough that the growth is all it is asked: its controller saw its spec, no rolling
    update is under way (current revision = update revision) and no pod is going (no more pods than replicas).
    A shrink never qualifies: it drains first, with Slurm."""
    if not live or (desired or {}).get("kind") != "StatefulSet":
        return None
    if labels(desired).get(names.LABEL_COMPONENT) != names.COMPONENT_WORKER:
        return None
    want, have = replicas(desired), replicas(live)
    if want <= have:
        return None
    status = live.get("status") or {}
    if not revision_seen(live) or status.get("currentRevision") != status.get("updateRevision"):
        return None
    if int(status.get("replicas") or 0) > have:
        return None
    as_applied = dict(desired, spec=dict(desired["spec"], replicas=have))
    if not objects.in_sync(as_applied, live):
        return None
    return want


class ScaleOut(object):
    """A worker StatefulSet to apply now: the rendered ``manifest``, as ``manager`` (the field manager whose apply
    owns its replicas), conditional on the live copy's ``resource_version``; ``was``/``replicas``: the growth."""

    manifest: KubeObject
    manager: str
    resource_version: str  # the live copy's: the apply is conditional on it
    was: int
    replicas: int

    def __init__(self, manifest: KubeObject, manager: str, resource_version: str, was: int,
                 replicas: int) -> None:
        self.manifest, self.manager, self.resource_version = manifest, manager, resource_version
        self.was, self.replicas = was, replicas


def scale_outs(plan: Plan, live: Mapping[Tuple[str, str], KubeObject]) -> list[ScaleOut]:
    """The worker StatefulSets a runtime may apply at once (``[ScaleOut]``), ahead of the converge that follows.

    ``plan``: ``converge.plan`` of the cluster without Slurm's view; ``live``: ``{(kind, name): object}`` of its
    cached objects. Empty unless growing worker StatefulSets (:func:`scale_out_now`) are the only difference: the
    plan has nothing under way and nothing for Slurm (no drain, resume, shrink, removal, roll, invalid NodeSet),
    every other rendered object is in sync, and one field manager applied each grown StatefulSet's replicas (the
    apply as that manager, of the manifest it would apply, changes nobody's fields: no conflict, no takeover).
    The converge that follows renders the same StatefulSet, finds it in sync, and does the rest."""
    if (plan.report.underway or plan.report.pending or plan.slurm.drain or plan.slurm.resume or plan.pods.scale
            or plan.objects.release or plan.pods.delete_pods or plan.slurm.delete_nodes or plan.pods.create_pods
            or plan.definition.invalid or plan.pods.give_up):
        return []
    found: list[ScaleOut] = []
    for desired in plan.objects.manifests:
        if objects.is_create_only(desired):
            continue  # created once, never updated: nothing of them can have changed
        current = live.get((desired["kind"], desired["metadata"]["name"]))
        if objects.plan_object(desired, current) == objects.SKIP:
            continue
        grown = scale_out_now(desired, current)
        manager = objects.applied_by(current, REPLICAS_FIELD)
        if grown is None or manager is None or current is None:  # grown: never without a live one
            return []
        found.append(ScaleOut(desired, manager, current["metadata"].get("resourceVersion"), replicas(current),
                              grown))
    return found
