# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workers of a NodeSet: slurmd's StatefulSet, one dynamic Slurm node per pod."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as directory
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    ClusterContext,
    config_hash,
    container_resources,
    run_mount,
    security,
    statefulset,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.health import worker_health_volume
from ansible_collections.soperator.slurm.plugins.module_utils.render.slurm_conf import node_conf_params
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, Spec

WORKER_CAPABILITIES = [
    "CHOWN",  # slurmstepd hands job output and spool files to the job's user
    "DAC_OVERRIDE",  # slurmd (root) reads and writes in users' directories (output files, working directory)
    "FOWNER",  # and sets modes on files it does not own
    "KILL",  # signals the processes of any user's job
    "SETGID",  # steps run as the job's user and groups
    "SETUID",
    # The jail plugin drops SYS_ADMIN, SYS_CHROOT and then SETPCAP from every task's bounding set once the task is
    # in the jail: no job, root's included, holds them (SETPCAP is what dropping needs).
    "SETPCAP",
    "SYS_ADMIN",  # the SPANK jail: unshare(CLONE_NEWNS), mounts, pivot_root; and rw cgroups for the job
    "SYS_CHROOT",  # the jail plugin's chroot(".") after pivot_root
    "SYS_NICE",  # task/affinity binds other users' tasks to their CPUs
    # Not SYS_RESOURCE: jobs run within the container's hard limits, which the runtime sets (memlock, nofile);
    # PropagateResourceLimits only lowers limits below them, which needs no capability.
]

# slurmstepd opens a batch job's output files (sbatch -o/-e) and enters the step's working directory as the job's
# user in slurmd's own mount namespace, before the jail plugin moves the task into the jail: those paths must be the
# jail's there too, or output lands in the container and is lost with the pod. The users' homes, and root's (root's
# batch output; no privileged program of the image reads it: the health program runs python3 -I).
SHARED_HOMES = ("/home", "/root")


def shared_jail_paths(sub_mounts: Iterable[Spec] | None) -> list[str]:
    """The jail paths the worker entrypoint mounts at the same path in slurmd's container: the homes, then each
    sub-mount the container may take (paths.may_mirror: never where its privileged processes execute, load or
    trust files; the validator refuses such a sub-mount anyway) that no earlier path carries already (a share is
    recursive)."""
    shared_paths = list(SHARED_HOMES)
    for path in sorted(sub["mountPath"] for sub in sub_mounts or ()):
        if paths.may_mirror(path) and not any(paths.under(path, shared) for shared in shared_paths):
            shared_paths.append(path)
    return shared_paths


HOSTNAME_LABEL = "kubernetes.io/hostname"


def one_per_node(pod: KubeObject, selector: Mapping[str, str]) -> None:
    """A required anti-affinity to the NodeSet's own workers on the node's hostname: never two of them on one node;
    added to any the user wrote. A worker with no node left stays Pending (FailedScheduling says why)."""
    anti = pod.setdefault("affinity", {}).setdefault("podAntiAffinity", {})
    anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
        {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": HOSTNAME_LABEL})


def worker(c: ClusterContext, nodeset: NodeSet) -> KubeObject:
    """A fixed NodeSet's StatefulSet: one dynamic node (``slurmd -Z``) per pod."""
    set_name = nodeset["metadata"]["name"]
    pod = worker_pod_spec(c, nodeset, elastic=False)
    name = names.worker_name(c.name, set_name)
    return statefulset(c, name, names.COMPONENT_WORKER, c.workers(nodeset), name, pod, nodeset=nodeset,
                       # OnDelete: a template change replaces no pod by itself; the converge plan replaces each
                       # worker once its Slurm node is drained and idle (plan/rolls.py).
                       extra={"podManagementPolicy": "Parallel", "updateStrategy": {"type": "OnDelete"}})


def _template(c: ClusterContext, nodeset: NodeSet, spec: KubeObject) -> tuple[KubeObject, str]:
    template = {"metadata": {"labels": names.labels(c.name, names.COMPONENT_WORKER, nodeset["metadata"]["name"])},
                "spec": spec}
    return template, config_hash(template)[:16]


def elastic_template(c: ClusterContext, nodeset: NodeSet) -> tuple[KubeObject, str]:
    """An elastic NodeSet's pod template (metadata and spec) and its hash (the pods' template-hash annotation)."""
    return _template(c, nodeset, worker_pod_spec(c, nodeset, elastic=True))


def every_node_template(c: ClusterContext, nodeset: NodeSet) -> tuple[KubeObject, str]:
    """An every-node NodeSet's pod template and its hash: the StatefulSet's pod (one renderer) with the DaemonSet's
    tolerations."""
    spec = worker_pod_spec(c, nodeset, elastic=False)
    spec["tolerations"] = list(spec.get("tolerations") or ()) + [dict(t) for t in EVERY_NODE_TOLERATIONS]
    return _template(c, nodeset, spec)


# What a DaemonSet's pods tolerate besides their own tolerations (the DaemonSet controller adds them): a worker of an
# every-node NodeSet belongs to its node. Cordoned, under pressure, not ready or unreachable, it stays: its Slurm node
# is drained (spec.healthChecks.kubernetesNodes) or not responding, never orphaned (Slinky's #259: a pod never made
# again on a cordoned node) and never evicted by the taint manager.
EVERY_NODE_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
)


