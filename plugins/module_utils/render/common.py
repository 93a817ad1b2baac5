# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every component's renderer shares: the cluster context, security contexts, placement, and the
builders of the kinds several components use (Secrets, ConfigMaps, headless Services, StatefulSets, budgets).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy
from typing import Dict, Iterable, List, Mapping, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import digests, names
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import EMPTY_DIR_MODE, sub_mount_read_only
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster, Spec

RUNTIME_DEFAULT = {"type": "RuntimeDefault"}

# Capabilities per container, in the file of the component that runs it. Everything else is dropped; each entry
# says why it is needed (docs/security.md lists them; tests/unit/test_security_doc.py keeps the two in step).
MUNGE_CAPABILITIES = [
    "CHOWN",  # the entrypoint copies the key from the Secret and gives it to the munge user
    "FOWNER",  # ... and sets its mode 0400
    "SETGID",  # munged is started as the munge user
    "SETUID",
]


def config_hash(data: object) -> str:
    """The digest of a ConfigMap's data (or a pod template): changes exactly when a file changes."""
    return digests.of_value(data)


def merge_placement(cluster_wide: Spec | None, specific: Spec | None) -> KubeObject:
    """Pod-spec placement fields: nodeSelector merged (specific wins), tolerations added, affinity parts replaced."""
    cluster_wide = cluster_wide or {}
    specific = specific or {}
    result: KubeObject = {}
    selector = dict(cluster_wide.get("nodeSelector") or {})
    selector.update(specific.get("nodeSelector") or {})
    if selector:
        result["nodeSelector"] = selector
    tolerations = [copy.deepcopy(t) for t in cluster_wide.get("tolerations") or ()]
    tolerations += [copy.deepcopy(t) for t in specific.get("tolerations") or () if t not in tolerations]
    if tolerations:
        result["tolerations"] = tolerations
    affinity = copy.deepcopy(cluster_wide.get("affinity") or {})
    affinity.update(copy.deepcopy(specific.get("affinity") or {}))
    if affinity:
        result["affinity"] = affinity
    return result


def security(capabilities: Sequence[str], seccomp: KubeObject | None = None, escalation: bool = False) -> KubeObject:
    context: KubeObject = {"capabilities": {"drop": ["ALL"]}}
    if capabilities:
        context["capabilities"]["add"] = list(capabilities)
    if not escalation:
        context["allowPrivilegeEscalation"] = False
    if seccomp:
        context["seccompProfile"] = seccomp
    return context


def container_resources(spec_resources: Spec | None) -> KubeObject:
    resources = spec_resources or {}
    result: KubeObject = {}
    for kind in ("requests", "limits"):
        if resources.get(kind):
            result[kind] = dict(resources[kind])
    return result


def tcp_probe(port_name: str) -> KubeObject:
    return {"tcpSocket": {"port": port_name}, "periodSeconds": 10, "failureThreshold": 3}


