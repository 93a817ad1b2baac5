# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Durations as Kubernetes and Go write them (``30m``, ``1h30m``, ``250ms``, ``1.5h``), or plain seconds, and
points in time as Kubernetes writes them (RFC 3339, UTC). Pure: a time is always given, never read from a clock.

The one parser of the collection: a NodeSet's ``drainTimeout``, the watches file's ``reconcilePeriod`` and the
operator's duration flags all go through it; every timestamp the collection and the operator write is :func:`iso`'s.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import calendar
import datetime
import re

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|\u00b5s|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, u"\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def seconds(value: object) -> float:
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


TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # RFC 3339, UTC, as Kubernetes writes its times
_EPOCH = datetime.datetime(1970, 1, 1)


def iso(epoch: float) -> str:
    """``epoch`` (seconds, the fraction dropped) as Kubernetes writes a time."""
    return (_EPOCH + datetime.timedelta(seconds=int(epoch))).strftime(TIME_FORMAT)


def epoch_of(text: object) -> int | None:
    """Epoch seconds of a time :func:`iso` wrote; None when ``text`` is not one."""
    try:
        return calendar.timegm(datetime.datetime.strptime(str(text), TIME_FORMAT).timetuple())
    except (TypeError, ValueError):
        return None