def every_node_pod(c: ClusterContext, nodeset: NodeSet, node: str) -> KubeObject:
    """The worker of an every-node NodeSet on Kubernetes node ``node``: named :func:`names.every_node_worker` (pod,
    hostname and Slurm node name), bound to the node by ``spec.nodeName`` (no scheduler: a cordoned node still gets its
    worker back, as a DaemonSet's), owned by its NodeSet. The pod is the NodeSet's worker pod, a dynamic node
    (``slurmd -Z``) like a StatefulSet's, with the DaemonSet's tolerations (:data:`EVERY_NODE_TOLERATIONS`)."""
    template, template_hash = every_node_template(c, nodeset)
    pod_name = names.every_node_worker(c.name, nodeset["metadata"]["name"], node)
    metadata = c.metadata(pod_name, names.COMPONENT_WORKER, nodeset=nodeset, owner=nodeset,
                          annotations={names.ANNOTATION_TEMPLATE_HASH: template_hash})
    metadata["labels"] = dict(template["metadata"]["labels"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": dict(template["spec"], nodeName=node)}


def elastic_pod(c: ClusterContext, nodeset: NodeSet, node_name: str) -> KubeObject:
    """The pod of one powered-up node of an elastic NodeSet: named exactly as the Slurm node (a ``State=CLOUD``
    record of slurm.conf), owned by its NodeSet. An individual Pod, not a StatefulSet's: the running nodes may have
    holes (node 2 up while node 1 is down), which a StatefulSet cannot have."""
    template, template_hash = elastic_template(c, nodeset)
    metadata = c.metadata(node_name, names.COMPONENT_WORKER, nodeset=nodeset, owner=nodeset,
                          annotations={names.ANNOTATION_TEMPLATE_HASH: template_hash})
    metadata["labels"] = dict(template["metadata"]["labels"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def worker_pod_spec(c: ClusterContext, nodeset: NodeSet, elastic: bool) -> KubeObject:
    set_name = nodeset["metadata"]["name"]
    spec = nodeset["spec"]
    image = spec.get("image") or c.spec["images"]["worker"]
    jail_volumes, jail_mounts = c.jail_volumes()
    volumes = jail_volumes + c.munge_volumes() + [
        {"name": "slurmd-spool", "emptyDir": {}},
        {"name": "slurm-run", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    health_volume, health_mount = worker_health_volume(c, nodeset)
    volumes.append(health_volume)
    container_volumes, container_mounts = container_step_volumes(c.spec)
    volumes += container_volumes
    resources = container_resources(spec.get("resources"))
    gpu = spec["gpu"]
    if gpu["count"]:
        resources.setdefault("limits", {})[gpu["resourceName"]] = gpu["count"]
    container = {
        "name": "slurmd",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "args": elastic_args() if elastic else [
            # A dynamic node named after its pod; its hardware description never touches slurm.conf.
            "/usr/sbin/slurmd", "-D", "-Z", "-N", "$(SLURMD_NODENAME)", "--conf-server", "$(SLURM_CONF_SERVER)",
            "--conf", "$(SLURMD_CONF_PARAMS)"],
        "env": [
            {"name": "SLURMD_NODENAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SLURM_NODESET", "value": set_name},
            {"name": "SLURMD_CONF_PARAMS", "value": node_conf_params(nodeset)},
            {"name": "SLURM_CONF_SERVER", "value": c.conf_server},
            # Jail paths the entrypoint also mounts at the same path for slurmstepd (batch output files).
            {"name": "SOPERATOR_JAIL_SHARED_PATHS",
             "value": " ".join(shared_jail_paths(c.spec["jail"].get("subMounts")))},
        ] + c.jail_sub_mounts_env(),
        "ports": [{"name": "slurmd", "containerPort": names.SLURMD_PORT, "protocol": "TCP"}],
        # Ready once its Slurm node is registered and responding: the pod's Ready condition carries what only
        # Slurm knows, so the reconciler sees a node arrive through the pod watch instead of polling Slurm.
        "readinessProbe": {"exec": {"command": [names.NODE_READY_PROBE]}, "periodSeconds": 5, "timeoutSeconds": 5,
                           "failureThreshold": 2},
        "volumeMounts": jail_mounts + [
            run_mount("slurmd-spool", names.SLURMD_SPOOL), run_mount("munge-run", names.MUNGE_RUN_DIR),
            run_mount("slurm-run", names.SLURM_RUN_DIR), {"name": "dshm", "mountPath": "/dev/shm"}, health_mount]
        + container_mounts,
        # Not privileged: the capabilities above, plus seccomp and AppArmor unconfined because the runtime
        # default profiles block pivot_root and mount, which the jail plugin needs. SYS_ADMIN implies that
        # privilege escalation stays allowed (the API server refuses the combination otherwise).
        "securityContext": security(WORKER_CAPABILITIES, {"type": "Unconfined"}, escalation=True),
    }
    container["securityContext"]["appArmorProfile"] = {"type": "Unconfined"}
    if resources:
        container["resources"] = resources
    grace = max(60, c.spec["slurm"]["killWait"] + 30)
    pod = c.pod_spec(spec.get("placement"), [container], volumes, init_containers=[c.munge_sidecar(image)],
                     grace=grace)
    if (spec.get("placement") or {}).get("onePerNode"):
        one_per_node(pod, names.selector_labels(c.name, names.COMPONENT_WORKER, set_name))
    if (spec.get("placement") or {}).get("pinned"):
        # The converge adds the worker's pin (a node affinity) and then removes the gate: plan/pins.py.
        pod["schedulingGates"] = [{"name": names.PIN_GATE}]
    directory.attach(c, pod, container)
    return pod


def container_step_volumes(spec: Spec) -> tuple[list[KubeObject], list[KubeObject]]:
    """(volumes, slurmd's mounts) of container steps: the image cache (an emptyDir on the node's disk: the cache
    keeps itself within spec.containers.cacheSize, and a kubelet limit would evict slurmd with its jobs), and the pull
    Secret, root's 0400 (the jail plugin reads it as root and hands it to the unprivileged puller)."""
    containers = spec.get("containers") or {}
    if not containers.get("enabled"):
        return [], []
    volumes: list[KubeObject] = [{"name": "container-images", "emptyDir": {}}]
    mounts: list[KubeObject] = [{"name": "container-images", "mountPath": container_steps.CACHE_DIR}]
    secret_name = (containers.get("pullSecretRef") or {}).get("name")
    if secret_name:
        volumes.append({"name": "registry-auth", "secret": {
            "secretName": secret_name, "defaultMode": 0o400,
            "items": [{"key": container_steps.REGISTRY_AUTH_KEY, "path": container_steps.REGISTRY_AUTH_KEY}]}})
        mounts.append({"name": "registry-auth", "mountPath": container_steps.REGISTRY_AUTH_MOUNT, "readOnly": True})
    return volumes, mounts


def elastic_args() -> list[str]:
    """slurmd of an elastic node: the NodeName record of slurm.conf (``State=CLOUD``) is its hardware, so no ``-Z``
    and no ``--conf``; ``-b`` reports a boot at slurmd's start, which Slurm waits for after a power-up (a container's
    kernel boot time is the host's, older than the request: without it the node never leaves POWERING_UP)."""
    return ["/usr/sbin/slurmd", "-D", "-b", "-N", "$(SLURMD_NODENAME)", "--conf-server", "$(SLURM_CONF_SERVER)"]
