"""spec.jail.backup: defaults, every refusal names its field (the schema, the CEL twins, the cron check, a repository
on the jail), the Secrets it takes only when marked for the cluster, where the installer lets it go
(allowed_backup_endpoints), and what a restore may ask."""

import pytest
from resources import make_cluster

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import references, restore, schema, spec, values
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, model
from ansible_collections.soperator.slurm.plugins.module_utils.plan import restore as plan_restore

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


def test_restore_into_the_staging_directory_is_refused():
    # No jail path starts with a dot: the staging directory is never one (the program refuses it too).
    for into in (names.RESTORE_STAGING, names.RESTORE_STAGING + "/x"):
        assert [p.path for p in restore.restore_problems(stored(), "latest", "/home/alice", into)] == [
            "jail_restore_into"]


# --- where the backups may go: the installer's allowed_backup_endpoints --------------------------------------------
REST = {"rest": {"url": "https://backup.example.com:8000/jails/demo"}}


def judged(repository, allowed):
    """The cluster's errors under a policy allowing ``allowed`` endpoints: {path: message}."""
    policy = policies.normalize({"allowed_backup_endpoints": allowed})
    try:
        spec.validate_cluster_with_nodesets(cluster(repository=repository), [], policy=policy)
    except SpecErrors as e:
        return dict((err.path, str(err)) for err in e.errors)
    return {}


@pytest.mark.parametrize("repository,allowed", [
    (S3, []),
    (S3, ["https://s3.example.com:9000"]),
    (S3, ["https://S3.Example.com:9000/"]),
    (S3, ["https://s3.example.com:9000/jails"]),
    (S3, ["https://s3.example.com:9000/jails/demo"]),  # the prefix defaults to the cluster's name
    (REST, ["https://backup.example.com:8000/jails"]),
    (REST, ["https://other.example.com", "https://backup.example.com:8000"]),
    ({"claim": {"claimName": "repo"}}, ["https://s3.example.com"]),  # a claim of the namespace: always
])
def test_an_allowed_repository(repository, allowed):
    assert judged(repository, allowed) == {}


@pytest.mark.parametrize("repository,allowed,field", [
    (S3, ["https://s3.example.com"], "spec.jail.backup.repository.s3.endpoint"),  # another port
    (S3, ["http://s3.example.com:9000"], "spec.jail.backup.repository.s3.endpoint"),  # another scheme
    (S3, ["https://s3.example.com:9000/other"], "spec.jail.backup.repository.s3.endpoint"),
    (S3, ["https://s3.example.com:9000/jails/demo2"], "spec.jail.backup.repository.s3.endpoint"),
    ({"s3": dict(S3["s3"], endpoint="https://s3.example.com.evil.example:9000")}, ["https://s3.example.com"],
     "spec.jail.backup.repository.s3.endpoint"),
    (REST, ["https://backup.example.com:8000/jail"], "spec.jail.backup.repository.rest.url"),  # a boundary
    ({"rest": {"url": "https://backup.example.com:8000/jails/../x"}}, ["https://backup.example.com:8000/jails"],
     "spec.jail.backup.repository.rest.url"),
    ({"rest": {"url": "https://backup.example.com:8000/jails/%2e%2e/x"}}, ["https://backup.example.com:8000/jails"],
     "spec.jail.backup.repository.rest.url"),
])
def test_a_repository_the_installer_does_not_allow_is_refused_naming_its_field(repository, allowed, field):
    found = judged(repository, allowed)
    assert list(found) == [field] and "(allowed_backup_endpoints)" in found[field]
    assert "is not allowed by the installer's policy" in found[field] and allowed[0].rstrip("/") in found[field]


@pytest.mark.parametrize("bad", [["s3.example.com"], ["https://user:pw@s3.example.com"], ["https://x/../y"],
                                 ["https://x/a%2fb"], ["ftp://x"], "https://x"])
def test_a_malformed_endpoint_in_the_policy_is_refused(bad):
    with pytest.raises(ValueError, match="allowed_backup_endpoints"):
        policies.normalize({"allowed_backup_endpoints": bad})


def test_the_converge_applies_it():
    policy = policies.normalize({"allowed_backup_endpoints": ["https://elsewhere.example.com"]})
    with pytest.raises(SpecErrors) as e:
        converge.plan(cluster(), [], {"statefulsets": {}, "pods": {}, "slurm": None}, 0, policy=policy)
    assert [err.path for err in e.value.errors] == ["spec.jail.backup.repository.s3.endpoint"]


def test_a_restore_applies_it_too():
    obj = cluster()
    obj["status"] = {"phase": "Ready"}
    mark = {names.LABEL_BACKUP_SECRET: "demo"}
    policy = policies.normalize({"allowed_backup_endpoints": ["https://elsewhere.example.com"]})
    with pytest.raises(SpecErrors) as e:
        plan_restore.restore_job(obj, {"pw": mark, "s3": mark}, policy, "latest", "/home/alice", "/restore/alice")
    assert [err.path for err in e.value.errors] == ["spec.jail.backup.repository.s3.endpoint"]
