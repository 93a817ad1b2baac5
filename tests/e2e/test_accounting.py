"""The accounting example end to end on the real node: examples/accounting-cluster-local.yaml converged by site.yml
(MariaDB, slurmdbd, slurmctld, workers, login, slurmrestd and the exporter in pods of the project's images), then
what users and operators see: sacct, sshare, the history across a controller restart, a wrong database password
reported in the SlurmCluster's status, the REST API with and without a token, the exporter's /metrics against
sinfo/squeue and the dashboard's queries, and a teardown that keeps the database. Jobs are a jail user's (the
example keeps DisableRootJobs=YES); slurmdbd runs as SlurmUser with no capability, and tokens keep working after
`scontrol reconfigure` re-executes slurmctld as SlurmUser.

The tests share one cluster and run in file order.
"""

import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml
from conftest import E2E, ROOT, wait_until

sys.path.insert(0, os.path.join(ROOT, "tests"))
from metrics_check import dashboard_metric_names, operator_sample_names, parse_exposition, value  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "accounting-cluster-local.yaml")
NAMESPACE = "e2e-accounting"
API = "v0.0.42"
USER = "carol"  # a user of the jail: root may not run jobs (DisableRootJobs=YES)
SLURM_UID = 64030  # names.SLURM_UID: SlurmUser's


class Accounting(E2E):
    """The E2E helpers for the accounting example's cluster (``acct``)."""

    name = "acct"

    def slurm(self, command, timeout=120):
        return self.exec("acct-controller-0", "slurmctld", command, timeout=timeout)

    def jail(self, command, timeout=180):
        return self.exec("acct-login-0", "sshd", "chroot /mnt/jail sh -c '%s'" % command.replace("'", "'\\''"),
                         timeout)

    def as_user(self, command, timeout=180):
        """``command`` in the jail as USER, from their home (a user's shell on the login node)."""
        return self.jail("cd /home/%s && setpriv --reuid=%s --regid=%s --init-groups -- sh -c %s"
                         % (USER, USER, USER, shlex.quote(command)), timeout)

    def definition(self, **_ignored):
        with open(EXAMPLE) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            doc["metadata"]["namespace"] = self.namespace
        return docs

    def explain(self):
        out = [self.kubectl("get", "pods", "-n", self.namespace, "-o", "wide", check=False).stdout,
               json.dumps((self.get("slurmcluster", "acct") or {}).get("status"), indent=1)]
        for pod, container in (("acct-accounting-0", "slurmdbd"), ("acct-accounting-db-0", "mariadb"),
                               ("acct-controller-0", "slurmctld"), ("acct-rest-0", "slurmrestd"),
                               ("acct-exporter-0", "exporter")):
            out.append("--- %s/%s ---\n%s" % (pod, container, self.kubectl(
                "logs", "-n", self.namespace, pod, "-c", container, "--tail=20", check=False).stdout))
        return "\n".join(out)

    def conditions(self):
        status = (self.get("slurmcluster", "acct") or {}).get("status") or {}
        return dict((c["type"], c) for c in status.get("conditions") or [])

    def service_url(self, name, port, path):
        return "http://%s:%d%s" % (self.get("service", name)["spec"]["clusterIP"], port, path)

    def sacct(self, job):
        res = self.slurm("sacct -j %s -X -n -P -o JobID,State,Elapsed,Account" % job)
        return dict(zip(("JobID", "State", "Elapsed", "Account"), res.stdout.strip().split("|"))) \
            if res.returncode == 0 and res.stdout.strip() else {}


