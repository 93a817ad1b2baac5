# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to do with the Slurm node of a pod that goes (a scale-in, a removal, maintenance, a rolling update), per
node, from what Slurm says (``slurm/scontrol.py`` parses it). Pure: no subprocess, no clock (``now`` is passed in); the
adapter ``k8s/slurm_exec.py`` runs the commands.

A victim is a pod the StatefulSet removes (highest ordinals first); its Slurm node has the pod's name.
Per victim the plan says one of:

* ``drain``            not drained and no foreign reason: we drain it with our reason;
* ``wait``             drained by us (or DOWN) but jobs still run on it;
* ``ready_to_remove``  no job can be lost: drained by us and idle, DOWN and idle, or unknown to Slurm;
  also a node drained by us for longer than ``drain_timeout`` (its jobs are then given up, by choice);
* ``blocked_by_admin`` someone else's reason is on the node. It is never overwritten and never resumed.
  Once such a node is drained AND idle it has no job to lose, so it is removable (unless
  ``remove_admin_drained=False``): a StatefulSet can only remove its top ordinal, so keeping an idle node an
  admin took out of service would block every scale-in below it. While such a node still runs jobs it
  blocks the removal (we never force an admin's node). A reason on a node that is neither drained nor
  down is stale (Slurm 24.11 keeps the last reason after a resume) and holds nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names

DRAIN = "drain"
WAIT = "wait"
READY = "ready_to_remove"
BLOCKED = "blocked_by_admin"


def scale_in_victims(current_replicas, desired, statefulset_name):
    """Pod (= Slurm node) names a StatefulSet removes going from ``current_replicas`` to ``desired``: the
    highest ordinals first, in the order they should be drained."""
    desired = max(0, desired)
    return [names.pod_name(statefulset_name, o) for o in range(current_replicas - 1, desired - 1, -1)]


def is_ours(reason, prefix=names.DRAIN_REASON_PREFIX):
    return bool(reason) and reason.strip().startswith(prefix)


def _expired(node, now, drain_timeout):
    when = node.get("reason_time")
    return (drain_timeout is not None and now is not None and isinstance(when, int)
            and now - when >= drain_timeout)


def plan_node(node, prefix=names.DRAIN_REASON_PREFIX, now=None, drain_timeout=None, remove_admin_drained=True):
    """(action, removable, expired) for one victim's Slurm node (``None``: Slurm does not know it)."""
    if node is None:
        return READY, True, False
    # A reason only holds a node while it is drained or down: Slurm 24.11 keeps the last reason on a
    # resumed node, and such a stale reason blocks nothing.
    held = node["drain"] or node["down"]
    foreign = held and bool(node["reason"]) and not is_ours(node["reason"], prefix)
    busy = node["busy"]
    if foreign and not node["down"]:
        # Never overwrite, never resume; removable only once the admin's drain left it without jobs.
        return BLOCKED, bool(remove_admin_drained and node["drain"] and not busy), False
    if node["down"] or node["drain"]:
        if not busy:
            return READY, True, False
        if not foreign and _expired(node, now, drain_timeout):
            return READY, True, True
        return WAIT, False, False
    return DRAIN, False, False


def plan_scale_in(nodes, victims, prefix=names.DRAIN_REASON_PREFIX, now=None, drain_timeout=None,
                  remove_admin_drained=True):
    """One entry per victim, in the victims' order (highest ordinal first, as ``plan.scale_in_victims``).

    ``now`` (epoch seconds) and ``drain_timeout`` (seconds) make a node drained by us for that long
    removable even with jobs; without them a job is never given up.
    """
    result = []
    for name in victims:
        node = nodes.get(name)
        action, removable, expired = plan_node(node, prefix, now, drain_timeout, remove_admin_drained)
        result.append({
            "name": name,
            "action": action,
            "removable": removable,
            "expired": expired,
            "present": node is not None,
            "busy": bool(node and node["busy"]),
            "state": "+".join([node["state"]] + node["flags"]) if node else None,
            "reason": node["reason"] if node else None,
        })
    return result


def removable_replicas(plan):
    """How many replicas may go now: StatefulSets remove the top ordinal first, so count removable victims
    from the top and stop at the first one that is not (ordinal 2 cannot go while 3 still drains)."""
    count = 0
    for entry in plan:
        if not entry["removable"]:
            break
        count += 1
    return count


def statefulset_nodes(nodes, statefulset, min_ordinal=0, max_ordinal=None):
    """Names of Slurm nodes that are pods of ``statefulset`` with ``min_ordinal <= ordinal [< max_ordinal]``,
    highest ordinal first."""
    found = []
    for name in nodes:
        n = names.ordinal(name, statefulset)
        if n is not None and n >= min_ordinal and (max_ordinal is None or n < max_ordinal):
            found.append((n, name))
    return [pair[1] for pair in sorted(found, reverse=True)]


def resume_candidates(nodes, statefulset, replicas, reason):
    """Nodes of pods that stay (ordinal < ``replicas``) still drained with exactly our scale-in ``reason``:
    a scale-in was cancelled (replicas raised again) before they were removed. Nothing else is resumed."""
    return [name for name in statefulset_nodes(nodes, statefulset, 0, replicas)
            if nodes[name]["drain"] and nodes[name]["reason"] == reason.strip() and is_ours(reason)]


def plan_delete(nodes, node_names):
    """Split node records to delete (their pods are gone) into ``delete`` (known to Slurm, no job),
    ``busy`` (jobs still on it: Slurm refuses to delete it; it goes DOWN by itself once its slurmd is
    gone, a later run deletes it) and ``absent`` (nothing to do)."""
    result = {"delete": [], "busy": [], "absent": []}
    for name in node_names:
        node = nodes.get(name)
        if node is None:
            result["absent"].append(name)
        elif node["busy"]:
            result["busy"].append(name)
        else:
            result["delete"].append(name)
    return result
