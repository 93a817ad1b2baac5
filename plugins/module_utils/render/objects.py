# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers about Kubernetes objects as plain dicts: identity, hashing, comparison, redaction, planning.

Stdlib only, no I/O: the adapter (``k8s/apply.py``) fetches live objects and calls these to decide what to
send. Everything here is unit-tested without a cluster.

The skip rule (why a no-op converge costs one list per kind and no apply):
an object is left alone when its live copy carries the annotation ``slurm.soperator.dev/applied-hash`` equal
to :func:`manifest_hash` of the desired manifest AND the live fields are a superset of the desired fields
(:func:`is_subset`). The hash catches fields removed from the desired manifest (server-side apply would
drop them, the subset test cannot see that); the subset test catches hand edits of fields we set (the hash
cannot see those). Anything else is server-side applied, which is always safe, merely one more request.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import base64
import copy
import re
from typing import Collection, Iterable, Mapping, Optional, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import digests, names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

APPLIED_HASH = names.ANNOTATION_APPLIED_HASH
CREATE_ONLY = names.ANNOTATION_CREATE_ONLY
GENERATE = names.ANNOTATION_GENERATE
PRUNE = names.ANNOTATION_PRUNE

GENERATORS = (names.GENERATE_MUNGE_KEY, names.GENERATE_SSH_HOST_KEYS, names.GENERATE_DB_PASSWORD,
              names.GENERATE_JWT_KEY)
DEFAULT_PROTECT_KINDS = ("Secret", "PersistentVolumeClaim")
HIDDEN = "<hidden>"

# Server-maintained metadata that says nothing about what we asked for.
VOLATILE_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink")

# Plan verdicts for one desired object.
CREATE = "create"  # create-only object, absent: POST it (with generated data)
APPLY = "apply"  # server-side apply (creates it when absent)
SKIP = "skip"  # live copy already matches: no request
KEEP = "keep"  # create-only object, present: never touched again

# The identity of an object (:func:`object_key`): (API group, kind, namespace, name), each as the object has it
# ("" for the core group; namespace None for a cluster-scoped object).
ObjectKey = Tuple[str, Optional[str], Optional[str], Optional[str]]


