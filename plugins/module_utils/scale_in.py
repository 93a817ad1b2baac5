# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scale-in of a NodeSet, decided from what Slurm says: parse ``scontrol show node -o``, plan per victim.

Pure: no subprocess, no clock (``now`` is passed in). The adapter ``_slurm.py`` runs the commands.

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

import re

from ansible_collections.soperator.slurm.plugins.module_utils import names

DRAIN = "drain"
WAIT = "wait"
READY = "ready_to_remove"
BLOCKED = "blocked_by_admin"

# Pod names (DNS labels): the only node names we ever pass to scontrol, so a name cannot smuggle in a
# hostlist expression ("a,b", "n[1-9]") or another key=value.
NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$")
# Base states in which a node runs jobs; COMPLETING is a flag.
_BUSY_STATES = ("ALLOCATED", "MIXED")
_KEY_RE = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_]*)=")
# `Reason=<text> [<user>@<time>]`: the reason is free text, always printed last by scontrol -o.
_REASON_SUFFIX_RE = re.compile(r"\s*\[([^\[\]@\s]+)@([^\[\]\s]+)\]\s*$")
_NO_NODES = ("No nodes in the system",)


# The drain reason of a scale-in (and of a NodeSet being removed): ours, so ours to take back.
REASON_SCALE_IN = names.DRAIN_REASON_PREFIX + " scale-in"


def scale_in_victims(current_replicas, desired, statefulset_name):
    """Pod (= Slurm node) names a StatefulSet removes going from ``current_replicas`` to ``desired``: the
    highest ordinals first, in the order they should be drained."""
    desired = max(0, desired)
    return ["%s-%d" % (statefulset_name, ordinal) for ordinal in range(current_replicas - 1, desired - 1, -1)]


class ScontrolParseError(ValueError):
    """``scontrol show node -o`` printed something this parser does not understand."""


def validate_node_names(node_names):
    """Raise ValueError unless every name is a plain pod name."""
    bad = [n for n in node_names if not isinstance(n, str) or not NODE_NAME_RE.fullmatch(n)]
    if bad:
        raise ValueError("invalid Slurm node names (expected pod names): %s" % ", ".join(repr(b) for b in bad))
    return list(node_names)


def _parse_fields(line):
    """``Key=value`` pairs of one line; values may hold spaces (``OS=Linux 6.1 #1 SMP``), Reason is last."""
    reason = None
    at = line.find(" Reason=")
    if line.startswith("Reason="):
        at = 0
    if at >= 0:
        reason = line[at:].strip()[len("Reason="):]
        line = line[:at]
    fields = {}
    keys = list(_KEY_RE.finditer(line))
    for i, match in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        fields[match.group(1)] = line[match.end():end].strip()
    if reason is not None:
        fields["Reason"] = reason
    return fields


def _split_reason(raw):
    """``"soperator: scale-in [root@1795251917]"`` -> (reason, user, time); time is an int for epochs."""
    if raw is None or raw in ("", "(null)", "None"):
        return None, None, None
    m = _REASON_SUFFIX_RE.search(raw)
    if not m:
        return raw.strip() or None, None, None
    when = m.group(2)
    return raw[:m.start()].strip() or None, m.group(1), int(when) if re.fullmatch(r"[0-9]+", when) else when


def _int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_show_node(text):
    """``scontrol show node -o`` (one line per node) -> ``{name: node}``.

    A node is a dict: ``name``, ``state`` (base state, e.g. ``IDLE``), ``flags`` (e.g. ``["DRAIN",
    "DYNAMIC_NORM"]``), ``reason``, ``reason_user``, ``reason_time`` (epoch seconds when scontrol ran with
    ``SLURM_TIME_FORMAT=%s``, else the printed string), ``cpus_alloc``, ``busy`` (jobs run or complete
    on it), ``drain`` (DRAIN or FAIL flag), ``down``.
    """
    result = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line in _NO_NODES:
            continue
        fields = _parse_fields(line)
        if "NodeName" not in fields or "State" not in fields:
            raise ScontrolParseError("not a `scontrol show node -o` line: %r" % line[:200])
        parts = fields["State"].rstrip("*~#!%$@^-").split("+")
        base, flags = parts[0].upper(), [p.upper() for p in parts[1:] if p]
        reason, user, when = _split_reason(fields.get("Reason"))
        cpus_alloc = _int(fields.get("CPUAlloc"))
        result[fields["NodeName"]] = {
            "name": fields["NodeName"],
            "state": base,
            "flags": flags,
            "reason": reason,
            "reason_user": user,
            "reason_time": when,
            "cpus_alloc": cpus_alloc,
            "busy": base in _BUSY_STATES or "COMPLETING" in flags or cpus_alloc > 0,
            "drain": "DRAIN" in flags or "FAIL" in flags or base in ("DRAIN", "FAIL"),
            "down": base == "DOWN",
        }
    return result


# The jobs on each node named as an argument (plain pod names, validated): one line "<node> <job id>" per job, and
# "<node> ?" when squeue could not answer for that node.
JOBS_SCRIPT = r"""for n do
  squeue -h -w "$n" -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING -o "$n %i" || echo "$n ?"
done
"""
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+|_\[[0-9,\-%]+\]|\+[0-9]+)?$")


def parse_jobs(text, node_names):
    """``{node: [job ids]}`` from JOBS_SCRIPT's output; nodes it could not answer for are left out."""
    jobs = dict((name, []) for name in node_names)
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) != 2 or jobs.get(parts[0]) is None:
            continue
        if parts[1] == "?":
            jobs[parts[0]] = None
        elif _JOB_ID.match(parts[1]) and parts[1] not in jobs[parts[0]]:
            jobs[parts[0]].append(parts[1])
    return dict((name, ids) for name, ids in jobs.items() if ids is not None)


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


def simulate_drain(nodes, node_names, reason):
    """What ``scontrol update state=drain`` would make of ``nodes`` (for check mode)."""
    result = dict(nodes)
    for name in node_names:
        if name in result:
            node = dict(result[name])
            node.update(drain=True, reason=reason, reason_user=None, reason_time=None,
                        flags=[f for f in node["flags"] if f != "DRAIN"] + ["DRAIN"])
            result[name] = node
    return result


def ordinal(node_name, statefulset):
    """The pod ordinal of ``<statefulset>-<n>``, or None for a node of something else."""
    head, sep, tail = node_name.rpartition("-")
    if sep and head == statefulset and re.fullmatch(r"[0-9]+", tail) and (tail == "0" or not tail.startswith("0")):
        return int(tail)
    return None


def statefulset_nodes(nodes, statefulset, min_ordinal=0, max_ordinal=None):
    """Names of Slurm nodes that are pods of ``statefulset`` with ``min_ordinal <= ordinal [< max_ordinal]``,
    highest ordinal first."""
    found = []
    for name in nodes:
        n = ordinal(name, statefulset)
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
