# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the API server refuses on the objects rendered from a spec although the spec itself passes the
CRD's schema: checked here, so that nothing is applied when a later object would be refused (the converge's
server-side dry run is the last line: tests/integration/test_validator_property.py holds the two together). Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import ipaddress
from fractions import Fraction
from typing import Any

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations, schema
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import child_path, label_key_ok, matches
from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import parse_quantity
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, Spec


_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


HUGEPAGES_PREFIX = "hugepages-"


def _quantity(value: object) -> Fraction | None:
    """The quantity, or None when it is not one (the schema walk already said so)."""
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _resource_kind(name: str) -> str | None:
    """standard | hugepages | extended | None (not a resource a container may ask for)."""
    if name in _STANDARD_RESOURCES:
        return "standard"
    if name.startswith(HUGEPAGES_PREFIX):
        size = _quantity(name[len(HUGEPAGES_PREFIX):])
        return "hugepages" if size else None
    if "/" in name and "kubernetes.io/" not in name and label_key_ok(name) and name.split("/")[0] == (
            name.split("/")[0].lower()) and label_key_ok("requests." + name):
        return "extended"
    return None


def resources_rules(resources: object, path: str, errors: Errors) -> None:
    """Container resources as the API server wants them: known names, requests <= limits, extended resources and
    hugepages whole, their request equal to their limit (which must be set), hugepages only with cpu or memory."""
    if not isinstance(resources, dict):
        return
    requests: dict[str, Any] = resources["requests"] if isinstance(resources.get("requests"), dict) else {}
    limits: dict[str, Any] = resources["limits"] if isinstance(resources.get("limits"), dict) else {}
    kinds = {}
    for section, values in (("requests", requests), ("limits", limits)):
        for name in sorted(values):
            kind = _resource_kind(name)
            kinds[name] = kind
            if kind is None:
                errors.append(SpecError(child_path("%s.%s" % (path, section), name),
                                        "unknown resource %r: use cpu, memory, ephemeral-storage, hugepages-<size> "
                                        "or an extended resource <domain>/<name>" % name))
    for name in sorted(set(requests) | set(limits)):
        kind = kinds.get(name)
        request, limit = _quantity(requests.get(name, 0)), _quantity(limits.get(name, 0))
        if kind is None or request is None or limit is None:
            continue
        where = child_path("%s.%s" % (path, "requests" if name in requests else "limits"), name)
        if kind == "standard":
            if name in requests and name in limits and request > limit:
                errors.append(SpecError(child_path(path + ".requests", name), "request %s is more than the limit %s"
                                        % (requests[name], limits[name])))
            continue
        if name in requests and name not in limits:
            errors.append(SpecError(child_path(path + ".limits", name), "Required value: %s cannot be overcommitted: "
                                                                        "set its limit (equal to the request)" % name))
        elif name in requests and request != limit:
            errors.append(SpecError(child_path(path + ".requests", name), "must equal the limit %s (%s cannot be "
                                                                          "overcommitted)" % (limits[name], name)))
        if kind == "extended":
            for section, values, quantity in (("requests", requests, request), ("limits", limits, limit)):
                if name in values and quantity.denominator != 1:
                    errors.append(SpecError(child_path("%s.%s" % (path, section), name), "must be a whole number"))
        else:
            size = _quantity(name[len(HUGEPAGES_PREFIX):])  # positive: _resource_kind said hugepages
            value = limit if name in limits else request
            if value <= 0 or size is None or (value / size).denominator != 1:
                errors.append(SpecError(where, "must be a positive whole multiple of the page size %s"
                                        % name[len(HUGEPAGES_PREFIX):]))
            if not any(k in requests or k in limits for k in ("cpu", "memory")):
                errors.append(SpecError(where, "hugepages need a cpu or memory request or limit too"))


def positive_size(value: object, path: str, errors: Errors) -> None:
    size = _quantity(value)
    if size is not None and size <= 0:
        errors.append(SpecError(path, "Invalid value: %r: a volume size must be more than zero" % (value,)))


def _node_requirements(requirements: list[KubeObject] | None, path: str, errors: Errors,
                       fields: bool = False) -> None:
    for index, req in enumerate(requirements or ()):
        where = child_path(path, index)
        op, values = req.get("operator"), req.get("values") or []
        if fields:
            if req.get("key") != "metadata.name":
                errors.append(SpecError(where + ".key", "matchFields supports only metadata.name"))
            if op not in ("In", "NotIn"):
                errors.append(SpecError(where + ".operator", "matchFields supports only In and NotIn"))
            elif len(values) != 1:
                errors.append(SpecError(where + ".values", "exactly one node name with In or NotIn"))
            for i, value in enumerate(values):
                if not matches(schema.DNS_SUBDOMAIN_PATTERN, value) or len(value) > 253:
                    errors.append(SpecError(child_path(where + ".values", i), "must be a node name"))
            continue
        if not label_key_ok(req.get("key")):
            errors.append(SpecError(where + ".key", schema.LABEL_KEYS_RULE_MESSAGE))
        _operator_values(op, values, where, errors, numeric=op in ("Gt", "Lt"))