class ClusterContext(object):
    """What the object builders share: the validated cluster, its NodeSets and naming.

    ``replicas``: ``{nodeset name: workers}`` decided by the planner (a NodeSet absent: its ``spec.replicas``);
    ``maintenance``: whether the cluster is rendered scaled to zero (None: its ``spec.maintenance``)."""

    obj: SlurmCluster  # the validated, defaulted SlurmCluster (the owner of cluster-level objects)
    spec: Spec  # its spec
    name: str  # its metadata.name
    namespace: str  # its metadata.namespace: every object's
    nodesets: List[NodeSet]  # its validated NodeSets, by name
    maintenance: bool  # rendered in maintenance: every StatefulSet at zero, no populate Job, backup or NCCL check
    replicas: Dict[str, int]  # {nodeset name: workers} the planner decided (absent: its spec.replicas)
    pull_policy: str  # spec.images.pullPolicy, every container's
    conf_server: str  # slurmctld's host:port, where configless clients fetch the configuration
    jail_claim: str  # the jail's PersistentVolumeClaim: spec.jail.existingClaim, else the one rendered

    def __init__(self, cluster: SlurmCluster, nodesets: Iterable[NodeSet],
                 replicas: Mapping[str, int] | None = None, maintenance: bool | None = None) -> None:
        self.obj = cluster
        self.spec = cluster["spec"]
        self.name = cluster["metadata"]["name"]
        self.namespace = cluster["metadata"]["namespace"]
        self.nodesets = sorted(nodesets, key=lambda ns: ns["metadata"]["name"])
        self.maintenance = self.spec["maintenance"] if maintenance is None else maintenance
        self.replicas = dict(replicas or {})
        self.pull_policy = self.spec["images"]["pullPolicy"]
        self.conf_server = names.conf_server(self.name, self.namespace)
        jail = self.spec["jail"]
        self.jail_claim = jail.get("existingClaim") or names.jail_claim_name(self.name)

    def workers(self, nodeset: NodeSet) -> int:
        """How many workers a NodeSet's StatefulSet asks for (before maintenance scales it to zero)."""
        return self.replicas.get(nodeset["metadata"]["name"], nodeset["spec"]["replicas"])

    # metadata ------------------------------------------------------------------------------------------------
    def metadata(self, name: str, component: str, nodeset: NodeSet | None = None, owner: KubeObject | None = None,
                 annotations: Mapping[str, str] | None = None) -> KubeObject:
        set_name = nodeset["metadata"]["name"] if nodeset is not None else None
        md: KubeObject = {"name": name, "namespace": self.namespace,
                          "labels": names.labels(self.name, component, set_name)}
        if annotations:
            md["annotations"] = dict(annotations)
        if owner is not None and owner["metadata"].get("uid"):
            md["ownerReferences"] = [{
                "apiVersion": names.API_VERSION, "kind": owner["kind"], "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
            }]
        return md

    def owned(self, name: str, component: str, annotations: Mapping[str, str] | None = None) -> KubeObject:
        """Metadata of a cluster-level object owned by the SlurmCluster."""
        return self.metadata(name, component, owner=self.obj, annotations=annotations)

    # volumes -------------------------------------------------------------------------------------------------
    def jail_volumes(self, with_sub_mounts: bool = True) -> tuple[list[KubeObject], list[KubeObject]]:
        """(volumes, mounts) of the jail's claim and, ``with_sub_mounts``, of each sub-mount (at SUB_MOUNTS_DIR)."""
        volumes = [{"name": "jail", "persistentVolumeClaim": {"claimName": self.jail_claim}}]
        mounts: list[KubeObject] = [{"name": "jail", "mountPath": names.JAIL_MOUNT}]
        if not with_sub_mounts:
            return volumes, mounts
        for sub in self.spec["jail"].get("subMounts") or ():
            volume = {"name": "submount-" + sub["name"]}
            read_only = sub_mount_read_only(sub)
            if "hostPath" in sub:
                volume["hostPath"] = {"path": sub["hostPath"], "type": "Directory"}
            elif "claimName" in sub:
                volume["persistentVolumeClaim"] = {"claimName": sub["claimName"], "readOnly": read_only}
            else:
                volume["emptyDir"] = {}
                read_only = False  # the entrypoint sets its mode; its bind into the jail is read-only if asked
            volumes.append(volume)
            # Not at its jail path: the runtime resolves a mount's target in the container's root following
            # symlinks, and jobs write in the jail. The entrypoint binds it there without following any.
            mounts.append({"name": volume["name"], "mountPath": "%s/%s" % (names.SUB_MOUNTS_DIR, sub["name"]),
                           "readOnly": read_only})
        return volumes, mounts

    def jail_sub_mounts_env(self) -> list[KubeObject]:
        """The sub-mounts for the entrypoint, which binds each from SUB_MOUNTS_DIR into the jail: ``NAME:PATH:ro|rw``
        each, ``:MODE`` added for an emptyDir (its directory root's, with that mode). A list of the container's env:
        empty without sub-mounts."""
        entries = []
        for sub in self.spec["jail"].get("subMounts") or ():
            entry = "%s:%s:%s" % (sub["name"], sub["mountPath"], "ro" if sub_mount_read_only(sub) else "rw")
            if sub.get("emptyDir"):
                entry += ":" + sub.get("mode", EMPTY_DIR_MODE)
            entries.append(entry)
        return [{"name": "SOPERATOR_JAIL_SUB_MOUNTS", "value": " ".join(entries)}] if entries else []

    def jwt_volume(self, mode: int = 0o400) -> KubeObject:
        """The JWT key: root's for the controller entrypoint (it gives slurmctld a copy of its own), the slurm group's
        for slurmdbd (0440 with its pod's fsGroup)."""
        return {"name": "jwt-key", "secret": {"secretName": names.jwt_key_name(self.name), "defaultMode": mode,
                                              "items": [{"key": names.JWT_KEY_FILE, "path": names.JWT_KEY_FILE}]}}

    def generated_secret(self, name: str, generator: str, component: str = names.COMPONENT_SECRET) -> KubeObject:
        return secret(self, name, generator, component)

    def slurm_conf_volume(self) -> KubeObject:
        """slurm.conf alone, for the Slurm clients that are no login node (slurmrestd, the exporter): the same
        ConfigMap slurmctld reads; their pod templates carry its hash, so a change restarts them."""
        return {"name": "slurm-config", "configMap": {"name": names.slurm_config_name(self.name),
                                                      "items": [{"key": "slurm.conf", "path": "slurm.conf"}]}}

    def munge_volumes(self) -> list[KubeObject]:
        return [
            {"name": "munge-key", "secret": {"secretName": names.munge_key_name(self.name), "defaultMode": 0o400}},
            {"name": "munge-run", "emptyDir": {}},
        ]

    def munge_sidecar(self, image: str) -> KubeObject:
        """munged as a native sidecar: started (socket ready) before the Slurm daemon, stopped after it."""
        return {
            "name": "munge",
            "image": image,
            "imagePullPolicy": self.pull_policy,
            "restartPolicy": "Always",
            "args": ["munged", "--foreground"],
            "startupProbe": {"exec": {"command": ["test", "-S", names.MUNGE_RUN_DIR + "/munge.socket.2"]},
                             "periodSeconds": 1, "failureThreshold": 60},
            "volumeMounts": [{"name": "munge-key", "mountPath": names.MUNGE_KEY_MOUNT, "readOnly": True},
                             {"name": "munge-run", "mountPath": names.MUNGE_RUN_DIR}],
            "securityContext": security(MUNGE_CAPABILITIES, RUNTIME_DEFAULT),
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        }

    def pod_spec(self, placement: Spec | None, containers: list[KubeObject], volumes: list[KubeObject],
                 init_containers: list[KubeObject] | None = None, grace: int | None = None) -> KubeObject:
        spec = {
            # Slurm pods never talk to the Kubernetes API.
            "automountServiceAccountToken": False,
            # No Service environment variables leaking into every job's environment.
            "enableServiceLinks": False,
            "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT)},
            "containers": containers,
            "volumes": volumes,
        }
        if init_containers:
            spec["initContainers"] = init_containers
        if grace is not None:
            spec["terminationGracePeriodSeconds"] = grace
        spec.update(merge_placement(self.spec.get("placement"), placement))
        return spec


