# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one hash: sha256, hex, of a text or of a value's canonical JSON. Pure.

Every digest the collection and the operator write goes through it: an object's applied-hash, a ConfigMap's
config-hash, a pod template's hash, a populate Job's name, the operator's reconciled digest. A value is hashed as
its canonical JSON (keys sorted, no spaces, non-ASCII as itself), so equal values have equal digests whatever the
order of their keys.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import hashlib
import json


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def of_text(text: str) -> str:
    """sha256 (hex) of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def of_value(value: object) -> str:
    """sha256 (hex) of the canonical JSON of ``value``."""
    return of_text(canonical_json(value))
