"""The jail's backups end to end on the real node: the local example with spec.jail.backup, converged by site.yml,
backed up by its CronJob's pods (Debian's restic in the backup image) to a claim, to Debian's restic-rest-server and
to an S3 server (versitygw, built from the Go module proxy by hack/build-binaries.sh), both in pods of this namespace;
restored by playbooks/jail-restore.yml.

What is shown: files with owners, modes (a 0600 file in a 0700 home of another user, setuid, setgid), symlinks, hard
links, extended attributes and a 200 MB file → backup → delete → restore → the same manifest (sha256, uid, gid, mode,
mtime, link targets, xattrs, hard-link groups); a restore into a user's directory never goes through a link the user
put in its way (the jail's system trees unchanged); `restic check --read-data` clean; a backup while a Slurm job writes
into the jail succeeds and the job completes; retention keeps exactly what it says; status.backup and BackupReady;
the password and credentials nowhere in describe, logs or ConfigMaps. The figures are printed (-s).

The tests share one cluster and run in file order.
"""

import json
import os
import subprocess
import time

import pytest
from conftest import E2E, ROOT, wait_until

from ansible_collections.soperator.slurm.plugins.module_utils import names

NAMESPACE = "e2e-backup"
BASE = "/srv/backup-test"
PASSWORD = "repo-pass-Zq8v1xW3"  # values searched for where they must not appear
S3_KEY, S3_SECRET = "backupkey01", "s3-secret-Hk2m9Pq7"
MARK = "slurm.soperator.dev/backup-secret-for"
IMAGE = "soperator/backup:0.1.0"
REAL = {"soperator.dev/localcluster": "real"}

# Run in the jail (python3 of the jail image) by root: the test files, then their manifest.
MAKE_FILES = r"""
set -e
rm -rf {base}; mkdir -p {base}/home/alice {base}/shared/proj
echo "alice's secret" > {base}/home/alice/private; chmod 0600 {base}/home/alice/private
echo data > {base}/shared/a; ln {base}/shared/a {base}/shared/b; ln {base}/shared/a {base}/home/alice/c
ln -s ../home/alice/private {base}/shared/link; ln -s /nonexistent/target {base}/shared/dangling
cp /bin/true {base}/shared/suid; chmod 4755 {base}/shared/suid
chmod 2775 {base}/shared/proj; chown 1002:1003 {base}/shared/proj
echo x > {base}/shared/proj/file; chown 1002:1003 {base}/shared/proj/file; chmod 0640 {base}/shared/proj/file
chown -R 1001:1001 {base}/home/alice; chown -h 1001:1001 {base}/shared/link; chmod 0700 {base}/home/alice
head -c 200M /dev/urandom > {base}/big.bin; chown 1001:1002 {base}/big.bin
python3 -c 'import os; os.setxattr("{base}/shared/a", "user.note", b"hard")'
python3 -c 'import os; os.setxattr("{base}/home/alice", "user.owner", b"alice")'
""".format(base=BASE)

MANIFEST = r"""
import hashlib, json, os, stat, sys
root = sys.argv[1]
out, inodes = [], {}
for top, dirs, files in os.walk(root):
    dirs.sort()
    for name in [""] + sorted(dirs + files) if top == root else sorted(dirs + files):
        path = os.path.join(top, name) if name else top
        rel = os.path.relpath(path, root)
        st = os.lstat(path)
        entry = {"path": rel, "uid": st.st_uid, "gid": st.st_gid, "mode": oct(st.st_mode), "mtime": st.st_mtime_ns}
        if stat.S_ISLNK(st.st_mode):
            entry["target"] = os.readlink(path)
        else:
            entry["xattrs"] = sorted((k, os.getxattr(path, k).hex()) for k in os.listxattr(path))
        if stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            entry["sha256"] = h.hexdigest()
            if st.st_nlink > 1:
                entry["hardlink"] = inodes.setdefault(st.st_ino, rel)
        out.append(entry)
print(json.dumps(out))
"""


# Run in the jail: {path: [mode, uid, gid, size, mtime, ctime]} of the jail's system trees. A chmod, chown, setxattr,
# utime or write through a link changes a ctime.
SYSTEM_MANIFEST = r"""
import json, os
out = {}
for tree in ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/opt"):
    for top, dirs, files in os.walk(tree):
        for name in [""] + dirs + files:
            path = os.path.join(top, name) if name else top
            st = os.lstat(path)
            out[path] = [st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
print(json.dumps(out))
"""


