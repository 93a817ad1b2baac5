# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node health: the settings of the worker image's health programs (one ConfigMap, a JSON file per NodeSet and one for
the NCCL check) and the NCCL check's CronJob.

The files are data the programs read (``images/worker/soperator_health.py``): built here from validated fields,
serialized as JSON, never evaluated by a shell. A ConfigMap rather than pod environment: slurmd runs its
HealthCheckProgram with an empty environment, and a changed threshold reaches the mounted file without replacing a pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    config_map,
    run_mount,
    security,
)
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import health_enabled, real_memory_mib

# The NCCL check pod's host name: slurmctld calls srun back by the name srun reports, which the pod's headless Service
# (and the controller's DNS searches) resolve. One at a time (concurrencyPolicy Forbid), so one name serves.
NCCL_HOSTNAME = "nccl-check"

# The NCCL check runs as SlurmUser (slurm), not root: Slurm's super user besides root, so it may drain nodes; not
# root, so its test jobs pass DisableRootJobs and it cannot write over the jail's files (only its results directory,
# which the jail image gives to slurm). No capability: it only talks to slurmctld through munge.
NCCL_CAPABILITIES = []

_GPU_KEYS = ("persistenceMode", "maxUncorrectedEccErrors", "maxRetiredPages", "maxRemappedRows", "xids",
             "maxXidEvents", "dcgmDiagLevel")


def gpu_settings(cluster_spec, nodeset_spec):
    """The cluster's GPU thresholds with the NodeSet's on top."""
    merged = dict((k, cluster_spec["healthChecks"]["gpu"][k]) for k in _GPU_KEYS)
    merged.update((k, v) for k, v in ((nodeset_spec.get("healthChecks") or {}).get("gpu") or {}).items()
                  if k in _GPU_KEYS)
    return merged


def nodeset_health(cluster_spec, nodeset):
    """What the health program checks on the nodes of ``nodeset`` (the file it reads)."""
    health = cluster_spec["healthChecks"]
    spec = nodeset["spec"]
    checks: dict = {
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


def nccl_sets(nodesets):
    """NodeSets the NCCL check tests: GPUs and a bus bandwidth threshold."""
    return [ns for ns in nodesets if ns["spec"]["gpu"]["count"]
            and ns["spec"]["healthChecks"].get("ncclMinBusBandwidthGBps")]


def nccl_settings(cluster_spec, nodesets):
    nccl = cluster_spec["healthChecks"]["nccl"]
    settings = {
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


def _json(data):
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def health_config(c):
    data = dict(("%s.json" % ns["metadata"]["name"], _json(nodeset_health(c.spec, ns))) for ns in c.nodesets)
    data[names.NCCL_CONFIG_FILE] = _json(nccl_settings(c.spec, c.nodesets))
    return config_map(c, names.health_config_name(c.name), data)


def worker_health_volume(c, nodeset):
    """The worker's own file of the ConfigMap, at the path the program reads."""
    volume = {"name": "health-checks", "configMap": {
        "name": names.health_config_name(c.name),
        "items": [{"key": "%s.json" % nodeset["metadata"]["name"], "path": names.HEALTH_CONFIG_FILE}]}}
    return volume, {"name": "health-checks", "mountPath": names.HEALTH_CONFIG_MOUNT, "readOnly": True}


def nccl_enabled(c):
    nccl = c.spec["healthChecks"]["nccl"]
    return bool(nccl.get("schedule") and nccl_sets(c.nodesets) and not c.maintenance)


def nccl_service(c):
    """The headless Service that gives the NCCL check pod a DNS name (srun's callbacks), or None."""
    if not nccl_enabled(c):
        return None
    name = names.nccl_check_name(c.name)
    return {"apiVersion": "v1", "kind": "Service", "metadata": c.owned(name, names.COMPONENT_HEALTH),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": names.selector_labels(c.name, names.COMPONENT_HEALTH),
                     # A headless Service needs a port to publish its endpoints; srun listens on ephemeral ports.
                     "ports": [{"name": "srun", "port": 6820, "protocol": "TCP"}]}}


def nccl_cronjob(c):
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
