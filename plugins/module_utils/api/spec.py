# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate and default SlurmCluster and NodeSet objects, with the field path of every problem: the entry points.

The validator walks the schemas of ``schema.py`` (the ones the CRDs are generated from) like the API server
does (``walk.py``: types, required fields, enums, patterns, bounds, list-type sets; unknown fields are REJECTED, as
the API server does with strict field validation, which kubectl and server-side apply use, never silently pruned).
Each ``x-kubernetes-validations`` CEL rule has a Python twin (``cel.py``), registered under the rule's message, so the
same message comes back whichever side refuses. Then come the rules CEL cannot express well: what a user writes into
Slurm's and sshd's configuration (``config_rules.py``), what the API server would refuse on the rendered objects
(``object_rules.py``), the rules between a SlurmCluster and its NodeSets (here) and the installer's policy
(``policy.py``). All problems are collected into one ``SpecErrors``.

Entry points: :func:`validate_cluster`, :func:`validate_nodeset`, :func:`validate_cluster_with_nodesets`. They
return new, defaulted objects and never mutate their input.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy
import ipaddress
from typing import Callable, Mapping, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import config_rules, identity, object_rules, schema
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import child_path
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import (
    MEMORY_MARGIN_MIN_MIB, every_node, nodeset_size, real_memory_mib,
)
from ansible_collections.soperator.slurm.plugins.module_utils.api.schema import Schema
from ansible_collections.soperator.slurm.plugins.module_utils.api.walk import NO_OLD, apply_defaults, validate_schema
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.version import SLURM
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster, Spec


def _cluster_rules(spec: Spec, errors: Errors) -> None:
    """The SlurmCluster's rules beyond its schema, in this order: what it writes into Slurm's and sshd's
    configuration, then what the API server would refuse on its objects."""
    jail = spec.get("jail") or {}
    login = spec.get("login") or {}
    sub_mounts = config_rules.cluster_rules(spec, errors)
    object_rules.component_rules(spec, errors)
    identity.rules(spec, errors)
    config_rules.health_rules(spec, sub_mounts, errors)
    config_rules.backup_rules(spec, errors)
    object_rules.resources_rules((jail.get("backup") or {}).get("resources"), "spec.jail.backup.resources", errors)
    if "size" in jail:
        object_rules.positive_size(jail["size"], "spec.jail.size", errors)
    object_rules.sub_mount_rules(jail.get("subMounts"), "spec.jail.subMounts", errors)
    controller = spec.get("controller") or {}
    object_rules.positive_size((controller.get("spool") or {}).get("size", 1), "spec.controller.spool.size", errors)
    for part, component in (("controller", controller), ("login", login)):
        object_rules.resources_rules(component.get("resources"), "spec.%s.resources" % part, errors)
        object_rules.placement_rules(component.get("placement"), "spec.%s.placement" % part, errors)
    object_rules.placement_rules(spec.get("placement"), "spec.placement", errors)
    if spec.get("topology") and "TopologyPlugin" in ((spec.get("slurm") or {}).get("slurmConf") or {}):
        errors.append(SpecError("spec.slurm.slurmConf.TopologyPlugin",
                                "spec.topology sets TopologyPlugin: remove it from spec.slurm.slurmConf"))
    ranges = (login.get("service") or {}).get("loadBalancerSourceRanges") or ()
    for index, cidr in enumerate(ranges):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errors.append(SpecError("spec.login.service.loadBalancerSourceRanges[%d]" % index,
                                    "Invalid value: %r: not a CIDR" % cidr))


def _nodeset_rules(spec: Spec, errors: Errors) -> None:
    resources = spec.get("resources") or {}
    gpu = spec.get("gpu") or {}
    for kind in ("requests", "limits"):
        if gpu.get("resourceName") in (resources.get(kind) or {}):
            errors.append(SpecError(child_path("spec.resources.%s" % kind, gpu["resourceName"]),
                                    "set GPUs with spec.gpu.count, not in resources"))
    object_rules.resources_rules(resources, "spec.resources", errors)
    object_rules.placement_rules(spec.get("placement"), "spec.placement", errors)
    try:
        real_memory = real_memory_mib(resources)
    except ValueError:  # not a quantity: the schema walk named it
        real_memory = None
    if real_memory is not None and real_memory < 1:
        errors.append(SpecError("spec.resources", "memory too small for a Slurm node: more than %dMi needed"
                                % MEMORY_MARGIN_MIN_MIB))


# The two schemas the validation walks, built once per process (``schema.py`` builds a fresh copy per call, for
# callers that change it: ``crds``): a constant, only read here. Building one took more CPU than the walk itself.
_SCHEMAS: dict[str, Schema] = {}


def shared_schema(kind: str) -> Schema:
    """The schema of ``kind`` (SlurmCluster or NodeSet) for reading only: the same object on every call."""
    found = _SCHEMAS.get(kind)
    if found is None:
        found = _SCHEMAS[kind] = (schema.slurm_cluster_schema() if kind == names.CLUSTER_KIND
                                  else schema.nodeset_schema())
    return found


def _validate(obj: object, root: Schema, kind: str, rules: Callable[[Spec, Errors], None],
              old: object = None) -> KubeObject:
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
    stored = NO_OLD
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