def annotations_of(obj: KubeObject | None) -> Mapping[str, object]:
    """An object's annotations as written (a manifest's YAML may give a value that is no string)."""
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def labels(obj: KubeObject | None) -> Mapping[str, object]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def api_group(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` -> ``""`` (the core group)."""
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def object_key(obj: KubeObject) -> ObjectKey:
    """Identity of an object: (group, kind, namespace, name). The version is not part of identity."""
    md = obj.get("metadata") or {}
    return (api_group(obj.get("apiVersion", "")), obj.get("kind"), md.get("namespace"), md.get("name"))


def describe(obj: KubeObject) -> str:
    """``Kind namespace/name`` (or ``Kind name`` when cluster-scoped), for messages and diff headers."""
    md = obj.get("metadata") or {}
    if md.get("namespace"):
        return "%s %s/%s" % (obj.get("kind"), md["namespace"], md.get("name"))
    return "%s %s" % (obj.get("kind"), md.get("name"))


def is_create_only(obj: KubeObject | None) -> bool:
    return str(annotations_of(obj).get(CREATE_ONLY, "")).lower() == "true"


def generator(obj: KubeObject | None) -> object | None:
    """The generator an object's annotation names, as written; None: none."""
    return annotations_of(obj).get(GENERATE)


def is_prune_exempt(obj: KubeObject | None) -> bool:
    return str(annotations_of(obj).get(PRUNE, "")).lower() == "false"


def without_applied_hash(manifest: KubeObject) -> KubeObject:
    """A deep copy of ``manifest`` without our hash annotation (and without an annotations map left empty)."""
    out = copy.deepcopy(manifest)
    md = out.get("metadata") or {}
    ann = md.get("annotations")
    if isinstance(ann, dict) and APPLIED_HASH in ann:
        del ann[APPLIED_HASH]
        if not ann:
            del md["annotations"]
    return out


def _unhashed_view(manifest: KubeObject) -> KubeObject:
    """``manifest`` without our hash annotation (and without an annotations map left empty), for reading only: the
    top level and the metadata are copied, every other value is shared with ``manifest`` (no deep copy: the hash
    and the skip rule only read it, and the no-op check makes one per rendered object)."""
    md = manifest.get("metadata")
    if not isinstance(md, dict):
        return manifest
    ann = md.get("annotations")
    if not isinstance(ann, dict) or APPLIED_HASH not in ann:
        return manifest
    rest = dict((k, v) for k, v in ann.items() if k != APPLIED_HASH)
    view_md = dict(md, annotations=rest) if rest else dict((k, v) for k, v in md.items() if k != "annotations")
    return dict(manifest, metadata=view_md)


def manifest_hash(manifest: KubeObject) -> str:
    """sha256 (hex) of the canonical JSON of the desired manifest, our own hash annotation excluded."""
    return digests.of_value(_unhashed_view(manifest))


def with_applied_hash(manifest: KubeObject) -> KubeObject:
    """What the adapter applies: the manifest plus the hash annotation."""
    out = without_applied_hash(manifest)
    md = out.setdefault("metadata", {})
    md.setdefault("annotations", {})[APPLIED_HASH] = manifest_hash(manifest)
    return out


def _empty(value: object) -> bool:
    return value is None or value == {} or value == []


def is_subset(desired: object, live: object) -> bool:
    """True when every field of ``desired`` is present in ``live`` with the same value.

    Maps: each desired key must be in ``live`` (an empty or null desired value also matches an absent key,
    since the apiserver drops those). Lists: same length, compared element-wise in order. Scalars: equal,
    with ``True`` never equal to ``1``.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        for key, value in desired.items():
            if key not in live:
                if _empty(value):
                    continue
                return False
            if not is_subset(value, live[key]):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        return all(is_subset(d, v) for d, v in zip(desired, live))
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    if desired is None:
        return live is None or _empty(live)
    return desired == live


def comparable(manifest: KubeObject) -> KubeObject:
    """The desired manifest as the apiserver will store it, for :func:`is_subset` against a live copy.

    Only the conversions the apiserver always does: a Secret's ``stringData`` is merged into ``data`` as base64.
    For reading only: values below the top level and the metadata are shared with ``manifest``.
    """
    out = dict(_unhashed_view(manifest))
    if out.get("kind") == "Secret" and out.get("stringData"):
        data = dict(out.get("data") or {})
        for key, value in out.pop("stringData").items():
            data[key] = base64.b64encode(str(value).encode("utf-8")).decode("ascii")
        out["data"] = data
    return out


def in_sync(desired: KubeObject, live: KubeObject) -> bool:
    """The skip rule (see the module docstring)."""
    if annotations_of(live).get(APPLIED_HASH) != manifest_hash(desired):
        return False
    return is_subset(comparable(desired), live)


def plan_object(desired: KubeObject, live: KubeObject | None) -> str:
    """What to do with one desired object given its live copy (``None`` when absent): CREATE/APPLY/SKIP/KEEP."""
    if is_create_only(desired):
        return KEEP if live is not None else CREATE
    if live is None:
        return APPLY
    return SKIP if in_sync(desired, live) else APPLY


# Update strategies whose parameters only one type allows: (kind, field of spec, parameters of the other type).
_STRATEGIES = {("StatefulSet", "updateStrategy"): ("RollingUpdate", "rollingUpdate"),
               ("Deployment", "strategy"): ("RollingUpdate", "rollingUpdate")}


def strategy_switch_patch(desired: KubeObject, live: KubeObject | None) -> KubeObject | None:
    """A JSON merge patch that switches a live object's update strategy away from RollingUpdate first, or None.

    The API server defaults ``rollingUpdate`` parameters that no field manager owns, so a server-side apply of
    another type (OnDelete, Recreate) keeps them and is refused ("only allowed for updateStrategy
    'RollingUpdate'"): the switch clears them explicitly, then the apply proceeds."""
    if live is None:
        return None
    for (kind, field), (typed, params) in _STRATEGIES.items():
        if desired.get("kind") != kind:
            continue
        want = ((desired.get("spec") or {}).get(field) or {}).get("type")
        have = ((live.get("spec") or {}).get(field) or {})
        if want and want != typed and have.get(params) is not None:
            return {"spec": {field: {"type": want, params: None}}}
    return None


def plan_prune(listed: Iterable[KubeObject], desired_keys: Collection[ObjectKey],
               protect_kinds: Collection[str] = DEFAULT_PROTECT_KINDS) -> list[KubeObject]:
    """Objects among ``listed`` (live, matching the prune selector) to delete: not desired, not exempt,
    not of a protected kind, not already being deleted."""
    out = []
    for obj in listed:
        if object_key(obj) in desired_keys:
            continue
        if obj.get("kind") in protect_kinds or is_prune_exempt(obj):
            continue
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            continue
        out.append(obj)
    return out


def parse_kind(text: str | None) -> tuple[str, str]:
    """``apps/v1/StatefulSet`` -> (``apps/v1``, ``StatefulSet``); ``v1/ConfigMap`` -> (``v1``, ``ConfigMap``)."""
    api_version, dummy, kind = (text or "").rpartition("/")
    if not api_version or not kind or not kind[:1].isupper():
        raise ValueError("expected apiVersion/Kind (e.g. v1/ConfigMap, apps/v1/StatefulSet), got %r" % (text,))
    return api_version, kind


# --- label selectors -------------------------------------------------------------------------------------

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*(?:(notin|in)\s*\(([^)]*)\)|(==|=|!=)\s*([^\s,()]*))?\s*$")


def _split_selector(selector: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def selector_matches(selector: str | None, obj_labels: Mapping[str, object]) -> bool:
    """Whether labels match a Kubernetes label selector string (equality- and set-based forms)."""
    for req in _split_selector(selector or ""):
        m = _SET_RE.match(req)
        if not m:
            raise ValueError("cannot parse label selector requirement %r" % req)
        negate, key, set_op, values, eq_op, value = m.groups()
        if negate:
            if set_op or eq_op:
                raise ValueError("cannot parse label selector requirement %r" % req)
            if key in obj_labels:
                return False
        elif set_op:
            allowed = set(v.strip() for v in values.split(",") if v.strip())
            if set_op == "in" and obj_labels.get(key) not in allowed:
                return False
            if set_op == "notin" and key in obj_labels and obj_labels[key] in allowed:
                return False
        elif eq_op in ("=", "=="):
            if obj_labels.get(key) != value:
                return False
        elif eq_op == "!=":
            if key in obj_labels and obj_labels[key] == value:
                return False
        elif key not in obj_labels:
            return False
    return True


# --- diff and redaction ----------------------------------------------------------------------------------


def strip_volatile(obj: KubeObject | None) -> KubeObject | None:
    """A deep copy without what the server maintains (status, managedFields, resourceVersion, uid,
    creationTimestamp, generation) and without our hash annotation: what a user compares."""
    if obj is None:
        return None
    out = without_applied_hash(obj)
    out.pop("status", None)
    md = out.get("metadata") or {}
    for key in VOLATILE_METADATA:
        md.pop(key, None)
    return out


def redact(obj: KubeObject | None) -> KubeObject | None:
    """A copy where a Secret's ``data``/``stringData`` values are replaced by ``<hidden>`` (keys kept)."""
    if obj is None or obj.get("kind") != "Secret":
        return obj
    out = dict(obj)
    for field in ("data", "stringData"):
        if isinstance(out.get(field), dict):
            out[field] = dict((k, HIDDEN) for k in out[field])
    return out


def normalize(obj: KubeObject | None) -> KubeObject | None:
    """What diffs and results show of an object: :func:`strip_volatile` then :func:`redact`."""
    return redact(strip_volatile(obj))


def same_object(before: KubeObject | None, after: KubeObject | None) -> bool:
    """Whether two live copies differ in anything but server-maintained fields (secret values included)."""
    return strip_volatile(before) == strip_volatile(after)


def secret_values(manifests: Iterable[object] | None) -> set[str]:
    """Every secret value as it appears in ``manifests`` (Secret ``data`` and ``stringData`` values), for a
    module's ``no_log_values``: these are the strings an API error or a log line could echo back."""
    out: set[str] = set()
    for obj in manifests or []:
        if not isinstance(obj, dict) or obj.get("kind") != "Secret":
            continue
        for field in ("data", "stringData"):
            for value in (obj.get(field) or {}).values():
                if value:
                    out.add(str(value))
    return out


# --- conflicts -------------------------------------------------------------------------------------------

_MANAGER_RE = re.compile(r'conflicts? with "([^"]+)"')
_FIELD_RE = re.compile(r"(?:^|\s)(\.[^\s]+)", re.MULTILINE)


def parse_conflict(message: str | None) -> tuple[list[str], list[str]]:
    """Managers and field paths named by a server-side apply 409 message.

    The apiserver says ``Apply failed with 2 conflicts: conflicts with "other" using v1:\\n- .data.a\\n- .data.b``
    (or one line for one conflict).
    """
    managers = sorted(set(_MANAGER_RE.findall(message or "")))
    fields = []
    for field in _FIELD_RE.findall(message or ""):
        if field not in fields:
            fields.append(field)
    return managers, fields


def last_written(live: KubeObject | None, manager: str) -> int | None:
    """Epoch seconds at which ``manager`` last changed ``live`` (its newest managedFields entry: the API server
    stamps an entry when a value it owns changes, not at an apply that changes nothing); None when not known."""
    times = [durations.epoch_of(e.get("time")) for e in ((live or {}).get("metadata") or {}).get("managedFields") or ()
             if e.get("manager") == manager]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def imperative_only(managers: Collection[str], live: KubeObject | None) -> bool:
    """True when each of ``managers`` owns fields of ``live`` only through Update operations (kubectl edit,
    patch, scale...). Those are hand edits of what we declare: re-applying with force repairs them. A manager
    that also applies (``operation: Apply``) is another declarative owner: a real conflict."""
    entries = ((live or {}).get("metadata") or {}).get("managedFields") or []
    if not managers:
        return False
    for manager in managers:
        ops = set(e.get("operation") for e in entries if e.get("manager") == manager)
        if not ops or ops != {"Update"}:
            return False
    return True


def applied_by(live: KubeObject | None, path: Iterable[str]) -> str | None:
    """The one field manager whose server-side apply (``operation: Apply``, not a subresource's) owns the field
    at ``path`` (keys, e.g. ``("spec", "replicas")``) of ``live``, by its managedFields; None when none or several
    do. A write as that manager of what it applied changes nobody's ownership."""
    found: set[str] = set()
    for entry in ((live or {}).get("metadata") or {}).get("managedFields") or []:
        if entry.get("operation") != "Apply" or entry.get("subresource"):
            continue
        node = entry.get("fieldsV1")
        for key in path:
            node = node.get("f:" + key) if isinstance(node, dict) else None
        if node is not None:
            found.add(entry.get("manager"))
    return found.pop() if len(found) == 1 else None


# --- input checks ----------------------------------------------------------------------------------------


def check_manifests(manifests: Iterable[object] | None) -> list[str]:
    """Problems with a list of desired manifests, as ``manifests[i]: message`` strings (empty when fine):
    missing apiVersion/kind/name, duplicates, unknown generators."""
    problems = []
    seen: dict[ObjectKey, int] = {}
    for i, obj in enumerate(manifests or []):
        where = "manifests[%d]" % i
        if not isinstance(obj, dict):
            problems.append("%s: must be a mapping" % where)
            continue
        missing = [f for f in ("apiVersion", "kind") if not obj.get(f)]
        if not (obj.get("metadata") or {}).get("name"):
            missing.append("metadata.name")
        if missing:
            problems.append("%s: missing %s" % (where, ", ".join(missing)))
            continue
        key = object_key(obj)
        if key in seen:
            problems.append("%s: %s is also manifests[%d]" % (where, describe(obj), seen[key]))
        seen.setdefault(key, i)
        gen = generator(obj)
        if gen is not None:
            if obj.get("kind") != "Secret" or not is_create_only(obj):
                problems.append("%s: %s needs a create-only Secret (%s: \"true\")" % (where, GENERATE, CREATE_ONLY))
            elif gen not in GENERATORS:
                problems.append("%s: unknown %s %r (known: %s)" % (where, GENERATE, gen, ", ".join(GENERATORS)))
    return problems
