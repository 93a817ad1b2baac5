# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jail: its claim (created once) and the Job that populates it once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    security,
)

POPULATE_CAPABILITIES = [
    "CHOWN",  # the jail's files keep their owners
    "DAC_OVERRIDE",  # reads every file of the jail image, whatever its mode
    "FOWNER",  # keeps modes and timestamps of files it does not own
    "FSETID",  # keeps setuid/setgid bits (sudo, ping in the jail)
    "SETFCAP",  # keeps file capabilities
]


def jail_claim(c):
    jail = c.spec["jail"]
    spec = {"accessModes": ["ReadWriteMany"], "storageClassName": jail["storageClassName"],
            "resources": {"requests": {"storage": jail["size"]}}}
    # No owner reference: the jail (users' files) must survive deletion of the SlurmCluster.
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": c.metadata(names.jail_claim_name(c.name), names.COMPONENT_JAIL,
                                   annotations={names.ANNOTATION_CREATE_ONLY: "true"}),
            "spec": spec}


def populate_job(c):
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
