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

from ansible_collections.soperator.slurm.plugins.module_utils import config_keys, durations, identity, names, schema
from ansible_collections.soperator.slurm.plugins.module_utils import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.quantity import QUANTITY_PATTERN, parse_quantity

# RealMemory of a node = its memory minus this share (at least MEMORY_MARGIN_MIN_MIB) for slurmd, munged and
# the page cache, so the kernel OOM killer never hits the daemons before Slurm's own limits hit the job.
MEMORY_MARGIN_MIN_MIB = 256
MEMORY_MARGIN_FRACTION = 0.05

_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_TYPES: dict = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list, "number": (int, float)}
# The API server's integers are int64.
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Passed down the walk when there is no old object (a create): transition rules (``oldSelf``) are not judged.
_NO_OLD = object()


def matches(pattern, value):
    """Whether ``value`` matches a schema ``pattern`` the way the API server's RE2 does: the whole string
    (``re.search`` with ``^...$`` would accept a trailing newline)."""
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def child_path(path, key):
    """``spec`` + ``replicas`` -> ``spec.replicas``; odd map keys in brackets: ``limits[nvidia.com/gpu]``."""
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    if not _SIMPLE_KEY.fullmatch(key):
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
        return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
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
        if "pattern" in node and not matches(node["pattern"], value):
            errors.append(SpecError(path, _pattern_error(value, node["pattern"])))
    elif isinstance(value, int):
        if "minimum" in node and value < node["minimum"]:
            errors.append(SpecError(path, "Invalid value: %d: should be greater than or equal to %d"
                                    % (value, node["minimum"])))
        if "maximum" in node and value > node["maximum"]:
            errors.append(SpecError(path, "Invalid value: %d: should be less than or equal to %d"
                                    % (value, node["maximum"])))


def validate_schema(value, node, path, errors, old=_NO_OLD):
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
        if node["type"] == "object":
            _validate_object(value, node, path, errors, old)
        elif node["type"] == "array":
            _validate_array(value, node, path, errors)
        else:
            _check_scalar(value, node, path, errors)
    for rule in node.get("x-kubernetes-validations") or ():
        try:
            if "oldSelf" in rule["rule"]:
                if old is not _NO_OLD:
                    errors.extend(TWINS[rule["message"]](value, path, old))
                continue
            errors.extend(TWINS[rule["message"]](value, path))
        except (AttributeError, KeyError, TypeError):
            # A twin cannot judge a malformed value; the schema errors above already name the problem.
            if len(errors) == before:
                raise


def _validate_object(value, node, path, errors, old=_NO_OLD):
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
            sub_old = old[key] if isinstance(old, dict) and key in old else _NO_OLD
            validate_schema(value[key], properties[key], sub_path, errors, sub_old)
        elif isinstance(extra, dict):
            validate_schema(value[key], extra, sub_path, errors)
        elif not node.get("x-kubernetes-preserve-unknown-fields"):
            errors.append(SpecError(sub_path, "unknown field (the API rejects unknown fields: check the spelling)"))


def _validate_array(value, node, path, errors):
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


# ---------------------------------------------------------------------------------------------------- CEL twins
TWINS: dict = {}


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
        if isinstance(name, str) and not matches(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name):
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
TWINS.update(identity.TWINS)  # spec.identity's, beside its other rules


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


@_twin(schema.SUB_MOUNT_MODE_EMPTY_DIR)
def _sub_mount_mode_source(mount, path):
    if "mode" in mount and not mount.get("emptyDir"):
        return _cel_error(child_path(path, "mode"), schema.SUB_MOUNT_MODE_EMPTY_DIR)
    return []


@_twin(schema.SUB_MOUNT_MODE_STICKY)
def _sub_mount_mode_sticky(mount, path):
    mode = mount.get("mode")
    if isinstance(mode, str) and re.search("[2367]$", mode) and not re.match("^[1357][0-7]{3}$", mode):
        return _cel_error(child_path(path, "mode"), schema.SUB_MOUNT_MODE_STICKY)
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


def label_key_ok(key):
    """A qualified name ([prefix/]name) as the API server wants label keys, taint keys and topology keys."""
    return (isinstance(key, str) and len(key) <= 317 and matches(schema.LABEL_KEY_PATTERN, key)
            and re.match(schema.LABEL_KEY_LONG_PREFIX_PATTERN, key) is None)