def _operator_values(op: object, values: list[Any], where: str, errors: Errors, numeric: bool = False) -> None:
    if op in ("In", "NotIn") and not values:
        errors.append(SpecError(where + ".values", "Required value: at least one value with operator %s" % op))
    elif op in ("Exists", "DoesNotExist") and values:
        errors.append(SpecError(where + ".values", "Forbidden: no values with operator %s" % op))
    elif numeric and (len(values) != 1 or not matches(r"^-?[0-9]{1,18}$", values[0])):
        errors.append(SpecError(where + ".values", "exactly one integer with operator %s" % op))
    if not numeric:
        for i, value in enumerate(values):
            if not matches(schema.LABEL_VALUE_PATTERN, value) or len(value) > schema.MAX_SHORT:
                errors.append(SpecError(child_path(where + ".values", i), "must be a label value"))


def _label_selector_rules(selector: KubeObject, path: str, errors: Errors) -> None:
    for key in sorted(selector.get("matchLabels") or {}):
        if not label_key_ok(key):
            errors.append(SpecError(child_path(path + ".matchLabels", key), schema.LABEL_KEYS_RULE_MESSAGE))
    for index, req in enumerate(selector.get("matchExpressions") or ()):
        where = child_path(path + ".matchExpressions", index)
        if not label_key_ok(req.get("key")):
            errors.append(SpecError(where + ".key", schema.LABEL_KEYS_RULE_MESSAGE))
        _operator_values(req.get("operator"), req.get("values") or [], where, errors)


def _pod_affinity_term_rules(term: KubeObject, path: str, errors: Errors) -> None:
    if not label_key_ok(term.get("topologyKey")):
        errors.append(SpecError(path + ".topologyKey", "Required value: a node label key (e.g. "
                                                       "kubernetes.io/hostname)"))
    for key in ("labelSelector", "namespaceSelector"):
        if isinstance(term.get(key), dict):
            _label_selector_rules(term[key], "%s.%s" % (path, key), errors)
    selector = term.get("labelSelector")
    in_selector = set((selector or {}).get("matchLabels") or {}) | set(
        r.get("key") for r in (selector or {}).get("matchExpressions") or ())
    match, mismatch = term.get("matchLabelKeys") or [], term.get("mismatchLabelKeys") or []
    for field, keys in (("matchLabelKeys", match), ("mismatchLabelKeys", mismatch)):
        if keys and selector is None:
            errors.append(SpecError("%s.%s" % (path, field), "Forbidden: needs labelSelector"))
        for index, key in enumerate(keys):
            where = child_path("%s.%s" % (path, field), index)
            if not label_key_ok(key):
                errors.append(SpecError(where, schema.LABEL_KEYS_RULE_MESSAGE))
            elif key in in_selector:
                errors.append(SpecError(where, "%r is in labelSelector too" % key))
            elif field == "mismatchLabelKeys" and key in match:
                errors.append(SpecError(where, "%r is in matchLabelKeys too" % key))


