# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's view of the workers projected into Kubernetes, and Kubernetes' view of the nodes projected into Slurm. Pure.

* Each worker pod gets a condition ``SlurmNodeReady``: True while its Slurm node serves jobs; its reason is the node
  state in CamelCase (``Idle``, ``Allocated``, ``Drained``, ``NotRegistered`` ...), its message the state and the
  drain reason, so ``kubectl describe pod`` says why a node takes no job.
* A cordoned Kubernetes node drains the Slurm nodes of the pods on it (``soperator: node cordoned``), a node
  condition listed in ``spec.healthChecks.kubernetesNodes.drainOnConditions`` while True drains them too
  (``soperator: node condition <Type>``); once the cause is gone those drains, and only those, are resumed.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Literal, Mapping, Optional, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_PROGRESSING, Context, NodeFacts, Draft, PodCondition,
)
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, Spec

# Base states in which a node serves jobs (flags such as DRAIN are judged separately).
SERVING_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")


def up(node: SlurmNode | None) -> bool:
    """Registered and answering (drained or not): what readiness counts."""
    return (node is not None and node["state"] in SERVING_STATES and "NOT_RESPONDING" not in node["flags"]
            and not node["down"])


def serves(node: SlurmNode | None) -> bool:
    """Up and taking jobs: what the pod condition says."""
    return node is not None and up(node) and not node["drain"]


def _camel(word: str) -> str:
    return "".join(part.capitalize() for part in word.lower().split("_"))


def node_state(node: SlurmNode | None) -> tuple[str, str]:
    """(CamelCase reason, state text) of a Slurm node as ``scontrol.parse_show_node`` gives it (None: unknown)."""
    if node is None:
        return "NotRegistered", "not registered with slurmctld"
    text = "+".join([node["state"]] + node["flags"])
    if "NOT_RESPONDING" in node["flags"]:
        reason = "NotResponding"
    elif node["down"]:
        reason = "Down"
    elif node["drain"]:
        reason = "Drained" if not node["busy"] else "Draining"
    else:
        reason = _camel(node["state"])
    return reason, text


def pod_condition(node: SlurmNode | None) -> PodCondition:
    """The ``SlurmNodeReady`` condition of the pod whose Slurm node is ``node`` (without lastTransitionTime)."""
    reason, text = node_state(node)
    message = "Slurm node %s" % text
    if node is not None and node.get("reason") and (node["drain"] or node["down"]):
        message += ": %s" % node["reason"]
    return {"type": names.POD_CONDITION_SLURM_NODE, "status": "True" if serves(node) else "False",
            "reason": reason, "message": message}


def same_condition(live: Mapping[str, object] | None, desired: Mapping[str, object]) -> bool:
    return live is not None and all(live.get(k) == desired[k] for k in ("status", "reason", "message"))


