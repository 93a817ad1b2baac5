# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate and default SlurmCluster and NodeSet objects, with the field path of every problem.

The validator walks the schemas of ``schema.py`` (the ones the CRDs are generated from) like the API server
does: types, required fields, enums, patterns, bounds, list-type sets; unknown fields are REJECTED (as the API
server does with strict field validation, which kubectl and server-side apply use), never silently pruned.
Each ``x-kubernetes-validations`` CEL rule has a Python twin here, registered under the rule's message, so the
same message comes back whichever side refuses. Then come the Slurm-level rules CEL cannot express well
(allowlists of raw config keys, cross-object checks). All problems are collected into one ``SpecErrors``.

Entry points: :func:`validate_cluster`, :func:`validate_nodeset`, :func:`validate_cluster_with_nodesets`. They
return new, defaulted objects and never mutate their input.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import ipaddress
import re

from ansible_collections.soperator.slurm.plugins.module_utils import config_keys, names, schema
from ansible_collections.soperator.slurm.plugins.module_utils.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.quantity import parse_quantity

# RealMemory of a node = its memory minus this share (at least MEMORY_MARGIN_MIN_MIB) for slurmd, munged and
# the page cache, so the kernel OOM killer never hits the daemons before Slurm's own limits hit the job.
MEMORY_MARGIN_MIN_MIB = 256
MEMORY_MARGIN_FRACTION = 0.05

_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TYPES: dict = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list, "number": (int, float)}


def child_path(path, key):
    """``spec`` + ``replicas`` -> ``spec.replicas``; odd map keys in brackets: ``limits[nvidia.com/gpu]``."""
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    if not _SIMPLE_KEY.match(key):
        return "%s[%s]" % (path, key)
    return "%s.%s" % (path, key) if path else key


# ---------------------------------------------------------------------------------------------------- defaults
def apply_defaults(value, node):
    """A copy of ``value`` with the schema's defaults filled in, top-down like the API server."""
    value = copy.deepcopy(value)
    _default_in_place(value, node)
    return value


def _default_in_place(value, node):
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


# ---------------------------------------------------------------------------------------------------- schema walk
def _type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name in ("integer", "string", "object", "array"):
        if isinstance(value, _TYPES[name]):
            return name
    return "number" if isinstance(value, float) else type(value).__name__


def _type_ok(value, expected):
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[expected])


def _pattern_error(value, pattern):
    hint = schema.PATTERN_HINTS.get(pattern)
    message = "Invalid value: %r: should match '%s'" % (value, pattern)
    return message + (" (%s)" % hint if hint else "")


def _check_scalar(value, node, path, errors):
    if "enum" in node and value not in node["enum"]:
        errors.append(SpecError(path, "Unsupported value: %r: supported values: %s"
                                % (value, ", ".join('"%s"' % v for v in node["enum"]))))
    if isinstance(value, str):
        if "maxLength" in node and len(value) > node["maxLength"]:
            errors.append(SpecError(path, "Too long: may not be more than %d characters" % node["maxLength"]))
        if "pattern" in node and not re.search(node["pattern"], value):
            errors.append(SpecError(path, _pattern_error(value, node["pattern"])))
    elif isinstance(value, int):
        if "minimum" in node and value < node["minimum"]:
            errors.append(SpecError(path, "Invalid value: %d: should be greater than or equal to %d"
                                    % (value, node["minimum"])))
        if "maximum" in node and value > node["maximum"]:
            errors.append(SpecError(path, "Invalid value: %d: should be less than or equal to %d"
                                    % (value, node["maximum"])))


def validate_schema(value, node, path, errors):
    """Append to ``errors`` every way ``value`` breaks the structural schema ``node`` (and its CEL twins)."""
    before = len(errors)
    if node.get("x-kubernetes-int-or-string"):
        if not (_type_ok(value, "integer") or _type_ok(value, "string")):
            errors.append(SpecError(path, "must be an integer or a string, got %s" % _type_name(value)))
            return
        _check_scalar(value, node, path, errors)
    elif "type" in node:
        if not _type_ok(value, node["type"]):
            errors.append(SpecError(path, "must be of type %s, got %s" % (node["type"], _type_name(value))))
            return
        if node["type"] == "object":
            _validate_object(value, node, path, errors)
        elif node["type"] == "array":
            _validate_array(value, node, path, errors)
        else:
            _check_scalar(value, node, path, errors)
    for rule in node.get("x-kubernetes-validations") or ():
        try:
            errors.extend(TWINS[rule["message"]](value, path))
        except (AttributeError, KeyError, TypeError):
            # A twin cannot judge a malformed value; the schema errors above already name the problem.
            if len(errors) == before:
                raise


