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

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names

# Base states in which a node serves jobs (flags such as DRAIN are judged separately).
SERVING_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")


def up(node):
    """Registered and answering (drained or not): what readiness counts."""
    return (node is not None and node["state"] in SERVING_STATES and "NOT_RESPONDING" not in node["flags"]
            and not node["down"])


def serves(node):
    """Up and taking jobs: what the pod condition says."""
    return up(node) and not node["drain"]


def _camel(word):
    return "".join(part.capitalize() for part in word.lower().split("_"))


def node_state(node):
    """(CamelCase reason, state text) of a Slurm node as ``scale_in.parse_show_node`` gives it (None: unknown)."""
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


def pod_condition(node):
    """The ``SlurmNodeReady`` condition of the pod whose Slurm node is ``node`` (without lastTransitionTime)."""
    reason, text = node_state(node)
    message = "Slurm node %s" % text
    if node is not None and node.get("reason") and (node["drain"] or node["down"]):
        message += ": %s" % node["reason"]
    return {"type": names.POD_CONDITION_SLURM_NODE, "status": "True" if serves(node) else "False",
            "reason": reason, "message": message}


def same_condition(live, desired):
    return live is not None and all(live.get(k) == desired[k] for k in ("status", "reason", "message"))


def live_condition(pod):
    for cond in ((pod or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == names.POD_CONDITION_SLURM_NODE:
            return cond
    return None


COUNT_KEYS = ("idle", "allocated", "mixed", "drained", "down")


def nodeset_counts(statefulset, replicas, slurm):
    """A NodeSet's Slurm node counts (its pods' nodes, ordinals below ``replicas``) and how many are up."""
    counts = dict((key, 0) for key in COUNT_KEYS)
    serving = 0
    for ordinal in range(replicas):
        node = slurm.get("%s-%d" % (statefulset, ordinal))
        if node is None:
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


def node_causes(k8s_node, settings):
    """Drain reasons a Kubernetes node gives the Slurm nodes of its pods, in order (empty: none)."""
    causes = []
    if k8s_node is None:
        return causes
    if settings.get("drainCordoned") and k8s_node.get("unschedulable"):
        causes.append(names.REASON_NODE_CORDONED)
    for ctype in settings.get("drainOnConditions") or ():
        if (k8s_node.get("conditions") or {}).get(ctype) == "True":
            causes.append(names.REASON_NODE_CONDITION + ctype)
    return causes


def is_node_reason(reason):
    return bool(reason) and (reason == names.REASON_NODE_CORDONED or reason.startswith(names.REASON_NODE_CONDITION))


def kubernetes_node_plan(worker_pods, k8s_nodes, slurm, settings):
    """({reason: [Slurm nodes to drain]}, [Slurm nodes to resume]) from the Kubernetes nodes of the worker pods.

    ``worker_pods``: {pod name: its Kubernetes node name}; ``k8s_nodes``: {node name: {"unschedulable": bool,
    "conditions": {type: status}}}. A Slurm node drained or down for any other reason is never touched: its drain is
    someone else's (an administrator's, a health check's, a scale-in's), and it takes no job either way.
    """
    drain, resume = {}, []
    for pod_name, host in sorted(worker_pods.items()):
        node = slurm.get(pod_name)
        if node is None:
            continue
        causes = node_causes(k8s_nodes.get(host), settings)
        held = node["drain"] or node["down"]
        ours = held and is_node_reason(node["reason"])
        if causes:
            if not held or (ours and node["reason"] not in causes):
                drain.setdefault(causes[0], []).append(pod_name)
        elif ours and node["drain"]:
            resume.append(pod_name)
    return drain, resume


def evictions(worker_pods, slurm, after_seconds, now):
    """Worker pods to move to another Kubernetes node: their Slurm node drained by the health program for at least
    ``after_seconds`` (its reason's time) and idle. [(pod name, drain reason)], at most one per StatefulSet a pass."""
    chosen, sets = [], set()
    for name in sorted(worker_pods):
        node = slurm.get(name)
        sts = name.rpartition("-")[0]
        if node is None or sts in sets or not node["drain"] or node["busy"]:
            continue
        if not (node["reason"] or "").startswith(names.HEALTH_REASON_PREFIX):
            continue
        if not isinstance(node.get("reason_time"), int) or now - node["reason_time"] < after_seconds:
            continue
        chosen.append((name, node["reason"]))
        sets.add(sts)
    return chosen
