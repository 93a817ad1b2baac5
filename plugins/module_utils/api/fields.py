# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Field paths and the API server's string checks, shared by every part of the validator. Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema


_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def matches(pattern: str, value: object) -> bool:
    """Whether ``value`` matches a schema ``pattern`` the way the API server's RE2 does: the whole string
    (``re.search`` with ``^...$`` would accept a trailing newline)."""
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def child_path(path: str, key: str | int) -> str:
    """``spec`` + ``replicas`` -> ``spec.replicas``; odd map keys in brackets: ``limits[nvidia.com/gpu]``."""
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    if not _SIMPLE_KEY.fullmatch(key):
        return "%s[%s]" % (path, key)
    return "%s.%s" % (path, key) if path else key


def label_key_ok(key: object) -> bool:
    """A qualified name ([prefix/]name) as the API server wants label keys, taint keys and topology keys."""
    return (isinstance(key, str) and len(key) <= 317 and matches(schema.LABEL_KEY_PATTERN, key)
            and re.match(schema.LABEL_KEY_LONG_PREFIX_PATTERN, key) is None)
