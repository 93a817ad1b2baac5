"""The extra vars operator-sdk's ansible-operator passes to a role, so roles run the same under either runtime.

- every key of ``spec`` snake_cased, recursively (maps inside lists too), at the top level;
- ``ansible_operator_meta: {name, namespace}``;
- the raw object as ``_<group>_<kind>`` and the raw spec as ``_<group>_<kind>_spec`` (dots and dashes of the
  group turned into underscores, kind lower-cased);
- then the watch entry's ``vars`` (which win).

Everything taken from the object is marked unsafe (as upstream's ``markUnsafe: true`` does): Ansible never
evaluates a ``{{ ... }}`` a user wrote into a resource, wherever a role uses the value. Only the watch entry's
own ``vars`` (written by whoever installs the operator) are templates.
"""

import re
from typing import Any

from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

_BOUNDARY_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")  # HTTPServer -> HTTP_Server
_BOUNDARY_2 = re.compile(r"([a-z\d])([A-Z])")      # fooBar -> foo_Bar, v1Alpha -> v1_Alpha

UNSAFE_KEY = "__ansible_unsafe"  # how Ansible's JSON loader reads a string it must never template

# The extra vars of one run (a JSON object: what ``ansible-playbook -e @file`` reads).
ExtraVars = dict[str, Any]


def snake_case(name: str) -> str:
    """``fooBar`` -> ``foo_bar``, ``HTTPServer`` -> ``http_server``, ``already_snake`` unchanged."""
    return _BOUNDARY_2.sub(r"\1_\2", _BOUNDARY_1.sub(r"\1_\2", name)).lower()


def snake_case_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {snake_case(k) if isinstance(k, str) else k: snake_case_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_case_keys(v) for v in value]
    return value


def mark_unsafe(value: Any) -> Any:
    """Every string in ``value`` wrapped as ``{"__ansible_unsafe": s}`` for a JSON extra-vars file."""
    if isinstance(value, str):
        return {UNSAFE_KEY: value}
    if isinstance(value, dict):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(v) for v in value]
    return value


def object_var_name(group: str, kind: str) -> str:
    return "_" + re.sub(r"[.\-]", "_", group) + "_" + kind.lower()


def extra_vars(obj: KubeObject, group: str, kind: str,
               watch_vars: dict[str, Any] | None = None) -> ExtraVars:
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    result: ExtraVars = snake_case_keys(spec)
    result["ansible_operator_meta"] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    key = object_var_name(group, kind)
    result[key] = obj
    result[key + "_spec"] = spec
    result = mark_unsafe(result)
    result.update(watch_vars or {})
    return result