@_twin(schema.LABEL_KEYS_RULE_MESSAGE)
def _label_keys(labels, path):
    return [SpecError(child_path(path, key), schema.LABEL_KEYS_RULE_MESSAGE) for key in sorted(labels)
            if not label_key_ok(key)]


@_twin(schema.TOLERATION_EXISTS_VALUE)
def _toleration_exists(toleration, path):
    if toleration.get("operator") == "Exists" and toleration.get("value"):
        return _cel_error(child_path(path, "value"), schema.TOLERATION_EXISTS_VALUE)
    return []


@_twin(schema.TOLERATION_EMPTY_KEY)
def _toleration_empty_key(toleration, path):
    if not toleration.get("key") and toleration.get("operator") != "Exists":
        return _cel_error(child_path(path, "operator"), schema.TOLERATION_EMPTY_KEY)
    return []


@_twin(schema.TOLERATION_SECONDS)
def _toleration_seconds(toleration, path):
    if "tolerationSeconds" in toleration and toleration.get("effect") != "NoExecute":
        return _cel_error(child_path(path, "tolerationSeconds"), schema.TOLERATION_SECONDS)
    return []


@_twin(schema.PARTITION_DEFAULT_NAME)
def _partition_default_name(partition, path):
    if isinstance(partition.get("name"), str) and partition["name"].lower() == "default":
        return _cel_error(child_path(path, "name"), schema.PARTITION_DEFAULT_NAME)
    return []


@_twin(schema.GPU_TYPE_WITHOUT_COUNT)
def _gpu_type(gpu, path):
    if "type" in gpu and not gpu.get("count"):
        return _cel_error(child_path(path, "type"), schema.GPU_TYPE_WITHOUT_COUNT)
    return []


@_twin(schema.NODESET_NAME_ORDINAL)
def _nodeset_name_ordinal(obj, path):
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and re.search(r"-[0-9]+\Z", name):
        return _cel_error("metadata.name", schema.NODESET_NAME_ORDINAL)
    return []


# Transition rules (``self == oldSelf``): judged only on an update, with the stored value.
@_twin(schema.SPOOL_IMMUTABLE)
def _spool_immutable(spool, path, old):
    return [] if spool == old else _cel_error(path, schema.SPOOL_IMMUTABLE)


@_twin(schema.CLUSTER_REF_IMMUTABLE)
def _cluster_ref_immutable(ref, path, old):
    return [] if ref == old else _cel_error(path, schema.CLUSTER_REF_IMMUTABLE)


@_twin(schema.ACCOUNTING_RULES["storage_immutable"])
def _database_storage_immutable(accounting, path, old):
    if not (isinstance(old, dict) and old.get("enabled") and accounting.get("enabled")):
        return []
    database, stored = accounting.get("database") or {}, old.get("database") or {}
    if database.get("type") != stored.get("type") or database.get("type") == "External":
        return []
    if "storage" in database and "storage" in stored and database["storage"] != stored["storage"]:
        return _cel_error(child_path(child_path(path, "database"), "storage"),
                          schema.ACCOUNTING_RULES["storage_immutable"])
    return []


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


@_twin(schema.NETWORK_PEER_RULE)
def _network_peer(peer, path):
    if ("ipBlock" in peer) == ("podSelector" in peer or "namespaceSelector" in peer):
        return _cel_error(path, schema.NETWORK_PEER_RULE)
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
def _check_raw_keys(mapping, path, allowed, owned, typed, what, errors, values=None, refused=None):
    for key in sorted(mapping):
        key_path = child_path(path, key)
        rule = (values or {}).get(key)
        # A value that is not one token is already refused by the schema's pattern: one error per field.
        problem = rule and matches(schema.SLURM_VALUE_PATTERN, str(mapping[key])) and config_keys.check_value(
            rule, mapping[key])
        if problem:
            errors.append(SpecError(key_path, "%s value %r for %s: must be %s" % (what, str(mapping[key]), key,
                                                                                  problem)))
        if key in (refused or {}):
            errors.append(SpecError(key_path, "%s key %s is not accepted: %s" % (what, key, refused[key])))
        elif key in owned:
            errors.append(SpecError(key_path, "%s key %s is set by the operator (%s)" % (what, key, owned[key])))
        elif key in typed:
            errors.append(SpecError(key_path, "%s key %s has a typed field: use %s" % (what, key, typed[key])))
        elif key not in allowed:
            hint = config_keys.suggest(key, list(allowed) + list(owned) + list(typed) + list(refused or ()))
            errors.append(SpecError(key_path, "unknown %s key %r%s" % (
                what, key, " (did you mean %s?)" % hint if hint else "")))