class Backup(E2E):
    def cluster(self):
        return self.get("slurmcluster", "demo") or {}

    def backup_spec(self, repository, **extra):
        spec = {"schedule": "0 0 1 1 *", "repository": repository, "passwordSecretRef": {"name": "backup-password"},
                "overdueAfter": "1h", "excludes": ["/var/cache/apt", "*.tmp"]}
        spec.update(extra)
        return spec

    def converge(self, backup, maintenance=False):
        docs = self.definition(replicas=1)
        docs[0]["spec"]["jail"]["backup"] = backup
        docs[0]["spec"]["maintenance"] = maintenance
        return self.site(docs)  # in maintenance: until every StatefulSet is at zero (phase Maintenance)

    def manifest(self, path):
        res = self.jail("python3 -c %s %s" % (_quote(MANIFEST), path), timeout=600)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def system_manifest(self):
        res = self.jail("python3 -c %s" % _quote(SYSTEM_MANIFEST), timeout=300)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def restore_report(self, since):
        """The report of the restore pod that ``playbooks/jail-restore.yml`` ran after the names in ``since``
        (its termination message: the program's JSON line) and that pod's name."""
        pods = [p for p in self.get("pods", "-l", "app.kubernetes.io/component=jail-restore")["items"]
                if p["metadata"]["name"] not in since]
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
        return json.loads(terminated["message"].strip().splitlines()[-1]), pods[0]["metadata"]["name"]

    def restore_pods(self):
        return set(p["metadata"]["name"] for p in self.get("pods", "-l", "app.kubernetes.io/component=jail-restore")[
            "items"])

    def run_job(self, name, args=None, timeout=900, cronjob="demo-backup"):
        """A Job from a CronJob's template (``args``: another command of the program); (seconds, report)."""
        cronjob = self.get("cronjob", cronjob)
        template = cronjob["spec"]["jobTemplate"]
        if args is not None:
            container = template["spec"]["template"]["spec"]["containers"][0]
            container["command"] = ["/usr/local/bin/soperator-backup"] + args
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": dict(template["metadata"], name=name,
                                                                             namespace=self.namespace),
               "spec": template["spec"]}
        if args is not None:  # not a backup: not read into the status
            job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] = "jail-backup-test"
        self.kubectl("delete", "job", "-n", self.namespace, name, "--ignore-not-found", "--wait=true")
        started = time.monotonic()
        self.kubectl("apply", "-f", "-", input=json.dumps(job))
        status = wait_until(lambda: _finished(self.get("job", name)), timeout, "job %s finished" % name,
                            lambda: self.kubectl("logs", "-n", self.namespace, "job/" + name, check=False).stdout)
        seconds = time.monotonic() - started
        logs = self.kubectl("logs", "-n", self.namespace, "job/" + name, check=False).stdout
        assert status == "Complete", logs
        return seconds, json.loads(logs.strip().splitlines()[-1])


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def _finished(job):
    for cond in ((job or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return cond["type"]
    return None


def _servers(versitygw):
    """The REST server (Debian's restic-rest-server) and the S3 server (versitygw), each a pod and a Service, and
    the repository claim."""
    security = {"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]}}

    def server(name, command, port, env=(), volumes=(), mounts=()):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE,
                                                               "labels": {"app": name}},
               "spec": {"nodeSelector": REAL, "securityContext": {"fsGroup": 65534},
                        "containers": [{"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": command,
                                        "env": list(env), "securityContext": security,
                                        "ports": [{"containerPort": port}],
                                        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
                                        "volumeMounts": [{"name": "data", "mountPath": "/data"}] + list(mounts)}],
                        "volumes": [{"name": "data", "emptyDir": {}}] + list(volumes)}}
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
                   "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": port}]}}
        return [pod, service]

    s3_env = [{"name": "ROOT_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3-server", "key": "access"}}},
              {"name": "ROOT_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3-server", "key": "secret"}}}]
    binary = {"name": "versitygw", "hostPath": {"path": os.path.dirname(versitygw), "type": "Directory"}}
    return (server("rest-server", ["restic-rest-server", "--path", "/data", "--listen", ":8000", "--no-auth"], 8000)
            + server("s3-server", ["/opt/versitygw/versitygw", "--port", ":7070", "posix", "/data"], 7070, s3_env,
                     [binary], [{"name": "versitygw", "mountPath": "/opt/versitygw", "readOnly": True}])
            + [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "backup-repo", "namespace": NAMESPACE},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                         "resources": {"requests": {"storage": "2Gi"}}}}])


def _secret(name, data, mark=True):
    labels = {MARK: "demo"} if mark else {}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "stringData": data}