def _validate_object(value, node, path, errors):
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
            validate_schema(value[key], properties[key], sub_path, errors)
        elif isinstance(extra, dict):
            validate_schema(value[key], extra, sub_path, errors)
        elif not node.get("x-kubernetes-preserve-unknown-fields"):
            errors.append(SpecError(sub_path, "unknown field (the API rejects unknown fields: check the spelling)"))


def _validate_array(value, node, path, errors):
    if "maxItems" in node and len(value) > node["maxItems"]:
        errors.append(SpecError(path, "Too many: %d: must have at most %d items" % (len(value), node["maxItems"])))
    for index, item in enumerate(value):
        validate_schema(item, node["items"], child_path(path, index), errors)
    if node.get("x-kubernetes-list-type") == "set":
        seen = set()
        for index, item in enumerate(value):
            if item in seen:
                errors.append(SpecError(child_path(path, index), "Duplicate value: %r" % (item,)))
            seen.add(item)


# ---------------------------------------------------------------------------------------------------- CEL twins
TWINS = {}


def _twin(message):
    def register(func):
        TWINS[message] = func
        return func
    return register


def _cel_error(path, message):
    return [SpecError(path, message)]


def _name_twins(kind, max_length):
    dns = "metadata.name of a %s must be a DNS label starting with a letter" % kind
    size = ("metadata.name of a %s must be at most %d characters (it prefixes the names of its objects)"
            % (kind, max_length))

    @_twin(dns)
    def _dns(obj, path):
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name):
            return _cel_error("metadata.name", dns)
        return []

    @_twin(size)
    def _size(obj, path):
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and len(name) > max_length:
            return _cel_error("metadata.name", size)
        return []


_name_twins("SlurmCluster", schema.CLUSTER_NAME_MAX)
_name_twins("NodeSet", schema.NODESET_NAME_MAX)


@_twin("nodePort requires type NodePort or LoadBalancer")
def _node_port(service, path):
    if "nodePort" in service and service.get("type") not in ("NodePort", "LoadBalancer"):
        return _cel_error(child_path(path, "nodePort"), "nodePort requires type NodePort or LoadBalancer")
    return []


@_twin("loadBalancerSourceRanges requires type LoadBalancer")
def _source_ranges(service, path):
    if service.get("loadBalancerSourceRanges") and service.get("type") != "LoadBalancer":
        return _cel_error(child_path(path, "loadBalancerSourceRanges"),
                          "loadBalancerSourceRanges requires type LoadBalancer")
    return []


@_twin("set exactly one of hostPath, claimName or emptyDir")
def _sub_mount_source(mount, path):
    sources = ["hostPath" in mount, "claimName" in mount, bool(mount.get("emptyDir"))]
    if sources.count(True) != 1:
        return _cel_error(path, "set exactly one of hostPath, claimName or emptyDir")
    return []


def _unique(items, field, path, message):
    seen = set()
    errors = []
    for index, item in enumerate(items):
        if item.get(field) in seen:
            errors.append(SpecError(child_path(child_path(path, index), field), message))
        seen.add(item.get(field))
    return errors


@_twin("subMount names must be unique")
def _sub_mount_names(mounts, path):
    return _unique(mounts, "name", path, "subMount names must be unique")


@_twin("subMount mountPaths must be unique")
def _sub_mount_paths(mounts, path):
    return _unique(mounts, "mountPath", path, "subMount mountPaths must be unique")


@_twin("set exactly one of existingClaim, or storageClassName and size")
def _jail_source(jail, path):
    existing = "existingClaim" in jail
    created = "storageClassName" in jail and "size" in jail
    if existing == ("storageClassName" in jail or "size" in jail) or not (existing or created):
        return _cel_error(path, "set exactly one of existingClaim, or storageClassName and size")
    return []


@_twin("at most one partition can be the default")
def _one_default(partitions, path):
    defaults = [i for i, p in enumerate(partitions) if p.get("default")]
    return [SpecError(child_path(child_path(path, i), "default"), "at most one partition can be the default")
            for i in defaults[1:]]


@_twin("partition names must be unique")
def _partition_names(partitions, path):
    return _unique(partitions, "name", path, "partition names must be unique")


