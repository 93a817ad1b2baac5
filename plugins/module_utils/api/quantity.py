# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities ("500m", "2", "4Gi", "1e3") as exact fractions, for sizing Slurm nodes.

Parsing is bounded: at most :data:`MAX_DIGITS` digits on each side of the point and a two-digit exponent, so
a value such as ``1e999999999`` (which makes the API server itself time out) costs nothing to refuse, and every
accepted value is computed in constant time. Values above :data:`MAX_QUANTITY` (2^63-1, the largest quantity
Kubernetes represents exactly) are refused too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

MAX_DIGITS = 30
# Non-negative quantities only (a resource is never negative); digits and exponent bounded (see above). The
# API server's schema uses the same pattern (RE2): explicit classes, no \d.
QUANTITY_PATTERN = (r"^([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})"
                    r"([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?$")
QUANTITY_MAX_LENGTH = 64
MAX_QUANTITY = 2 ** 63 - 1
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10 ** 3), "M": Fraction(10 ** 6), "G": Fraction(10 ** 9), "T": Fraction(10 ** 12),
            "P": Fraction(10 ** 15), "E": Fraction(10 ** 18)}


def parse_quantity(value: object) -> Fraction:
    """``value`` (int or quantity string) as a Fraction; ValueError (with the reason) when it is not a
    non-negative quantity of at most :data:`MAX_QUANTITY`."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("not a quantity: %r" % (value,))
    if isinstance(value, int):
        number = Fraction(value)
    else:
        # fullmatch: "$" alone would accept a trailing newline, which the API server (RE2) refuses.
        match = _QUANTITY_RE.fullmatch(value) if len(value) <= QUANTITY_MAX_LENGTH else None
        if not match:
            raise ValueError("not a quantity: %r" % (value,))
        number = Fraction(match.group(1))
        suffix = match.group(3) or ""
        if suffix in _BINARY:
            number *= _BINARY[suffix]
        elif suffix in _DECIMAL:
            number *= _DECIMAL[suffix]
        else:
            number *= Fraction(10) ** int(suffix[1:])  # at most two digits: bounded
    if number < 0:
        raise ValueError("negative quantity: %r" % (value,))
    if number > MAX_QUANTITY:
        raise ValueError("quantity %r is too large (at most %d)" % (value, MAX_QUANTITY))
    return number