@pytest.fixture(scope="module")
def acct(real_node_cluster):
    cluster = Accounting(real_node_cluster, namespace=NAMESPACE)
    t0 = time.monotonic()
    cluster.site(cluster.definition())
    wait_until(lambda: all(cluster.sinfo().get(n) == "idle" for n in ("acct-cpu-0", "acct-cpu-1")), 240,
               "acct workers idle", cluster.explain)
    made = cluster.jail("id %s >/dev/null 2>&1 || useradd -m -s /bin/bash -p '*' %s" % (USER, USER))
    assert made.returncode == 0, made.stderr
    print("\ne2e: accounting example applied -> Ready, workers idle in %.1f s" % (time.monotonic() - t0))
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "namespace", cluster.namespace, "--wait=false", check=False)


def _get(url, token=None, user=None):
    headers = {}
    if token:
        headers["X-SLURM-USER-TOKEN"] = token
    if user:
        headers["X-SLURM-USER-NAME"] = user
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def test_every_component_is_ready_and_says_so(acct):
    conditions = acct.conditions()
    for ctype in ("Ready", "AccountingReady", "RestApiReady", "ExporterReady"):
        assert conditions[ctype]["status"] == "True", (ctype, conditions)
    # The password is in a Secret and nowhere else.
    for cm in acct.get("configmaps")["items"]:
        assert "StoragePass" not in json.dumps(cm.get("data")).replace("# StoragePass is appended", "")


def test_slurmdbd_and_slurmctld_run_as_slurmuser_and_root_runs_no_job(acct):
    """slurmdbd is SlurmUser from its first instruction and holds no capability (slurmctld, also SlurmUser, takes
    its connection: the accounting tests below); root's jobs are refused."""
    status = acct.exec("acct-accounting-0", "slurmdbd", "cat /proc/1/status")
    fields = dict(line.split(":", 1) for line in status.stdout.splitlines() if ":" in line)
    assert fields["Name"].strip() == "slurmdbd" and fields["Uid"].split() == [str(SLURM_UID)] * 4, status.stdout
    for cap in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, fields[cap])
    assert acct.slurmctld_uids() == [str(SLURM_UID)] * 4
    root = acct.jail("cd /root && timeout 60 srun -N1 --immediate=30 true")
    assert root.returncode != 0 and "invalid user id" in (root.stdout + root.stderr).lower(), root.stdout + root.stderr


def test_a_finished_job_is_in_sacct_with_state_and_elapsed(acct):
    res = acct.as_user("timeout 150 sbatch --parsable --wait -o /dev/null --wrap \"sleep 3\"")
    assert res.returncode == 0, res.stderr + acct.explain()
    job = res.stdout.strip().split(";")[0]
    record = wait_until(lambda: (lambda r: r.get("State") == "COMPLETED" and r)(acct.sacct(job)), 60,
                        "job %s COMPLETED in sacct" % job, acct.explain)
    h, m, s = (int(x) for x in record["Elapsed"].split(":"))
    assert 3 <= h * 3600 + m * 60 + s < 120, record
    acct.first_job = job


def test_sshare_shows_fairshare_for_two_accounts(acct):
    for account, share in (("physics", 3), ("chemistry", 1)):
        res = acct.slurm("sacctmgr -i add account %s fairshare=%d" % (account, share))
        assert res.returncode == 0, res.stderr
    assert acct.slurm("sacctmgr -i add user %s account=physics,chemistry" % USER).returncode == 0
    for account in ("physics", "chemistry"):
        res = acct.as_user("timeout 150 sbatch --parsable --wait -A %s -o /dev/null --wrap true" % account)
        assert res.returncode == 0, res.stderr
    shares = wait_until(lambda: (lambda out: ("physics" in out and "chemistry" in out) and out)(
        acct.slurm("sshare -a -n -P -o Account,User,RawShares,NormShares,FairShare").stdout), 60, "sshare")
    # sshare indents an account's name by its depth in the tree (" physics"): the name is the stripped field.
    rows = {tuple(f.strip() for f in line.split("|")[:2]): line.split("|") for line in shares.splitlines()}
    assert rows[("physics", "")][2] == "3" and rows[("chemistry", "")][2] == "1", shares
    assert float(rows[("physics", "")][3]) == pytest.approx(3 * float(rows[("chemistry", "")][3]), rel=1e-3)
    for account in ("physics", "chemistry"):
        assert 0 <= float(rows[(account, USER)][4]) <= 1, shares


