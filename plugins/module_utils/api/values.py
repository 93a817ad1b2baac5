# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a validated, defaulted spec means where more than one part of the collection needs it (the renderers,
the planner, the validator): node sizes for Slurm, the partitions of a NodeSet, whether the shipped health program
runs, how a jail sub-mount is mounted, the Secrets an External database names. Pure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import parse_quantity


# RealMemory of a node = its memory minus this share (at least MEMORY_MARGIN_MIN_MIB) for slurmd, munged and
# the page cache, so the kernel OOM killer never hits the daemons before Slurm's own limits hit the job.
MEMORY_MARGIN_MIN_MIB = 256


MEMORY_MARGIN_FRACTION = 0.05


def health_enabled(cluster_spec):
    """Whether slurmd runs the shipped health program: spec.healthChecks.enabled, else unless the user names a
    HealthCheckProgram of their own."""
    enabled = (cluster_spec.get("healthChecks") or {}).get("enabled")
    if enabled is None:
        return "healthCheckProgram" not in (cluster_spec.get("slurm") or {})
    return bool(enabled)


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


def nodeset_partitions(cluster_spec, nodeset_spec):
    """The partitions a (defaulted) NodeSet joins: its own list, else the cluster's default partition."""
    if nodeset_spec.get("partitions"):
        return list(nodeset_spec["partitions"])
    return [p["name"] for p in cluster_spec["partitions"] if p["default"]]