def validate_cluster(obj: object, collection_version: str = names.COLLECTION_VERSION,
                     old: object = None) -> SlurmCluster:
    """A defaulted copy of the SlurmCluster ``obj``; raises SpecErrors listing every problem.

    Besides the schema defaults, fills ``spec.clusterName`` (metadata.name) and every image (the soperator
    image of ``collection_version``). ``old``: the stored object ``obj`` replaces, for the transition rules.
    """
    result = _validate(obj, shared_schema(names.CLUSTER_KIND), names.CLUSTER_KIND, _cluster_rules, old)
    spec = result["spec"]
    repository_claim = ((spec["jail"].get("backup") or {}).get("repository") or {}).get("claim") or {}
    if repository_claim.get("claimName") == names.jail_claim_name(result["metadata"]["name"]):
        raise SpecErrors([SpecError("spec.jail.backup.repository.claim.claimName", config_rules.BACKUP_INTO_JAIL)])
    spec.setdefault("clusterName", result["metadata"]["name"])
    for component in names.IMAGE_REPOSITORIES:
        spec["images"].setdefault(component, names.default_image(component, collection_version))
    return result


def validate_nodeset(obj: object, old: object = None) -> NodeSet:
    """A defaulted copy of the NodeSet ``obj``; raises SpecErrors listing every problem."""
    return _validate(obj, shared_schema(names.NODESET_KIND), names.NODESET_KIND, _nodeset_rules, old)


def validate_cluster_with_nodesets(cluster: object, nodesets: Sequence[object],
                                   collection_version: str = names.COLLECTION_VERSION,
                                   policy: policies.Policy | None = None, old_cluster: object = None,
                                   old_nodesets: Mapping[str, object] | None = None,
                                   ) -> tuple[SlurmCluster, list[NodeSet]]:
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
            # a name that is no string (refused: metadata.name) has no stored object, and may not be hashable
            checked.append(validate_nodeset(nodeset, old_nodesets.get(label) if isinstance(label, str) else None))
        except SpecErrors as exc:
            errors.extend(SpecError("%s.%s" % (prefix, e.path) if e.path else prefix, e.message)
                          for e in exc.errors)
    if cluster is not None and len(checked) == len(nodesets):
        _cross_rules(cluster, checked, errors)
        if policy is not None:
            errors.extend(policies.check(cluster, checked, policy))
    if errors or cluster is None:  # None: validate_cluster's errors are in errors
        raise SpecErrors(errors)
    return cluster, checked


# slurm.conf keys of power saving the operator writes while a NodeSet is elastic (render/slurm_conf.py), with the
# field to use instead.
POWER_SAVING_KEYS = {
    "ResumeProgram": "the operator's program records Slurm's requests",
    "SuspendProgram": "the operator's program records Slurm's requests",
    "ResumeFailProgram": "the operator's program records Slurm's requests",
    "SuspendExcNodes": "use the NodeSet's spec.elastic.minNodes",
    "SuspendExcStates": "fixed NodeSets are never powered down",
    "SuspendTime": "use spec.slurm.powerSaving.suspendTime",
    "SuspendTimeout": "use spec.slurm.powerSaving.suspendTimeout",
    "ResumeTimeout": "use spec.slurm.powerSaving.resumeTimeout",
}


def _power_saving_rules(spec: Spec, nodesets: Sequence[NodeSet]) -> Errors:
    """With an elastic NodeSet, power saving is the operator's: a raw override of its keys is refused."""
    sets = [ns["metadata"]["name"] for ns in nodesets if nodeset_size(ns["spec"]) and ns["spec"].get("elastic")]
    if not sets:
        return []
    raw = spec["slurm"].get("slurmConf") or {}
    return [SpecError("spec.slurm.slurmConf.%s" % key, "%s is owned by the operator while a NodeSet is elastic (%s): "
                      "%s" % (key, ", ".join(sets), POWER_SAVING_KEYS[key]))
            for key in sorted(raw) if key in POWER_SAVING_KEYS]


def _block_topology_rules(spec: Spec, nodesets: Sequence[NodeSet]) -> Errors:
    """topology/block only with fixed node names: every NodeSet elastic. A worker of a fixed-replica or every-node
    NodeSet is a dynamic node (slurmd -Z), unknown to slurmctld until it registers; slurmctld sizes its blocks at start
    and at every reconfigure from the nodes it knows, and exits ('fatal: Block not contains any nodes') when the
    first block holds none (``SLURM.block_needs_known_nodes``, slurm/version.py). An elastic NodeSet's names are
    NodeName records of slurm.conf from the start, so its blocks always hold nodes."""
    if (spec.get("topology") or {}).get("plugin") != "block" or not SLURM.block_needs_known_nodes:
        return []
    dynamic = ["%s (%s)" % (ns["metadata"]["name"], "everyNode" if every_node(ns["spec"]) else "replicas")
               for ns in nodesets if not ns["spec"].get("elastic")]
    if not dynamic:
        return []
    return [SpecError("spec.topology.plugin", "block needs fixed node names, i.e. every NodeSet elastic "
                      "(spec.elastic): NodeSet %s has dynamic workers, which slurmctld %s cannot hold in a block "
                      "before they register (it exits at start: 'Block not contains any nodes'); use tree, or make "
                      "these NodeSets elastic" % (", ".join(dynamic), SLURM.name))]


def _cross_rules(cluster: SlurmCluster, nodesets: Sequence[NodeSet], errors: Errors) -> None:
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
        total += nodeset_size(nodeset["spec"])
    errors.extend(_power_saving_rules(spec, nodesets))
    errors.extend(_block_topology_rules(spec, nodesets))
    if total > spec["slurm"]["maxNodeCount"]:
        errors.append(SpecError("spec.slurm.maxNodeCount", "total NodeSet replicas and elastic maxNodes (%d) exceed "
                                "maxNodeCount (%d)" % (total, spec["slurm"]["maxNodeCount"])))
