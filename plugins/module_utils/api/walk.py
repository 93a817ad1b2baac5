# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The structural schema walk: defaults and validation of a value against a schema of ``schema.py`` the way the
API server does it (types, required fields, enums, patterns, bounds, list-type sets; unknown fields rejected), with
each ``x-kubernetes-validations`` rule judged by its Python twin (``cel.py``). Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy
from typing import Any, TypeVar

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.api.cel import TWINS
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import child_path, matches
from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import QUANTITY_PATTERN, parse_quantity
from ansible_collections.soperator.slurm.plugins.module_utils.api.schema import Schema
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


_TYPES: dict[str, type[object] | tuple[type[object], ...]] = {
    "string": str, "integer": int, "boolean": bool, "object": dict, "array": list, "number": (int, float)}


# The API server's integers are int64.
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


# Passed down the walk when there is no old object (a create): transition rules (``oldSelf``) are not judged.
NO_OLD = object()

_V = TypeVar("_V")


def apply_defaults(value: _V, node: Schema) -> _V:
    """A copy of ``value`` with the schema's defaults filled in, top-down like the API server."""
    value = copy.deepcopy(value)
    _default_in_place(value, node)
    return value


def _default_in_place(value: object, node: Schema) -> None:
    if isinstance(value, dict) and node.get("type") == "object":
        for key, sub in (node.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default_in_place(value[key], sub)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                _default_in_place(value[key], extra)
    elif isinstance(value, list) and node.get("type") == "array":
        for item in value:
            _default_in_place(item, node["items"])


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name in ("integer", "string", "object", "array"):
        if isinstance(value, _TYPES[name]):
            return name
    return "number" if isinstance(value, float) else type(value).__name__


def _type_ok(value: object, expected: str) -> bool:
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[expected])


def _pattern_error(value: object, pattern: str) -> str:
    hint = schema.PATTERN_HINTS.get(pattern)
    message = "Invalid value: %r: should match '%s'" % (value, pattern)
    return message + (" (%s)" % hint if hint else "")


def _check_scalar(value: object, node: Schema, path: str, errors: Errors) -> None:
    if "enum" in node and value not in node["enum"]:
        errors.append(SpecError(path, "Unsupported value: %r: supported values: %s"
                                % (value, ", ".join('"%s"' % v for v in node["enum"]))))
    if isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            errors.append(SpecError(path, "Invalid value: %r: should be at least %d chars long"
                                    % (value, node["minLength"])))
        if "maxLength" in node and len(value) > node["maxLength"]:
            errors.append(SpecError(path, "Too long: may not be more than %d characters" % node["maxLength"]))
        if "pattern" in node and not matches(node["pattern"], value):
            errors.append(SpecError(path, _pattern_error(value, node["pattern"])))
    elif isinstance(value, int):
        if "minimum" in node and value < node["minimum"]:
            errors.append(SpecError(path, "Invalid value: %d: should be greater than or equal to %d"
                                    % (value, node["minimum"])))
        if "maximum" in node and value > node["maximum"]:
            errors.append(SpecError(path, "Invalid value: %d: should be less than or equal to %d"
                                    % (value, node["maximum"])))


def validate_schema(value: object, node: Schema, path: str, errors: Errors, old: object = NO_OLD) -> None:
    """Append to ``errors`` every way ``value`` breaks the structural schema ``node`` (and its CEL twins).

    ``old``: the stored value at the same place (an update), for the transition rules (``oldSelf``)."""
    before = len(errors)
    if node.get("x-kubernetes-int-or-string"):
        if not (_type_ok(value, "integer") or _type_ok(value, "string")):
            errors.append(SpecError(path, "must be an integer or a string, got %s" % _type_name(value)))
            return
        _check_scalar(value, node, path, errors)
        if node.get("pattern") == QUANTITY_PATTERN and len(errors) == before:
            try:  # the pattern bounds the digits; this bounds the value (and refuses what the pattern cannot)
                parse_quantity(value)
            except ValueError as e:
                errors.append(SpecError(path, "Invalid value: %s" % e))
    elif "type" in node:
        if not _type_ok(value, node["type"]):
            errors.append(SpecError(path, "must be of type %s, got %s" % (node["type"], _type_name(value))))
            return
        if node["type"] == "object" and isinstance(value, dict):  # _type_ok: it is one
            _validate_object(value, node, path, errors, old)
        elif node["type"] == "array" and isinstance(value, list):
            _validate_array(value, node, path, errors)
        else:
            _check_scalar(value, node, path, errors)
    for rule in node.get("x-kubernetes-validations") or ():
        try:
            if "oldSelf" in rule["rule"]:
                if old is not NO_OLD:
                    errors.extend(TWINS[rule["message"]](value, path, old))
                continue
            errors.extend(TWINS[rule["message"]](value, path))
        except (AttributeError, KeyError, TypeError):
            # A twin cannot judge a malformed value; the schema errors above already name the problem.
            if len(errors) == before:
                raise


def _validate_object(value: KubeObject, node: Schema, path: str, errors: Errors, old: object = NO_OLD) -> None:
    properties = node.get("properties")
    extra = node.get("additionalProperties")
    for key in node.get("required") or ():
        if key not in value:
            errors.append(SpecError(child_path(path, key), "Required value"))
    if "maxProperties" in node and len(value) > node["maxProperties"]:
        errors.append(SpecError(path, "Too many: %d: must have at most %d properties"
                                % (len(value), node["maxProperties"])))
    for key in sorted(value, key=str):
        sub_path = child_path(path, str(key))
        if properties is not None and key in properties:
            if properties[key] == {"type": "object"}:  # metadata: the API server validates it
                continue
            sub_old = old[key] if isinstance(old, dict) and key in old else NO_OLD
            validate_schema(value[key], properties[key], sub_path, errors, sub_old)
        elif isinstance(extra, dict):
            validate_schema(value[key], extra, sub_path, errors)
        elif not node.get("x-kubernetes-preserve-unknown-fields"):
            errors.append(SpecError(sub_path, "unknown field (the API rejects unknown fields: check the spelling)"))


def _validate_array(value: list[Any], node: Schema, path: str, errors: Errors) -> None:
    if "minItems" in node and len(value) < node["minItems"]:
        errors.append(SpecError(path, "Invalid value: %d: should have at least %d items"
                                % (len(value), node["minItems"])))
    if "maxItems" in node and len(value) > node["maxItems"]:
        errors.append(SpecError(path, "Too many: %d: must have at most %d items" % (len(value), node["maxItems"])))
    if "minItems" in node and len(value) < node["minItems"]:
        errors.append(SpecError(path, "Too few: %d: must have at least %d items" % (len(value), node["minItems"])))
    for index, item in enumerate(value):
        validate_schema(item, node["items"], child_path(path, index), errors)
    if node.get("x-kubernetes-list-type") == "set":
        seen = set()
        for index, item in enumerate(value):
            if item in seen:
                errors.append(SpecError(child_path(path, index), "Duplicate value: %r" % (item,)))
            seen.add(item)
