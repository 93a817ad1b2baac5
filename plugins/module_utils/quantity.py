# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities ("500m", "2", "4Gi", "1e3") as exact fractions, for sizing Slurm nodes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

# Non-negative quantities only: a resource request is never negative.
QUANTITY_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10 ** 3), "M": Fraction(10 ** 6), "G": Fraction(10 ** 9), "T": Fraction(10 ** 12),
            "P": Fraction(10 ** 15), "E": Fraction(10 ** 18)}


def parse_quantity(value):
    """``value`` (int or quantity string) as a Fraction; ValueError when it is not a quantity."""
    if isinstance(value, bool):
        raise ValueError("not a quantity: %r" % (value,))
    if isinstance(value, int):
        return Fraction(value)
    text = str(value)
    match = _QUANTITY_RE.match(text)
    if not match:
        raise ValueError("not a quantity: %r" % (value,))
    number = Fraction(match.group(1))
    suffix = match.group(3) or ""
    if suffix in _BINARY:
        return number * Fraction(_BINARY[suffix])
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])