def live_condition(pod: KubeObject | None) -> KubeObject | None:
    for cond in ((pod or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == names.POD_CONDITION_SLURM_NODE:
            return cond
    return None


CountKey = Literal["idle", "allocated", "mixed", "drained", "down"]  # a NodeSet's Slurm node counts (its facts)
COUNT_KEYS: Tuple[CountKey, ...] = ("idle", "allocated", "mixed", "drained", "down")


def nodeset_counts(statefulset: str, replicas: int, slurm: Mapping[str, SlurmNode]) -> tuple[dict[str, int], int]:
    """A NodeSet's Slurm node counts (its pods' nodes, ordinals below ``replicas``) and how many are up."""
    return node_counts([names.pod_name(statefulset, ordinal) for ordinal in range(replicas)], slurm)


def node_counts(node_names: Iterable[str], slurm: Mapping[str, SlurmNode]) -> tuple[dict[str, int], int]:
    """The Slurm node counts of ``node_names`` and how many are up; a node of an elastic NodeSet powered down or
    powering up is none of them (the NodeSet's power counts say so)."""
    counts: dict[str, int] = dict((key, 0) for key in COUNT_KEYS)
    serving = 0
    for node_name in node_names:
        node = slurm.get(node_name)
        if node is None or "POWERED_DOWN" in node["flags"] or "POWERING_UP" in node["flags"]:
            continue
        if node["down"] or "NOT_RESPONDING" in node["flags"]:
            counts["down"] += 1
        elif node["drain"]:
            counts["drained"] += 1
        elif node["state"] in ("IDLE", "ALLOCATED", "MIXED"):
            counts[node["state"].lower()] += 1
        if up(node):
            serving += 1
    return counts, serving


def node_causes(k8s_node: NodeFacts | None, settings: Spec) -> list[str]:
    """Drain reasons a Kubernetes node gives the Slurm nodes of its pods, in order (empty: none)."""
    causes: list[str] = []
    if k8s_node is None:
        return causes
    if settings.get("drainCordoned") and k8s_node.get("unschedulable"):
        causes.append(names.REASON_NODE_CORDONED)
    for ctype in settings.get("drainOnConditions") or ():
        if (k8s_node.get("conditions") or {}).get(ctype) == "True":
            causes.append(names.REASON_NODE_CONDITION + ctype)
    return causes


def is_node_reason(reason: str | None) -> bool:
    return bool(reason and (reason == names.REASON_NODE_CORDONED or reason.startswith(names.REASON_NODE_CONDITION)))


def kubernetes_node_plan(worker_pods: Mapping[str, Optional[str]], k8s_nodes: Mapping[str, NodeFacts],
                         slurm: Mapping[str, SlurmNode], settings: Spec) -> tuple[dict[str, list[str]], list[str]]:
    """({reason: [Slurm nodes to drain]}, [Slurm nodes to resume]) from the Kubernetes nodes of the worker pods.

    ``worker_pods``: {pod name: its Kubernetes node name}; ``k8s_nodes``: {node name: {"unschedulable": bool,
    "conditions": {type: status}}}. A Slurm node drained or down for any other reason is never touched: its drain is
    someone else's (an administrator's, a health check's, a scale-in's), and it takes no job either way.
    """
    drain: dict[str, list[str]] = {}
    resume: list[str] = []
    for pod_name, host in sorted(worker_pods.items()):
        node = slurm.get(pod_name)
        if node is None:
            continue
        causes = node_causes(k8s_nodes.get(host) if host is not None else None, settings)
        held = node["drain"] or node["down"]
        ours = held and is_node_reason(node["reason"])
        if causes:
            if not held or (ours and node["reason"] not in causes):
                drain.setdefault(causes[0], []).append(pod_name)
        elif ours and node["drain"]:
            resume.append(pod_name)
    return drain, resume


def evictions(worker_pods: Iterable[str], slurm: Mapping[str, SlurmNode], after_seconds: float,
              now: int) -> list[tuple[str, str]]:
    """Worker pods to move to another Kubernetes node: their Slurm node drained by the health program for at least
    ``after_seconds`` (its reason's time) and idle. [(pod name, drain reason)], at most one per StatefulSet a pass."""
    chosen: list[tuple[str, str]] = []
    sets: set[str] = set()
    for name in sorted(worker_pods):
        node = slurm.get(name)
        sts = names.statefulset_of(name)
        if node is None or sts in sets or not node["drain"] or node["busy"]:
            continue
        reason = node["reason"] or ""
        if not reason.startswith(names.HEALTH_REASON_PREFIX):
            continue
        when = node.get("reason_time")
        if not isinstance(when, int) or now - when < after_seconds:
            continue
        chosen.append((name, reason))
        sets.add(sts)
    return chosen


def after_actions(slurm: Mapping[str, SlurmNode], p: Draft) -> dict[str, SlurmNode]:
    """Slurm's node table once the plan's drains and resumes are done (what `scontrol update` makes of it)."""
    after = dict(slurm)
    for reason, node_names in p.drain.items():
        after = scontrol.simulate_drain(after, node_names, reason)
    for name in p.resume:
        if name in after:
            after[name] = {**after[name], "drain": False, "flags": [f for f in after[name]["flags"] if f != "DRAIN"]}
    return after


def plan_projection(p: Draft, ctx: Context, workers: Mapping[str, KubeObject], bound: Mapping[str, KubeObject]) -> None:
    """Slurm node states onto the worker pods (``p.pod_conditions``) and the NodeSets' counts (``p.nodesets``), as
    Slurm will be once this plan's drains and resumes are done; unhealthy workers to move (``p.evict``); cordoned
    Kubernetes nodes and their listed conditions onto the Slurm nodes of their pods (``p.drain``, and ``p.resume``
    once the cause is gone; a drain this plan already decides wins). Nothing without Slurm. ``workers``, ``bound``:
    the live worker pods that may move to another node and those that may not (``modes.projected_pods``)."""
    slurm, spec = ctx.slurm, ctx.spec
    if slurm is None:
        return
    for name in list(workers) + list(bound):
        p.pod_conditions[name] = pod_condition(slurm.get(name))
    settings = spec["healthChecks"]["kubernetesNodes"]
    if settings.get("evictUnhealthyAfter"):
        after_seconds = durations.seconds(settings["evictUnhealthyAfter"])
        for name, why in evictions(workers, slurm, after_seconds, ctx.now):
            pod = workers[name]
            p.evict.append((name, pod["metadata"].get("uid"), (pod.get("spec") or {}).get("nodeName"), why))
            p.wait(REQUEUE_PROGRESSING, "%s: unhealthy since more than %s (%s): moving it to another node"
                   % (name, settings["evictUnhealthyAfter"], why))
    if settings["drainCordoned"] or settings.get("drainOnConditions"):
        _project_kubernetes_nodes(p, ctx, slurm, dict(workers, **bound), settings)
    # What Kubernetes is told is Slurm as this pass leaves it: its own drains and resumes included.
    after = after_actions(slurm, p)
    for name in p.pod_conditions:
        p.pod_conditions[name] = pod_condition(after.get(name))
    for facts in p.nodesets.values():
        nodes, sts_name = facts.get("nodes"), facts.get("statefulset")
        if nodes is not None:  # elastic and every-node sets: their node names
            counts, dummy = node_counts(nodes, after)
        elif sts_name is not None:
            counts, dummy = nodeset_counts(sts_name, facts["replicas"], after)
        else:
            continue  # no planner of its workers wrote its facts (none does so)
        for key in COUNT_KEYS:
            facts[key] = counts[key]


def _project_kubernetes_nodes(p: Draft, ctx: Context, slurm: Mapping[str, SlurmNode], workers: Mapping[str, KubeObject],
                              settings: Spec) -> None:
    k8s_nodes = ctx.observed.get("k8s_nodes")
    if k8s_nodes is None:
        why = ctx.observed.get("k8s_nodes_error") or "Kubernetes nodes not read"
        p.deferred.append("spec.healthChecks.kubernetesNodes: %s" % why)
        return
    hosts = dict((name, (pod.get("spec") or {}).get("nodeName")) for name, pod in workers.items()
                 if name not in p.delete_nodes)
    drain, resume = kubernetes_node_plan(hosts, k8s_nodes, slurm, settings)
    decided = set(n for nodes in p.drain.values() for n in nodes)  # a drain of this plan (scale-in, update) wins
    for reason, nodes in sorted(drain.items()):
        for name in nodes:
            if name not in decided:
                p.drain_node(name, reason)
    p.resume += [name for name in resume if name not in decided and name not in p.resume]
