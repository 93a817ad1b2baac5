# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render every Kubernetes object of a Slurm cluster from its SlurmCluster and NodeSets (pure: dicts in, dicts out).

:func:`render_cluster` validates and defaults its input, then returns the manifests in apply order. Secrets are
rendered without data (the apply adapter generates them once, at creation); the jail claim and the populate Job
are create-only. Owner references are set only when the owner's UID is known.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm_conf import node_conf_params, render_config_files
from ansible_collections.soperator.slurm.plugins.module_utils.spec import validate_cluster_with_nodesets
from ansible_collections.soperator.slurm.plugins.module_utils.sshd_conf import render_sshd_config

_RUNTIME_DEFAULT = {"type": "RuntimeDefault"}

# Capabilities per container. Everything else is dropped; each entry says why it is needed.
MUNGE_CAPABILITIES = [
    "CHOWN",  # the entrypoint copies the key from the Secret and gives it to the munge user
    "FOWNER",  # ... and sets its mode 0400
    "SETGID",  # munged is started as the munge user
    "SETUID",
]
CONTROLLER_CAPABILITIES = [
    "CHOWN",  # the spool volume is handed to SlurmUser on first start
    "FOWNER",  # state files keep their modes across restarts
    "SETGID",  # slurmctld drops from root to SlurmUser
    "SETUID",
]
WORKER_CAPABILITIES = [
    "CHOWN",  # slurmstepd hands job output and spool files to the job's user
    "DAC_OVERRIDE",  # slurmd (root) reads and writes in users' directories (output files, working directory)
    "FOWNER",  # and sets modes on files it does not own
    "KILL",  # signals the processes of any user's job
    "SETGID",  # steps run as the job's user and groups
    "SETUID",
    "SYS_ADMIN",  # the SPANK jail: unshare(CLONE_NEWNS), mounts, pivot_root; and rw cgroups for the job
    "SYS_CHROOT",  # the jail plugin's chroot(".") after pivot_root
    "SYS_NICE",  # task/affinity binds other users' tasks to their CPUs
    # Not SYS_RESOURCE: jobs run within the container's hard limits, which the runtime sets (memlock, nofile);
    # PropagateResourceLimits only lowers limits below them, which needs no capability.
]
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
POPULATE_CAPABILITIES = [
    "CHOWN",  # the jail's files keep their owners
    "DAC_OVERRIDE",  # reads every file of the jail image, whatever its mode
    "FOWNER",  # keeps modes and timestamps of files it does not own
    "FSETID",  # keeps setuid/setgid bits (sudo, ping in the jail)
    "SETFCAP",  # keeps file capabilities
]