def test_history_survives_a_controller_restart(acct):
    job = acct.first_job
    before = acct.sacct(job)
    uid = acct.get("pod", "acct-controller-0")["metadata"]["uid"]
    acct.kubectl("delete", "pod", "-n", acct.namespace, "acct-controller-0")
    wait_until(lambda: (lambda p: p and p["metadata"]["uid"] != uid and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])))(
        acct.get("pod", "acct-controller-0")), 180, "a new controller pod ready", acct.explain)
    assert wait_until(lambda: acct.sacct(job), 60, "sacct after the restart") == before


def _token(acct):
    """A token slurmctld signs; waited for: the controller pod's entrypoint runs `scontrol reconfigure` once its
    slurmctld answers (a fresh pod, as after the restart above), and slurmctld answers nothing while it re-executes."""
    res = wait_until(lambda: (lambda r: r.returncode == 0 and r.stdout.startswith("SLURM_JWT=") and r)(
        acct.slurm("scontrol token lifespan=600")), 60, "a token from slurmctld", acct.explain)
    return res.stdout.strip().split("=", 1)[1]


def test_the_rest_api_answers_with_a_token_and_refuses_without(acct):
    token = _token(acct)
    url = acct.service_url("acct-rest", 6820, "/slurm/%s/ping" % API)
    status, body = wait_until(lambda: (lambda r: r[0] == 200 and r)(_get(url, token)), 120, "slurmrestd ping",
                              acct.explain)
    assert json.loads(body)["pings"][0]["responding"] is True
    # diag's counters start again whenever slurmctld re-executes (a restart, the entrypoint's `scontrol
    # reconfigure`): what is checked is that slurmctld's own statistics come back, for this token.
    status, body = _get(acct.service_url("acct-rest", 6820, "/slurm/%s/diag" % API), token)
    statistics = json.loads(body)["statistics"]
    assert status == 200 and statistics["server_thread_count"] >= 1 and isinstance(statistics["jobs_submitted"], int)
    status, body = _get(acct.service_url("acct-rest", 6820, "/slurmdb/%s/jobs" % API), token)
    assert status == 200 and json.loads(body)["jobs"]
    assert _get(url)[0] == 401
    assert _get(acct.service_url("acct-rest", 6820, "/slurm/%s/diag" % API))[0] == 401
    # `scontrol reconfigure` re-executes slurmctld as SlurmUser: it reads its copy of the JWT key again.
    assert acct.slurm("scontrol reconfigure").returncode == 0
    token = _token(acct)
    status, body = wait_until(lambda: (lambda r: r[0] == 200 and r)(_get(url, token)), 60,
                              "slurmrestd ping after reconfigure", acct.explain)


def _collections(url):
    """The exporter's count of collections from Slurm (None while it does not answer)."""
    status, text = _get(url)
    return value(parse_exposition(text), "slurm_exporter_collections_total") if status == 200 else None


