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
  down is stale (``slurm/version.reason_holds``: a release may keep the last reason after a resume) and holds
  nothing.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Mapping, Optional, Sequence, TypedDict

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.version import reason_holds

DRAIN = "drain"
WAIT = "wait"
READY = "ready_to_remove"
BLOCKED = "blocked_by_admin"


class Victim(TypedDict):
    """What :func:`plan_scale_in` says of one victim."""

    name: str  # the pod's, its Slurm node's
    action: str  # DRAIN, WAIT, READY or BLOCKED
    removable: bool  # its pod may go now
    expired: bool  # removable only because its drain is older than drain_timeout: its jobs are given up
    present: bool  # known to Slurm
    busy: bool  # jobs run on it
    state: Optional[str]  # its state and flags ("IDLE+DRAIN"); None: unknown to Slurm
    reason: Optional[str]


def answered(slurm: Mapping[str, SlurmNode] | None) -> Mapping[str, SlurmNode]:
    """Slurm's nodes, for a decision taken only once slurmctld answered (its caller checks: ValueError without)."""
    if slurm is None:
        raise ValueError("decided only with Slurm's view (slurmctld did not answer)")
    return slurm


def scale_in_victims(current_replicas: int, desired: int, statefulset_name: str) -> list[str]:
    """Pod (= Slurm node) names a StatefulSet removes going from ``current_replicas`` to ``desired``: the
    highest ordinals first, in the order they should be drained."""
    desired = max(0, desired)
    return [names.pod_name(statefulset_name, o) for o in range(current_replicas - 1, desired - 1, -1)]


def is_ours(reason: str | None, prefix: str = names.DRAIN_REASON_PREFIX) -> bool:
    return bool(reason and reason.strip().startswith(prefix))


def _expired(node: SlurmNode, now: float | None, drain_timeout: float | None) -> bool:
    when = node.get("reason_time")
    return (drain_timeout is not None and now is not None and isinstance(when, int)
            and now - when >= drain_timeout)


def plan_node(node: SlurmNode | None, prefix: str = names.DRAIN_REASON_PREFIX, now: float | None = None,
              drain_timeout: float | None = None, remove_admin_drained: bool = True) -> tuple[str, bool, bool]:
    """(action, removable, expired) for one victim's Slurm node (``None``: Slurm does not know it)."""
    if node is None:
        return READY, True, False
    held = reason_holds(node)  # a stale reason (a resumed node keeps its last one) blocks nothing
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


def drain_time(node: SlurmNode | None) -> int:
    """When the drain of a node :func:`plan_node` found expired began (epoch seconds): it finds a node expired only
    when Slurm gave that time (``reason_time`` under ``SLURM_TIME_FORMAT=%s``)."""
    when = None if node is None else node["reason_time"]
    if not isinstance(when, int):
        raise ValueError("a node without the time of its drain cannot have expired: %r" % (node,))
    return when


def plan_scale_in(nodes: Mapping[str, SlurmNode], victims: Iterable[str], prefix: str = names.DRAIN_REASON_PREFIX,
                  now: float | None = None, drain_timeout: float | None = None,
                  remove_admin_drained: bool = True) -> list[Victim]:
    """One entry per victim, in the victims' order (highest ordinal first, as ``plan.scale_in_victims``).

    ``now`` (epoch seconds) and ``drain_timeout`` (seconds) make a node drained by us for that long
    removable even with jobs; without them a job is never given up.
    """
    result: list[Victim] = []
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


def removable_replicas(plan: Sequence[Victim]) -> int:
    """How many replicas may go now: StatefulSets remove the top ordinal first, so count removable victims
    from the top and stop at the first one that is not (ordinal 2 cannot go while 3 still drains)."""
    count = 0
    for entry in plan:
        if not entry["removable"]:
            break
        count += 1
    return count


def statefulset_nodes(nodes: Iterable[str], statefulset: str, min_ordinal: int = 0,
                      max_ordinal: int | None = None) -> list[str]:
    """Names of Slurm nodes that are pods of ``statefulset`` with ``min_ordinal <= ordinal [< max_ordinal]``,
    highest ordinal first."""
    found: list[tuple[int, str]] = []
    for name in nodes:
        n = names.ordinal(name, statefulset)
        if n is not None and n >= min_ordinal and (max_ordinal is None or n < max_ordinal):
            found.append((n, name))
    return [pair[1] for pair in sorted(found, reverse=True)]


def resume_candidates(nodes: Mapping[str, SlurmNode], statefulset: str, replicas: int, reason: str) -> list[str]:
    """Nodes of pods that stay (ordinal < ``replicas``) still drained with exactly our scale-in ``reason``:
    a scale-in was cancelled (replicas raised again) before they were removed. Nothing else is resumed."""
    return [name for name in statefulset_nodes(nodes, statefulset, 0, replicas)
            if nodes[name]["drain"] and nodes[name]["reason"] == reason.strip() and is_ours(reason)]


def plan_delete(nodes: Mapping[str, SlurmNode], node_names: Iterable[str]) -> dict[str, list[str]]:
    """Split node records to delete (their pods are gone) into ``delete`` (known to Slurm, no job),
    ``busy`` (jobs still on it: Slurm refuses to delete it; it goes DOWN by itself once its slurmd is
    gone, a later run deletes it) and ``absent`` (nothing to do)."""
    result: dict[str, list[str]] = {"delete": [], "busy": [], "absent": []}
    for name in node_names:
        node = nodes.get(name)
        if node is None:
            result["absent"].append(name)
        elif node["busy"]:
            result["busy"].append(name)
        else:
            result["delete"].append(name)
    return result
