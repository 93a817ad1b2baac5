# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node health: the settings of the worker image's health programs (one ConfigMap, a JSON file per NodeSet and one for
the NCCL check) and the NCCL check's CronJob.

The files are data the programs read (``images/worker/soperator_health.py``): built here from validated fields,
serialized as JSON, never evaluated by a shell. A ConfigMap rather than pod environment: slurmd runs its
HealthCheckProgram with an empty environment, and a changed threshold reaches the mounted file without replacing a pod.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json
from typing import Any, Dict, Iterable, List, TypedDict

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    config_map,
    run_mount,
    security,
)
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import health_enabled, real_memory_mib
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, Spec

# The NCCL check pod's host name: slurmctld calls srun back by the name srun reports, which the pod's headless Service
# (and the controller's DNS searches) resolve. One at a time (concurrencyPolicy Forbid), so one name serves.
NCCL_HOSTNAME = "nccl-check"

# The NCCL check runs as SlurmUser (slurm), not root: Slurm's super user besides root, so it may drain nodes; not
# root, so its test jobs pass DisableRootJobs and it cannot write over the jail's files (only its results directory,
# which the jail image gives to slurm). No capability: it only talks to slurmctld through munge.
NCCL_CAPABILITIES: list[str] = []

_GPU_KEYS = ("persistenceMode", "maxUncorrectedEccErrors", "maxRetiredPages", "maxRemappedRows", "xids",
             "maxXidEvents", "dcgmDiagLevel")


class NodeSetHealth(TypedDict):
    """What the health program checks on the nodes of one NodeSet (:func:`nodeset_health`): the file
    ``<nodeset>.json`` of the ConfigMap, which images/worker/soperator_health.py reads on each of them."""

    enabled: bool  # whether it checks at all (the cluster's health program runs and the NodeSet's checks are on)
    checks: Dict[str, Any]  # each check's settings: munge, jail, disks, memory; gpu and dcgm on a NodeSet with GPUs


class NcclNodeSet(TypedDict):
    """A NodeSet the NCCL check tests (:class:`NcclSettings`' nodesets)."""

    gpus: int  # spec.gpu.count
    minBusBandwidthGBps: int  # spec.healthChecks.ncclMinBusBandwidthGBps: a node under it is drained


class _NcclSettings(TypedDict):
    command: str
    args: List[str]  # all_reduce_perf's: -b minBytes -e maxBytes -f 2
    pairs: bool
    mpi: str
    gres: bool
    timeLimitMinutes: int
    resultsDir: str  # where it writes its results: in the jail, as the pod mounts it
    nodesets: Dict[str, NcclNodeSet]  # by NodeSet name


class NcclSettings(_NcclSettings, total=False):
    """The NCCL check's settings (:func:`nccl_settings`: spec.healthChecks.nccl and the NodeSets it tests), the file
    names.NCCL_CONFIG_FILE of the ConfigMap, which the check's CronJob reads (images/worker/soperator_health.py)."""

    partition: str  # of the test jobs; absent: the cluster's default partition


def gpu_settings(cluster_spec: Spec, nodeset_spec: Spec) -> dict[str, Any]:
    """The cluster's GPU thresholds with the NodeSet's on top."""
    merged = dict((k, cluster_spec["healthChecks"]["gpu"][k]) for k in _GPU_KEYS)
    merged.update((k, v) for k, v in ((nodeset_spec.get("healthChecks") or {}).get("gpu") or {}).items()
                  if k in _GPU_KEYS)
    return merged


def nodeset_health(cluster_spec: Spec, nodeset: NodeSet) -> NodeSetHealth:
    """What the health program checks on the nodes of ``nodeset`` (the file it reads)."""
    health = cluster_spec["healthChecks"]
    spec = nodeset["spec"]
    checks: dict[str, Any] = {
        "munge": True,
        "jail": {"path": names.JAIL_MOUNT, "requireMount": True},
        "disks": [{"path": names.SLURMD_SPOOL, "minFreeMiB": health["minFreeSpoolMiB"]},
                  {"path": "/tmp", "minFreeMiB": health["minFreeTmpMiB"]}],
        "memory": {"minTotalMiB": real_memory_mib(spec.get("resources")) or 0,
                   "minAvailableMiB": health["minAvailableMemoryMiB"]},
    }
    if spec["gpu"]["count"]:
        gpu = gpu_settings(cluster_spec, spec)
        checks["gpu"] = dict((k, gpu[k]) for k in _GPU_KEYS if k != "dcgmDiagLevel")
        checks["gpu"]["count"] = spec["gpu"]["count"]
        if gpu["dcgmDiagLevel"]:
            checks["dcgm"] = {"level": gpu["dcgmDiagLevel"]}
    enabled = health_enabled(cluster_spec) and spec["healthChecks"]["enabled"]
    return {"enabled": enabled, "checks": checks}


def nccl_sets(nodesets: Iterable[NodeSet]) -> list[NodeSet]:
    """NodeSets the NCCL check tests: GPUs and a bus bandwidth threshold."""
    return [ns for ns in nodesets if ns["spec"]["gpu"]["count"]
            and ns["spec"]["healthChecks"].get("ncclMinBusBandwidthGBps")]


