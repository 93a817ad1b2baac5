# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Elastic NodeSets: the worker pods made to match what Slurm's power saving decided. Pure.

Every name ``<cluster>-<nodeset>-<i>`` (i < maxNodes) is a ``State=CLOUD`` record of slurm.conf. Slurm powers up
exactly the nodes it gave a job and powers idle ones down after SuspendTime; its ResumeProgram and SuspendProgram
only record the request (they hold no Kubernetes credentials). This planner reads Slurm's node states and decides:

* a node powering up or powered up gets a pod of exactly its name (a missing one is created: also after an operator
  that died between the resume and the pod);
* a node powering up whose pod is left from an earlier power-up (its slurmd registered already: the operator
  missed the power-down) gets a new pod, since Slurm waits for a fresh slurmd's registration;
* a node powering down or powered down has no pod; a node that did not come up within ResumeTimeout (``DOWN`` and
  powered down) loses its pod and is handed back (``scontrol power down force``) so Slurm may use it again;
* a pod on an older template: an idle node is powered down (``power down asap``: Slurm drains it first, so no job is
  ever killed) and its next power-up gets the new template; a busy node keeps its pod until its jobs end;
* at least ``minNodes`` are powered up (``scontrol power up`` of the lowest powered-down names; slurm.conf's
  ``SuspendExcNodes=<set>:<min>`` keeps them up).

Holes are allowed: the pods are individual Pods (not a StatefulSet), so node 2 may run while node 1 does not.
Nothing is decided without Slurm: with slurmctld silent every pod stays as it is.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Mapping, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations, values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_PROGRESSING, REQUEUE_SLURM_UNREACHABLE, Context, NodeSetFacts, Draft, PodRef, deleting, name, pod_ready,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import PodRenderer
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.version import SLURM
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet

# What a node of an elastic NodeSet is, from its Slurm state (and the pod it needs).
UP = "up"              # powered up, registered: pod
POWERING_UP = "poweringUp"  # resumed, its slurmd not registered yet: pod
DOWN = "poweredDown"   # powered down or powering down: no pod
FAILED = "failed"      # not up within ResumeTimeout: DOWN+POWERED_DOWN, no pod, handed back
WANTS_POD = (UP, POWERING_UP)

# How soon to look again while a node powers up or down (Slurm's own changes come with no Kubernetes event).
REQUEUE_POWER = 2

EVENT_POWERED_UP = "PoweredUp"
EVENT_POWERED_DOWN = "PoweredDown"
EVENT_RESUME_FAILED = "ResumeFailed"
EVENT_STALE_POD = "StalePodReplaced"


def node_names(cluster_name: str, nodeset: NodeSet) -> list[str]:
    """Every Slurm node name of an elastic NodeSet, in ordinal order."""
    prefix = names.worker_name(cluster_name, name(nodeset))
    return [names.pod_name(prefix, i) for i in range(int(nodeset["spec"]["elastic"]["maxNodes"]))]


def node_state(node: SlurmNode | None) -> str:
    """UP, POWERING_UP, DOWN or FAILED of a parsed ``scontrol show node`` entry (None: unknown to Slurm yet)."""
    if node is None:
        return DOWN
    flags = node["flags"]
    if "POWERED_DOWN" in flags:
        return FAILED if node["down"] else DOWN
    if "POWERING_DOWN" in flags:
        return DOWN
    if "POWERING_UP" in flags:
        return POWERING_UP
    return UP


def _outdated(pod: KubeObject, template_hash: str | None) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_TEMPLATE_HASH) != template_hash