def config_hash(data):
    """sha256 of a ConfigMap's data (canonical JSON): changes exactly when a file changes."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def merge_placement(cluster_wide, specific):
    """Pod-spec placement fields: nodeSelector merged (specific wins), tolerations added, affinity parts replaced."""
    cluster_wide = cluster_wide or {}
    specific = specific or {}
    result = {}
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


def _security(capabilities, seccomp=None, escalation=False):
    context = {"capabilities": {"drop": ["ALL"]}}
    if capabilities:
        context["capabilities"]["add"] = list(capabilities)
    if not escalation:
        context["allowPrivilegeEscalation"] = False
    if seccomp:
        context["seccompProfile"] = seccomp
    return context


def _resources(spec_resources):
    result = {}
    for kind in ("requests", "limits"):
        if (spec_resources or {}).get(kind):
            result[kind] = dict(spec_resources[kind])
    return result


def _tcp_probe(port_name):
    return {"tcpSocket": {"port": port_name}, "periodSeconds": 10, "failureThreshold": 3}


class _Cluster(object):
    """What the object builders share: the validated cluster, its NodeSets and naming."""

    def __init__(self, cluster, nodesets):
        self.obj = cluster
        self.spec = cluster["spec"]
        self.name = cluster["metadata"]["name"]
        self.namespace = cluster["metadata"]["namespace"]
        self.nodesets = sorted(nodesets, key=lambda ns: ns["metadata"]["name"])
        self.maintenance = self.spec["maintenance"]
        self.pull_policy = self.spec["images"]["pullPolicy"]
        self.conf_server = names.conf_server(self.name, self.namespace)
        jail = self.spec["jail"]
        self.jail_claim = jail.get("existingClaim") or names.jail_claim_name(self.name)

    # metadata ------------------------------------------------------------------------------------------------
    def metadata(self, name, component, nodeset=None, owner=None, annotations=None):
        set_name = nodeset["metadata"]["name"] if nodeset is not None else None
        md = {"name": name, "namespace": self.namespace, "labels": names.labels(self.name, component, set_name)}
        if annotations:
            md["annotations"] = dict(annotations)
        if owner is not None and owner["metadata"].get("uid"):
            md["ownerReferences"] = [{
                "apiVersion": names.API_VERSION, "kind": owner["kind"], "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
            }]
        return md

    def owned(self, name, component, annotations=None):
        """Metadata of a cluster-level object owned by the SlurmCluster."""
        return self.metadata(name, component, owner=self.obj, annotations=annotations)

    # volumes -------------------------------------------------------------------------------------------------
    def jail_volumes(self, with_sub_mounts=True):
        volumes = [{"name": "jail", "persistentVolumeClaim": {"claimName": self.jail_claim}}]
        mounts = [{"name": "jail", "mountPath": names.JAIL_MOUNT}]
        if not with_sub_mounts:
            return volumes, mounts
        for sub in self.spec["jail"].get("subMounts") or ():
            volume = {"name": "submount-" + sub["name"]}
            if "hostPath" in sub:
                volume["hostPath"] = {"path": sub["hostPath"], "type": "Directory"}
            elif "claimName" in sub:
                volume["persistentVolumeClaim"] = {"claimName": sub["claimName"], "readOnly": sub["readOnly"]}
            else:
                volume["emptyDir"] = {}
            volumes.append(volume)
            mounts.append({"name": volume["name"], "mountPath": names.JAIL_MOUNT + sub["mountPath"],
                           "readOnly": sub["readOnly"]})
        return volumes, mounts

    def munge_volumes(self):
        return [
            {"name": "munge-key", "secret": {"secretName": names.munge_key_name(self.name), "defaultMode": 0o400}},
            {"name": "munge-run", "emptyDir": {}},
        ]

    def munge_sidecar(self, image):
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
            "securityContext": _security(MUNGE_CAPABILITIES, _RUNTIME_DEFAULT),
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        }

    def pod_spec(self, placement, containers, volumes, init_containers=None, grace=None):
        spec = {
            # Slurm pods never talk to the Kubernetes API.
            "automountServiceAccountToken": False,
            # No Service environment variables leaking into every job's environment.
            "enableServiceLinks": False,
            "securityContext": {"seccompProfile": dict(_RUNTIME_DEFAULT)},
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
def _secret(c, name, generator):
    return {
        "apiVersion": "v1", "kind": "Secret",
        # No owner reference: the keys must survive deletion of the SlurmCluster (deletionPolicy.secrets).
        "metadata": c.metadata(name, names.COMPONENT_SECRET, annotations={
            names.ANNOTATION_CREATE_ONLY: "true", names.ANNOTATION_GENERATE: generator}),
        "type": "Opaque",
    }


def _jail_claim(c):
    jail = c.spec["jail"]
    spec = {"accessModes": ["ReadWriteMany"], "storageClassName": jail["storageClassName"],
            "resources": {"requests": {"storage": jail["size"]}}}
    # No owner reference: the jail (users' files) must survive deletion of the SlurmCluster.
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": c.metadata(names.jail_claim_name(c.name), names.COMPONENT_JAIL,
                                   annotations={names.ANNOTATION_CREATE_ONLY: "true"}),
            "spec": spec}


def _config_map(c, name, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": c.owned(name, names.COMPONENT_CONFIG),
            "data": data}


def _headless_service(c, name, component, port_name, port, nodeset=None):
    owner = nodeset if nodeset is not None else c.obj
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": c.metadata(name, component, nodeset=nodeset, owner=owner),
        "spec": {
            "clusterIP": "None",
            # Daemons must resolve each other while starting, before they are ready.
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(c.name, component, nodeset and nodeset["metadata"]["name"]),
            "ports": [{"name": port_name, "port": port, "targetPort": port_name, "protocol": "TCP"}],
        },
    }


def _login_service(c):
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


def populate_job_name(cluster_name, repopulate_token):
    """``<cluster>-populate-jail-initial``, or a short hash of the token: a new token is a new Job."""
    if not repopulate_token:
        return "%s-populate-jail-initial" % cluster_name
    return "%s-populate-jail-%s" % (cluster_name, hashlib.sha256(repopulate_token.encode("utf-8")).hexdigest()[:10])


def _populate_job(c):
    token = c.spec["jail"]["populate"]["repopulateToken"]
    images = c.spec["images"]
    jail_volumes, jail_mounts = c.jail_volumes(with_sub_mounts=False)
    tool = "%s/%s" % (names.POPULATE_TOOL_DIR, names.POPULATE_TOOL)
    command = [tool, "--source", "/", "--target", names.JAIL_MOUNT]
    # The initial Job leaves a populated jail alone (an existing claim may already hold one); a repopulate
    # token asks for an overwrite (which keeps users: see images/README.md).
    command.append("--overwrite" if token else "--skip-if-populated")
    tools_mount = {"name": "tools", "mountPath": names.POPULATE_TOOL_DIR}
    labels = names.labels(c.name, names.COMPONENT_POPULATE)
    pod = c.pod_spec(None, containers=[{
        # Runs the jail image itself, so "/" is the root filesystem to copy; the tool comes from the populate image.
        "name": "populate",
        "image": images["jail"],
        "imagePullPolicy": c.pull_policy,
        "command": command,
        "volumeMounts": jail_mounts + [tools_mount],
        "securityContext": _security(POPULATE_CAPABILITIES, _RUNTIME_DEFAULT),
    }], volumes=jail_volumes + [{"name": "tools", "emptyDir": {}}], init_containers=[{
        "name": "install-tool",
        "image": images["populateJail"],
        "imagePullPolicy": c.pull_policy,
        "command": ["cp", "/usr/local/bin/" + names.POPULATE_TOOL, tool],
        "volumeMounts": [tools_mount],
        "securityContext": _security([], _RUNTIME_DEFAULT),
    }])
    pod["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": c.owned(populate_job_name(c.name, token), names.COMPONENT_POPULATE,
                            annotations={names.ANNOTATION_CREATE_ONLY: "true"}),
        "spec": {"backoffLimit": 3, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }


def _statefulset(c, name, component, replicas, service, pod_spec, nodeset=None, annotations=None, extra=None):
    set_name = nodeset and nodeset["metadata"]["name"]
    template_md = {"labels": names.labels(c.name, component, set_name)}
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
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": c.metadata(name, component, nodeset=nodeset, owner=owner), "spec": spec}


def _pdb(c, name, component, nodeset=None):
    owner = nodeset if nodeset is not None else c.obj
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": c.metadata(name, component, nodeset=nodeset, owner=owner),
        "spec": {"maxUnavailable": 1,
                 "selector": {"matchLabels": names.selector_labels(c.name, component,
                                                                   nodeset and nodeset["metadata"]["name"])}},
    }


def _controller(c, slurm_config):
    spec = c.spec["controller"]
    image = c.spec["images"]["controller"]
    jail_volumes = c.jail_volumes(with_sub_mounts=False)[0]
    volumes = ([{"name": "slurm-config", "configMap": {"name": names.slurm_config_name(c.name)}}] + c.munge_volumes()
               + jail_volumes)
    container = {
        "name": "slurmctld",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        # The entrypoint runs `scontrol reconfigure` once slurmctld answers, so nodes pick up a changed config.
        # Absolute paths: Slurm daemons re-exec argv[0] on `scontrol reconfigure` (execv, no PATH lookup).
        "args": ["/usr/sbin/slurmctld", "-D"],
        "ports": [{"name": "slurmctld", "containerPort": names.SLURMCTLD_PORT, "protocol": "TCP"}],
        "readinessProbe": _tcp_probe("slurmctld"),
        "volumeMounts": [
            {"name": "slurm-config", "mountPath": names.SLURM_CONFIG_DIR, "readOnly": True},
            {"name": "spool", "mountPath": names.SLURMCTLD_SPOOL},
            {"name": "munge-run", "mountPath": names.MUNGE_RUN_DIR},
            # Users exist only in the jail (one set for the cluster): slurmctld resolves job owners from its
            # /etc/passwd and /etc/group, which the entrypoint links to the jail's. Read-only: it never writes there.
            {"name": "jail", "mountPath": names.JAIL_MOUNT, "readOnly": True},
        ],
        "securityContext": _security(CONTROLLER_CAPABILITIES, _RUNTIME_DEFAULT),
    }
    resources = _resources(spec.get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(spec.get("placement"), [container], volumes, init_containers=[c.munge_sidecar(image)], grace=60)
    spool = spec["spool"]
    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": spool["size"]}}}
    if spool.get("storageClassName"):
        claim_spec["storageClassName"] = spool["storageClassName"]
    name = names.controller_name(c.name)
    return _statefulset(c, name, names.COMPONENT_CONTROLLER, 1, name, pod,
                        annotations={names.ANNOTATION_CONFIG_HASH: config_hash(slurm_config)},
                        extra={
                            "volumeClaimTemplates": [{
                                "metadata": {"name": "spool",
                                             "labels": names.labels(c.name, names.COMPONENT_CONTROLLER)},
                                "spec": claim_spec}],
                            # The spool holds the job queue: it outlives the StatefulSet (see deletionPolicy.jail).
                            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                        })


def _run_mounts(volume, path):
    """A per-pod directory mounted at ``path`` and at the same place inside the jail (jobs and sessions see it)."""
    return [{"name": volume, "mountPath": path}, {"name": volume, "mountPath": names.JAIL_MOUNT + path}]


def _login(c, sshd_config):
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
        "securityContext": _security([], _RUNTIME_DEFAULT),
    }
    sshd = {
        "name": "sshd",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "args": ["/usr/sbin/sshd", "-D", "-e", "-f", names.SSHD_CONFIG_MOUNT + "/sshd_config"],
        "env": [{"name": "SLURM_CONF_SERVER", "value": c.conf_server}],
        "ports": [{"name": "ssh", "containerPort": names.SSH_PORT, "protocol": "TCP"}],
        "readinessProbe": _tcp_probe("ssh"),
        "volumeMounts": jail_mounts + [
            {"name": "ssh-host-keys", "mountPath": names.SSH_HOST_KEYS_MOUNT, "readOnly": True},
            {"name": "sshd-config", "mountPath": names.SSHD_CONFIG_MOUNT, "readOnly": True},
        ] + _run_mounts("munge-run", names.MUNGE_RUN_DIR) + _run_mounts("slurm-run", names.SLURM_RUN_DIR),
        # Sessions may use setuid programs of the jail (sudo): privilege escalation stays allowed. The runtime's
        # default AppArmor profile denies mount (the entrypoint's binds); seccomp RuntimeDefault allows them.
        "securityContext": _security(LOGIN_CAPABILITIES, _RUNTIME_DEFAULT, escalation=True),
    }
    sshd["securityContext"]["appArmorProfile"] = {"type": "Unconfined"}
    resources = _resources(spec.get("resources"))
    if resources:
        sshd["resources"] = resources
    pod = c.pod_spec(spec.get("placement"), [sshd], volumes, init_containers=[c.munge_sidecar(image), sackd])
    name = names.login_name(c.name)
    return _statefulset(c, name, names.COMPONENT_LOGIN, spec["replicas"], names.login_headless_name(c.name), pod,
                        annotations={names.ANNOTATION_CONFIG_HASH: config_hash(sshd_config)},
                        extra={"podManagementPolicy": "Parallel"})


def _worker(c, nodeset):
    set_name = nodeset["metadata"]["name"]
    spec = nodeset["spec"]
    image = spec.get("image") or c.spec["images"]["worker"]
    jail_volumes, jail_mounts = c.jail_volumes()
    volumes = jail_volumes + c.munge_volumes() + [
        {"name": "slurmd-spool", "emptyDir": {}},
        {"name": "slurm-run", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    resources = _resources(spec.get("resources"))
    gpu = spec["gpu"]
    if gpu["count"]:
        resources.setdefault("limits", {})[gpu["resourceName"]] = gpu["count"]
    container = {
        "name": "slurmd",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        # A dynamic node named after its pod; its hardware description never touches slurm.conf.
        "args": ["/usr/sbin/slurmd", "-D", "-Z", "-N", "$(SLURMD_NODENAME)", "--conf-server", "$(SLURM_CONF_SERVER)",
                 "--conf", "$(SLURMD_CONF_PARAMS)"],
        "env": [
            {"name": "SLURMD_NODENAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SLURM_NODESET", "value": set_name},
            {"name": "SLURMD_CONF_PARAMS", "value": node_conf_params(nodeset)},
            {"name": "SLURM_CONF_SERVER", "value": c.conf_server},
            # Jail paths the entrypoint also mounts at the same path for slurmstepd (batch output files).
            {"name": "SOPERATOR_JAIL_SHARED_PATHS", "value": " ".join(
                ["/home", "/root"] + [sub["mountPath"] for sub in c.spec["jail"].get("subMounts") or ()])},
        ],
        "ports": [{"name": "slurmd", "containerPort": names.SLURMD_PORT, "protocol": "TCP"}],
        # Ready once its Slurm node is registered and responding: the pod's Ready condition carries what only
        # Slurm knows, so the reconciler sees a node arrive through the pod watch instead of polling Slurm.
        "readinessProbe": {"exec": {"command": [names.NODE_READY_PROBE]}, "periodSeconds": 5, "timeoutSeconds": 5,
                           "failureThreshold": 2},
        "volumeMounts": jail_mounts + _run_mounts("slurmd-spool", names.SLURMD_SPOOL)
        + _run_mounts("munge-run", names.MUNGE_RUN_DIR) + _run_mounts("slurm-run", names.SLURM_RUN_DIR)
        + [{"name": "dshm", "mountPath": "/dev/shm"}],
        # Not privileged: the capabilities above, plus seccomp and AppArmor unconfined because the runtime
        # default profiles block pivot_root and mount, which the jail plugin needs. SYS_ADMIN implies that
        # privilege escalation stays allowed (the API server refuses the combination otherwise).
        "securityContext": _security(WORKER_CAPABILITIES, {"type": "Unconfined"}, escalation=True),
    }
    container["securityContext"]["appArmorProfile"] = {"type": "Unconfined"}
    if resources:
        container["resources"] = resources
    grace = max(60, c.spec["slurm"]["killWait"] + 30)
    pod = c.pod_spec(spec.get("placement"), [container], volumes, init_containers=[c.munge_sidecar(image)],
                     grace=grace)
    name = names.worker_name(c.name, set_name)
    return _statefulset(c, name, names.COMPONENT_WORKER, spec["replicas"], name, pod, nodeset=nodeset,
                        extra={"podManagementPolicy": "Parallel"})


def render_cluster(cluster, nodesets, collection_version=names.COLLECTION_VERSION):
    """Every Kubernetes object of the cluster, in apply order.

    ``cluster`` is a SlurmCluster object and ``nodesets`` its NodeSet objects (apiVersion, kind, metadata with
    name/namespace and optionally uid, spec). Both are validated and defaulted first: a SpecErrors lists every
    problem. Apply order: Secrets, jail claim, ConfigMaps, Services, populate Job, StatefulSets, PDBs.
    """
    cluster, nodesets = validate_cluster_with_nodesets(cluster, nodesets, collection_version)
    c = _Cluster(cluster, nodesets)
    slurm_config = render_config_files(cluster, nodesets)
    sshd_config = {"sshd_config": render_sshd_config(cluster)}
    objects = [_secret(c, names.munge_key_name(c.name), names.GENERATE_MUNGE_KEY),
               _secret(c, names.ssh_host_keys_name(c.name), names.GENERATE_SSH_HOST_KEYS)]
    if "existingClaim" not in c.spec["jail"]:
        objects.append(_jail_claim(c))
    objects += [_config_map(c, names.slurm_config_name(c.name), slurm_config),
                _config_map(c, names.sshd_config_name(c.name), sshd_config)]
    objects.append(_headless_service(c, names.controller_name(c.name), names.COMPONENT_CONTROLLER, "slurmctld",
                                     names.SLURMCTLD_PORT))
    objects.append(_login_service(c))
    objects.append(_headless_service(c, names.login_headless_name(c.name), names.COMPONENT_LOGIN, "ssh",
                                     names.SSH_PORT))
    objects += [_headless_service(c, names.worker_name(c.name, ns["metadata"]["name"]), names.COMPONENT_WORKER,
                                  "slurmd", names.SLURMD_PORT, nodeset=ns) for ns in c.nodesets]
    if not c.maintenance:
        objects.append(_populate_job(c))
    objects.append(_controller(c, slurm_config))
    objects.append(_login(c, sshd_config))
    objects += [_worker(c, ns) for ns in c.nodesets]
    objects.append(_pdb(c, names.login_name(c.name), names.COMPONENT_LOGIN))
    objects += [_pdb(c, names.worker_name(c.name, ns["metadata"]["name"]), names.COMPONENT_WORKER, nodeset=ns)
                for ns in c.nodesets]
    return objects