def _cluster_rules(spec, errors):
    slurm = spec.get("slurm") or {}
    _check_raw_keys(slurm.get("slurmConf") or {}, "spec.slurm.slurmConf", config_keys.SLURM_CONF_KEYS,
                    config_keys.SLURM_CONF_OWNED, config_keys.SLURM_CONF_TYPED, "slurm.conf", errors,
                    config_keys.SLURM_CONF_VALUES, config_keys.SLURM_CONF_REFUSED)
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
    jail = spec.get("jail") or {}
    sub_mounts = _sub_mount_paths_of(jail)
    _program_rules(slurm.get("slurmConf") or {}, sub_mounts, errors)
    program = slurm.get("healthCheckProgram")
    problem = matches(schema.PROGRAM_PATH_PATTERN, program) and where_users_write(program, sub_mounts)
    if problem:
        errors.append(SpecError("spec.slurm.healthCheckProgram", "HealthCheckProgram runs as root on every node: "
                                + problem))
    _component_rules(spec, errors)
    identity.rules(spec, errors)
    _health_rules(spec, sub_mounts, errors)
    if "size" in jail:
        _positive_size(jail["size"], "spec.jail.size", errors)
    _sub_mount_rules(jail.get("subMounts"), "spec.jail.subMounts", errors)
    controller = spec.get("controller") or {}
    _positive_size((controller.get("spool") or {}).get("size", 1), "spec.controller.spool.size", errors)
    for part, component in (("controller", controller), ("login", login)):
        _resources_rules(component.get("resources"), "spec.%s.resources" % part, errors)
        _placement_rules(component.get("placement"), "spec.%s.placement" % part, errors)
    _placement_rules(spec.get("placement"), "spec.placement", errors)
    ranges = (login.get("service") or {}).get("loadBalancerSourceRanges") or ()
    for index, cidr in enumerate(ranges):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errors.append(SpecError("spec.login.service.loadBalancerSourceRanges[%d]" % index,
                                    "Invalid value: %r: not a CIDR" % cidr))


# An emptyDir sub-mount's directory unless jail.subMounts[].mode says otherwise: root's, not writable by users.
EMPTY_DIR_MODE = "0755"


def sub_mount_read_only(sub):
    """Whether a jail sub-mount is mounted read-only: as asked, else true for a node's directory (a writable
    hostPath is the node's disk under every job's root), false for the other sources."""
    return bool(sub.get("readOnly", "hostPath" in sub))


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
    _resources_rules(resources, "spec.resources", errors)
    _placement_rules(spec.get("placement"), "spec.placement", errors)
    try:
        real_memory = real_memory_mib(resources)
    except ValueError:  # not a quantity: the schema walk named it
        real_memory = None
    if real_memory is not None and real_memory < 1:
        errors.append(SpecError("spec.resources", "memory too small for a Slurm node: more than %dMi needed"
                                % MEMORY_MARGIN_MIN_MIB))


# ---------------------------------------------------------------------------------------------------- rendered objects
# What the API server refuses on the objects rendered from a spec, although the spec itself passes the CRD's
# schema: checked here, so that nothing is applied when a later object would be refused (the converge's
# server-side dry run is the last line: tests/integration/test_validator_property.py holds the two together).

_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"


def _quantity(value):
    """The quantity, or None when it is not one (the schema walk already said so)."""
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _resource_kind(name):
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