@_twin(schema.LABEL_KEYS_RULE_MESSAGE)
def _label_keys(labels, path):
    return [SpecError(child_path(path, key), schema.LABEL_KEYS_RULE_MESSAGE) for key in sorted(labels)
            if len(key) > 317 or not re.match(schema.LABEL_KEY_PATTERN, key)]


@_twin(schema.ACCOUNTING_RULES["external"])
def _external_database(database, path):
    if database.get("type") == "External" and not ("host" in database and "passwordSecretRef" in database):
        return _cel_error(path, schema.ACCOUNTING_RULES["external"])
    return []


@_twin(schema.ACCOUNTING_RULES["external_only"])
def _external_only(database, path):
    if database.get("type") != "External" and any(k in database for k in ("host", "passwordSecretRef", "tls")):
        return _cel_error(path, schema.ACCOUNTING_RULES["external_only"])
    return []


@_twin("healthCheckInterval requires healthCheckProgram")
def _health_check(slurm, path):
    if slurm.get("healthCheckInterval") and "healthCheckProgram" not in slurm:
        return _cel_error(child_path(path, "healthCheckInterval"), "healthCheckInterval requires healthCheckProgram")
    return []


@_twin(schema.HEALTH_EXCLUSIVE_RULE)
def _health_exclusive(spec, path):
    if (spec.get("healthChecks") or {}).get("enabled") and "healthCheckProgram" in (spec.get("slurm") or {}):
        return _cel_error(child_path(child_path(path, "healthChecks"), "enabled"), schema.HEALTH_EXCLUSIVE_RULE)
    return []


def health_enabled(cluster_spec):
    """Whether slurmd runs the shipped health program: spec.healthChecks.enabled, else unless the user names a
    HealthCheckProgram of their own."""
    enabled = (cluster_spec.get("healthChecks") or {}).get("enabled")
    if enabled is None:
        return "healthCheckProgram" not in (cluster_spec.get("slurm") or {})
    return bool(enabled)


# ---------------------------------------------------------------------------------------------------- Slurm rules
def _check_raw_keys(mapping, path, allowed, owned, typed, what, errors, values=None):
    for key in sorted(mapping):
        key_path = child_path(path, key)
        rule = (values or {}).get(key)
        # A value that is not one token is already refused by the schema's pattern: one error per field.
        problem = rule and re.match(schema.SLURM_VALUE_PATTERN, str(mapping[key])) and config_keys.check_value(
            rule, mapping[key])
        if problem:
            errors.append(SpecError(key_path, "%s value %r for %s: must be %s" % (what, str(mapping[key]), key,
                                                                                  problem)))
        if key in owned:
            errors.append(SpecError(key_path, "%s key %s is set by the operator (%s)" % (what, key, owned[key])))
        elif key in typed:
            errors.append(SpecError(key_path, "%s key %s has a typed field: use %s" % (what, key, typed[key])))
        elif key not in allowed:
            hint = config_keys.suggest(key, list(allowed) + list(owned) + list(typed))
            errors.append(SpecError(key_path, "unknown %s key %r%s" % (
                what, key, " (did you mean %s?)" % hint if hint else "")))