@pytest.fixture(scope="module")
def bk(real_node_cluster):
    cluster = Backup(real_node_cluster, namespace=NAMESPACE)
    versitygw = subprocess.run([os.path.join(ROOT, "hack", "build-binaries.sh"), "versitygw"], check=True,
                               capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout.split()[-1]
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    objects = [_secret("backup-password", {"password": PASSWORD}),
               _secret("backup-s3", {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET}),
               _secret("s3-server", {"access": S3_KEY, "secret": S3_SECRET}, mark=False)] + _servers(versitygw)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    cluster.figures = {}
    try:
        t0 = time.monotonic()
        cluster.converge(cluster.backup_spec({"claim": {"claimName": "backup-repo"}}))
        cluster.wait_idle(["demo-cpu-0"])
        print("\nbackup e2e: cluster with backups up in %.1f s" % (time.monotonic() - t0))
        yield cluster
    finally:
        print("\nbackup figures: %s" % json.dumps(cluster.figures, indent=1, sort_keys=True))
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def test_the_cronjobs_never_overlap_and_read_the_jail_read_only(bk):
    backup = bk.get("cronjob", "demo-backup")
    retention = bk.get("cronjob", "demo-retention")
    assert backup["spec"]["concurrencyPolicy"] == retention["spec"]["concurrencyPolicy"] == "Forbid"
    pod = backup["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    jail = next(v for v in pod["volumes"] if v["name"] == "jail")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "jail")
    assert jail["persistentVolumeClaim"]["readOnly"] is True and mount["readOnly"] is True
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["DAC_READ_SEARCH"]}
    assert "forget" in retention["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]


def test_backup_delete_restore_gives_the_same_manifest(bk):
    res = bk.jail(MAKE_FILES, timeout=300)
    assert res.returncode == 0, res.stderr
    original = bk.manifest(BASE)
    assert any(e.get("hardlink") for e in original) and any(e.get("xattrs") for e in original)
    assert any(e.get("target") == "/nonexistent/target" for e in original)
    seconds, report = bk.run_job("backup-1")
    assert report["result"] == "Succeeded" and report["sizeBytes"] >= 200 * 2 ** 20 and report["unreadable"] == 0
    bk.figures["claim backup"] = {"seconds (job)": round(seconds, 1), "seconds (restic)": report["durationSeconds"],
                                  "bytes read": report["sizeBytes"], "bytes added": report["addedBytes"],
                                  "files": report["files"]}
    assert bk.jail("rm -rf %s && test ! -e %s" % (BASE, BASE)).returncode == 0
    # Into a directory of the jail while the cluster runs; in place is refused while it runs.
    refused = bk.playbook("jail-restore.yml", {"slurm_cluster": "demo", "slurm_namespace": NAMESPACE,
                                               "path": BASE}, check=False)
    assert refused.returncode != 0 and "jail_restore_into" in refused.stdout and "maintenance" in refused.stdout
    before, t0 = bk.restore_pods(), time.monotonic()
    bk.playbook("jail-restore.yml", {"slurm_cluster": "demo", "slurm_namespace": NAMESPACE, "snapshot":
                                     report["snapshot"], "path": BASE, "into": "/srv/restored"})
    seconds = time.monotonic() - t0
    restored_report, dummy = bk.restore_report(before)
    assert restored_report["result"] == "Succeeded" and restored_report["sizeBytes"] >= 200 * 2 ** 20
    bk.figures["claim restore into a directory"] = {
        "seconds (playbook)": round(seconds, 1), "seconds (restic)": restored_report["durationSeconds"],
        "bytes restored": restored_report["sizeBytes"], "files": restored_report["files"]}
    restored = bk.manifest("/srv/restored")
    assert restored == original


def test_a_restore_never_goes_through_a_symlink_a_user_put_in_its_way(bk):
    # alice (uid 1001) owns /srv/users/alice, and puts a link to the jail's /etc where her files are to be restored.
    res = bk.jail("rm -rf /srv/users && mkdir -p /srv/users/alice && chown 1001:1001 /srv/users/alice && "
                  "chmod 0700 /srv/users/alice && ln -s ../../../etc /srv/users/alice/restored && "
                  "chown -h 1001:1001 /srv/users/alice/restored")
    assert res.returncode == 0, res.stderr
    before = bk.system_manifest()
    request = {"slurm_cluster": "demo", "slurm_namespace": NAMESPACE, "path": BASE + "/home/alice",
               "into": "/srv/users/alice/restored"}
    refused = bk.playbook("jail-restore.yml", request, check=False)
    assert refused.returncode != 0 and "exists; a restore goes into a new directory" in refused.stdout, \
        refused.stdout[-3000:]
    assert bk.system_manifest() == before
    # Without the link: staged where no user reaches, handed over complete, with the snapshot's owner and mode. The
    # same request again: its failed Job is replaced.
    assert bk.jail("rm /srv/users/alice/restored").returncode == 0
    bk.playbook("jail-restore.yml", request)
    assert bk.system_manifest() == before

    def without_hard_links(entries):  # alice's file c is linked from outside her home in the snapshot
        return [dict((k, v) for k, v in e.items() if k != "hardlink") for e in entries]
    assert without_hard_links(bk.manifest("/srv/users/alice/restored")) == without_hard_links(
        bk.manifest("/srv/restored/home/alice"))
    staging = bk.jail("stat -c '%%u %%a' %s && ls -A %s" % (names.RESTORE_STAGING, names.RESTORE_STAGING))
    assert staging.stdout.split() == ["0", "700"], staging.stdout


def test_status_shows_the_last_backup(bk):
    bk.converge(bk.backup_spec({"claim": {"claimName": "backup-repo"}}))
    status = bk.cluster()["status"]
    backup = status["backup"]
    assert backup["sizeBytes"] >= 200 * 2 ** 20 and backup["snapshot"] and backup["lastSuccessTime"]
    cond = next(c for c in status["conditions"] if c["type"] == "BackupReady")
    assert cond["status"] == "True" and cond["reason"] == "Succeeded", cond


def test_restic_check_read_data_is_clean(bk):
    seconds, report = bk.run_job("check", ["check", "--read-data"])
    assert report["result"] == "Succeeded" and report["readData"] is True
    bk.figures["claim check --read-data"] = {"seconds": round(seconds, 1)}


def test_a_backup_while_a_job_writes_succeeds_and_the_job_completes(bk):
    # The job itself writes its last file (slurmstepd's -o file is not where this test reads: it is not the point).
    job = bk.jail("rm -rf /srv/jobout && mkdir -p /srv/jobout && cd /root && sbatch --parsable -o /dev/null --wrap "
                  "'for i in $(seq 1 30); do head -c 2M /dev/urandom > /srv/jobout/f$i; sleep 0.5; done; "
                  "echo done > /srv/jobout/done'")
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip()
    wait_until(lambda: bk.jail("test -e /srv/jobout/f2").returncode == 0, 120, "the job writing")
    seconds, report = bk.run_job("backup-while-writing")
    assert report["result"] == "Succeeded"
    wait_until(lambda: "done" in bk.jail("cat /srv/jobout/done").stdout, 300, "job %s done" % job_id)
    state = bk.slurm("scontrol show job %s -o" % job_id).stdout
    assert "JobState=COMPLETED" in state or not state.strip()  # completed (or already purged from slurmctld)
    bk.figures["claim backup while a job writes"] = {"seconds (job)": round(seconds, 1),
                                                     "bytes read": report["sizeBytes"]}


def test_retention_keeps_exactly_what_it_says(bk):
    dummy, before = bk.run_job("snapshots-before", ["snapshots", "--host", "demo"])
    assert len(before["snapshots"]) >= 2
    # One a day, by the retention CronJob's own Job: every snapshot here is from today, so exactly the newest stays.
    bk.converge(bk.backup_spec({"claim": {"claimName": "backup-repo"}}, retention={"daily": 1, "weekly": 0,
                                                                                   "monthly": 0}))
    dummy, forgot = bk.run_job("retention", cronjob="demo-retention")
    assert forgot["kept"] == 1 and forgot["removed"] == len(before["snapshots"]) - 1
    dummy, after = bk.run_job("snapshots-after", ["snapshots", "--host", "demo"])
    assert [s["id"] for s in after["snapshots"]] == [before["snapshots"][-1]["id"]]


@pytest.mark.parametrize("kind", ["rest", "s3"])
def test_each_repository_kind_against_a_real_server(bk, kind):
    repository = {"rest": {"rest": {"url": "http://rest-server:8000/demo"}},
                  "s3": {"s3": {"endpoint": "http://s3-server:7070", "bucket": "jails",
                                "credentialsSecretRef": {"name": "backup-s3"}}}}[kind]
    wait_until(lambda: all(((bk.get("pod", p) or {}).get("status") or {}).get("conditions") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in bk.get("pod", p)["status"]["conditions"])
        for p in ("rest-server", "s3-server")), 120, "the repository servers ready")
    bk.converge(bk.backup_spec(repository))
    seconds, report = bk.run_job("backup-" + kind)
    assert report["result"] == "Succeeded" and report["repositoryCreated"] is True
    assert report["sizeBytes"] >= 200 * 2 ** 20
    dummy, snaps = bk.run_job("snapshots-" + kind, ["snapshots", "--host", "demo"])
    assert [s["id"] for s in snaps["snapshots"]] == [report["snapshot"][:8]]
    check_seconds, checked = bk.run_job("check-" + kind, ["check", "--read-data"])
    assert checked["result"] == "Succeeded"
    bk.figures["%s backup" % kind] = {"seconds (job)": round(seconds, 1), "seconds (restic)": report[
        "durationSeconds"], "bytes read": report["sizeBytes"], "bytes added": report["addedBytes"],
        "check --read-data seconds": round(check_seconds, 1)}


def test_the_password_and_credentials_appear_nowhere_they_must_not(bk):
    pods = [p["metadata"]["name"] for p in bk.get("pods")["items"]
            if p["metadata"]["labels"].get("app.kubernetes.io/component", "").startswith("jail-")]
    assert pods
    seen = [bk.kubectl("describe", "pod", "-n", NAMESPACE, *pods).stdout,
            bk.kubectl("describe", "cronjob", "-n", NAMESPACE).stdout,
            bk.kubectl("get", "configmaps", "-n", NAMESPACE, "-o", "json").stdout]
    seen += [bk.kubectl("logs", "-n", NAMESPACE, p, check=False).stdout for p in pods]
    for text in seen:
        for value in (PASSWORD, S3_SECRET, S3_KEY):
            assert value not in text


def test_a_secret_not_marked_for_the_cluster_is_refused_before_anything_is_written(bk):
    bk.kubectl("apply", "-f", "-", input=json.dumps(_secret("unmarked", {"password": "x"}, mark=False)))
    before = bk.get("cronjob", "demo-backup")["metadata"]["resourceVersion"]
    res = bk.site(_with_backup(bk, dict(bk.backup_spec({"claim": {"claimName": "backup-repo"}}),
                                        passwordSecretRef={"name": "unmarked"})), check=False)
    assert res.returncode != 0 and "spec.jail.backup.passwordSecretRef.name" in res.stdout
    assert bk.get("cronjob", "demo-backup")["metadata"]["resourceVersion"] == before


def _with_backup(bk, backup):
    docs = bk.definition(replicas=1)
    docs[0]["spec"]["jail"]["backup"] = backup
    return docs


def test_restore_in_place_during_maintenance(bk):
    original = bk.manifest("/srv/restored")  # the first restore: what BASE held
    bk.converge(bk.backup_spec({"claim": {"claimName": "backup-repo"}}))
    seconds, report = bk.run_job("backup-before-maintenance")
    bk.jail("rm -rf /srv/restored")
    bk.converge(bk.backup_spec({"claim": {"claimName": "backup-repo"}}), maintenance=True)
    assert (bk.cluster().get("status") or {}).get("phase") == "Maintenance"
    assert not [p["metadata"]["name"] for p in bk.get("pods", "-l", "%s=demo" % names.LABEL_INSTANCE)["items"]
                if p["metadata"]["labels"].get(names.LABEL_COMPONENT) in (
                    names.COMPONENT_LOGIN, names.COMPONENT_WORKER, names.COMPONENT_CONTROLLER)]
    before, t0 = bk.restore_pods(), time.monotonic()
    bk.playbook("jail-restore.yml", {"slurm_cluster": "demo", "slurm_namespace": NAMESPACE,
                                     "snapshot": report["snapshot"], "path": "/srv/restored"})
    seconds = time.monotonic() - t0
    restored_report, dummy = bk.restore_report(before)
    assert restored_report["result"] == "Succeeded" and restored_report["sizeBytes"] >= 200 * 2 ** 20
    bk.figures["claim restore in place (maintenance)"] = {
        "seconds (playbook)": round(seconds, 1), "seconds (restic)": restored_report["durationSeconds"],
        "bytes restored": restored_report["sizeBytes"], "files": restored_report["files"]}
    bk.converge(bk.backup_spec({"claim": {"claimName": "backup-repo"}}))
    bk.wait_idle(["demo-cpu-0"])
    # The login pod (where the manifest is read) back too: out of maintenance, it may start after the workers.
    # Maintenance was reached only once the old one was gone (a terminating pod may still read Ready).
    wait_until(lambda: (lambda pod: not pod.get("metadata", {}).get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or ()))(
        bk.get("pod", "demo-login-0") or {}), 240, "demo-login-0 ready")
    assert bk.manifest("/srv/restored") == original
