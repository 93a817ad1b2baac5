# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm hostlist expressions (``demo-gpu-[0-2,5],login-0``) for the names we give Slurm: pod names ending in an
ordinal. Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Iterable

_ORDINAL = re.compile(r"^(.*?)([0-9]+)$")
_GROUP = re.compile(r"^(.*)\[([0-9,\-]+)\]$")


def compress(node_names: Iterable[str]) -> str:
    """A hostlist expression of ``node_names``, sorted by prefix then ordinal (the same set gives the same text)."""
    by_prefix: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in set(node_names):
        m = _ORDINAL.match(name)
        if m and not (len(m.group(2)) > 1 and m.group(2).startswith("0")):
            by_prefix.setdefault(m.group(1), []).append(int(m.group(2)))
        else:
            plain.append(name)
    parts = sorted(plain)
    for prefix in sorted(by_prefix):
        numbers = sorted(by_prefix[prefix])
        if len(numbers) == 1:
            parts.append("%s%d" % (prefix, numbers[0]))
            continue
        runs: list[str] = []
        start = numbers[0]
        for prev, cur in zip(numbers, numbers[1:] + [-1]):  # -1: no ordinal (>= 0) follows the last
            if cur != prev + 1:
                runs.append("%d" % start if start == prev else "%d-%d" % (start, prev))
                start = cur
        parts.append("%s[%s]" % (prefix, ",".join(runs)))
    return ",".join(parts)


def _split_top(expression: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts: list[str] = []
    depth, current = 0, ""
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current:
        parts.append(current)
    return parts


def expand(expression: str | None) -> list[str]:
    """The names of a hostlist expression with at most one bracket group per item (what Slurm prints for ours)."""
    found: list[str] = []
    for item in _split_top((expression or "").strip()):
        m = _GROUP.match(item)
        if not m:
            found.append(item)
            continue
        for run in m.group(2).split(","):
            low, dummy, high = run.partition("-")
            width = len(low) if low.startswith("0") and len(low) > 1 else 0
            for number in range(int(low), int(high or low) + 1):
                found.append("%s%0*d" % (m.group(1), width, number))
    return found
