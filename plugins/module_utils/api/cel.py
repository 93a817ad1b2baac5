# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Python twins of the CEL rules of ``schema.py`` (``x-kubernetes-validations``), registered under the rule's
message in :data:`TWINS` so the same message comes back whichever side refuses (a unit test checks the two sets are
equal). A twin takes (value, path) and returns SpecErrors; a transition rule (``oldSelf``) also takes the stored
value. Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Callable, TypeVar

from ansible_collections.soperator.slurm.plugins.module_utils.api import identity, schema
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import child_path, label_key_ok, matches
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, Spec


# A twin: (value, path) -> Errors, and (value, path, stored value) for a transition rule.
Twin = Callable[..., Errors]
_T = TypeVar("_T", bound=Twin)

TWINS: dict[str, Twin] = {}


def _twin(message: str) -> Callable[[_T], _T]:
    def register(func: _T) -> _T:
        TWINS[message] = func
        return func
    return register


def _cel_error(path: str, message: str) -> Errors:
    return [SpecError(path, message)]


def _name_twins(kind: str, max_length: int) -> None:
    dns = "metadata.name of a %s must be a DNS label starting with a letter" % kind
    size = ("metadata.name of a %s must be at most %d characters (it prefixes the names of its objects)"
            % (kind, max_length))

    @_twin(dns)
    def _dns(obj: KubeObject, path: str) -> Errors:
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and not matches(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name):
            return _cel_error("metadata.name", dns)
        return []

    @_twin(size)
    def _size(obj: KubeObject, path: str) -> Errors:
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and len(name) > max_length:
            return _cel_error("metadata.name", size)
        return []


_name_twins("SlurmCluster", schema.CLUSTER_NAME_MAX)


_name_twins("NodeSet", schema.NODESET_NAME_MAX)
TWINS.update(identity.TWINS)  # spec.identity's, beside its other rules


@_twin("nodePort requires type NodePort or LoadBalancer")
def _node_port(service: Spec, path: str) -> Errors:
    if "nodePort" in service and service.get("type") not in ("NodePort", "LoadBalancer"):
        return _cel_error(child_path(path, "nodePort"), "nodePort requires type NodePort or LoadBalancer")
    return []


@_twin("loadBalancerSourceRanges requires type LoadBalancer")
def _source_ranges(service: Spec, path: str) -> Errors:
    if service.get("loadBalancerSourceRanges") and service.get("type") != "LoadBalancer":
        return _cel_error(child_path(path, "loadBalancerSourceRanges"),
                          "loadBalancerSourceRanges requires type LoadBalancer")
    return []


@_twin("set exactly one of hostPath, claimName or emptyDir")
def _sub_mount_source(mount: Spec, path: str) -> Errors:
    sources = ["hostPath" in mount, "claimName" in mount, bool(mount.get("emptyDir"))]
    if sources.count(True) != 1:
        return _cel_error(path, "set exactly one of hostPath, claimName or emptyDir")
    return []


@_twin(schema.SUB_MOUNT_MODE_EMPTY_DIR)
def _sub_mount_mode_source(mount: Spec, path: str) -> Errors:
    if "mode" in mount and not mount.get("emptyDir"):
        return _cel_error(child_path(path, "mode"), schema.SUB_MOUNT_MODE_EMPTY_DIR)
    return []


@_twin(schema.SUB_MOUNT_MODE_STICKY)
def _sub_mount_mode_sticky(mount: Spec, path: str) -> Errors:
    mode = mount.get("mode")
    # CEL's "$" (RE2) is the end of the text, Python's admits a trailing newline: \Z and fullmatch say it as CEL does.
    if isinstance(mode, str) and re.search(r"[2367]\Z", mode) and not re.fullmatch("[1357][0-7]{3}", mode):
        return _cel_error(child_path(path, "mode"), schema.SUB_MOUNT_MODE_STICKY)
    return []


def _unique(items: list[Spec], field: str, path: str, message: str) -> Errors:
    seen = set()
    errors = []
    for index, item in enumerate(items):
        if item.get(field) in seen:
            errors.append(SpecError(child_path(child_path(path, index), field), message))
        seen.add(item.get(field))
    return errors


@_twin("subMount names must be unique")
def _sub_mount_names(mounts: list[Spec], path: str) -> Errors:
    return _unique(mounts, "name", path, "subMount names must be unique")


@_twin("subMount mountPaths must be unique")
def _sub_mount_paths(mounts: list[Spec], path: str) -> Errors:
    return _unique(mounts, "mountPath", path, "subMount mountPaths must be unique")