def nccl_settings(cluster_spec: Spec, nodesets: Iterable[NodeSet]) -> NcclSettings:
    nccl = cluster_spec["healthChecks"]["nccl"]
    settings: NcclSettings = {
        "command": nccl["command"], "args": ["-b", nccl["minBytes"], "-e", nccl["maxBytes"], "-f", "2"],
        "pairs": nccl["pairs"], "mpi": nccl["mpi"], "gres": True, "timeLimitMinutes": nccl["timeLimitMinutes"],
        "resultsDir": names.JAIL_MOUNT + names.NCCL_RESULTS_DIR,
        "nodesets": dict((ns["metadata"]["name"], {"gpus": ns["spec"]["gpu"]["count"],
                                                   "minBusBandwidthGBps": ns["spec"]["healthChecks"][
                                                       "ncclMinBusBandwidthGBps"]})
                         for ns in nccl_sets(nodesets)),
    }
    if nccl.get("partition"):
        settings["partition"] = nccl["partition"]
    return settings


def _json(data: object) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def health_config(c: ClusterContext) -> KubeObject:
    data = dict(("%s.json" % ns["metadata"]["name"], _json(nodeset_health(c.spec, ns))) for ns in c.nodesets)
    data[names.NCCL_CONFIG_FILE] = _json(nccl_settings(c.spec, c.nodesets))
    return config_map(c, names.health_config_name(c.name), data)


def worker_health_volume(c: ClusterContext, nodeset: NodeSet) -> tuple[KubeObject, KubeObject]:
    """The worker's own file of the ConfigMap, at the path the program reads."""
    volume = {"name": "health-checks", "configMap": {
        "name": names.health_config_name(c.name),
        "items": [{"key": "%s.json" % nodeset["metadata"]["name"], "path": names.HEALTH_CONFIG_FILE}]}}
    return volume, {"name": "health-checks", "mountPath": names.HEALTH_CONFIG_MOUNT, "readOnly": True}


def nccl_enabled(c: ClusterContext) -> bool:
    nccl = c.spec["healthChecks"]["nccl"]
    return bool(nccl.get("schedule") and nccl_sets(c.nodesets) and not c.maintenance)


def nccl_service(c: ClusterContext) -> KubeObject | None:
    """The headless Service that gives the NCCL check pod a DNS name (srun's callbacks), or None."""
    if not nccl_enabled(c):
        return None
    name = names.nccl_check_name(c.name)
    return {"apiVersion": "v1", "kind": "Service", "metadata": c.owned(name, names.COMPONENT_HEALTH),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": names.selector_labels(c.name, names.COMPONENT_HEALTH),
                     # A headless Service needs a port to publish its endpoints; srun listens on ephemeral ports.
                     "ports": [{"name": "srun", "port": 6820, "protocol": "TCP"}]}}


def nccl_cronjob(c: ClusterContext) -> KubeObject | None:
    """The NCCL check's CronJob, or None (not scheduled, or no NodeSet with GPUs and a threshold)."""
    nccl = c.spec["healthChecks"]["nccl"]
    if not nccl_enabled(c):
        return None
    image = c.spec["images"]["worker"]
    jail_volumes, jail_mounts = c.jail_volumes(with_sub_mounts=False)
    volumes = jail_volumes + c.munge_volumes() + [{"name": "health-checks", "configMap": {
        "name": names.health_config_name(c.name),
        "items": [{"key": names.NCCL_CONFIG_FILE, "path": names.NCCL_CONFIG_FILE}]}}]
    container = {
        "name": "nccl-check",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "args": [names.NCCL_CHECK_PROGRAM, names.HEALTH_CONFIG_MOUNT + "/" + names.NCCL_CONFIG_FILE],
        # Configless clients: srun and scontrol fetch the configuration from slurmctld.
        "env": [{"name": "SLURM_CONF_SERVER", "value": c.conf_server}],
        "volumeMounts": jail_mounts + [run_mount("munge-run", names.MUNGE_RUN_DIR),
                                       {"name": "health-checks", "mountPath": names.HEALTH_CONFIG_MOUNT,
                                        "readOnly": True}],
        "securityContext": dict(security(NCCL_CAPABILITIES, RUNTIME_DEFAULT), runAsUser=names.SLURM_UID,
                                runAsGroup=names.SLURM_UID, runAsNonRoot=True),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }
    pod = c.pod_spec(None, [container], volumes, init_containers=[c.munge_sidecar(image)])
    pod["restartPolicy"] = "Never"
    pod["hostname"], pod["subdomain"] = NCCL_HOSTNAME, names.nccl_check_name(c.name)
    # Each test job has a time limit; the runs are sequential per stage (nodes, pairs, retests).
    deadline = nccl["timeLimitMinutes"] * 60 * 3 + 600
    name = names.nccl_check_name(c.name)
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": c.owned(name, names.COMPONENT_HEALTH),
        "spec": {
            "schedule": nccl["schedule"],
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "metadata": {"labels": names.labels(c.name, names.COMPONENT_HEALTH)},
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": deadline,
                         "template": {"metadata": {"labels": names.labels(c.name, names.COMPONENT_HEALTH)},
                                      "spec": pod}},
            },
        },
    }
