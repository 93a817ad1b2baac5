"""The backup and retention CronJobs and the restore Job: what they run, with what, and what never reaches them."""

import json

from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster_with_nodesets
from ansible_collections.soperator.slurm.plugins.module_utils.render import backup as render_backup
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext

S3 = {"s3": {"endpoint": "https://s3.example.com/", "bucket": "jails", "region": "eu-1",
             "credentialsSecretRef": {"name": "s3-creds"}}}


def backup(repository=S3, **over):
    body = {"schedule": "0 2 * * *", "repository": repository, "passwordSecretRef": {"name": "pw", "key": "pass"},
            "excludes": ["/var/cache/apt", "*.tmp"]}
    body.update(over)
    return body


def objects(repository=S3, maintenance=False, **over):
    cluster = make_cluster({"jail": {"storageClassName": "standard", "size": "10Gi",
                                     "backup": backup(repository, **over)}, "maintenance": maintenance})
    return render_cluster(cluster, [make_nodeset()])


def cronjob(objs, name):
    return next((o for o in objs if o["kind"] == "CronJob" and o["metadata"]["name"] == name), None)


def container(obj):
    template = obj["spec"]["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob" else obj["spec"]["template"]
    return template["spec"]["containers"][0], template["spec"]


def env(c):
    return dict((e["name"], e.get("value")) for e in c["env"])


def test_the_backup_cronjob_reads_the_jail_read_only_and_never_runs_twice():
    job = cronjob(objects(), "demo-backup")
    assert job["spec"]["concurrencyPolicy"] == "Forbid" and job["spec"]["schedule"] == "0 2 * * *"
    c, pod = container(job)
    jail = next(v for v in pod["volumes"] if v["name"] == "jail")
    assert jail["persistentVolumeClaim"] == {"claimName": "demo-jail", "readOnly": True}
    assert next(m for m in c["volumeMounts"] if m["name"] == "jail") == {
        "name": "jail", "mountPath": names.JAIL_MOUNT, "readOnly": True}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["DAC_READ_SEARCH"]}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True and not c["securityContext"].get("privileged")
    assert pod["automountServiceAccountToken"] is False
    assert c["command"] == [names.BACKUP_PROGRAM, "backup", "--host", "demo", "--retry-lock", "2h",
                            "--exclude=/mnt/jail/var/cache/apt", "--exclude=*.tmp"]
    # The Jobs are the CronJob's: the converge's prune leaves them alone.
    assert job["spec"]["jobTemplate"]["metadata"]["annotations"] == {names.ANNOTATION_PRUNE: "false"}
    assert job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"][names.LABEL_COMPONENT] == \
        names.COMPONENT_BACKUP


def test_retention_is_a_separate_cronjob_with_its_own_schedule():
    job = cronjob(objects(retention={"schedule": "0 5 * * 0", "daily": 3, "weekly": 0, "monthly": 12}),
                  "demo-retention")
    c, pod = container(job)
    assert job["spec"]["schedule"] == "0 5 * * 0" and job["spec"]["concurrencyPolicy"] == "Forbid"
    assert c["command"][1:] == ["forget", "--host", "demo", "--retry-lock", "2h", "--keep-daily", "3",
                                "--keep-weekly", "0", "--keep-monthly", "12"]
    assert "jail" not in [v["name"] for v in pod["volumes"]]  # it never sees the jail
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_secrets_are_files_never_values_in_the_manifests():
    for repository in (S3, {"rest": {"url": "https://backup:8000/demo", "credentialsSecretRef": {"name": "rest"}}}):
        c, pod = container(cronjob(objects(repository), "demo-backup"))
        values = env(c)
        assert values["RESTIC_PASSWORD_FILE"] == names.BACKUP_PASSWORD_MOUNT + "/repository-password"
        assert values["SOPERATOR_BACKUP_CREDENTIALS"] == names.BACKUP_CREDENTIALS_MOUNT
        assert not any("valueFrom" in e for e in c["env"]) and "envFrom" not in c
        secrets = dict((v["name"], v["secret"]) for v in pod["volumes"] if "secret" in v)
        assert secrets["password"] == {"secretName": "pw", "defaultMode": 0o400,
                                       "items": [{"key": "pass", "path": "repository-password"}]}
        assert secrets["credentials"]["defaultMode"] == 0o400
    assert env(c)["RESTIC_REPOSITORY"] == "rest:https://backup:8000/demo"


def test_the_repository_address_of_each_kind():
    c, dummy = container(cronjob(objects(), "demo-backup"))
    assert env(c)["RESTIC_REPOSITORY"] == "s3:https://s3.example.com/jails/demo"
    assert env(c)["AWS_DEFAULT_REGION"] == "eu-1"
    c, pod = container(cronjob(objects({"claim": {"claimName": "repo", "path": "a/b"}}), "demo-backup"))
    assert env(c)["RESTIC_REPOSITORY"] == names.BACKUP_REPOSITORY_MOUNT + "/a/b"
    assert {"name": "repository", "persistentVolumeClaim": {"claimName": "repo"}} in pod["volumes"]
    assert "SOPERATOR_BACKUP_CREDENTIALS" not in env(c)
    c, pod = container(cronjob(objects({"rest": {"url": "http://rest:8000/x"}}), "demo-backup"))
    assert env(c)["RESTIC_REPOSITORY"] == "rest:http://rest:8000/x" and "credentials" not in [
        v["name"] for v in pod["volumes"]]


def test_no_backup_while_in_maintenance_and_none_without_the_field():
    assert cronjob(objects(maintenance=True), "demo-backup") is None
    plain = render_cluster(make_cluster(), [make_nodeset()])
    assert not [o for o in plain if o["kind"] == "CronJob"]


def test_the_restore_job():
    cluster, nodesets = validate_cluster_with_nodesets(make_cluster({"jail": {
        "storageClassName": "standard", "size": "10Gi", "backup": backup()}}, uid="u1"), [])
    c = ClusterContext(cluster, nodesets)
    job = render_backup.restore_job(c, "0123abcd", "/home/alice", "/restore/alice")
    ctr, pod = container(job)
    assert ctr["command"][1:] == ["restore", "--host", "demo", "--snapshot", "0123abcd", "--source",
                                  "/mnt/jail/home/alice", "--target", "/mnt/jail/restore/alice"]
    assert next(v for v in pod["volumes"] if v["name"] == "jail")["persistentVolumeClaim"]["readOnly"] is False
    assert ctr["securityContext"]["capabilities"]["add"] == render_backup.RESTORE_CAPABILITIES
    assert job["metadata"]["annotations"] == {names.ANNOTATION_PRUNE: "false"}
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u1"
    # One Job per request: the same request is the same name, another is another.
    again = render_backup.restore_job(c, "0123abcd", "/home/alice", "/restore/alice")
    assert again["metadata"]["name"] == job["metadata"]["name"] != render_backup.restore_job(
        c, "latest", "/home/alice", "/restore/alice")["metadata"]["name"]
    whole = render_backup.restore_job(c, "latest", "", "")
    assert container(whole)[0]["command"][-4:] == ["--source", "/mnt/jail", "--target", "/mnt/jail"]
    assert "pw" not in json.dumps([e for e in ctr["env"]])


def test_names_fit_the_api_servers_bounds_for_the_longest_cluster_name():
    longest = "a" * 40  # schema.CLUSTER_NAME_PATTERN allows 40
    assert len(names.backup_name(longest)) <= 52 and len(names.backup_retention_name(longest)) <= 52
    assert len(names.restore_job_name(longest, {"snapshot": "latest"})) <= 63
