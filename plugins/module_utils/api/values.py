# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a validated, defaulted spec means where more than one part of the collection needs it (the renderers,
the planner, the validator): node sizes for Slurm, the partitions of a NodeSet, whether the shipped health program
runs, how a jail sub-mount is mounted, the Secrets an External database and the backups name. Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Callable, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps
from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import parse_quantity
from ansible_collections.soperator.slurm.plugins.module_utils.types import Spec


# RealMemory of a node = its memory minus this share (at least MEMORY_MARGIN_MIN_MIB) for slurmd, munged and
# the page cache, so the kernel OOM killer never hits the daemons before Slurm's own limits hit the job.
MEMORY_MARGIN_MIN_MIB = 256


MEMORY_MARGIN_FRACTION = 0.05

# (field path, Secret name) of a Secret a SlurmCluster names.
SecretRef = Tuple[str, str]


def health_enabled(cluster_spec: Spec) -> bool:
    """Whether slurmd runs the shipped health program: spec.healthChecks.enabled, else unless the user names a
    HealthCheckProgram of their own."""
    enabled = (cluster_spec.get("healthChecks") or {}).get("enabled")
    if enabled is None:
        return "healthCheckProgram" not in (cluster_spec.get("slurm") or {})
    return bool(enabled)


# An emptyDir sub-mount's directory unless jail.subMounts[].mode says otherwise: root's, not writable by users.
EMPTY_DIR_MODE = "0755"


def sub_mount_read_only(sub: Spec) -> bool:
    """Whether a jail sub-mount is mounted read-only: as asked, else true for a node's directory (a writable
    hostPath is the node's disk under every job's root), false for the other sources."""
    return bool(sub.get("readOnly", "hostPath" in sub))


def memory_mib(resources: Spec | None) -> int | None:
    """Memory of a container in MiB (limit, else request), or None when neither is set."""
    for kind in ("limits", "requests"):
        value = ((resources or {}).get(kind) or {}).get("memory")
        if value is not None:
            return int(parse_quantity(value) / 2 ** 20)
    return None


def real_memory_mib(resources: Spec | None) -> int | None:
    """Slurm RealMemory of a node: its memory minus the safety margin; None when no memory is set."""
    total = memory_mib(resources)
    if total is None:
        return None
    return total - max(MEMORY_MARGIN_MIN_MIB, int(total * MEMORY_MARGIN_FRACTION))


def cpu_count(resources: Spec | None) -> int | None:
    """Slurm CPUs of a node: whole CPUs of the limit, else of the request (at least 1); None when unset."""
    for kind in ("limits", "requests"):
        value = ((resources or {}).get(kind) or {}).get("cpu")
        if value is not None:
            return max(1, int(parse_quantity(value)))
    return None


def database_secret_refs(cluster_spec: Spec | None) -> list[SecretRef]:
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


def backup_secret_refs(cluster_spec: Spec | None) -> list[SecretRef]:
    """``(field, Secret name)`` of the Secrets the jail's backups take: the repository's password, which opens every
    snapshot, and the credentials the backup pods send to the repository's endpoint."""
    backup = ((cluster_spec or {}).get("jail") or {}).get("backup") or {}
    if not backup:
        return []
    path = "spec.jail.backup"
    repository = backup.get("repository") or {}
    refs = [(path + ".passwordSecretRef.name", (backup.get("passwordSecretRef") or {}).get("name"))]
    for kind in ("s3", "rest"):
        refs.append(("%s.repository.%s.credentialsSecretRef.name" % (path, kind),
                     ((repository.get(kind) or {}).get("credentialsSecretRef") or {}).get("name")))
    return [(field, name) for field, name in refs if isinstance(name, str) and name]