def _finished(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _left_from_before(pod: KubeObject, node: SlurmNode) -> bool:
    """A pod of a node that powers up whose slurmd registered at or after the pod's creation: a pod made for this
    power-up is up in Slurm's eyes at its first registration (``slurmd -b``), so this one is left from an earlier
    power-up (the operator missed the whole power-down). Slurm never takes its running slurmd as this power-up's
    boot (``SLURM.power_up_needs_a_new_slurmd``): without a new pod the node fails at ResumeTimeout and its job is
    requeued."""
    started = node.get("slurmd_start")
    created = durations.epoch_of((pod.get("metadata") or {}).get("creationTimestamp"))
    return (SLURM.power_up_needs_a_new_slurmd and started is not None and created is not None
            and started >= created)


class Decision(object):
    """What :func:`decide` makes of one elastic NodeSet: pods to ``create`` (node names), pods to ``delete``
    (``(name, uid)``), nodes to ``power_up``, ``power_down`` (asap: idle nodes on an older template) and
    ``power_down_force`` (failed resumes), the ``states`` per node, Events ``(type, reason, message)`` and whether
    anything is still moving (``moving``)."""

    create: list[str]
    delete: list[PodRef]
    power_up: list[str]
    power_down: list[str]
    power_down_force: list[str]
    states: dict[str, str]  # node name -> UP, POWERING_UP, DOWN or FAILED
    events: list[tuple[str, str, str]]  # (type, reason, message)
    moving: bool

    def __init__(self) -> None:
        self.create = []
        self.delete = []
        self.power_up = []
        self.power_down = []
        self.power_down_force = []
        self.states = {}
        self.events = []
        self.moving = False

    def counts(self) -> dict[str, int]:
        result = dict((key, 0) for key in (UP, POWERING_UP, DOWN, FAILED))
        for state in self.states.values():
            result[state] += 1
        return result


def decide(all_names: Sequence[str], slurm: Mapping[str, SlurmNode], pods: Mapping[str, KubeObject],
           template_hash: str | None, min_nodes: int) -> Decision:
    """The pods of one elastic NodeSet against Slurm's node states.

    ``all_names``: its node names (:func:`node_names`); ``slurm``: ``{name: node}`` (scontrol.parse_show_node);
    ``pods``: ``{name: pod}`` of the live pods (any of the cluster's: only these names are looked at);
    ``template_hash``: the rendered pods' template hash; ``min_nodes``: spec.elastic.minNodes."""
    d = Decision()
    for node_name in all_names:
        node = slurm.get(node_name)
        state = d.states[node_name] = node_state(node)
        pod = pods.get(node_name)
        if state in WANTS_POD:
            if pod is None:
                d.create.append(node_name)
                d.events.append(("Normal", EVENT_POWERED_UP, "Slurm powered up node %s: creating its pod" % node_name))
            elif deleting(pod):
                d.moving = True  # the old pod still goes; created again on a later pass
            elif _finished(pod):
                d.delete.append((node_name, pod["metadata"].get("uid")))
            elif state == POWERING_UP and node is not None and _left_from_before(pod, node):
                d.delete.append((node_name, pod["metadata"].get("uid")))  # made anew on a later pass
                d.events.append(("Normal", EVENT_STALE_POD, "Slurm powers up node %s, whose pod is left from an "
                                 "earlier power-up (its slurmd registered before): replacing it" % node_name))
            elif (_outdated(pod, template_hash) and state == UP and node is not None and not node["busy"]
                  and not node["drain"]):
                d.power_down.append(node_name)
            if state == POWERING_UP or (pod is not None and not pod_ready(pod)):
                d.moving = True
        elif pod is not None and not deleting(pod):
            d.delete.append((node_name, pod["metadata"].get("uid")))
            reason = EVENT_RESUME_FAILED if state == FAILED else EVENT_POWERED_DOWN
            why = ("did not come up within ResumeTimeout (its job is requeued)" if state == FAILED
                   else "was powered down by Slurm")
            d.events.append(("Warning" if state == FAILED else "Normal", reason,
                             "Node %s %s: removing its pod" % (node_name, why)))
        elif pod is not None:
            d.moving = True
        if state == FAILED and pod is None and node is not None and "POWER_DOWN" not in node["flags"]:  # not asked yet
            d.power_down_force.append(node_name)
        if node is not None and "POWERING_DOWN" in node["flags"]:
            d.moving = True
    wanted = [n for n in all_names if d.states[n] in WANTS_POD]
    if len(wanted) < min_nodes:
        spare = [n for n in all_names if d.states[n] == DOWN and slurm.get(n) is not None
                 and "POWERING_DOWN" not in slurm[n]["flags"] and n not in d.power_down]
        d.power_up = spare[:min_nodes - len(wanted)]
    d.moving = d.moving or bool(d.create or d.delete or d.power_up or d.power_down or d.power_down_force)
    return d


def mismatched(all_names: Sequence[str], slurm: Mapping[str, SlurmNode], pods: Mapping[str, KubeObject]) -> list[str]:
    """Names whose pod does not match Slurm's power state: wanted and missing, present while powered down, or left
    from an earlier power-up (:func:`_left_from_before`). The operator runtime's cheap check between runs (Slurm
    powers nodes up and down with no Kubernetes event)."""
    found = []
    for node_name in all_names:
        node = slurm.get(node_name)
        wants = node_state(node) in WANTS_POD
        pod = pods.get(node_name)
        if wants != (pod is not None and not deleting(pod)):
            found.append(node_name)
        elif (wants and pod is not None and node is not None and node_state(node) == POWERING_UP
              and _left_from_before(pod, node)):
            found.append(node_name)
    return found


def facts(all_names: Sequence[str], decision: Decision, pods: Mapping[str, KubeObject]) -> NodeSetFacts:
    """A NodeSet's status facts (see scale.nodeset_facts) for an elastic set."""
    counts = decision.counts()
    own = [pods[n] for n in all_names if n in pods]
    return {"statefulset": None, "elastic": True, "leaving": False, "nodes": list(all_names),
            "replicas": len(own), "currentReplicas": len(own),
            "desired": counts[UP] + counts[POWERING_UP],
            "readyReplicas": len([p for p in own if pod_ready(p)]),
            "serving": counts[UP],
            "poweredUp": counts[UP], "poweringUp": counts[POWERING_UP], "poweredDown": counts[DOWN],
            "failed": counts[FAILED]}


def plan_shrink(p: Draft, ctx: Context) -> dict[str, int]:
    """A lowered maxNodes: the names past it leave slurm.conf only once Slurm has powered them down (a reconfigure
    that removes a busy node kills its job: ``SLURM.removing_a_busy_node_kills_its_job``). Returns ``{nodeset name:
    maxNodes to render}`` for the sets that must keep more names for now, and powers those names down once idle
    (``power down asap``)."""
    keep: dict[str, int] = {}
    for ns in ctx.of(values.ELASTIC):
        set_name, limit = name(ns), int(ns["spec"]["elastic"]["maxNodes"])
        prefix = names.worker_name(ctx.name, set_name)
        beyond = [n for n in list(ctx.pods) + list(ctx.slurm or ()) if (names.ordinal(n, prefix) or 0) >= limit]
        if not beyond:
            continue
        if ctx.slurm is None:
            busy = [n for n in beyond if n in ctx.pods]
        else:
            busy = [n for n in beyond if n in ctx.pods or node_state(ctx.slurm.get(n)) in WANTS_POD]
        if busy and SLURM.removing_a_busy_node_kills_its_job:
            keep[set_name] = max(names.ordinal(n, prefix) or 0 for n in busy) + 1  # (each has one, >= limit)
            p.power_down += [n for n in sorted(set(busy)) if ctx.slurm is not None and n in ctx.slurm
                             and node_state(ctx.slurm[n]) == UP and "POWER_DOWN" not in ctx.slurm[n]["flags"]]
            p.defer(REQUEUE_PROGRESSING, "NodeSet %s: maxNodes %d waits for %s to power down"
                    % (set_name, limit, ", ".join(sorted(set(busy)))))
    return keep


def with_max(nodeset: NodeSet, max_nodes: int) -> NodeSet:
    """A copy of an elastic NodeSet rendered with ``max_nodes`` names (plan_shrink)."""
    spec = dict(nodeset["spec"], elastic=dict(nodeset["spec"]["elastic"], maxNodes=max_nodes))
    return dict(nodeset, spec=spec)


def maintenance(p: Draft, ctx: Context, nodeset: NodeSet) -> list[str]:
    """``spec.maintenance`` for an elastic NodeSet (``modes.Elastic``): every node up is powered down once idle
    (``power down asap``: Slurm drains it, its jobs end first), and every powered-down one is drained (``soperator:
    maintenance``) so Slurm powers none up for a pending job; resumed when maintenance ends
    (maintenance.plan_maintenance). Returns the nodes maintenance still waits for (up, or a pod left)."""
    slurm = drains.answered(ctx.slurm)
    waiting = []
    for node_name in node_names(ctx.name, nodeset):
        node = slurm.get(node_name)
        state = node_state(node)
        if state in WANTS_POD or node_name in ctx.pods:
            waiting.append(node_name)
            if state == UP and node is not None and "POWER_DOWN" not in node["flags"]:
                p.power_down.append(node_name)
        elif node is not None and not node["drain"]:
            p.drain_node(node_name, names.REASON_MAINTENANCE)
    return waiting


def kept(ctx: Context) -> dict[str, int]:
    """``{name prefix: maxNodes}`` of the elastic NodeSets: their node names are no pods gone for good
    (scale.plan_node_records forgets only names beyond)."""
    return dict((names.worker_name(ctx.name, name(ns)), int(ns["spec"]["elastic"]["maxNodes"]))
                for ns in ctx.of(values.ELASTIC) + ctx.of(values.ELASTIC, leaving=True))


def leave(p: Draft, ctx: Context, ns: NodeSet) -> None:
    """An elastic NodeSet being deleted (still rendered, so slurm.conf keeps its names): every node powered down
    once idle (``power down asap``: Slurm drains it, its jobs end first), its pods removed as Slurm powers them down;
    released once no node is up and no pod is left."""
    set_name = name(ns)
    all_names = node_names(ctx.name, ns)
    left_pods = [n for n in all_names if n in ctx.pods]
    if ctx.slurm is None:
        p.wait(REQUEUE_SLURM_UNREACHABLE, "NodeSet %s: its removal waits for slurmctld to answer" % set_name)
        return
    d = decide(all_names, ctx.slurm, ctx.pods, None, 0)
    p.delete_pods += d.delete
    up = [n for n in all_names if d.states[n] in WANTS_POD]
    p.power_down += [n for n in up if "POWER_DOWN" not in ctx.slurm.get(n, {"flags": ()})["flags"]]
    if not up and not left_pods:
        p.release.append(set_name)
    else:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: waiting for %s to power down" % (set_name, ", ".join(up or left_pods)))


def plan_elastic(p: Draft, ctx: Context, template_hashes: Mapping[str, str], render_pod: PodRenderer) -> None:
    """Decide every valid elastic NodeSet of ``ctx``: writes ``p.create_pods`` (manifests, from
    ``render_pod(nodeset, node name)``), ``p.delete_pods``, ``p.power_up``, ``p.power_down``,
    ``p.power_down_force``, ``p.events``, ``p.nodesets`` (facts) and the waits. ``template_hashes``:
    ``{nodeset name: hash}`` of the rendered pods. Without Slurm nothing changes."""
    for ns in ctx.of(values.ELASTIC, leaving=True):
        leave(p, ctx, ns)
    for ns in ctx.of(values.ELASTIC):
        set_name = name(ns)
        all_names = node_names(ctx.name, ns)
        if ctx.slurm is None:
            if ctx.observed.get("slurm_error"):  # asked and silent (the operator's cache check does not ask)
                p.wait(REQUEUE_SLURM_UNREACHABLE, "elastic NodeSet %s waits for slurmctld to answer" % set_name)
            continue
        maintenance = ctx.spec["maintenance"]
        d = decide(all_names, ctx.slurm, ctx.pods, template_hashes[set_name],
                   0 if maintenance else ns["spec"]["elastic"]["minNodes"])
        if maintenance:  # no new pod: the nodes are being powered down (plan_maintenance)
            d.create = []
        p.create_pods += [render_pod(ns, node_name) for node_name in d.create]
        p.delete_pods += d.delete
        p.power_up += d.power_up
        p.power_down += [n for n in d.power_down if n not in p.power_down]
        p.power_down_force += d.power_down_force
        p.events += [(set_name,) + event for event in d.events]
        p.nodesets[set_name] = facts(all_names, d, ctx.pods)
        if d.moving:
            # Deferred, not pending: the cluster serves while Slurm powers nodes up and down.
            p.defer(REQUEUE_POWER if (d.create or POWERING_UP in d.states.values()) else REQUEUE_PROGRESSING,
                    "elastic NodeSet %s: nodes powering up or down" % set_name)