def _resources_rules(resources, path, errors):
    """Container resources as the API server wants them: known names, requests <= limits, extended resources and
    hugepages whole, their request equal to their limit (which must be set), hugepages only with cpu or memory."""
    if not isinstance(resources, dict):
        return
    requests: dict = resources["requests"] if isinstance(resources.get("requests"), dict) else {}
    limits: dict = resources["limits"] if isinstance(resources.get("limits"), dict) else {}
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
            for section, values in (("requests", requests), ("limits", limits)):
                if name in values and _quantity(values[name]).denominator != 1:
                    errors.append(SpecError(child_path("%s.%s" % (path, section), name), "must be a whole number"))
        else:
            size = _quantity(name[len(HUGEPAGES_PREFIX):])
            value = limit if name in limits else request
            if value <= 0 or (value / size).denominator != 1:
                errors.append(SpecError(where, "must be a positive whole multiple of the page size %s"
                                        % name[len(HUGEPAGES_PREFIX):]))
            if not any(k in requests or k in limits for k in ("cpu", "memory")):
                errors.append(SpecError(where, "hugepages need a cpu or memory request or limit too"))


def _positive_size(value, path, errors):
    size = _quantity(value)
    if size is not None and size <= 0:
        errors.append(SpecError(path, "Invalid value: %r: a volume size must be more than zero" % (value,)))


def _node_requirements(requirements, path, errors, fields=False):
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


def _operator_values(op, values, where, errors, numeric=False):
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


def _label_selector_rules(selector, path, errors):
    for key in sorted(selector.get("matchLabels") or {}):
        if not label_key_ok(key):
            errors.append(SpecError(child_path(path + ".matchLabels", key), schema.LABEL_KEYS_RULE_MESSAGE))
    for index, req in enumerate(selector.get("matchExpressions") or ()):
        where = child_path(path + ".matchExpressions", index)
        if not label_key_ok(req.get("key")):
            errors.append(SpecError(where + ".key", schema.LABEL_KEYS_RULE_MESSAGE))
        _operator_values(req.get("operator"), req.get("values") or [], where, errors)


def _pod_affinity_term_rules(term, path, errors):
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


def _affinity_rules(affinity, path, errors):
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


def _placement_rules(placement, path, errors):
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
# config_keys.sub_mount_problem's.
JAIL_RESERVED_TREES = ("/proc", "/sys", "/dev", "/run", "/tmp", names.SLURMD_SPOOL, names.SLURM_CONFIG_DIR)


def _sub_mount_rules(mounts, path, errors):
    targets = [m.get("mountPath") for m in mounts or () if matches(schema.JAIL_PATH_PATTERN, m.get("mountPath"))]
    for index, mount in enumerate(mounts or ()):
        target = mount.get("mountPath")
        if not matches(schema.JAIL_PATH_PATTERN, target):
            continue  # the schema already refused it
        where = child_path(path, index) + ".mountPath"
        for tree in JAIL_RESERVED_TREES:
            if config_keys.overlaps(target, tree):
                errors.append(SpecError(where, "%s collides with %s, which soperator mounts in the jail itself"
                                        % (target, tree)))
                break
        else:
            problem = config_keys.sub_mount_problem(target, targets)
            if problem:
                errors.append(SpecError(where, problem))


def _component_rules(spec, errors):
    """Accounting, the REST API and the exporter: their pods as the API server wants them (resources, placement),
    the database's volume more than zero."""
    accounting = spec.get("accounting") or {}
    database = accounting.get("database") or {}
    parts = [("spec.accounting.slurmdbd", accounting.get("slurmdbd") or {}), ("spec.accounting.database", database),
             ("spec.restApi", spec.get("restApi") or {}), ("spec.exporter", spec.get("exporter") or {}),
             ("spec.identity.sssd", (spec.get("identity") or {}).get("sssd") or {})]
    for path, part in parts:
        _resources_rules(part.get("resources"), path + ".resources", errors)
        _placement_rules(part.get("placement"), path + ".placement", errors)
    storage = database.get("storage") or {}
    if "size" in storage:
        _positive_size(storage["size"], "spec.accounting.database.storage.size", errors)
    interval = (spec.get("exporter") or {}).get("collectInterval")
    if matches(schema.GO_DURATION_PATTERN, interval) and durations.seconds(
            interval) < schema.EXPORTER_MIN_INTERVAL_SECONDS:
        errors.append(SpecError("spec.exporter.collectInterval", "Invalid value: %r: at least %ds (each collection "
                                "is a set of Slurm calls)" % (interval, schema.EXPORTER_MIN_INTERVAL_SECONDS)))
    for field in ("restApiFrom", "exporterFrom"):
        for index, peer in enumerate((spec.get("networkPolicies") or {}).get(field) or ()):
            _network_peer_rules(peer, "spec.networkPolicies.%s[%d]" % (field, index), errors)