def test_the_exporter_reports_what_sinfo_and_squeue_report(acct):
    url = acct.service_url("acct-exporter", 9341, "/metrics")
    held = acct.as_user("sbatch --parsable --hold -o /dev/null --wrap true").stdout.strip()
    running = acct.as_user("sbatch --parsable -w acct-cpu-0 -o /dev/null --wrap \"sleep 300\"").stdout.strip()
    # A drained node (an admin's, with a reason): the drain-reason series exist only while one is drained.
    assert acct.slurm("scontrol update nodename=acct-cpu-1 state=drain reason=e2e-exporter").returncode == 0
    try:
        wait_until(lambda: "RUNNING" in acct.slurm("squeue -h -j %s -o %%T" % running).stdout, 60, "a running job")
        # Scrapes are answered from the last collection (one per spec.exporter.collectInterval, 30 s): judged on the
        # second collection from now, the first to begin after the jobs and the drain were there.
        now = wait_until(lambda: _collections(url), 120, "the exporter's first collection", acct.explain)
        status, text = wait_until(
            lambda: (lambda r: r[0] == 200 and value(parse_exposition(r[1]), "slurm_exporter_collections_total")
                     >= now + 2 and r)(_get(url)), 150, "a collection after the setup", acct.explain)
        samples = parse_exposition(text)
        nodes = set(acct.slurm("sinfo -h -N -o %N").stdout.split())
        assert value(samples, "slurm_nodes_total") == len(nodes) == 2
        assert value(samples, "slurm_jobs_running") == len(acct.slurm("squeue -h -t R -o %i").stdout.split()) == 1
        assert value(samples, "slurm_jobs_pending") == len(acct.slurm("squeue -h -t PD -o %i").stdout.split()) == 1
        assert all(v == 1 for _lab, v in samples["slurm_exporter_collector_success"]), samples[
            "slurm_exporter_collector_success"]
        drains = [labels for labels, _v in samples.get("slurm_node_drain_reason_info", [])]
        assert any(lab.get("node") == "acct-cpu-1" and lab.get("reason") == "e2e-exporter" for lab in drains), drains
        missing = dashboard_metric_names() - set(samples) - operator_sample_names()
        assert missing == set(), "the dashboard queries metrics nobody serves: %s" % missing
    finally:
        acct.slurm("scancel %s %s" % (held, running))
        acct.slurm("scontrol update nodename=acct-cpu-1 state=resume")


def test_a_wrong_database_password_shows_in_the_status_and_recovers(acct):
    """slurmdbd's Secret gets a password the database does not have: the slurmdbd container ends with a reason,
    and the SlurmCluster's AccountingReady condition carries it (not a crash loop without explanation)."""
    secret = acct.get("secret", "acct-accounting-db-password")
    original = secret["data"]["password"]
    patch = json.dumps({"data": {"password": "d3JvbmctcGFzc3dvcmQ="}})  # "wrong-password"
    acct.kubectl("patch", "secret", "-n", acct.namespace, "acct-accounting-db-password", "--type=merge", "-p", patch)
    try:
        acct.kubectl("delete", "pod", "-n", acct.namespace, "acct-accounting-0")

        def denied():
            acct.site(acct.definition(), wait=False, check=False)
            cond = acct.conditions().get("AccountingReady") or {}
            return cond.get("reason") == "DatabaseAccessDenied" and cond

        cond = wait_until(denied, 240, "AccountingReady: DatabaseAccessDenied", acct.explain)
        assert cond["status"] == "False" and "refused user slurm" in cond["message"], cond
        assert "wrong-password" not in json.dumps(acct.get("slurmcluster", "acct")["status"])
    finally:
        acct.kubectl("patch", "secret", "-n", acct.namespace, "acct-accounting-db-password", "--type=merge", "-p",
                     json.dumps({"data": {"password": original}}))
    acct.kubectl("delete", "pod", "-n", acct.namespace, "acct-accounting-0")
    acct.site(acct.definition())
    assert acct.conditions()["AccountingReady"]["status"] == "True"
    assert acct.sacct(acct.first_job)["State"] == "COMPLETED"  # the history is still there


def test_teardown_keeps_the_database(acct):
    res = acct.playbook("teardown.yml", {"slurm_cluster": "acct", "slurm_namespace": acct.namespace})
    assert res.returncode == 0
    wait_until(lambda: not (acct.get("statefulsets") or {"items": [1]})["items"], 180, "workloads gone")
    assert acct.get("pvc", "data-acct-accounting-db-0") is not None
    assert acct.get("secret", "acct-accounting-db-password") is not None
    assert acct.get("secret", "acct-jwt-key") is not None
