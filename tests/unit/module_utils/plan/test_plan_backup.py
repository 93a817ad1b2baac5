"""status.backup and BackupReady from the backup pods' termination messages (the program's JSON report)."""

import json

from planning import NOW, context

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan import backup, decided, status
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import Draft

BACKUP = {"schedule": "0 2 * * *", "passwordSecretRef": {"name": "pw"}, "overdueAfter": "1h",
          "repository": {"claim": {"claimName": "repo"}}}


def pod(name, exit_code=None, report=None, message=None, waiting=None, component=names.COMPONENT_BACKUP):
    state = {}
    if exit_code is not None:
        state["terminated"] = {"exitCode": exit_code, "finishedAt": durations.iso(NOW - 5),
                               "message": message if message is not None else json.dumps(report) + "\n"}
    if waiting:
        state["waiting"] = {"reason": waiting, "message": "secret \"pw\" not found"}
    return {"metadata": {"name": name, "labels": names.labels("demo", component)},
            "status": {"containerStatuses": [{"name": "backup", "ready": False, "state": state}]}}


def ok(end, snapshot="abc", size=100):
    return {"result": "Succeeded", "snapshot": snapshot, "sizeBytes": size, "addedBytes": 10, "files": 3,
            "durationSeconds": 7, "end": end}


def planned(pods=(), old=None, maintenance=False, now=NOW):
    spec = {"jail": {"storageClassName": "standard", "size": "1Gi", "backup": BACKUP}, "maintenance": maintenance}
    ctx = context(spec, observed={"pods": dict((p["metadata"]["name"], p) for p in pods)}, now=now)
    if old is not None:
        ctx.cluster["status"] = {"backup": old}
    p = Draft()
    backup.plan_backup(p, ctx)
    return p


def test_the_last_success_is_reported():
    p = planned([pod("b1", 0, ok(durations.iso(NOW - 600), "old")), pod("b2", 0, ok(durations.iso(NOW - 60), "new",
                                                                                       250))])
    assert p.backup["snapshot"] == "new" and p.backup["sizeBytes"] == 250 and p.backup["durationSeconds"] == 7
    assert p.backup["lastSuccessTime"] == durations.iso(NOW - 60)
    assert p.components["BackupReady"][:2] == ("True", "Succeeded")


def test_a_failure_after_the_last_success_is_a_false_condition_with_its_words():
    failed = {"result": "Failed", "message": "the repository cannot be opened", "end": durations.iso(NOW - 30)}
    p = planned([pod("b1", 0, ok(durations.iso(NOW - 600))), pod("b2", 1, failed)])
    cstatus, reason, message = p.components["BackupReady"]
    assert (cstatus, reason) == ("False", "BackupFailed") and "cannot be opened" in message
    assert p.backup["lastFailure"] == "the repository cannot be opened" and p.backup["snapshot"] == "abc"
    # A success after it clears it.
    p = planned([pod("b1", 1, failed), pod("b2", 0, ok(durations.iso(NOW - 10)))])
    assert p.components["BackupReady"][0] == "True"


def test_a_pod_that_cannot_start_is_a_failure():
    p = planned([pod("b1", waiting="CreateContainerConfigError")])
    assert p.components["BackupReady"][:2] == ("False", "BackupFailed")


def test_overdue_after_the_last_success_or_since_watched():
    p = planned([pod("b1", 0, ok(durations.iso(NOW - 7200)))])
    assert p.components["BackupReady"][:2] == ("False", "Overdue")
    p = planned([], old={"watchedSince": durations.iso(NOW - 3000)})
    assert p.components["BackupReady"][:2] == ("True", "Waiting")
    p = planned([], old={"watchedSince": durations.iso(NOW - 4000)})
    assert p.components["BackupReady"][:2] == ("False", "Overdue")
    assert p.requeue_after is None  # the overdue clock is no work under way


def test_the_status_keeps_the_last_success_after_its_pod_is_gone():
    old = {"lastSuccessTime": durations.iso(NOW - 100), "snapshot": "kept", "sizeBytes": 5,
           "watchedSince": durations.iso(NOW - 9000)}
    p = planned([], old=old)
    assert p.backup == old and p.components["BackupReady"][0] == "True"
    # An older pod does not overwrite a newer recorded success.
    p = planned([pod("b0", 0, ok(durations.iso(NOW - 500), "older"))], old=old)
    assert p.backup["snapshot"] == "kept"


def test_other_pods_and_reports_are_ignored():
    p = planned([pod("r1", 0, ok(durations.iso(NOW - 10), "x"), component=names.COMPONENT_RESTORE),
                 pod("b1", 0, message="not json at all")])
    assert "snapshot" not in p.backup


def test_maintenance_and_no_backup():
    assert planned(maintenance=True).components["BackupReady"][:2] == ("False", "Maintenance")
    ctx = context({}, now=NOW)
    p = Draft()
    backup.plan_backup(p, ctx)
    assert p.backup is None and "BackupReady" not in p.components


def test_the_cluster_status_carries_it_and_removes_it():
    p = planned([pod("b1", 0, ok(durations.iso(NOW - 60)))])
    p.ready, p.phase, p.message = True, "Ready", "ok"
    obj = {"metadata": {"generation": 1}}
    got = status.cluster_status({}, obj, decided.freeze(p), durations.iso(NOW))
    assert got["backup"]["snapshot"] == "abc"
    assert next(c for c in got["conditions"] if c["type"] == "BackupReady")["status"] == "True"
    off = Draft()
    off.ready, off.phase, off.message = True, "Ready", "ok"
    gone = status.cluster_status(got, obj, decided.freeze(off), durations.iso(NOW))
    assert gone["backup"] is None and "BackupReady" not in [c["type"] for c in gone["conditions"]]
    assert "backup" not in status.cluster_status({}, obj, decided.freeze(off), durations.iso(NOW))


def test_a_time_not_written_as_kubernetes_writes_them_is_no_failure_of_the_pass():
    # A backup image of the user's (spec.images.backup) may write its report's end in another format: the overdue
    # clock takes the container's end then (this raised TypeError, and every pass of the cluster failed).
    p = planned([pod("b1", 0, ok("2026-01-01T02:00:00.123456+00:00"))])
    assert p.backup["lastSuccessTime"] == durations.iso(NOW - 5)
    assert p.components["BackupReady"][:2] == ("True", "Succeeded")
    # A status whose time cannot be read (edited by hand): the clock starts now.
    p = planned([], old={"lastSuccessTime": "yesterday", "watchedSince": durations.iso(NOW - 9000)})
    assert p.components["BackupReady"][:2] == ("True", "Succeeded")