def _network_peer_rules(peer, path, errors):
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


def database_secret_refs(cluster_spec):
    """``(field, Secret name)`` of the Secrets an External database hands to slurmdbd (the password, which slurmdbd
    sends to the database host, and the CA it trusts). None for the other databases: their Secret is the cluster's."""
    accounting = (cluster_spec or {}).get("accounting") or {}
    database = accounting.get("database") or {}
    if accounting.get("enabled") is not True or database.get("type") != "External":
        return []
    refs = [("spec.accounting.database.passwordSecretRef.name", (database.get("passwordSecretRef") or {}).get("name")),
            ("spec.accounting.database.tls.caSecretRef.name",
             ((database.get("tls") or {}).get("caSecretRef") or {}).get("name"))]
    return [(path, name) for path, name in refs if isinstance(name, str) and name]


def database_secret_errors(cluster, secrets):
    """The Secrets of :func:`database_secret_refs` that are missing or not marked for ``cluster``: their owner gives
    one to a cluster with the label ``names.LABEL_DATABASE_SECRET`` = the cluster's name. ``secrets``: ``{name:
    the Secret's labels}`` (a name left out: it does not exist)."""
    name = cluster["metadata"]["name"]
    mark = "%s=%s" % (names.LABEL_DATABASE_SECRET, name)
    errors = []
    for path, secret in database_secret_refs(cluster.get("spec")):
        labels = secrets.get(secret)
        if labels is None:
            errors.append(SpecError(path, "Secret %s does not exist; an External database takes only a Secret "
                                    "labelled %s" % (secret, mark)))
        elif labels.get(names.LABEL_DATABASE_SECRET) != name:
            errors.append(SpecError(path, "Secret %s is not marked for SlurmCluster %s: slurmdbd would send its "
                                    "value to the database host, so an External database takes only a Secret its "
                                    "owner labelled %s (kubectl label secret %s %s)"
                                    % (secret, name, mark, secret, mark)))
    return errors


