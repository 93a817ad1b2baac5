# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus exporter: its StatefulSet (the exporter and the munge sidecar), Service and ServiceMonitor.

The exporter is a Slurm client (sinfo, squeue, sshare, sdiag): munge for credentials, slurm.conf from the
cluster's ConfigMap. It runs as nobody, with no capability: it reads only what any user may read.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render.accounting import non_root
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    ClusterContext,
    config_hash,
    container_resources,
    statefulset,
)
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.config_keys import restart_lines
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

SERVICE_MONITOR_API_VERSION = "monitoring.coreos.com/v1"


def exporter_service(c: ClusterContext) -> KubeObject:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": c.owned(names.exporter_name(c.name), names.COMPONENT_EXPORTER),
        "spec": {"selector": names.selector_labels(c.name, names.COMPONENT_EXPORTER),
                 "ports": [{"name": "metrics", "port": names.EXPORTER_PORT, "targetPort": "metrics",
                            "protocol": "TCP"}]},
    }


def exporter_args(c: ClusterContext) -> list[str]:
    args = [names.EXPORTER_BINARY, "--web.listen-address=:%d" % names.EXPORTER_PORT,
            "--collect.interval=%s" % c.spec["exporter"]["collectInterval"]]
    if not c.spec["accounting"]["enabled"]:
        args.append("--no-collector.fairshare")  # sshare answers only with accounting
    return args


def exporter(c: ClusterContext, slurm_config: str) -> KubeObject:
    """The exporter's StatefulSet; ``slurm_config``: the slurm.conf rendered."""
    spec = c.spec["exporter"]
    image = c.spec["images"]["exporter"]
    container = {
        "name": "exporter",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "args": exporter_args(c),
        "env": [{"name": "SLURM_CONF", "value": names.SLURM_CONFIG_DIR + "/slurm.conf"}],
        "ports": [{"name": "metrics", "containerPort": names.EXPORTER_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10,
                           "failureThreshold": 3},
        "volumeMounts": [{"name": "slurm-config", "mountPath": names.SLURM_CONFIG_DIR, "readOnly": True},
                         {"name": "munge-run", "mountPath": names.MUNGE_RUN_DIR}],
        "securityContext": non_root(names.EXPORTER_UID, read_only=True),
    }
    resources = container_resources(spec.get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(spec.get("placement"), [container], [c.slurm_conf_volume()] + c.munge_volumes(),
                     init_containers=[c.munge_sidecar(image)], grace=10)
    name = names.exporter_name(c.name)
    return statefulset(c, name, names.COMPONENT_EXPORTER, 1, name, pod,
                       annotations={
                           # A client: only what it reads at start (slurmctld's address, authentication) restarts it.
                           names.ANNOTATION_CONFIG_HASH: config_hash({"slurm.conf": restart_lines(slurm_config)})})


def service_monitor(c: ClusterContext) -> KubeObject:
    monitor = c.spec["exporter"]["serviceMonitor"]
    metadata = c.owned(names.exporter_name(c.name), names.COMPONENT_EXPORTER)
    for key, value in sorted((monitor.get("labels") or {}).items()):
        metadata["labels"].setdefault(key, value)  # ours stay: pruning and selectors rely on them
    return {
        "apiVersion": SERVICE_MONITOR_API_VERSION, "kind": "ServiceMonitor", "metadata": metadata,
        "spec": {"selector": {"matchLabels": names.selector_labels(c.name, names.COMPONENT_EXPORTER)},
                 "endpoints": [{"port": "metrics", "path": "/metrics", "interval": monitor["interval"]}]},
    }
