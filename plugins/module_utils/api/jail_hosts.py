# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each SlurmCluster's jail as an Ansible host (the inventory plugin soperator.slurm.jails): its name, its groups and
its variables, from the SlurmCluster and its NodeSets as stored (the API server has defaulted them). Pure.

Host ``<namespace>/<cluster>``; groups ``jails`` (every one), ``namespace_<namespace>`` and ``label_<key>_<value>``
for each label of the SlurmCluster (characters other than letters, digits and ``_`` made ``_``, as Ansible's own
group names want); variables ``soperator_*`` (below) and the connection: ``soperator.slurm.jail`` with the jail's own
Python.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Any, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import readiness
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import jail_shell
from ansible_collections.soperator.slurm.plugins.module_utils.types import NodeSet, SlurmCluster, Spec

CONNECTION = "soperator.slurm.jail"
JAIL_PYTHON = "/usr/bin/python3"  # the jail image's (Debian's python3); a jail of another image says its own
ALL_GROUP = "jails"
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def group_name(*parts: object) -> str:
    """An Ansible group name from ``parts`` joined by ``_``: anything but letters, digits and ``_`` made ``_``."""
    return _UNSAFE.sub("_", "_".join(str(p) for p in parts))


def groups(cluster: SlurmCluster) -> list[str]:
    """The groups of a SlurmCluster's jail: every jail's, its namespace's, one per label of the SlurmCluster."""
    md = cluster.get("metadata") or {}
    found = [ALL_GROUP, group_name("namespace", md.get("namespace"))]
    found += [group_name("label", key, value) for key, value in sorted((md.get("labels") or {}).items())]
    return found


def _partitions(spec: Spec) -> list[Spec]:
    return [p for p in spec.get("partitions") or [{"name": "main", "default": True}] if p.get("name")]


def nodeset_partitions(spec: Spec, nodeset_spec: Spec) -> list[str]:
    """The partitions a NodeSet joins (its own list, else the cluster's default partition)."""
    if nodeset_spec.get("partitions"):
        return list(nodeset_spec["partitions"])
    return [p["name"] for p in _partitions(spec) if p.get("default")]


def host_vars(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
              slurm_version: str | None = None) -> dict[str, Any]:
    """The variables of a SlurmCluster's jail, from the SlurmCluster, its NodeSets (those whose clusterRef names it
    are kept) and the Slurm version its login pods carry (None: unknown)."""
    md = cluster.get("metadata") or {}
    spec = cluster.get("spec") or {}
    status = cluster.get("status") or {}
    name = md.get("name")
    mine = sorted((ns for ns in nodesets if ((ns.get("spec") or {}).get("clusterRef") or {}).get("name") == name),
                  key=lambda ns: ns["metadata"]["name"])
    sets: list[dict[str, Any]] = []
    for ns in mine:
        ns_spec = ns.get("spec") or {}
        ns_status = ns.get("status") or {}
        gpu = ns_spec.get("gpu") or {}
        sets.append({"name": ns["metadata"]["name"], "replicas": ns_spec.get("replicas"),
                     "partitions": nodeset_partitions(spec, ns_spec), "gpus": int(gpu.get("count") or 0),
                     "gpu_type": gpu.get("type"), "elastic": bool(ns_spec.get("elastic")),
                     "ready_replicas": ns_status.get("readyReplicas")})
    partitions = [{"name": p["name"], "default": bool(p.get("default")),
                   "nodesets": [s["name"] for s in sets if p["name"] in s["partitions"]]} for p in _partitions(spec)]
    return {
        "ansible_connection": CONNECTION,
        "ansible_python_interpreter": JAIL_PYTHON,
        "soperator_cluster": name,
        "soperator_namespace": md.get("namespace"),
        "soperator_jail": jail_shell.host_name(str(md.get("namespace")), str(name)),
        "soperator_labels": dict(md.get("labels") or {}),
        "soperator_slurm_version": slurm_version,
        "soperator_partitions": partitions,
        "soperator_nodesets": sets,
        "soperator_gpu_nodesets": [s["name"] for s in sets if s["gpus"]],
        # What was asked (spec.maintenance) and what is (status.phase Maintenance: no pod of the cluster runs).
        "soperator_maintenance": bool(spec.get("maintenance")),
        "soperator_phase": status.get("phase"),
        "soperator_ready": readiness.ready(cluster),
    }


def slurm_version(text: str | None) -> str | None:
    """The Slurm version in paths.SLURM_VERSION_FILE's text (Debian's package version, e.g. 24.11.5-4+deb13u1):
    the upstream part (24.11.5); None when there is none."""
    found = re.match(r"\s*(?:[0-9]+:)?([0-9]+(?:\.[0-9]+)+)", text or "")
    return found.group(1) if found else None
