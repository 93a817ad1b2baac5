# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Slurm prints and how to ask it, for the reconciler: ``scontrol show node -o`` parsed into node dicts,
the jobs on given nodes (``squeue``), the node names scontrol may be given, and what a drain makes of a node. Pure:
the adapter (``k8s/slurm_exec.py``) runs the commands."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Collection, Iterable, List, Mapping, Optional, TypedDict, TypeVar, Union

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import hostlist


# scontrol with epoch seconds in its times (a Reason's `[user@time]`, SlurmdStartTime): no time zone to guess.
SCONTROL = ["env", "SLURM_TIME_FORMAT=%s", "scontrol"]
# Every node, one line each: what the converge and the operator's Slurm status loop run in the controller pod.
SHOW_NODES = SCONTROL + ["show", "node", "-o"]


# Pod names (DNS labels): the only node names we ever pass to scontrol, so a name cannot smuggle in a
# hostlist expression ("a,b", "n[1-9]") or another key=value.
NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$")


# A feature we pass on (ours, the NodeSet's, an administrator's): nothing that separates a line, a list, a key or
# an argument, nor a constraint operator. Used with fullmatch: "$" alone admits a trailing newline.
FEATURE_RE = re.compile(r"^[^\s,=&|\[\]*!()\"'\\#:]{1,253}$")

# Base states in which a node runs jobs; COMPLETING is a flag.
_BUSY_STATES = ("ALLOCATED", "MIXED")
_KEY_RE = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_]*)=")


# `Reason=<text> [<user>@<time>]`: the reason is free text, always printed last by scontrol -o.
_REASON_SUFFIX_RE = re.compile(r"\s*\[([^\[\]@\s]+)@([^\[\]\s]+)\]\s*$")
_NO_NODES = ("No nodes in the system",)


class ScontrolParseError(ValueError):
    """``scontrol show node -o`` printed something this parser does not understand."""


class SlurmNode(TypedDict):
    """A Slurm node as :func:`parse_show_node` reads it from ``scontrol show node -o`` (see there)."""

    name: str
    state: str  # the base state, upper case: IDLE, ALLOCATED, MIXED, DOWN, ...
    flags: List[str]  # upper case: DRAIN, COMPLETING, DYNAMIC_NORM, ...
    reason: Optional[str]
    reason_user: Optional[str]
    reason_time: Union[int, str, None]  # epoch seconds under SLURM_TIME_FORMAT=%s, else as printed
    cpus_alloc: int
    busy: bool
    drain: bool
    down: bool
    slurmd_start: Optional[int]
    features: List[str]
    active_features: List[str]


def validate_node_names(node_names: Collection[str]) -> list[str]:
    """Raise ValueError unless every name is a plain pod name."""
    bad = [n for n in node_names if not isinstance(n, str) or not NODE_NAME_RE.fullmatch(n)]
    if bad:
        raise ValueError("invalid Slurm node names (expected pod names): %s" % ", ".join(repr(b) for b in bad))
    return list(node_names)


def _parse_fields(line: str) -> dict[str, str]:
    """``Key=value`` pairs of one line; values may hold spaces (``OS=Linux 6.1 #1 SMP``), Reason is last."""
    reason = None
    at = line.find(" Reason=")
    if line.startswith("Reason="):
        at = 0
    if at >= 0:
        reason = line[at:].strip()[len("Reason="):]
        line = line[:at]
    fields: dict[str, str] = {}
    keys = list(_KEY_RE.finditer(line))
    for i, match in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        fields[match.group(1)] = line[match.end():end].strip()
    if reason is not None:
        fields["Reason"] = reason
    return fields


def _split_reason(raw: str | None) -> tuple[str | None, str | None, int | str | None]:
    """``"soperator: scale-in [root@1795251917]"`` -> (reason, user, time); time is an int for epochs."""
    if raw is None or raw in ("", "(null)", "None"):
        return None, None, None
    m = _REASON_SUFFIX_RE.search(raw)
    if not m:
        return raw.strip() or None, None, None
    when = m.group(2)
    return raw[:m.start()].strip() or None, m.group(1), int(when) if re.fullmatch(r"[0-9]+", when) else when


_Default = TypeVar("_Default", int, None)