def _cluster_rules(spec, errors):
    slurm = spec.get("slurm") or {}
    _check_raw_keys(slurm.get("slurmConf") or {}, "spec.slurm.slurmConf", config_keys.SLURM_CONF_KEYS,
                    config_keys.SLURM_CONF_OWNED, config_keys.SLURM_CONF_TYPED, "slurm.conf", errors,
                    config_keys.SLURM_CONF_VALUES)
    _check_raw_keys(slurm.get("cgroupConf") or {}, "spec.slurm.cgroupConf", config_keys.CGROUP_CONF_KEYS,
                    config_keys.CGROUP_CONF_OWNED, {}, "cgroup.conf", errors, config_keys.CGROUP_CONF_VALUES)
    for index, partition in enumerate(spec.get("partitions") or ()):
        _check_raw_keys(partition.get("config") or {}, "spec.partitions[%d].config" % index,
                        config_keys.PARTITION_KEYS, config_keys.PARTITION_OWNED, {}, "partition", errors)
    if health_enabled(spec) and "HealthCheckNodeState" in (slurm.get("slurmConf") or {}):
        errors.append(SpecError("spec.slurm.slurmConf.HealthCheckNodeState", "slurm.conf key HealthCheckNodeState "
                                "has a typed field while the shipped health program runs: use "
                                "spec.healthChecks.nodeStates"))
    slurmdbd = ((spec.get("accounting") or {}).get("slurmdbd") or {})
    _check_raw_keys(slurmdbd.get("config") or {}, "spec.accounting.slurmdbd.config", config_keys.SLURMDBD_CONF_KEYS,
                    config_keys.SLURMDBD_CONF_OWNED, {}, "slurmdbd.conf", errors, config_keys.SLURMDBD_CONF_VALUES)
    login = spec.get("login") or {}
    sshd = login.get("sshdConfig") or {}
    _check_raw_keys(sshd, "spec.login.sshdConfig", config_keys.SSHD_KEYS, config_keys.SSHD_OWNED, {},
                    "sshd_config", errors)
    if "PermitRootLogin" in sshd and sshd["PermitRootLogin"] not in config_keys.SSHD_PERMIT_ROOT_LOGIN:
        errors.append(SpecError("spec.login.sshdConfig.PermitRootLogin", "must be one of %s (no password logins)"
                                % ", ".join(config_keys.SSHD_PERMIT_ROOT_LOGIN)))
    ranges = (login.get("service") or {}).get("loadBalancerSourceRanges") or ()
    for index, cidr in enumerate(ranges):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errors.append(SpecError("spec.login.service.loadBalancerSourceRanges[%d]" % index,
                                    "Invalid value: %r: not a CIDR" % cidr))


def memory_mib(resources):
    """Memory of a container in MiB (limit, else request), or None when neither is set."""
    for kind in ("limits", "requests"):
        value = ((resources or {}).get(kind) or {}).get("memory")
        if value is not None:
            return int(parse_quantity(value) / 2 ** 20)
    return None


def real_memory_mib(resources):
    """Slurm RealMemory of a node: its memory minus the safety margin; None when no memory is set."""
    total = memory_mib(resources)
    if total is None:
        return None
    return total - max(MEMORY_MARGIN_MIN_MIB, int(total * MEMORY_MARGIN_FRACTION))


def cpu_count(resources):
    """Slurm CPUs of a node: whole CPUs of the limit, else of the request (at least 1); None when unset."""
    for kind in ("limits", "requests"):
        value = ((resources or {}).get(kind) or {}).get("cpu")
        if value is not None:
            return max(1, int(parse_quantity(value)))
    return None


def _nodeset_rules(spec, errors):
    resources = spec.get("resources") or {}
    gpu = spec.get("gpu") or {}
    for kind in ("requests", "limits"):
        if gpu.get("resourceName") in (resources.get(kind) or {}):
            errors.append(SpecError(child_path("spec.resources.%s" % kind, gpu["resourceName"]),
                                    "set GPUs with spec.gpu.count, not in resources"))
    real_memory = real_memory_mib(resources)
    if real_memory is not None and real_memory < 1:
        errors.append(SpecError("spec.resources", "memory too small for a Slurm node: more than %dMi needed"
                                % MEMORY_MARGIN_MIN_MIB))


# ---------------------------------------------------------------------------------------------------- entry points
def _validate(obj, root, kind, rules):
    if not isinstance(obj, dict):
        raise SpecErrors([SpecError("", "a %s must be a mapping" % kind)])
    errors = []
    if obj.get("kind", kind) != kind:
        errors.append(SpecError("kind", "expected %s, got %r" % (kind, obj.get("kind"))))
    if obj.get("apiVersion", names.API_VERSION) != names.API_VERSION:
        errors.append(SpecError("apiVersion", "expected %s, got %r" % (names.API_VERSION, obj.get("apiVersion"))))
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata.get("name"):
        errors.append(SpecError("metadata.name", "Required value"))
    result = apply_defaults(obj, root)
    result.pop("status", None)  # the status is the operator's: not part of what is validated
    validate_schema(result, root, "", errors)
    if isinstance(result.get("spec"), dict):
        found = len(errors)
        try:
            rules(result["spec"], errors)
        except (AttributeError, KeyError, TypeError):
            # Malformed parts are already reported by the schema walk; the Slurm rules judge the rest.
            if not found:
                raise
    if errors:
        raise SpecErrors(errors)
    if "status" in obj:
        result["status"] = copy.deepcopy(obj["status"])
    result.setdefault("apiVersion", names.API_VERSION)
    result.setdefault("kind", kind)
    result["metadata"].setdefault("namespace", "default")
    return result