# --------------------------------------------------------------------------------------------------- objects
def run_mount(volume: str, path: str) -> KubeObject:
    """A per-pod runtime directory at ``path``. Jobs and sessions see it at the same place in the jail: the
    entrypoint binds it there read-only, without following a symlink of the jail (share_run_dirs)."""
    return {"name": volume, "mountPath": path}


def secret(c: ClusterContext, name: str, generator: str, component: str = names.COMPONENT_SECRET) -> KubeObject:
    return {
        "apiVersion": "v1", "kind": "Secret",
        # No owner reference: the keys must survive deletion of the SlurmCluster (deletionPolicy.secrets).
        "metadata": c.metadata(name, component, annotations={
            names.ANNOTATION_CREATE_ONLY: "true", names.ANNOTATION_GENERATE: generator}),
        "type": "Opaque",
    }


def config_map(c: ClusterContext, name: str, data: Mapping[str, str]) -> KubeObject:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": c.owned(name, names.COMPONENT_CONFIG),
            "data": data}


def headless_service(c: ClusterContext, name: str, component: str, port_name: str, port: int,
                     nodeset: NodeSet | None = None) -> KubeObject:
    owner = nodeset if nodeset is not None else c.obj
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": c.metadata(name, component, nodeset=nodeset, owner=owner),
        "spec": {
            "clusterIP": "None",
            # Daemons must resolve each other while starting, before they are ready.
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(c.name, component,
                                              nodeset["metadata"]["name"] if nodeset is not None else None),
            "ports": [{"name": port_name, "port": port, "targetPort": port_name, "protocol": "TCP"}],
        },
    }


def statefulset(c: ClusterContext, name: str, component: str, replicas: int, service: str, pod_spec: KubeObject,
                nodeset: NodeSet | None = None, annotations: Mapping[str, str] | None = None,
                extra: KubeObject | None = None) -> KubeObject:
    set_name = nodeset["metadata"]["name"] if nodeset is not None else None
    template_md: KubeObject = {"labels": names.labels(c.name, component, set_name)}
    if annotations:
        template_md["annotations"] = annotations
    spec = {
        "replicas": 0 if c.maintenance else replicas,
        "serviceName": service,
        "selector": {"matchLabels": names.selector_labels(c.name, component, set_name)},
        "template": {"metadata": template_md, "spec": pod_spec},
    }
    spec.update(extra or {})
    owner = nodeset if nodeset is not None else c.obj
    metadata = c.metadata(name, component, nodeset=nodeset, owner=owner)
    metadata.setdefault("annotations", {})[names.ANNOTATION_TEMPLATE_HASH] = config_hash(spec["template"])[:16]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata, "spec": spec}


def pdb(c: ClusterContext, name: str, component: str, nodeset: NodeSet | None = None) -> KubeObject:
    owner = nodeset if nodeset is not None else c.obj
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": c.metadata(name, component, nodeset=nodeset, owner=owner),
        "spec": {"maxUnavailable": 1,
                 "selector": {"matchLabels": names.selector_labels(
                     c.name, component, nodeset["metadata"]["name"] if nodeset is not None else None)}},
    }