def identity_secret_refs(cluster_spec: Spec | None) -> list[SecretRef]:
    """``(field, Secret name)`` of the Secrets a directory takes (spec.identity.ldap): the bind password, which sssd
    sends to the directory the SlurmCluster names, and the CA it trusts."""
    ldap = ((cluster_spec or {}).get("identity") or {}).get("ldap") or {}
    path = "spec.identity.ldap"
    refs = [(path + ".bindPasswordSecretRef.name", (ldap.get("bindPasswordSecretRef") or {}).get("name")),
            (path + ".tls.caSecretRef.name", ((ldap.get("tls") or {}).get("caSecretRef") or {}).get("name"))]
    return [(field, name) for field, name in refs if isinstance(name, str) and name]


def registry_secret_refs(cluster_spec: Spec | None) -> list[SecretRef]:
    """``(field, Secret name)`` of the registries' credentials container steps pull with (spec.containers), which
    every worker sends to the registries jobs name."""
    containers = (cluster_spec or {}).get("containers") or {}
    name = (containers.get("pullSecretRef") or {}).get("name")
    if containers.get("enabled") is not True or not isinstance(name, str) or not name:
        return []
    return [("spec.containers.pullSecretRef.name", name)]


# Each kind of Secret a cluster takes only when its owner marked it for the cluster, with the label that marks it.
_MARKED: tuple[tuple[Callable[[Spec | None], list[SecretRef]], str], ...] = (
    (database_secret_refs, names.LABEL_DATABASE_SECRET), (backup_secret_refs, names.LABEL_BACKUP_SECRET),
    (identity_secret_refs, names.LABEL_IDENTITY_SECRET), (registry_secret_refs, container_steps.LABEL_REGISTRY_SECRET))


def marked_secret_refs(cluster_spec: Spec | None) -> list[tuple[str, str, str]]:
    """``(field, Secret name, label)`` of every Secret a cluster takes only when its owner marked it for the cluster
    with ``label`` (value: the cluster's name): an External database's, the backups', a directory's, the container
    registries'."""
    return [(field, secret, label) for refs, label in _MARKED for field, secret in refs(cluster_spec)]


def nodeset_partitions(cluster_spec: Spec, nodeset_spec: Spec) -> list[str]:
    """The partitions a (defaulted) NodeSet joins: its own list, else the cluster's default partition."""
    if nodeset_spec.get("partitions"):
        return list(nodeset_spec["partitions"])
    return [p["name"] for p in cluster_spec["partitions"] if p["default"]]


# How a NodeSet's workers exist (its mode): one owner of the classification, which plan/modes.py gives behaviour.
FIXED = "fixed"            # a StatefulSet of spec.replicas
ELASTIC = "elastic"        # Slurm's power saving decides which of spec.elastic.maxNodes run (a pod each)
EVERY_NODE = "every-node"  # one worker on every matching Kubernetes node (spec.placement.everyNode)


def mode(nodeset_spec: Spec) -> str:
    """The NodeSet's mode: :data:`ELASTIC`, :data:`EVERY_NODE` or :data:`FIXED` (validation refuses an elastic
    every-node set; an elastic spec wins here all the same)."""
    if elastic(nodeset_spec):
        return ELASTIC
    return EVERY_NODE if every_node(nodeset_spec) else FIXED


def elastic(nodeset_spec: Spec) -> bool:
    """Whether Slurm's power saving decides which nodes of this NodeSet run (spec.elastic)."""
    return bool(nodeset_spec.get("elastic"))


def every_node(nodeset_spec: Spec) -> bool:
    """Whether the NodeSet has one worker on every matching Kubernetes node (spec.placement.everyNode)."""
    return bool((nodeset_spec.get("placement") or {}).get("everyNode"))


def nodeset_size(nodeset_spec: Spec) -> int:
    """How many Slurm node names the NodeSet may take: its replicas, or an elastic set's maxNodes; an every-node set's
    depend on the Kubernetes nodes (0 here: plan/every_node.py keeps them within what maxNodeCount leaves)."""
    if every_node(nodeset_spec):
        return 0
    if elastic(nodeset_spec):
        return int(nodeset_spec["elastic"]["maxNodes"])
    return int(nodeset_spec.get("replicas", 1))