def validate_cluster(obj, collection_version=names.COLLECTION_VERSION):
    """A defaulted copy of the SlurmCluster ``obj``; raises SpecErrors listing every problem.

    Besides the schema defaults, fills ``spec.clusterName`` (metadata.name) and every image (the soperator
    image of ``collection_version``).
    """
    result = _validate(obj, schema.slurm_cluster_schema(), names.CLUSTER_KIND, _cluster_rules)
    spec = result["spec"]
    spec.setdefault("clusterName", result["metadata"]["name"])
    for component in names.IMAGE_REPOSITORIES:
        spec["images"].setdefault(component, names.default_image(component, collection_version))
    return result


def validate_nodeset(obj):
    """A defaulted copy of the NodeSet ``obj``; raises SpecErrors listing every problem."""
    return _validate(obj, schema.nodeset_schema(), names.NODESET_KIND, _nodeset_rules)


def validate_cluster_with_nodesets(cluster, nodesets, collection_version=names.COLLECTION_VERSION):
    """Validate a SlurmCluster, its NodeSets, and the rules between them; returns the defaulted copies.

    Errors of a NodeSet carry the prefix ``nodesets[<name>].`` (``nodesets[<index>].`` when it has no name).
    """
    errors = []
    try:
        cluster = validate_cluster(cluster, collection_version)
    except SpecErrors as exc:
        errors.extend(exc.errors)
        cluster = None
    checked = []
    for index, nodeset in enumerate(nodesets):
        label = ((nodeset or {}).get("metadata") or {}).get("name") if isinstance(nodeset, dict) else None
        prefix = "nodesets[%s]" % (label or index)
        try:
            checked.append(validate_nodeset(nodeset))
        except SpecErrors as exc:
            errors.extend(SpecError("%s.%s" % (prefix, e.path) if e.path else prefix, e.message)
                          for e in exc.errors)
    if cluster is not None and len(checked) == len(nodesets):
        _cross_rules(cluster, checked, errors)
    if errors:
        raise SpecErrors(errors)
    return cluster, checked


def _cross_rules(cluster, nodesets, errors):
    spec = cluster["spec"]
    name = cluster["metadata"]["name"]
    namespace = cluster["metadata"]["namespace"]
    partitions = [p["name"] for p in spec["partitions"]]
    default = [p["name"] for p in spec["partitions"] if p["default"]]
    seen = set()
    total = 0
    for nodeset in nodesets:
        set_name = nodeset["metadata"]["name"]
        prefix = "nodesets[%s]" % set_name
        if set_name in seen:
            errors.append(SpecError(prefix + ".metadata.name", "Duplicate value: two NodeSets named %r" % set_name))
        seen.add(set_name)
        if set_name in names.RESERVED_NODESET_NAMES:
            errors.append(SpecError(prefix + ".metadata.name", "%r is reserved (it would collide with the "
                                                               "cluster's own objects)" % set_name))
        if nodeset["metadata"]["namespace"] != namespace:
            errors.append(SpecError(prefix + ".metadata.namespace",
                                    "must be the SlurmCluster's namespace %r" % namespace))
        if nodeset["spec"]["clusterRef"]["name"] != name:
            errors.append(SpecError(prefix + ".spec.clusterRef.name", "does not reference SlurmCluster %r" % name))
        for index, partition in enumerate(nodeset["spec"].get("partitions") or ()):
            if partition not in partitions:
                errors.append(SpecError("%s.spec.partitions[%d]" % (prefix, index),
                                        "unknown partition %r (the cluster has: %s)"
                                        % (partition, ", ".join(partitions))))
        if not nodeset["spec"].get("partitions") and not default:
            errors.append(SpecError(prefix + ".spec.partitions",
                                    "lists no partition and the cluster has no default partition"))
        total += nodeset["spec"]["replicas"]
    if total > spec["slurm"]["maxNodeCount"]:
        errors.append(SpecError("spec.slurm.maxNodeCount", "total NodeSet replicas (%d) exceed maxNodeCount (%d)"
                                % (total, spec["slurm"]["maxNodeCount"])))


def nodeset_partitions(cluster_spec, nodeset_spec):
    """The partitions a (defaulted) NodeSet joins: its own list, else the cluster's default partition."""
    if nodeset_spec.get("partitions"):
        return list(nodeset_spec["partitions"])
    return [p["name"] for p in cluster_spec["partitions"] if p["default"]]
