# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jail: its claim (created once), the Job that populates it once, and the administration Job the jail connection
makes while no login pod runs."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import jail_shell
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    security,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

POPULATE_CAPABILITIES = [
    "CHOWN",  # the jail's files keep their owners
    "DAC_OVERRIDE",  # reads every file of the jail image, whatever its mode
    "FOWNER",  # keeps modes and timestamps of files it does not own
    "FSETID",  # keeps setuid/setgid bits (sudo, ping in the jail)
    "SETFCAP",  # keeps file capabilities
]


def jail_claim(c: ClusterContext) -> KubeObject:
    jail = c.spec["jail"]
    spec = {"accessModes": ["ReadWriteMany"], "storageClassName": jail["storageClassName"],
            "resources": {"requests": {"storage": jail["size"]}}}
    # No owner reference: the jail (users' files) must survive deletion of the SlurmCluster.
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": c.metadata(names.jail_claim_name(c.name), names.COMPONENT_JAIL,
                                   annotations={names.ANNOTATION_CREATE_ONLY: "true"}),
            "spec": spec}


def populate_job(c: ClusterContext) -> KubeObject:
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
        # A refusal (a non-empty volume that is not a soperator jail) reaches the converge's status this way.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": jail_mounts + [tools_mount],
        "securityContext": security(POPULATE_CAPABILITIES, RUNTIME_DEFAULT),
    }], volumes=jail_volumes + [{"name": "tools", "emptyDir": {}}], init_containers=[{
        "name": "install-tool",
        "image": images["populateJail"],
        "imagePullPolicy": c.pull_policy,
        "command": ["cp", "/usr/local/bin/" + names.POPULATE_TOOL, tool],
        "volumeMounts": [tools_mount],
        "securityContext": security([], RUNTIME_DEFAULT),
    }])
    pod["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": c.owned(names.populate_job_name(c.name, token), names.COMPONENT_POPULATE,
                            annotations={names.ANNOTATION_CREATE_ONLY: "true"}),
        "spec": {"backoffLimit": 3, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }


# The jail's administration Job (admin_job): labelled names.COMPONENT_JAIL_ADMIN and managed by
# names.MANAGED_BY_JAIL_CONNECTION, so that none of the converge's selectors (the cluster label, its managed-by
# label) takes it. Its main process (after the login entrypoint prepared the jail and dropped SYS_ADMIN and
# SETPCAP from the bounding set): it ends the pod, and the Job's TTL removes both, once no other process (an exec of
# the jail connection) has run in the container for $1 seconds.
ADMIN_IDLE_SCRIPT = r"""idle=$1 last=$(date +%s)
trap 'exit 0' TERM INT
while :; do
  set -- /proc/[0-9]*
  now=$(date +%s)
  if [ $# -gt 1 ]; then last=$now; fi
  if [ $((now - last)) -ge "$idle" ]; then exit 0; fi
  sleep 2 & wait $!
done
"""
# Which of the login container's settings the administration pod keeps: its jail and sub-mounts (and their
# variable), nothing of sshd (host keys, configuration), munge, sackd or sssd.
_ADMIN_POD_KEYS = ("automountServiceAccountToken", "enableServiceLinks", "securityContext", "nodeSelector",
                   "tolerations", "affinity", "priorityClassName", "imagePullSecrets", "runtimeClassName")
_ADMIN_ENV = ("SOPERATOR_JAIL_SUB_MOUNTS",)


def admin_name(cluster: str) -> str:
    """The jail's administration Job (its pod: this and a suffix)."""
    return "%s-jail-admin" % cluster


def _jail_mount(mount: KubeObject) -> bool:
    path = mount.get("mountPath") or ""
    return path == names.JAIL_MOUNT or path.startswith(names.SUB_MOUNTS_DIR + "/")


def admin_job(login_statefulset: KubeObject, idle_seconds: float) -> KubeObject:
    """The jail's administration Job, from the cluster's login StatefulSet as the converge applied it (so what the
    installer's policy judged: image, placement, sub-mounts): one pod running the login image with the sshd
    container's securityContext (the same capabilities, so that a task may do in it what it may do in a login pod),
    the jail and its sub-mounts, prepared by the login entrypoint, and no sshd, host keys, munge or sssd. It ends
    itself after ``idle_seconds`` without an exec, and the Job's TTL removes it. Owned by the SlurmCluster (garbage
    collected with it); labelled for the jail connection, not for the converge (none of its selectors takes it)."""
    md = login_statefulset["metadata"]
    cluster = (md.get("labels") or {}).get(names.LABEL_INSTANCE)
    # The Job is named and labelled for this cluster: the jail connection of the cluster the label names enters it.
    if not isinstance(cluster, str) or md.get("name") != names.login_name(cluster):
        raise ValueError("StatefulSet %s/%s: its label %s is %r, not the SlurmCluster whose login StatefulSet it is "
                         "(the converge sets it: converge the cluster again)"
                         % (md.get("namespace"), md.get("name"), names.LABEL_INSTANCE, cluster))
    template = copy.deepcopy(login_statefulset["spec"]["template"]["spec"])
    sshd = next(c for c in template["containers"] if c["name"] == "sshd")
    mounts = [m for m in sshd.get("volumeMounts") or () if _jail_mount(m)]
    volume_names = set(m["name"] for m in mounts)
    container = {
        "name": jail_shell.ADMIN_CONTAINER,
        "image": sshd["image"],
        "args": ["/bin/sh", "-c", ADMIN_IDLE_SCRIPT, names.COMPONENT_JAIL_ADMIN, str(int(idle_seconds))],
        # The login entrypoint prepares the jail as for sessions (sub-mounts, /dev, /proc, /sys, the Slurm clients,
        # name resolution), then drops SYS_ADMIN and SETPCAP before it execs the script above.
        "env": [{"name": "SOPERATOR_ROLE", "value": "login"}] + [
            dict(e) for e in sshd.get("env") or () if e.get("name") in _ADMIN_ENV],
        "volumeMounts": mounts,
        "readinessProbe": {"exec": {"command": ["test", "-d", names.JAIL_MOUNT + "/proc/1"]}, "periodSeconds": 1},
        "securityContext": copy.deepcopy(sshd["securityContext"]),
    }
    for key in ("imagePullPolicy", "resources"):
        if key in sshd:
            container[key] = copy.deepcopy(sshd[key])
    pod = dict((k, template[k]) for k in _ADMIN_POD_KEYS if k in template)
    pod.update(containers=[container], volumes=[v for v in template.get("volumes") or () if v["name"] in volume_names],
               restartPolicy="Never", terminationGracePeriodSeconds=5)
    labels = {names.LABEL_NAME: "slurm", names.LABEL_INSTANCE: cluster,
              names.LABEL_COMPONENT: names.COMPONENT_JAIL_ADMIN, names.LABEL_PART_OF: "soperator",
              names.LABEL_MANAGED_BY: names.MANAGED_BY_JAIL_CONNECTION}
    metadata = {"name": admin_name(cluster), "namespace": md["namespace"], "labels": dict(labels)}
    owners = [dict(o) for o in md.get("ownerReferences") or () if o.get("kind") == names.CLUSTER_KIND]
    if owners:
        metadata["ownerReferences"] = owners
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 0,
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}
