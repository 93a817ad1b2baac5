"""spec.jail.backup: defaults, every refusal names its field (the schema, the CEL twins, the cron check, a repository
on the jail), the Secrets it takes only when marked for the cluster, and what a restore may ask."""

import pytest
from resources import make_cluster

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import references, restore, schema, spec, values
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model

S3 = {"s3": {"endpoint": "https://s3.example.com:9000", "bucket": "jails", "credentialsSecretRef": {"name": "s3"}}}


def backup(**over):
    body = {"schedule": "0 2 * * *", "repository": S3, "passwordSecretRef": {"name": "pw"}}
    body.update(over)
    return body


def cluster(**over):
    return make_cluster({"jail": {"storageClassName": "standard", "size": "10Gi", "backup": backup(**over)}})


def errors_of(obj):
    with pytest.raises(SpecErrors) as e:
        spec.validate_cluster(obj)
    return dict((err.path, str(err)) for err in e.value.errors)


def test_defaults():
    got = spec.validate_cluster(cluster())["spec"]["jail"]["backup"]
    assert got["retention"] == {"schedule": "30 4 * * *", "daily": 7, "weekly": 4, "monthly": 6}
    assert got["passwordSecretRef"] == {"name": "pw", "key": "password"} and got["overdueAfter"] == "26h"
    images = spec.validate_cluster(cluster())["spec"]["images"]
    assert images["backup"] == "soperator/backup:" + names.COLLECTION_VERSION


@pytest.mark.parametrize("over,path,words", [
    ({"repository": {}}, "spec.jail.backup.repository", schema.BACKUP_REPOSITORY_RULE),
    ({"repository": dict(S3, claim={"claimName": "repo"})}, "spec.jail.backup.repository",
     schema.BACKUP_REPOSITORY_RULE),
    ({"retention": {"daily": 0, "weekly": 0, "monthly": 0}}, "spec.jail.backup.retention",
     schema.BACKUP_RETENTION_RULE),
    ({"schedule": "61 * * * *"}, "spec.jail.backup.schedule", "minute field"),
    ({"retention": {"schedule": "0 25 * * *"}}, "spec.jail.backup.retention.schedule", "hour field"),
    ({"repository": {"s3": dict(S3["s3"], endpoint="https://user:pw@s3.example.com")}},
     "spec.jail.backup.repository.s3.endpoint", "should match"),
    ({"repository": {"rest": {"url": "http://x:8000/a b"}}}, "spec.jail.backup.repository.rest.url", "should match"),
    ({"repository": {"claim": {"claimName": "repo", "path": "../escape"}}}, "spec.jail.backup.repository.claim.path",
     "should match"),
    ({"excludes": ["a\nb"]}, "spec.jail.backup.excludes[0]", "should match"),
    ({"overdueAfter": "a day"}, "spec.jail.backup.overdueAfter", "should match"),
    ({"repository": {"claim": {"claimName": "demo-jail"}}}, "spec.jail.backup.repository.claim.claimName",
     "on a volume it backs up"),
])
def test_refusals_name_the_field(over, path, words):
    found = errors_of(cluster(**over))
    assert path in found and words in found[path], found


def test_a_repository_on_an_existing_jail_claim_or_a_sub_mount_is_refused():
    obj = make_cluster({"jail": {"existingClaim": "shared", "backup": backup(repository={"claim": {
        "claimName": "shared"}})}})
    assert "spec.jail.backup.repository.claim.claimName" in errors_of(obj)
    obj = make_cluster({"jail": {"storageClassName": "standard", "size": "1Gi", "subMounts": [
        {"name": "home", "mountPath": "/home", "claimName": "homes"}], "backup": backup(repository={"claim": {
            "claimName": "homes"}})}})
    assert "spec.jail.backup.repository.claim.claimName" in errors_of(obj)


def test_the_secrets_it_takes_must_be_marked_for_the_cluster():
    obj = spec.validate_cluster(cluster())
    assert values.backup_secret_refs(obj["spec"]) == [("spec.jail.backup.passwordSecretRef.name", "pw"), (
        "spec.jail.backup.repository.s3.credentialsSecretRef.name", "s3")]
    mark = {names.LABEL_BACKUP_SECRET: "demo"}
    assert references.marked_secret_errors(obj, {"pw": mark, "s3": mark}) == []
    problems = dict((e.path, str(e)) for e in references.marked_secret_errors(obj, {"pw": mark, "s3": {
        names.LABEL_DATABASE_SECRET: "demo"}}))
    assert list(problems) == ["spec.jail.backup.repository.s3.credentialsSecretRef.name"]
    assert "%s=demo" % names.LABEL_BACKUP_SECRET in problems["spec.jail.backup.repository.s3.credentialsSecretRef.name"]
    missing = references.marked_secret_errors(obj, {"s3": mark})
    assert [e.path for e in missing] == ["spec.jail.backup.passwordSecretRef.name"] and "does not exist" in str(
        missing[0])


def test_no_backup_takes_no_secret():
    assert values.backup_secret_refs(spec.validate_cluster(make_cluster())["spec"]) == []


def stored(maintenance=False, phase="Ready", with_backup=True):
    obj = cluster() if with_backup else make_cluster()
    obj["spec"]["maintenance"] = maintenance
    obj["status"] = {"phase": phase}
    return obj


def test_restore_in_place_only_in_maintenance():
    assert restore.restore_problems(stored(True, "Maintenance"), "latest", "/home/alice", "") == []
    for obj in (stored(), stored(True, "Progressing")):  # asked for, but pods may still use the jail
        problems = restore.restore_problems(obj, "latest", "/home/alice", "")
        assert [p.path for p in problems] == ["jail_restore_into"] and "maintenance" in str(problems[0])
    assert restore.restore_problems(stored(), "0123abcd", "/home/alice", "/restore/alice") == []
    assert restore.MAINTENANCE_PHASE == model.PHASE_MAINTENANCE


@pytest.mark.parametrize("snapshot,path,into,var", [
    ("LATEST", "", "/restore", "jail_restore_snapshot"),
    ("abc", "", "/restore", "jail_restore_snapshot"),
    ("latest; rm -rf /", "", "/restore", "jail_restore_snapshot"),
    ("latest", "home/alice", "/restore", "jail_restore_path"),
    ("latest", "/home/../etc", "/restore", "jail_restore_path"),
    ("latest", "/home/alice", "/", "jail_restore_into"),
    ("latest", "/home/alice", "/home/alice", "jail_restore_into"),
    ("latest", "/home/alice", "/home", "jail_restore_into"),
])
def test_a_bad_restore_request_names_its_variable(snapshot, path, into, var):
    assert [p.path for p in restore.restore_problems(stored(), snapshot, path, into)] == [var]


def test_a_cluster_without_backups_has_nothing_to_restore():
    assert [p.path for p in restore.restore_problems(stored(with_backup=False), "latest", "", "/r")] == [
        "jail_restore_cluster"]
