# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller: slurmctld's StatefulSet (its spool on a claim template) with the munge sidecar."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as directory
from ansible_collections.soperator.slurm.plugins.module_utils.render.health import nccl_enabled
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    config_hash,
    container_resources,
    security,
    statefulset,
    tcp_probe,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

CONTROLLER_CAPABILITIES = [
    "CHOWN",  # the spool volume is handed to SlurmUser on first start
    "FOWNER",  # state files keep their modes across restarts
    "SETGID",  # slurmctld drops from root to SlurmUser
    "SETUID",
]


# Files slurmctld rereads at `scontrol reconfigure` (the converge asks for one): no restart when they change.
RECONFIGURE_FILES = ("topology.conf",)


def restart_files(slurm_config: Mapping[str, str]) -> dict[str, str]:
    """What restarts slurmctld when it changes (its pod template's config hash): of slurm.conf only the lines of the
    keys Slurm documents as needing a restart (config_keys.RESTART_KEYS; the rest is applied in place by the
    converge's reconfigure, plan/slurm_config.py), the other files but RECONFIGURE_FILES whole."""
    files = dict((k, v) for k, v in slurm_config.items() if k not in RECONFIGURE_FILES)
    if "slurm.conf" in files:
        files["slurm.conf"] = config_keys.restart_lines(files["slurm.conf"])
    return files


def restart_digest(slurm_config: Mapping[str, str]) -> str:
    return config_hash(restart_files(slurm_config))


def controller(c: ClusterContext, slurm_config: Mapping[str, str], slurm_user: str = names.SLURM_USER) -> KubeObject:
    spec = c.spec["controller"]
    image = c.spec["images"]["controller"]
    jail_volumes = c.jail_volumes(with_sub_mounts=False)[0]
    volumes = ([{"name": "slurm-config", "configMap": {"name": names.slurm_config_name(c.name)}}] + c.munge_volumes()
               + jail_volumes)
    mounts: list[KubeObject] = []
    if c.spec["restApi"]["enabled"]:
        volumes.append(c.jwt_volume())
        mounts.append({"name": "jwt-key", "mountPath": names.JWT_KEY_MOUNT, "readOnly": True})
    container = {
        "name": "slurmctld",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        # The entrypoint runs `scontrol reconfigure` once slurmctld answers, so nodes pick up a changed config.
        # Absolute paths: Slurm daemons re-exec argv[0] on `scontrol reconfigure` (execv, no PATH lookup).
        "args": ["/usr/sbin/slurmctld", "-D"],
        "ports": [{"name": "slurmctld", "containerPort": names.SLURMCTLD_PORT, "protocol": "TCP"}],
        "readinessProbe": tcp_probe("slurmctld"),
        "volumeMounts": [
            {"name": "slurm-config", "mountPath": names.SLURM_CONFIG_DIR, "readOnly": True},
            {"name": names.SPOOL_CLAIM_TEMPLATE, "mountPath": names.SLURMCTLD_SPOOL},
            {"name": "munge-run", "mountPath": names.MUNGE_RUN_DIR},
            # Users exist only in the jail (one set for the cluster): slurmctld resolves job owners from its
            # /etc/passwd and /etc/group, which the entrypoint links to the jail's. Read-only: it never writes there.
            {"name": "jail", "mountPath": names.JAIL_MOUNT, "readOnly": True},
        ] + mounts,
        "securityContext": security(CONTROLLER_CAPABILITIES, RUNTIME_DEFAULT),
    }
    resources = container_resources(spec.get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(spec.get("placement"), [container], volumes, init_containers=[c.munge_sidecar(image)], grace=60)
    directory.attach(c, pod, container, controller=True)
    # slurmctld calls back srun and sbatch by the short host name they report (a login or worker pod's name):
    # searching the pods' headless Services resolves it. Without, each callback spends ~10 failed lookups and a
    # finished job stays COMPLETING for a minute or more.
    services = [names.login_headless_name(c.name)] + ([names.nccl_check_name(c.name)] if nccl_enabled(c) else []) \
        + sorted(names.worker_name(c.name, ns["metadata"]["name"]) for ns in c.nodesets)  # + the NCCL check's srun
    pod["dnsConfig"] = {"searches": ["%s.%s.svc.%s" % (svc, c.namespace, names.CLUSTER_DOMAIN)
                                     for svc in services[:names.MAX_EXTRA_DNS_SEARCHES]]}
    spool = spec["spool"]
    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": spool["size"]}}}
    if spool.get("storageClassName"):
        claim_spec["storageClassName"] = spool["storageClassName"]
    name = names.controller_name(c.name)
    return statefulset(c, name, names.COMPONENT_CONTROLLER, 1, name, pod,
                       annotations={names.ANNOTATION_CONFIG_HASH: restart_digest(slurm_config),
                                    names.ANNOTATION_SLURM_USER: slurm_user},
                       extra={
                           "volumeClaimTemplates": [{
                               "metadata": {"name": names.SPOOL_CLAIM_TEMPLATE,
                                            "labels": names.labels(c.name, names.COMPONENT_CONTROLLER)},
                               "spec": claim_spec}],
                           # The spool holds the job queue: it outlives the StatefulSet (see deletionPolicy.jail).
                           "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                       })
