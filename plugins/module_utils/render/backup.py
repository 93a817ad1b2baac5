# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jail's backups (spec.jail.backup): the backup CronJob, the retention CronJob, and the restore Job that
playbooks/jail-restore.yml creates.

Every pod runs the backup image's program (images/backup/soperator-backup) with restic. What is not secret travels as
arguments and environment (the repository's address, excludes, retention); the repository's password and credentials
only as Secret files the program reads (RESTIC_PASSWORD_FILE, and the credentials put into restic's own environment
by the program): never a ConfigMap, never the pod's env that ``kubectl describe`` shows, never a log line.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    container_resources,
    security,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, Spec

# restic reads every file of every user as root. Root without capabilities is subject to the files' modes (a 0600
# file of a user, a 0700 home): DAC_READ_SEARCH lets it read any file and search any directory, and nothing more; it
# cannot write (the jail is mounted read-only, and DAC_OVERRIDE, CHOWN, FOWNER are not granted).
BACKUP_CAPABILITIES = ["DAC_READ_SEARCH"]
# The retention step only talks to the repository (a claim's files are root's: the backup wrote them as root).
RETENTION_CAPABILITIES: list[str] = []
# A restore writes files of every user back with their owners, modes and attributes.
RESTORE_CAPABILITIES = [
    "CHOWN",  # files get their owners back
    "DAC_OVERRIDE",  # writes into directories of any user, whatever their modes
    "FOWNER",  # sets modes, times and attributes of files it does not own
    "FSETID",  # keeps setuid/setgid bits
    "SETFCAP",  # restores file capabilities (security.capability)
]

_PASSWORD_FILE = "repository-password"
# Retries of a repository lock held by the other step (a backup while the retention prunes, and back).
RETRY_LOCK = "2h"


def backup_enabled(c: ClusterContext) -> bool:
    return bool(c.spec["jail"].get("backup")) and not c.maintenance


def _repository(c: ClusterContext,
                backup: Spec) -> tuple[str, list[KubeObject], list[KubeObject], list[KubeObject]]:
    """(RESTIC_REPOSITORY, extra env, volumes, mounts) of the repository."""
    repo = backup["repository"]
    env: list[KubeObject] = []
    volumes: list[KubeObject] = []
    mounts: list[KubeObject] = []
    credentials = None
    if "s3" in repo:
        s3 = repo["s3"]
        url = "s3:%s/%s/%s" % (s3["endpoint"].rstrip("/"), s3["bucket"], s3.get("prefix") or c.name)
        if s3.get("region"):
            env.append({"name": "AWS_DEFAULT_REGION", "value": s3["region"]})
        credentials = s3["credentialsSecretRef"]["name"]
    elif "rest" in repo:
        url = "rest:" + repo["rest"]["url"]
        credentials = (repo["rest"].get("credentialsSecretRef") or {}).get("name")
    else:
        claim = repo["claim"]
        url = "%s/%s" % (names.BACKUP_REPOSITORY_MOUNT, claim.get("path") or c.name)
        volumes.append({"name": "repository", "persistentVolumeClaim": {"claimName": claim["claimName"]}})
        mounts.append({"name": "repository", "mountPath": names.BACKUP_REPOSITORY_MOUNT})
    if credentials:
        volumes.append({"name": "credentials", "secret": {"secretName": credentials, "defaultMode": 0o400}})
        mounts.append({"name": "credentials", "mountPath": names.BACKUP_CREDENTIALS_MOUNT, "readOnly": True})
        env.append({"name": "SOPERATOR_BACKUP_CREDENTIALS", "value": names.BACKUP_CREDENTIALS_MOUNT})
    return url, env, volumes, mounts


def _pod(c: ClusterContext, name: str, args: list[str], capabilities: Sequence[str], jail_read_only: bool | None,
         extra_volumes: Iterable[KubeObject] = (), extra_mounts: Iterable[KubeObject] = (),
         component: str | None = None) -> KubeObject:
    """The pod of a backup, retention or restore run: root with ``capabilities`` only, a read-only root filesystem."""
    backup = c.spec["jail"]["backup"]
    url, env, volumes, mounts = _repository(c, backup)
    password = backup["passwordSecretRef"]
    volumes = volumes + [
        {"name": "password", "secret": {"secretName": password["name"], "defaultMode": 0o400,
                                        "items": [{"key": password["key"], "path": _PASSWORD_FILE}]}},
        {"name": "cache", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ] + list(extra_volumes)
    mounts = mounts + [
        {"name": "password", "mountPath": names.BACKUP_PASSWORD_MOUNT, "readOnly": True},
        {"name": "cache", "mountPath": names.BACKUP_CACHE_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ] + list(extra_mounts)
    if jail_read_only is not None:
        volumes.append({"name": "jail", "persistentVolumeClaim": {"claimName": c.jail_claim,
                                                                  "readOnly": jail_read_only}})
        mounts.append({"name": "jail", "mountPath": names.JAIL_MOUNT, "readOnly": jail_read_only})
    env = [{"name": "RESTIC_REPOSITORY", "value": url},
           {"name": "RESTIC_PASSWORD_FILE", "value": "%s/%s" % (names.BACKUP_PASSWORD_MOUNT, _PASSWORD_FILE)},
           {"name": "RESTIC_CACHE_DIR", "value": names.BACKUP_CACHE_DIR}] + env
    context = dict(security(capabilities, RUNTIME_DEFAULT), runAsUser=0, runAsGroup=0, readOnlyRootFilesystem=True)
    container = {
        "name": name,
        "image": c.spec["images"]["backup"],
        "imagePullPolicy": c.pull_policy,
        "command": [names.BACKUP_PROGRAM] + args,
        "env": env,
        "volumeMounts": mounts,
        "securityContext": context,
        # The program's last line (a JSON report, or why it failed) is what the converge reads into the status.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    resources = container_resources(backup.get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(None, [container], volumes)
    pod["restartPolicy"] = "Never"
    return pod


def _excludes(backup: Spec) -> list[str]:
    """restic --exclude arguments: a pattern starting with '/' is a path of the jail, as the snapshots hold it."""
    args = []
    for pattern in backup.get("excludes") or ():
        args.append("--exclude=" + (names.JAIL_MOUNT + pattern if pattern.startswith("/") else pattern))
    return args


def _cronjob(c: ClusterContext, name: str, schedule: str, pod: KubeObject, deadline: int) -> KubeObject:
    labels = names.labels(c.name, names.COMPONENT_BACKUP)
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": c.owned(name, names.COMPONENT_BACKUP),
        "spec": {
            "schedule": schedule,
            # Never two at once: a run still going when the next is due makes that one skip.
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                # The Jobs are the CronJob's (its owner reference and history limits remove them): the converge's
                # prune, which sees the cluster's label on them, leaves them alone.
                "metadata": {"labels": labels, "annotations": {names.ANNOTATION_PRUNE: "false"}},
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": deadline,
                         "template": {"metadata": {"labels": labels}, "spec": pod}},
            },
        },
    }


def backup_cronjob(c: ClusterContext) -> KubeObject | None:
    """The backup CronJob, or None (no spec.jail.backup, or the cluster is in maintenance: a restore may be writing
    the jail)."""
    if not backup_enabled(c):
        return None
    backup = c.spec["jail"]["backup"]
    args = ["backup", "--host", c.name, "--retry-lock", RETRY_LOCK] + _excludes(backup)
    pod = _pod(c, "backup", args, BACKUP_CAPABILITIES, jail_read_only=True)
    return _cronjob(c, names.backup_name(c.name), backup["schedule"], pod, 24 * 3600)


def retention_cronjob(c: ClusterContext) -> KubeObject | None:
    """The retention step: restic forget --prune of this cluster's snapshots, on its own schedule."""
    if not backup_enabled(c):
        return None
    backup = c.spec["jail"]["backup"]
    keep = backup["retention"]
    args = ["forget", "--host", c.name, "--retry-lock", RETRY_LOCK, "--keep-daily", str(keep["daily"]),
            "--keep-weekly", str(keep["weekly"]), "--keep-monthly", str(keep["monthly"])]
    pod = _pod(c, "retention", args, RETENTION_CAPABILITIES, jail_read_only=None)
    return _cronjob(c, names.backup_retention_name(c.name), keep["schedule"], pod, 24 * 3600)


def restore_job(c: ClusterContext, snapshot: str, path: str = "", into: str = "") -> KubeObject:
    """A Job that restores ``path`` (a jail path, "" for the whole jail) of ``snapshot`` into the jail: at the same
    place when ``into`` is "" (the cluster must be in maintenance: the caller checks), else below ``into`` (a jail
    path, e.g. /restore/2024-06-01, made if missing). Arguments are validated by the caller (api/restore.py)."""
    source = names.JAIL_MOUNT + path
    target = names.JAIL_MOUNT + (into or path)
    args = ["restore", "--host", c.name, "--snapshot", snapshot, "--source", source, "--target", target]
    pod = _pod(c, "restore", args, RESTORE_CAPABILITIES, jail_read_only=False)
    labels = names.labels(c.name, names.COMPONENT_RESTORE)
    request = {"snapshot": snapshot, "path": path, "into": into}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": c.owned(names.restore_job_name(c.name, request), names.COMPONENT_RESTORE,
                            annotations={names.ANNOTATION_PRUNE: "false"}),
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 7 * 24 * 3600,
                 "template": {"metadata": {"labels": labels}, "spec": pod}},
    }