@_twin("set exactly one of existingClaim, or storageClassName and size")
def _jail_source(jail: Spec, path: str) -> Errors:
    existing = "existingClaim" in jail
    created = "storageClassName" in jail and "size" in jail
    if existing == ("storageClassName" in jail or "size" in jail) or not (existing or created):
        return _cel_error(path, "set exactly one of existingClaim, or storageClassName and size")
    return []


@_twin("at most one partition can be the default")
def _one_default(partitions: list[Spec], path: str) -> Errors:
    defaults = [i for i, p in enumerate(partitions) if p.get("default")]
    return [SpecError(child_path(child_path(path, i), "default"), "at most one partition can be the default")
            for i in defaults[1:]]


@_twin("partition names must be unique")
def _partition_names(partitions: list[Spec], path: str) -> Errors:
    return _unique(partitions, "name", path, "partition names must be unique")


@_twin(schema.LABEL_KEYS_RULE_MESSAGE)
def _label_keys(labels: dict[str, str], path: str) -> Errors:
    return [SpecError(child_path(path, key), schema.LABEL_KEYS_RULE_MESSAGE) for key in sorted(labels)
            if not label_key_ok(key)]


@_twin(schema.TOLERATION_EXISTS_VALUE)
def _toleration_exists(toleration: Spec, path: str) -> Errors:
    if toleration.get("operator") == "Exists" and toleration.get("value"):
        return _cel_error(child_path(path, "value"), schema.TOLERATION_EXISTS_VALUE)
    return []


@_twin(schema.TOLERATION_EMPTY_KEY)
def _toleration_empty_key(toleration: Spec, path: str) -> Errors:
    if not toleration.get("key") and toleration.get("operator") != "Exists":
        return _cel_error(child_path(path, "operator"), schema.TOLERATION_EMPTY_KEY)
    return []


@_twin(schema.TOLERATION_SECONDS)
def _toleration_seconds(toleration: Spec, path: str) -> Errors:
    if "tolerationSeconds" in toleration and toleration.get("effect") != "NoExecute":
        return _cel_error(child_path(path, "tolerationSeconds"), schema.TOLERATION_SECONDS)
    return []


@_twin(schema.PARTITION_DEFAULT_NAME)
def _partition_default_name(partition: Spec, path: str) -> Errors:
    if isinstance(partition.get("name"), str) and partition["name"].lower() == "default":
        return _cel_error(child_path(path, "name"), schema.PARTITION_DEFAULT_NAME)
    return []


@_twin(schema.GPU_TYPE_WITHOUT_COUNT)
def _gpu_type(gpu: Spec, path: str) -> Errors:
    if "type" in gpu and not gpu.get("count"):
        return _cel_error(child_path(path, "type"), schema.GPU_TYPE_WITHOUT_COUNT)
    return []


@_twin(schema.NODESET_NAME_ORDINAL)
def _nodeset_name_ordinal(obj: KubeObject, path: str) -> Errors:
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and re.search(r"-[0-9]+\Z", name):
        return _cel_error("metadata.name", schema.NODESET_NAME_ORDINAL)
    return []


@_twin(schema.ELASTIC_MIN_ABOVE_MAX)
def _elastic_min_max(elastic: Spec, path: str) -> Errors:
    if isinstance(elastic.get("maxNodes"), int) and elastic.get("minNodes", 0) > elastic["maxNodes"]:
        return _cel_error(child_path(path, "minNodes"), schema.ELASTIC_MIN_ABOVE_MAX)
    return []


@_twin(schema.TOPOLOGY_BLOCK_LEVELS)
def _topology_block(topology: Spec, path: str) -> Errors:
    if topology.get("plugin") == "block" and len(topology.get("levels") or ()) != 1:
        return _cel_error(child_path(path, "levels"), schema.TOPOLOGY_BLOCK_LEVELS)
    return []


@_twin(schema.PINNED_ONE_PER_NODE)
def _pinned(placement: Spec, path: str) -> Errors:
    if placement.get("pinned") and not placement.get("onePerNode"):
        return _cel_error(child_path(path, "pinned"), schema.PINNED_ONE_PER_NODE)
    return []


@_twin(schema.EVERY_NODE_ALONE)
def _every_node_alone(placement: Spec, path: str) -> Errors:
    if placement.get("everyNode") and (placement.get("onePerNode") or placement.get("pinned")):
        return _cel_error(child_path(path, "everyNode"), schema.EVERY_NODE_ALONE)
    return []