# The standard cron schedule of a CronJob as the API server parses it (robfig/cron's standard parser): five fields,
# each a list of '*', N, N-M, optionally /step (N/step is N-max/step), within these bounds; names for months and
# days of the week. CRON_PATTERN only bounds the characters.
_CRON_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
                ("month", 1, 12, dict((m, i + 1) for i, m in enumerate(
                    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")))),
                ("day of week", 0, 6, dict((d, i) for i, d in enumerate(
                    ("sun", "mon", "tue", "wed", "thu", "fri", "sat")))))


def _cron_number(text, names_of):
    if text.lower() in names_of:
        return names_of[text.lower()]
    if not re.fullmatch(r"[0-9]{1,9}", text):
        raise ValueError("%r is not a number" % text)
    return int(text)


def cron_problem(schedule):
    """Why the API server would refuse ``schedule`` as a CronJob's, or None."""
    if "TZ" in schedule:
        return "a time zone (TZ, CRON_TZ) is not allowed in a schedule"
    if schedule.startswith("@"):
        return None if schedule in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                                    "@hourly") else "unknown descriptor %s" % schedule
    fields = schedule.split()
    if len(fields) != 5:
        return "expected 5 fields (minute hour day-of-month month day-of-week), found %d" % len(fields)
    for text, (what, low, high, names_of) in zip(fields, _CRON_FIELDS):
        for expr in (part for part in text.split(",") if part):
            try:
                range_text, slash, step_text = expr.partition("/")
                if "/" in step_text:
                    raise ValueError("too many slashes")
                bounds = range_text.split("-")
                if bounds[0] in ("*", "?"):
                    start, end = low, high
                else:
                    if len(bounds) > 2:
                        raise ValueError("too many hyphens")
                    start = _cron_number(bounds[0], names_of)
                    end = _cron_number(bounds[1], names_of) if len(bounds) == 2 else start
                step = _cron_number(step_text, {}) if slash else 1
                if slash and len(bounds) == 1:
                    end = high
                if start < low or end > high or start > end:
                    raise ValueError("outside %d-%d" % (low, high))
                if step == 0:
                    raise ValueError("a step must be positive")
            except ValueError as e:
                return "%s field %r: %s" % (what, expr, e)
    return None


def _health_rules(spec, sub_mounts, errors):
    """The NCCL check: a schedule the API server takes, a partition of the cluster, sizes in order, and its command
    (run as SlurmUser on every tested node) not where users write."""
    nccl = (spec.get("healthChecks") or {}).get("nccl") or {}
    path = "spec.healthChecks.nccl"
    schedule = nccl.get("schedule")
    if matches(schema.CRON_PATTERN, schedule):
        problem = cron_problem(schedule)
        if problem:
            errors.append(SpecError(path + ".schedule", "Invalid value: %r: %s" % (schedule, problem)))
    partitions = [p.get("name") for p in spec.get("partitions") or ()]
    if nccl.get("partition") and nccl["partition"] not in partitions:
        errors.append(SpecError(path + ".partition", "%r is not a partition of the cluster (%s)"
                                % (nccl["partition"], ", ".join(str(p) for p in partitions))))
    sizes = [nccl.get(k) for k in ("minBytes", "maxBytes")]
    if all(matches(schema.NCCL_SIZE_PATTERN, size) for size in sizes) and _bytes(sizes[0]) > _bytes(sizes[1]):
        errors.append(SpecError(path + ".minBytes", "minBytes %s is more than maxBytes %s" % tuple(sizes)))
    command = nccl.get("command")
    problem = matches(schema.PROGRAM_PATH_PATTERN, command) and where_users_write(command, sub_mounts)
    if problem:
        errors.append(SpecError(path + ".command", "the NCCL check runs its command as SlurmUser (%s) on every "
                                "tested node: %s" % (names.SLURM_USER, problem)))


def _bytes(size):
    return int(size.rstrip("KMG")) * 1024 ** ("KMG".find(size[-1]) + 1 if size[-1] in "KMG" else 0)


def where_users_write(path, sub_mounts):
    """Why ``path`` (absolute) is where users can write, or None. ``sub_mounts``: ``[(field, mount path)]`` of the
    jail's sub-mounts (their volumes are the jobs' to write, and the slurmd container mounts them at the same
    path)."""
    for tree in config_keys.USER_WRITABLE_TREES:
        if config_keys.under(path, tree):
            return "%s is where users can write (%s)" % (path, tree)
    for field, mount_path in sub_mounts:
        if config_keys.under(path, mount_path):
            return "%s is where users can write (the jail sub-mount %s, %s)" % (path, mount_path, field)
    return None


def _sub_mount_paths_of(jail):
    return [("spec.jail.subMounts[%d]" % index, sub["mountPath"])
            for index, sub in enumerate(jail.get("subMounts") or ())
            if matches(schema.JAIL_PATH_PATTERN, sub.get("mountPath"))]


_USES = {"program": "runs as", "loaded": "is a file loaded (it may name code) as", "written": "is a file written as"}


def _program_rules(slurm_conf, sub_mounts, errors):
    """Every raw slurm.conf key that makes a daemon run, load or write a file (config_keys.file_keys): an absolute
    path, never where users write; plugins that would load a script soperator cannot render; options naming files
    a daemon trusts."""
    for key, (use, who) in sorted(config_keys.file_keys(slurm_conf).items()):
        value = str(slurm_conf[key])
        where = "spec.slurm.slurmConf.%s" % key
        if not matches(schema.SLURM_VALUE_PATTERN, value):
            continue  # the schema already refused it: one error per field
        if not matches(schema.PROGRAM_PATH_PATTERN, value):
            errors.append(SpecError(where, "%s must be an absolute path (no '.' components)" % key))
            continue
        problem = use != "user" and where_users_write(value, sub_mounts)
        if problem:
            hint = "" if use == "written" else " (use a program of the image)"
            errors.append(SpecError(where, "%s %s %s: %s%s" % (key, _USES[use], who, problem, hint)))
    jobcomp = str(slurm_conf.get("JobCompType", ""))
    use = config_keys.JOBCOMP_LOC_USE.get(jobcomp)
    if use in ("program", "loaded") and "JobCompLoc" not in slurm_conf:
        errors.append(SpecError("spec.slurm.slurmConf.JobCompType", "%s needs JobCompLoc (the %s)" % (
            jobcomp, "script to run" if use == "program" else "librdkafka configuration file")))
    location = str(slurm_conf.get("JobCompLoc", ""))
    if use == "url" and "@" in location.partition("://")[2].partition("/")[0]:
        errors.append(SpecError("spec.slurm.slurmConf.JobCompLoc", "JobCompLoc carries credentials (user@ in the "
                                "URL): slurm.conf is served to every node and readable by every user of the jail"))
    for (key, plugin), loaded in sorted(config_keys.CONFIG_DIR_SCRIPT_PLUGINS.items()):
        if key in slurm_conf and plugin in config_keys.plugin_names(slurm_conf[key]):
            errors.append(SpecError("spec.slurm.slurmConf.%s" % key, "%s=%s loads %s from the configuration "
                                    "directory, which soperator renders: no field can put that file there, and code "
                                    "Slurm runs as root or SlurmUser comes only from the images"
                                    % (key, slurm_conf[key], loaded)))
    for key, (options, reason) in sorted(config_keys.FILE_OPTIONS.items()):
        named = set(item.partition("=")[0].strip().lower() for item in str(slurm_conf.get(key, "")).split(","))
        for option in sorted(o for o in options if o.lower() in named):
            errors.append(SpecError("spec.slurm.slurmConf.%s" % key, "%s option %s names a file a daemon reads and "
                                    "trusts: %s" % (key, option, reason)))


# ---------------------------------------------------------------------------------------------------- entry points
def _validate(obj, root, kind, rules, old=None):
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
    stored = _NO_OLD
    if isinstance(old, dict):
        stored = apply_defaults(old, root)
        stored.pop("status", None)
    validate_schema(result, root, "", errors, stored)
    if isinstance(result.get("spec"), dict):
        found = len(errors)
        try:
            rules(result["spec"], errors)
        except (AttributeError, KeyError, TypeError, ValueError):
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


def validate_cluster(obj, collection_version=names.COLLECTION_VERSION, old=None):
    """A defaulted copy of the SlurmCluster ``obj``; raises SpecErrors listing every problem.

    Besides the schema defaults, fills ``spec.clusterName`` (metadata.name) and every image (the soperator
    image of ``collection_version``). ``old``: the stored object ``obj`` replaces, for the transition rules.
    """
    result = _validate(obj, schema.slurm_cluster_schema(), names.CLUSTER_KIND, _cluster_rules, old)
    spec = result["spec"]
    spec.setdefault("clusterName", result["metadata"]["name"])
    for component in names.IMAGE_REPOSITORIES:
        spec["images"].setdefault(component, names.default_image(component, collection_version))
    return result


def validate_nodeset(obj, old=None):
    """A defaulted copy of the NodeSet ``obj``; raises SpecErrors listing every problem."""
    return _validate(obj, schema.nodeset_schema(), names.NODESET_KIND, _nodeset_rules, old)


def validate_cluster_with_nodesets(cluster, nodesets, collection_version=names.COLLECTION_VERSION, policy=None,
                                   old_cluster=None, old_nodesets=None):
    """Validate a SlurmCluster, its NodeSets, and the rules between them; returns the defaulted copies.

    Errors of a NodeSet carry the prefix ``nodesets[<name>].`` (``nodesets[<index>].`` when it has no name).
    ``policy``: the installer's policy (``policy.normalize``), None to skip it. ``old_cluster``, ``old_nodesets``
    (``{name: object}``): the stored objects these replace, for the transition rules (immutable fields).
    """
    errors = []
    old_nodesets = old_nodesets or {}
    try:
        cluster = validate_cluster(cluster, collection_version, old_cluster)
    except SpecErrors as exc:
        errors.extend(exc.errors)
        cluster = None
    checked = []
    for index, nodeset in enumerate(nodesets):
        label = ((nodeset or {}).get("metadata") or {}).get("name") if isinstance(nodeset, dict) else None
        prefix = "nodesets[%s]" % (label or index)
        try:
            checked.append(validate_nodeset(nodeset, old_nodesets.get(label)))
        except SpecErrors as exc:
            errors.extend(SpecError("%s.%s" % (prefix, e.path) if e.path else prefix, e.message)
                          for e in exc.errors)
    if cluster is not None and len(checked) == len(nodesets):
        _cross_rules(cluster, checked, errors)
        if policy is not None:
            errors.extend(policies.check(cluster, checked, policy))
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
        # Slurm's NodeSet=<name> lines select nodes by feature: a feature named like another NodeSet would move these
        # nodes into that NodeSet's partitions.
        others = dict((ns["metadata"]["name"].lower(), ns["metadata"]["name"]) for ns in nodesets
                      if ns["metadata"]["name"] != set_name)
        for index, feature in enumerate(nodeset["spec"].get("features") or ()):
            if feature.lower() in others:
                errors.append(SpecError("%s.spec.features[%d]" % (prefix, index),
                                        "feature %r is the name of NodeSet %s: its nodes would join that NodeSet's "
                                        "partitions" % (feature, others[feature.lower()])))
        total += nodeset["spec"]["replicas"]
    if total > spec["slurm"]["maxNodeCount"]:
        errors.append(SpecError("spec.slurm.maxNodeCount", "total NodeSet replicas (%d) exceed maxNodeCount (%d)"
                                % (total, spec["slurm"]["maxNodeCount"])))


def nodeset_partitions(cluster_spec, nodeset_spec):
    """The partitions a (defaulted) NodeSet joins: its own list, else the cluster's default partition."""
    if nodeset_spec.get("partitions"):
        return list(nodeset_spec["partitions"])
    return [p["name"] for p in cluster_spec["partitions"] if p["default"]]


# ---------------------------------------------------------------------------------------------------- names
def _owner_label(owner):
    if owner["nodeset"] is None:
        return "SlurmCluster %s" % owner["cluster"]
    return "NodeSet %s (of SlurmCluster %s)" % (owner["nodeset"], owner["cluster"])


def _meeting(a, b):
    """A name the objects of owners ``a`` and ``b`` would both take, or None."""
    exact_a, families_a = names.owned_names(a["cluster"], a["nodeset"])
    exact_b, families_b = names.owned_names(b["cluster"], b["nodeset"])
    for name in exact_a:
        if name in exact_b:
            return name
    for exact, families in ((exact_a, families_b), (exact_b, families_a)):
        for name in exact:
            for prefix, tail in families:
                if name.startswith(prefix) and re.fullmatch(tail, name[len(prefix):]):
                    return name
    shared = set(p for p, dummy in families_a) & set(p for p, dummy in families_b)
    if shared:
        return sorted(shared)[0] + "0"
    return None


def name_collisions(owners, cluster_name):
    """SpecErrors-ready problems of ``cluster_name`` and its NodeSets whose objects would take names another owner
    of the namespace already takes.

    ``owners``: every SlurmCluster and NodeSet of the namespace (this cluster's included) as
    ``{"cluster": name, "nodeset": name or None, "created": creationTimestamp or None}``; a NodeSet's cluster is its
    clusterRef. Of two owners that meet, the one created later (None: not created yet) is refused, naming both, so
    a running cluster never stops because a newer one was named badly."""
    def age(owner):
        return (owner.get("created") or "~", owner["cluster"], owner["nodeset"] or "")

    errors = []
    mine = [o for o in owners if o["cluster"] == cluster_name]
    for owner in mine:
        if owner["nodeset"] in names.RESERVED_NODESET_NAMES:
            continue  # already refused as reserved
        for other in owners:
            if other is owner or age(other) > age(owner) or other["nodeset"] in names.RESERVED_NODESET_NAMES or (
                    other["cluster"] == owner["cluster"] and other["nodeset"] == owner["nodeset"]):
                continue
            name = _meeting(owner, other)
            if name is None:
                continue
            path = "metadata.name" if owner["nodeset"] is None else "nodesets[%s].metadata.name" % owner["nodeset"]
            errors.append(SpecError(path, "the objects of %s and of %s would both be named %s: rename one of them"
                                    % (_owner_label(owner), _owner_label(other), name)))
            break
    return errors