def _affinity_rules(affinity: KubeObject, path: str, errors: Errors) -> None:
    node = affinity.get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms_path = path + ".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if isinstance(required, dict) and not required.get("nodeSelectorTerms"):
        errors.append(SpecError(terms_path, "Required value: at least one node selector term"))
    terms = [(child_path(terms_path, i), t) for i, t in enumerate((required or {}).get("nodeSelectorTerms") or ())]
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    terms += [("%s.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference" % (path, i),
               w.get("preference") or {}) for i, w in enumerate(preferred)]
    for where, term in terms:
        _node_requirements(term.get("matchExpressions"), where + ".matchExpressions", errors)
        _node_requirements(term.get("matchFields"), where + ".matchFields", errors, fields=True)
    for part in ("podAffinity", "podAntiAffinity"):
        pod = affinity.get(part) or {}
        base = "%s.%s" % (path, part)
        for i, term in enumerate(pod.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
            _pod_affinity_term_rules(term, "%s.requiredDuringSchedulingIgnoredDuringExecution[%d]" % (base, i), errors)
        for i, weighted in enumerate(pod.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            _pod_affinity_term_rules(weighted.get("podAffinityTerm") or {}, "%s.preferredDuringSchedulingIgnored"
                                     "DuringExecution[%d].podAffinityTerm" % (base, i), errors)


def placement_rules(placement: object, path: str, errors: Errors) -> None:
    if not isinstance(placement, dict):
        return
    for index, toleration in enumerate(placement.get("tolerations") or ()):
        key = toleration.get("key")
        if key and not label_key_ok(key):
            errors.append(SpecError(child_path(path + ".tolerations", index) + ".key", schema.LABEL_KEYS_RULE_MESSAGE))
    if isinstance(placement.get("affinity"), dict):
        _affinity_rules(placement["affinity"], path + ".affinity", errors)


# Paths inside the jail a sub-mount may not take: the jail plugin binds the node's /proc, /sys, /dev, /tmp and
# /run over them for every task (a sub-mount there would be hidden in jobs, or hide what the jobs need); the
# pods mount the Slurm spool there; /etc/slurm is the configless configuration. Every other system tree is
# paths.sub_mount_problem's.
JAIL_RESERVED_TREES = ("/proc", "/sys", "/dev", "/run", "/tmp", names.SLURMD_SPOOL, names.SLURM_CONFIG_DIR)


def sub_mount_rules(mounts: list[Spec] | None, path: str, errors: Errors) -> None:
    targets = [m["mountPath"] for m in mounts or () if matches(schema.JAIL_PATH_PATTERN, m.get("mountPath"))]
    for index, mount in enumerate(mounts or ()):
        target = mount.get("mountPath")
        if not isinstance(target, str) or not matches(schema.JAIL_PATH_PATTERN, target):
            continue  # the schema already refused it
        where = child_path(path, index) + ".mountPath"
        for tree in JAIL_RESERVED_TREES:
            if paths.overlaps(target, tree):
                errors.append(SpecError(where, "%s collides with %s, which soperator mounts in the jail itself"
                                        % (target, tree)))
                break
        else:
            problem = paths.sub_mount_problem(target, targets)
            if problem:
                errors.append(SpecError(where, problem))


def component_rules(spec: Spec, errors: Errors) -> None:
    """Accounting, the REST API, the exporter and the sssd sidecars: their pods as the API server wants them
    (resources, placement), the database's volume more than zero."""
    accounting = spec.get("accounting") or {}
    database = accounting.get("database") or {}
    parts = [("spec.accounting.slurmdbd", accounting.get("slurmdbd") or {}), ("spec.accounting.database", database),
             ("spec.restApi", spec.get("restApi") or {}), ("spec.exporter", spec.get("exporter") or {}),
             ("spec.identity.sssd", (spec.get("identity") or {}).get("sssd") or {})]
    for path, part in parts:
        resources_rules(part.get("resources"), path + ".resources", errors)
        placement_rules(part.get("placement"), path + ".placement", errors)
    storage = database.get("storage") or {}
    if "size" in storage:
        positive_size(storage["size"], "spec.accounting.database.storage.size", errors)
    interval = (spec.get("exporter") or {}).get("collectInterval")
    if matches(schema.GO_DURATION_PATTERN, interval) and durations.seconds(
            interval) < schema.EXPORTER_MIN_INTERVAL_SECONDS:
        errors.append(SpecError("spec.exporter.collectInterval", "Invalid value: %r: at least %ds (each collection "
                                "is a set of Slurm calls)" % (interval, schema.EXPORTER_MIN_INTERVAL_SECONDS)))
    for field in ("restApiFrom", "exporterFrom"):
        for index, peer in enumerate((spec.get("networkPolicies") or {}).get(field) or ()):
            _network_peer_rules(peer, "spec.networkPolicies.%s[%d]" % (field, index), errors)


def _network_peer_rules(peer: KubeObject, path: str, errors: Errors) -> None:
    """A NetworkPolicyPeer as the API server wants it: selectors' keys and operators, an ipBlock's CIDRs with its
    exceptions strictly inside."""
    for key in ("podSelector", "namespaceSelector"):
        if isinstance(peer.get(key), dict):
            _label_selector_rules(peer[key], "%s.%s" % (path, key), errors)
    block = peer.get("ipBlock")
    if not isinstance(block, dict) or not matches(schema.CIDR_PATTERN, block.get("cidr")):
        return
    try:
        network = ipaddress.ip_network(block["cidr"], strict=False)
    except ValueError:
        errors.append(SpecError(path + ".ipBlock.cidr", "Invalid value: %r: not a CIDR" % block["cidr"]))
        return
    for index, text in enumerate(block.get("except") or ()):
        try:
            inner = ipaddress.ip_network(text, strict=False) if matches(schema.CIDR_PATTERN, text) else None
        except ValueError:
            inner = None
        if inner is None or inner.prefixlen <= network.prefixlen or inner.network_address not in network:
            errors.append(SpecError("%s.ipBlock.except[%d]" % (path, index), "Invalid value: %r: must be a CIDR "
                                    "strictly inside cidr %s" % (text, block["cidr"])))