def _every_node(spec: object) -> bool:
    return isinstance(spec, dict) and bool((spec.get("placement") or {}).get("everyNode"))


@_twin(schema.EVERY_NODE_ELASTIC)
def _every_node_elastic(spec: Spec, path: str) -> Errors:
    if "elastic" in spec and _every_node(spec):
        return _cel_error(child_path(child_path(path, "placement"), "everyNode"), schema.EVERY_NODE_ELASTIC)
    return []


@_twin(schema.FEATURE_LABELS_ELASTIC)
def _feature_labels_elastic(spec: Spec, path: str) -> Errors:
    if "elastic" in spec and "featureLabelPrefix" in spec:
        return _cel_error(child_path(path, "featureLabelPrefix"), schema.FEATURE_LABELS_ELASTIC)
    return []


# Transition rules (``self == oldSelf``): judged only on an update, with the stored value.
@_twin(schema.SPOOL_IMMUTABLE)
def _spool_immutable(spool: object, path: str, old: object) -> Errors:
    return [] if spool == old else _cel_error(path, schema.SPOOL_IMMUTABLE)


@_twin(schema.CLUSTER_REF_IMMUTABLE)
def _cluster_ref_immutable(ref: object, path: str, old: object) -> Errors:
    return [] if ref == old else _cel_error(path, schema.CLUSTER_REF_IMMUTABLE)


@_twin(schema.ELASTIC_SWITCH)
def _elastic_switch(spec: Spec, path: str, old: object) -> Errors:
    if isinstance(old, dict) and ("elastic" in spec) != ("elastic" in old):
        return _cel_error(child_path(path, "elastic"), schema.ELASTIC_SWITCH)
    return []


@_twin(schema.EVERY_NODE_SWITCH)
def _every_node_switch(spec: Spec, path: str, old: object) -> Errors:
    if isinstance(old, dict) and _every_node(spec) != _every_node(old):
        return _cel_error(child_path(child_path(path, "placement"), "everyNode"), schema.EVERY_NODE_SWITCH)
    return []


@_twin(schema.ACCOUNTING_RULES["storage_immutable"])
def _database_storage_immutable(accounting: Spec, path: str, old: object) -> Errors:
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
def _external_database(database: Spec, path: str) -> Errors:
    if database.get("type") == "External" and not ("host" in database and "passwordSecretRef" in database):
        return _cel_error(path, schema.ACCOUNTING_RULES["external"])
    return []


@_twin(schema.ACCOUNTING_RULES["external_only"])
def _external_only(database: Spec, path: str) -> Errors:
    if database.get("type") != "External" and any(k in database for k in ("host", "passwordSecretRef", "tls")):
        return _cel_error(path, schema.ACCOUNTING_RULES["external_only"])
    return []


@_twin(schema.NETWORK_PEER_RULE)
def _network_peer(peer: Spec, path: str) -> Errors:
    if ("ipBlock" in peer) == ("podSelector" in peer or "namespaceSelector" in peer):
        return _cel_error(path, schema.NETWORK_PEER_RULE)
    return []


@_twin("healthCheckInterval requires healthCheckProgram")
def _health_check(slurm: Spec, path: str) -> Errors:
    if slurm.get("healthCheckInterval") and "healthCheckProgram" not in slurm:
        return _cel_error(child_path(path, "healthCheckInterval"), "healthCheckInterval requires healthCheckProgram")
    return []


@_twin(schema.HEALTH_EXCLUSIVE_RULE)
def _health_exclusive(spec: Spec, path: str) -> Errors:
    if (spec.get("healthChecks") or {}).get("enabled") and "healthCheckProgram" in (spec.get("slurm") or {}):
        return _cel_error(child_path(child_path(path, "healthChecks"), "enabled"), schema.HEALTH_EXCLUSIVE_RULE)
    return []


@_twin(schema.BACKUP_REPOSITORY_RULE)
def _backup_repository(repository: Spec, path: str) -> Errors:
    if sum(1 for kind in ("s3", "rest", "claim") if kind in repository) != 1:
        return _cel_error(path, schema.BACKUP_REPOSITORY_RULE)
    return []


@_twin(schema.BACKUP_RETENTION_RULE)
def _backup_retention(retention: Spec, path: str) -> Errors:
    if sum(retention.get(k) or 0 for k in ("daily", "weekly", "monthly")) <= 0:
        return _cel_error(path, schema.BACKUP_RETENTION_RULE)
    return []
