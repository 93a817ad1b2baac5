# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Durations as Kubernetes and Go write them (``30m``, ``1h30m``, ``250ms``, ``1.5h``), or plain seconds. Pure.

The one parser of the collection: a NodeSet's ``drainTimeout``, the watches file's ``reconcilePeriod`` and the
operator's duration flags all go through it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|\u00b5s|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, u"\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def seconds(value):
    """Seconds (a float) in ``value``: a Go duration, or a number of seconds (int, float or digits).

    Raises ValueError for anything else, negative values included.
    """
    if isinstance(value, bool):
        raise ValueError("not a duration: %r" % (value,))
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("negative duration: %r" % (value,))
        return float(value)
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        return float(text)
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise ValueError("not a duration: %r (expected e.g. 30m, 1h30m, 90s)" % (value,))
    return total
