# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The login nodes: sshd's StatefulSet (sessions chrooted into the jail), its Services."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as directory
from ansible_collections.soperator.slurm.plugins.module_utils.render.accounting import non_root
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    config_hash,
    container_resources,
    run_mount,
    security,
    statefulset,
    tcp_probe,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

LOGIN_CAPABILITIES = [
    "AUDIT_WRITE",  # sshd writes login audit records; without it, logins fail
    "CHOWN",  # the session's pty is given to the user
    "DAC_OVERRIDE",  # root's sessions in the jail administer users' files (sshd reads keys as the user)
    "FOWNER",
    "KILL",  # root's sessions may signal users' processes on the login node
    "NET_BIND_SERVICE",  # listens on port 22
    "SETGID",  # the session runs as the user
    "SETUID",
    "SETPCAP",  # only the entrypoint: it removes SYS_ADMIN and SETPCAP from the bounding set before sshd
    # The entrypoint bind-mounts /dev, /proc, /sys and the Slurm clients into the jail for sessions; it then
    # removes SYS_ADMIN from the bounding set before exec'ing sshd, so no session can ever hold it.
    "SYS_ADMIN",
    "SYS_CHROOT",  # ChrootDirectory: every session lands in the jail
]
# What sshd and every session keep: the login entrypoint drops the rest before it execs sshd.
LOGIN_ENTRYPOINT_ONLY_CAPABILITIES = ["SETPCAP", "SYS_ADMIN"]
LOGIN_SESSION_CAPABILITIES = [c for c in LOGIN_CAPABILITIES if c not in LOGIN_ENTRYPOINT_ONLY_CAPABILITIES]
# The configuration sackd fetched (configless), which the jail's /etc/slurm links to: sessions' clients read it there.
SACKD_SLURM_CONF = names.SLURM_RUN_DIR + "/conf/slurm.conf"
# sackd has it within 10 s of slurmctld answering (it retries its fetch every 10 s, and on a fresh start it empties
# the directory first); sshd waits for it as long as the login entrypoint waits for the jail.
SACKD_STARTUP_SECONDS = 1800


def login_service(c: ClusterContext) -> KubeObject:
    service = c.spec["login"]["service"]
    port = {"name": "ssh", "port": service["port"], "targetPort": "ssh", "protocol": "TCP"}
    if "nodePort" in service:
        port["nodePort"] = service["nodePort"]
    spec = {"type": service["type"], "selector": names.selector_labels(c.name, names.COMPONENT_LOGIN),
            "ports": [port]}
    if service.get("loadBalancerSourceRanges"):
        spec["loadBalancerSourceRanges"] = list(service["loadBalancerSourceRanges"])
    return {"apiVersion": "v1", "kind": "Service", "metadata": c.owned(names.login_name(c.name), names.COMPONENT_LOGIN),
            "spec": spec}


def sackd_security(slurm_user: str) -> KubeObject:
    """sackd runs as SlurmUser, as Slurm intends: slurmctld pushes each new configuration to it with a credential
    only SlurmUser may decode (munge refused it to a root sackd: "Unauthorized credential for client UID=0", and the
    login's clients kept the old slurm.conf until the pod restarted). A cluster whose SlurmUser is still root (made
    by an earlier release, see plan/maintenance.py) keeps a root sackd: its template does not change."""
    if slurm_user == names.SLURM_USER_BEFORE_ANNOTATION:
        return security([], RUNTIME_DEFAULT)
    return non_root(names.SLURM_UID, read_only=True)


def login(c: ClusterContext, sshd_config: Mapping[str, str], slurm_user: str = names.SLURM_USER) -> KubeObject:
    spec = c.spec["login"]
    image = c.spec["images"]["login"]
    jail_volumes, jail_mounts = c.jail_volumes()
    volumes = jail_volumes + c.munge_volumes() + [
        {"name": "slurm-run", "emptyDir": {}},
        {"name": "ssh-host-keys", "secret": {"secretName": names.ssh_host_keys_name(c.name), "defaultMode": 0o400}},
        {"name": "sshd-config", "configMap": {"name": names.sshd_config_name(c.name)}},
    ]
    sackd = {
        # sackd fetches the configuration (configless) for the client commands of jailed sessions.
        "name": "sackd",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "restartPolicy": "Always",
        "args": ["/usr/sbin/sackd", "-D", "--conf-server", "$(SLURM_CONF_SERVER)"],
        "env": [{"name": "SLURM_CONF_SERVER", "value": c.conf_server}],
        "volumeMounts": [{"name": "munge-run", "mountPath": names.MUNGE_RUN_DIR},
                         {"name": "slurm-run", "mountPath": names.SLURM_RUN_DIR}],
        "securityContext": sackd_security(slurm_user),
        # sshd (a main container) starts once sackd has the configuration, so the pod is never Ready, and no session
        # opens, while the jail's /etc/slurm leads nowhere: clients there would find no slurm.conf and fail with
        # "Could not establish a configuration source" (the cold e2e's sbatch, while sackd waited out its retry).
        "startupProbe": {"exec": {"command": ["test", "-s", SACKD_SLURM_CONF]}, "periodSeconds": 1,
                         "failureThreshold": SACKD_STARTUP_SECONDS},
    }
    sshd = {
        "name": "sshd",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "args": ["/usr/sbin/sshd", "-D", "-e", "-f", names.SSHD_CONFIG_MOUNT + "/sshd_config"],
        "env": [{"name": "SLURM_CONF_SERVER", "value": c.conf_server}] + c.jail_sub_mounts_env(),
        "ports": [{"name": "ssh", "containerPort": names.SSH_PORT, "protocol": "TCP"}],
        "readinessProbe": tcp_probe("ssh"),
        "volumeMounts": jail_mounts + [
            {"name": "ssh-host-keys", "mountPath": names.SSH_HOST_KEYS_MOUNT, "readOnly": True},
            {"name": "sshd-config", "mountPath": names.SSHD_CONFIG_MOUNT, "readOnly": True},
            run_mount("munge-run", names.MUNGE_RUN_DIR), run_mount("slurm-run", names.SLURM_RUN_DIR),
        ],
        # Sessions may use setuid programs of the jail (sudo): privilege escalation stays allowed. The runtime's
        # default AppArmor profile denies mount (the entrypoint's binds); seccomp RuntimeDefault allows them.
        "securityContext": security(LOGIN_CAPABILITIES, RUNTIME_DEFAULT, escalation=True),
    }
    sshd["securityContext"]["appArmorProfile"] = {"type": "Unconfined"}
    resources = container_resources(spec.get("resources"))
    if resources:
        sshd["resources"] = resources
    pod = c.pod_spec(spec.get("placement"), [sshd], volumes, init_containers=[c.munge_sidecar(image), sackd])
    directory.attach(c, pod, sshd, login=True)
    name = names.login_name(c.name)
    return statefulset(c, name, names.COMPONENT_LOGIN, spec["replicas"], names.login_headless_name(c.name), pod,
                       annotations={names.ANNOTATION_CONFIG_HASH: config_hash(sshd_config)},
                       # OnDelete: the converge plan replaces each outdated login pod once its sessions ended
                       # (or its grace period is over), one at a time.
                       extra={"podManagementPolicy": "Parallel", "updateStrategy": {"type": "OnDelete"}})
