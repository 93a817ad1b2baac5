# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmrestd, Slurm's REST API: its StatefulSet and Service, and the JWT key Secret.

Tokens only (``rest_auth/jwt``): every request carries a user's token, which slurmrestd hands to slurmctld (and
slurmdbd) as that user's credential; a request without one is refused (401). slurmrestd itself needs neither the
munge key nor the JWT key (only slurmctld and slurmdbd verify tokens), and it runs as its own unprivileged user,
which Slurm requires (it refuses root and SlurmUser).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as directory
from ansible_collections.soperator.slurm.plugins.module_utils.render.accounting import non_root
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    ClusterContext,
    config_hash,
    container_resources,
    statefulset,
    tcp_probe,
)
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.config_keys import restart_lines
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


def rest_service(c: ClusterContext) -> KubeObject:
    service = c.spec["restApi"]["service"]
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": c.owned(names.rest_name(c.name), names.COMPONENT_REST),
        "spec": {"type": service["type"], "selector": names.selector_labels(c.name, names.COMPONENT_REST),
                 "ports": [{"name": "http", "port": service["port"], "targetPort": "http", "protocol": "TCP"}]},
    }


def slurmrestd(c: ClusterContext, slurm_config: str) -> KubeObject:
    """slurmrestd's StatefulSet; ``slurm_config``: the slurm.conf rendered."""
    spec = c.spec["restApi"]
    plugins = ["openapi/slurmctld"] + (["openapi/slurmdbd"] if c.spec["accounting"]["enabled"] else [])
    container = {
        "name": "slurmrestd",
        "image": c.spec["images"]["slurmrestd"],
        "imagePullPolicy": c.pull_policy,
        "args": ["/usr/sbin/slurmrestd", "-a", "rest_auth/jwt", "-s", ",".join(plugins),
                 "0.0.0.0:%d" % names.SLURMRESTD_PORT],
        # SLURM_JWT=daemon: slurmrestd's own traffic uses auth/jwt too, so it needs no munge key at all (measured:
        # without it, slurmrestd dies at start when no munge socket is there).
        "env": [{"name": "SLURM_CONF", "value": names.SLURM_CONFIG_DIR + "/slurm.conf"},
                {"name": "SLURM_JWT", "value": "daemon"},
                # slurmrestd unshares its System V IPC namespace and its file table at start; the RuntimeDefault
                # seccomp profile refuses unshare() without CAP_SYS_ADMIN (measured in the pod: "Unable to unshare
                # System V namespace / file descriptors: Operation not permitted"). The container already has an
                # IPC namespace of its own and slurmrestd starts no child, so skipping both loses nothing.
                {"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_sysv,disable_unshare_files"}],
        "ports": [{"name": "http", "containerPort": names.SLURMRESTD_PORT, "protocol": "TCP"}],
        "readinessProbe": tcp_probe("http"),
        "volumeMounts": [{"name": "slurm-config", "mountPath": names.SLURM_CONFIG_DIR, "readOnly": True}],
        "securityContext": non_root(names.SLURMRESTD_UID, read_only=True),
    }
    resources = container_resources(spec.get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(spec.get("placement"), [container], [c.slurm_conf_volume()], grace=30)
    directory.attach(c, pod, container)
    name = names.rest_name(c.name)
    return statefulset(c, name, names.COMPONENT_REST, spec["replicas"], name, pod,
                       annotations={
                           # A client: only what it reads at start (slurmctld's address, authentication) restarts it.
                           names.ANNOTATION_CONFIG_HASH: config_hash({"slurm.conf": restart_lines(slurm_config)})},
                       extra={"podManagementPolicy": "Parallel"})