def _int(value: str | None, default: _Default) -> int | _Default:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def parse_show_node(text: str) -> dict[str, SlurmNode]:
    """``scontrol show node -o`` (one line per node) -> ``{name: node}``.

    A node is a dict: ``name``, ``state`` (base state, e.g. ``IDLE``), ``flags`` (e.g. ``["DRAIN",
    "DYNAMIC_NORM"]``), ``reason``, ``reason_user``, ``reason_time`` (epoch seconds when scontrol ran with
    ``SLURM_TIME_FORMAT=%s``, else the printed string), ``cpus_alloc``, ``busy`` (jobs run or complete
    on it), ``drain`` (DRAIN or FAIL flag), ``down``, ``slurmd_start`` (SlurmdStartTime in epoch seconds under
    ``SLURM_TIME_FORMAT=%s``, else None: when the node's slurmd last registered as started).
    """
    result: dict[str, SlurmNode] = {}
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
        cpus_alloc = _int(fields.get("CPUAlloc"), 0)
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
            "slurmd_start": _int(fields.get("SlurmdStartTime"), None),
            "features": _list(fields.get("AvailableFeatures")),
            "active_features": _list(fields.get("ActiveFeatures")),
        }
    return result


def _list(value: str | None) -> list[str]:
    return [] if value is None or value in ("", "(null)") else value.split(",")


def parse_show_topology(text: str | None) -> dict[str, str]:
    """``scontrol show topology`` -> ``{node: its lowest switch or block}``: where Slurm places each node now
    (a node in no switch is absent). Hostlists expanded (``slurm/hostlist.py``).

    Tree: 24.11 prints a leaf's ``Nodes=`` as topology.conf wrote it, names it could not place included (a dynamic
    node absent at the last reconfigure is in no switch: jobs that need it are refused "Requested topology
    configuration is not available"), but a switch of switches from the nodes it really holds. So a node counts as
    placed only when a switch above the leaves lists it (``render.topology`` always writes one above every leaf);
    a tree of leaves alone places nobody."""
    leaves: dict[str, str] = {}
    reached: set[str] = set()
    blocks: dict[str, str] = {}
    for line in (text or "").splitlines():
        fields = _parse_fields(line.strip())
        nodes = hostlist.expand(fields.get("Nodes") or "")
        if "SwitchName" in fields and fields.get("Level") == "0":
            for node in nodes:
                leaves.setdefault(node, fields["SwitchName"])
        elif "SwitchName" in fields:
            reached.update(nodes)
        elif "BlockName" in fields:
            for node in nodes:
                blocks.setdefault(node, fields["BlockName"])
    placed = dict((node, leaf) for node, leaf in leaves.items() if node in reached)
    placed.update(blocks)
    return placed


def features_update(node_name: str, features: Collection[str]) -> list[str]:
    """argv of the scontrol call that sets a node's features (available and active: no changeable features)."""
    validate_node_names([node_name])
    bad = [f for f in features if not FEATURE_RE.fullmatch(f)]
    if bad:
        raise ValueError("invalid Slurm features: %s" % ", ".join(repr(b) for b in bad))
    value = ",".join(features)
    return ["scontrol", "update", "nodename=%s" % node_name, "availablefeatures=%s" % value,
            "activefeatures=%s" % value]


# The jobs on each node named as an argument (plain pod names, validated): one line "<node> <job id>" per job, and
# "<node> ?" when squeue could not answer for that node.
JOBS_SCRIPT = r"""for n do
  squeue -h -w "$n" -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING -o "$n %i" || echo "$n ?"
done
"""
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+|_\[[0-9,\-%]+\]|\+[0-9]+)?$")


def parse_jobs(text: str | None, node_names: Iterable[str]) -> dict[str, list[str]]:
    """``{node: [job ids]}`` from JOBS_SCRIPT's output; nodes it could not answer for are left out."""
    jobs: dict[str, list[str] | None] = dict((name, []) for name in node_names)  # None: squeue could not answer
    for line in (text or "").splitlines():
        parts = line.split()
        ids = jobs.get(parts[0]) if len(parts) == 2 else None
        if ids is None:
            continue
        if parts[1] == "?":
            jobs[parts[0]] = None
        elif _JOB_ID.match(parts[1]) and parts[1] not in ids:
            ids.append(parts[1])
    return dict((name, ids) for name, ids in jobs.items() if ids is not None)


def simulate_drain(nodes: Mapping[str, SlurmNode], node_names: Iterable[str],
                   reason: str) -> dict[str, SlurmNode]:
    """What ``scontrol update state=drain`` would make of ``nodes`` (for check mode)."""
    result = dict(nodes)
    for name in node_names:
        if name in result:
            node = result[name]
            result[name] = {**node, "drain": True, "reason": reason, "reason_user": None, "reason_time": None,
                            "flags": [f for f in node["flags"] if f != "DRAIN"] + ["DRAIN"]}
    return result
