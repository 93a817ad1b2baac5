# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jail's backups in the status: the last successful backup (when, snapshot, size, duration) and a condition
BackupReady, False when the last backup failed or the last success is older than ``overdueAfter``. Pure.

The facts come from the backup pods' termination messages (the program's one-line JSON report,
images/backup/soperator-backup), which the pods keep while the CronJob keeps their Job (three of each outcome); the
status keeps the last success after its pod is gone. No pod talks to the Kubernetes API for this.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json
from typing import Literal, Mapping, Tuple, cast

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan.components import pod_problem
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import BackupStatus, Context, Draft, labels
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

CONDITION = "BackupReady"
REASON_SUCCEEDED = "Succeeded"
REASON_FAILED = "BackupFailed"
REASON_OVERDUE = "Overdue"
REASON_MAINTENANCE = "Maintenance"
_REPORT_KEYS: Tuple[Literal["snapshot", "sizeBytes", "addedBytes", "files", "durationSeconds"], ...] = (
    "snapshot", "sizeBytes", "addedBytes", "files", "durationSeconds")
# A backup pod's outcome: (its end time, RFC 3339; its report, or {"message"} of a failure).
Run = Tuple[str, KubeObject]


def _terminated(pod: KubeObject, container: str) -> KubeObject | None:
    for status in ((pod.get("status") or {}).get("containerStatuses") or ()):
        if status.get("name") == container:
            return (status.get("state") or {}).get("terminated")
    return None


def _report(message: str | None) -> KubeObject | None:
    """The program's JSON report: the last line of the termination message that parses, or None."""
    for line in reversed((message or "").strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def backup_runs(cluster_name: str, pods: Mapping[str, KubeObject]) -> tuple[list[Run], list[Run], list[str]]:
    """``(successes, failures, stuck)`` of the backup pods: ``(end time, report)`` each, oldest first, and the
    problems of pods that cannot run (a Secret or key missing, the image not there)."""
    successes: list[Run] = []
    failures: list[Run] = []
    stuck: list[str] = []
    for pod in pods.values():
        pod_labels = labels(pod)
        if (pod_labels.get(names.LABEL_COMPONENT) != names.COMPONENT_BACKUP
                or pod_labels.get(names.LABEL_INSTANCE) != cluster_name):
            continue
        terminated = _terminated(pod, "backup")
        if terminated is None:
            problem = pod_problem(pod)
            if problem:
                stuck.append(problem)
            continue
        report = _report(terminated.get("message")) or {}
        end = report.get("end") or ""
        if durations.epoch_of(end) is None:  # none, or not a time as Kubernetes writes one: when the container ended
            end = terminated.get("finishedAt") or ""
        if terminated.get("exitCode") == 0 and report.get("result") == "Succeeded":
            successes.append((end, report))
        elif terminated.get("exitCode") is not None and report.get("result") != "Succeeded":
            said = report.get("message") or (terminated.get("message") or "").strip().splitlines()[-1:] or [
                terminated.get("reason") or "failed"]
            failures.append((end, {"message": said if isinstance(said, str) else said[0]}))
    return sorted(successes, key=lambda r: r[0]), sorted(failures, key=lambda r: r[0]), sorted(stuck)


def plan_backup(p: Draft, ctx: Context) -> None:
    """``p.backup`` (status.backup; None removes it) and the condition BackupReady in ``p.components``."""
    backup = ctx.spec["jail"].get("backup")
    if not backup:
        p.backup = None
        return
    old = dict(((ctx.cluster.get("status") or {}).get("backup")) or {})
    status = cast(BackupStatus, dict(old))  # as an earlier pass wrote it
    status.setdefault("watchedSince", durations.iso(ctx.now))
    successes, failures, stuck = backup_runs(ctx.name, ctx.pods)
    if successes and successes[-1][0] > status.get("lastSuccessTime", ""):
        end, report = successes[-1]
        status["lastSuccessTime"] = end
        for key in _REPORT_KEYS:
            if key in report:
                status[key] = report[key]
    if failures and failures[-1][0] > status.get("lastFailureTime", ""):
        status["lastFailureTime"], status["lastFailure"] = failures[-1][0], failures[-1][1]["message"][:1024]
    p.backup = status
    if ctx.spec["maintenance"]:
        p.components[CONDITION] = ("False", REASON_MAINTENANCE, "no backups while the cluster is in maintenance")
        return
    last_success = status.get("lastSuccessTime", "")
    if stuck:
        p.components[CONDITION] = ("False", REASON_FAILED, "a backup pod cannot run: " + "; ".join(stuck))
        return
    if status.get("lastFailureTime", "") > last_success:
        p.components[CONDITION] = ("False", REASON_FAILED, "the last backup failed at %s: %s" % (
            status["lastFailureTime"], status.get("lastFailure", "")))
        return
    limit = durations.seconds(backup["overdueAfter"])
    since = durations.epoch_of(last_success or status["watchedSince"])
    if since is None:  # not a time as this planner writes them (a status edited by hand): the clock starts now
        since = ctx.now
    age = ctx.now - since
    if age > limit:
        since_text = last_success or status["watchedSince"]
        p.components[CONDITION] = ("False", REASON_OVERDUE, "no successful backup since %s (spec.jail.backup."
                                   "overdueAfter %s)" % (since_text, backup["overdueAfter"]))
        return
    # No timed look for the overdue clock: it is no work under way (a requeue would keep the operator from
    # recording a settled run). The operator's periodic resync (watches.yaml reconcilePeriod) and every backup
    # pod's events look again.
    if last_success:
        p.components[CONDITION] = ("True", REASON_SUCCEEDED, "last backup %s at %s: %s bytes in %s s" % (
            status.get("snapshot"), last_success, status.get("sizeBytes"), status.get("durationSeconds")))
    else:
        p.components[CONDITION] = ("True", "Waiting", "no backup yet; overdue after %s" % backup["overdueAfter"])
