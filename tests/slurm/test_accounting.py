"""Accounting and the REST API against real daemons: Debian's MariaDB, slurmdbd, slurmctld, dynamic slurmd and
slurmrestd (accounting_cluster.py), started the way the accounting pods start them (the images' entrypoint, the
rendered slurmdbd.conf, the pods' users).

Must show: a finished job is in ``sacct`` with its state and elapsed time; ``sshare`` shows fairshare for two
accounts; the history survives a slurmctld restart; a wrong database password ends slurmdbd's container with a
reason that becomes the SlurmCluster's AccountingReady condition; slurmrestd answers with a token and refuses
without one. The database is External with TLS: slurmdbd reaches it only over TLS verified against the CA of
``tls.caSecretRef``; a server certificate of another CA, or of the CA for another host, is refused before anything
is sent; a server that asks for the password in clear text gets nothing (a default client hands it over).
slurmctld and slurmdbd run as SlurmUser (``slurm``), slurmdbd without any capability, and tokens still work after
``scontrol reconfigure`` re-executes slurmctld. Every command is bounded (``timeout``).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request

import pytest
from accounting_cluster import (
    ACCOUNTS,
    CLUSTER,
    DB_CA_KEY,
    DB_HOST,
    DB_NAME,
    OTHER_DB_HOST,
    AccountingCluster,
    _pem,
    accounting_spec,
)
from dynamic_cluster import node_name
from slurm_cluster import USER, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import components, model
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext
from ansible_collections.soperator.slurm.plugins.module_utils.render.rest import slurmrestd

API = "v0.0.42"  # the newest REST API version Slurm 24.11 serves


def sbatch(c: AccountingCluster, *args: str, user: str | None = None) -> str:
    res = c.run(["sbatch", "--parsable", "--wait", "-o", "/dev/null", *args], user=user, timeout=90).check()
    return res.stdout.strip().split(";")[0]


def sacct(c: AccountingCluster, job: str) -> dict[str, str]:
    res = c.run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,State,Elapsed,ExitCode,Account,User"]).check()
    fields = res.stdout.strip().split("|")
    return dict(zip(("JobID", "State", "Elapsed", "ExitCode", "Account", "User"), fields))


def test_slurmctld_and_slurmdbd_run_as_slurmuser_slurmdbd_without_any_capability(acct):
    """slurmctld accepts slurmdbd's connection only from its SlurmUser: both are ``slurm`` (the registration below
    and every accounting test show that they talk), slurmdbd from its first instruction and holding nothing."""
    uid = str(names.SLURM_UID)
    dbd = acct.process("slurmdbd")
    assert dbd["Uid"].split() == [uid] * 4 and dbd["Gid"].split() == [uid] * 4, dbd
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(dbd[field], 16) == 0, (field, dbd[field])
    ctld = acct.process("slurmctld")
    assert ctld["Uid"].split() == [uid] * 4, ctld
    conf = acct.run(["cat", names.SLURMDBD_RUN_DIR + "/slurmdbd.conf"]).check().stdout  # /run: the namespace's
    assert "SlurmUser=%s\n" % names.SLURM_USER in conf


def test_the_cluster_registered_itself_in_the_database(acct):
    """No `sacctmgr add cluster` anywhere: slurmctld registers the cluster when it first reaches slurmdbd."""
    res = acct.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster,ControlPort"]).check()
    assert res.stdout.split("|")[0] == CLUSTER


def test_a_finished_job_is_in_sacct_with_its_state_and_elapsed_time(acct):
    job = sbatch(acct, "--wrap", "sleep 2")
    record = wait_for(lambda: (lambda r: r if r.get("State") == "COMPLETED" else None)(sacct(acct, job)), 30,
                      "job %s COMPLETED in sacct" % job)
    hours, minutes, seconds = (int(x) for x in record["Elapsed"].split(":"))
    assert 2 <= hours * 3600 + minutes * 60 + seconds < 60, record
    assert record["ExitCode"] == "0:0"
    failed = sbatch_failing(acct)
    assert wait_for(lambda: sacct(acct, failed).get("State"), 30, "the failed job in sacct") == "FAILED"


def sbatch_failing(c: AccountingCluster) -> str:
    res = c.run(["sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "exit 3"], timeout=90)
    assert res.returncode != 0  # --wait returns the job's exit code
    return res.stdout.strip().split(";")[0]


def test_sshare_shows_fairshare_for_two_accounts(acct):
    for account in ACCOUNTS:
        acct.run(["sacctmgr", "-i", "add", "account", account, "fairshare=%d" % (3 if account == ACCOUNTS[0] else 1)]
                 ).check()
    acct.run(["sacctmgr", "-i", "add", "user", USER, "account=%s" % ",".join(ACCOUNTS),
              "defaultaccount=%s" % ACCOUNTS[0]]).check()
    for account in ACCOUNTS:
        job = sbatch(acct, "-A", account, "--wrap", "sleep 1", user=USER)
        assert wait_for(lambda j=job: sacct(acct, j).get("Account"), 30, "job %s accounted" % job) == account

    seen = []

    def shares():
        res = acct.run(["sshare", "-a", "-n", "-P", "-o", "Account,User,RawShares,NormShares,RawUsage,FairShare"])
        seen[:] = [res.check().stdout]
        rows = [line.split("|") for line in res.stdout.splitlines()]
        found = {r[0].strip(): r for r in rows if r[0].strip() in ACCOUNTS and not r[1]}
        users = {r[0].strip(): r for r in rows if r[0].strip() in ACCOUNTS and r[1] == USER}
        # (Usage reaches sshare with the next decay pass, PriorityCalcPeriod, 5 min: not waited for.)
        return (found, users) if len(found) == 2 and len(users) == 2 else None

    try:
        accounts, users = wait_for(shares, 60, "fairshare of both accounts in sshare", interval=1)
    except TimeoutError:
        pytest.fail("sshare never showed both accounts and their user:\n%s" % seen[0])
    assert accounts[ACCOUNTS[0]][2] == "3" and accounts[ACCOUNTS[1]][2] == "1"
    # Normalised among the root account's children (root's own user holds a share too): 3 to 1 between them.
    assert float(accounts[ACCOUNTS[0]][3]) == pytest.approx(3 * float(accounts[ACCOUNTS[1]][3]), rel=1e-3)
    for account in ACCOUNTS:
        assert 0.0 <= float(users[account][5]) <= 1.0, users[account]


def test_history_survives_a_slurmctld_restart(acct):
    job = sbatch(acct, "--wrap", "true")
    before = wait_for(lambda: (lambda r: r if r.get("State") == "COMPLETED" else None)(sacct(acct, job)), 30,
                      "job accounted")
    acct.restart_slurmctld()
    assert sacct(acct, job) == before
    newer = sbatch(acct, "--wrap", "true")
    assert int(newer) > int(job)
    assert wait_for(lambda: sacct(acct, newer).get("State"), 30, "a job after the restart") == "COMPLETED"


def test_a_wrong_database_password_ends_slurmdbd_with_the_reason_the_status_shows(acct, tmp_path):
    """The entrypoint asks the real MariaDB with the wrong password: refused (ERROR 1045). The container ends with
    ``DatabaseAccessDenied: ...`` as its termination message, which the reconciler turns into the condition."""
    fake = "/tmp/wrong-password-root"
    root = fake_pod(acct, fake)
    shutil.copy2(acct.root / names.SLURMDBD_CONFIG_MOUNT.lstrip("/") / "slurmdbd.conf",
                 root / "etc/soperator/slurmdbd/slurmdbd.conf")
    acct.secret_file(names.DB_PASSWORD_MOUNT + "/password", b"not-the-password\n", root)
    termination = fake + "/termination-log"
    res = acct.entrypoint(["/usr/sbin/slurmdbd", "-D"], {"SOPERATOR_ROOT": fake, "SOPERATOR_DB_WAIT_TIMEOUT": "10",
                                                          "SOPERATOR_TERMINATION_LOG": termination},
                          user=names.SLURM_USER)
    assert res.returncode == 1, res.output
    message = (acct.root / termination.lstrip("/")).read_text().strip()
    assert message.startswith("DatabaseAccessDenied: the database at %s:%d refused user slurm" % (DB_HOST,
                                                                                                 acct.db_port))
    assert "not-the-password" not in message + res.output  # never in a log
    assert not (root / "run/slurmdbd/client.cnf").exists()  # the client file with the password is gone
    # What the reconciler makes of that pod (its status as the kubelet reports a crash loop).
    pod = {"metadata": {"name": "demo-accounting-0"}, "status": {"containerStatuses": [{
        "name": "slurmdbd", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "message": message + "\n"}}}]}}
    cluster = accounting_spec()
    sts = {"metadata": {"name": "demo-accounting"}, "spec": {"replicas": 1}, "status": {"readyReplicas": 0}}
    plan = model.Draft()
    plan.manifests = [dict(sts, kind="StatefulSet")]
    ctx = model.Context(cluster, [], [], {}, {"statefulsets": {"demo-accounting": sts},
                                               "pods": {"demo-accounting-0": pod}}, 0)
    components.plan_components(plan, ctx)
    status, reason, text = plan.components["AccountingReady"]
    assert (status, reason) == ("False", "DatabaseAccessDenied")
    assert "refused user slurm" in text and text.startswith("demo-accounting: 0/1 pods ready; slurmdbd: ")


def fake_pod(acct: AccountingCluster, fake: str):
    """A second slurmdbd pod's files under ``fake`` (its SOPERATOR_ROOT): the ConfigMap's directory, the memory
    volume (an emptyDir, the pod's fsGroup), the kubelet's termination log (anyone may write it)."""
    root = acct.root / fake.lstrip("/")
    shutil.rmtree(root, ignore_errors=True)
    (root / "etc/soperator/slurmdbd").mkdir(parents=True)
    acct.pod_dir("run/slurmdbd", root)
    for name in ("termination-log", "t"):
        (root / name).touch()
        (root / name).chmod(0o666)
    return root


# --- an External database: TLS verified, no clear-text authentication ---------------------------------------------
def test_slurmdbd_reaches_the_database_only_over_tls_and_loads_no_password_revealing_plugin(acct):
    """The server refuses every TCP client without TLS (require_secure_transport), yet slurmdbd stores and answers:
    its connection is TLS, verified against the CA (StorageParameters=SSL_CA, which the client library checks:
    the refusals below). Its MariaDB client library may load only challenge-response authentication plugins."""
    plain = acct.run(["mariadb", "--skip-ssl", "-h", DB_HOST, "-P", str(acct.db_port), "-u", "slurm",
                      "-p" + acct.password, "-e", "select 1"])
    assert plain.returncode != 0 and "secure transport" in plain.output.lower(), plain.output
    assert acct.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster"]).check().stdout.strip() == CLUSTER
    conf = acct.run(["cat", names.SLURMDBD_RUN_DIR + "/slurmdbd.conf"]).check().stdout
    assert "StorageHost=%s\n" % DB_HOST in conf
    assert "StorageParameters=SSL_CA=%s/%s\n" % (names.DB_CA_MOUNT, DB_CA_KEY) in conf
    pid = acct.run(["pgrep", "-xo", "slurmdbd"]).check().stdout.strip()
    environ = dict(v.split("=", 1) for v in acct.run(["cat", "/proc/%s/environ" % pid]).check().stdout.split("\0")
                   if "=" in v)
    plugins = acct.run(["ls", environ["MARIADB_PLUGIN_DIR"]]).check().stdout.split()
    assert plugins == ["client_ed25519.so", "parsec.so"]


def dbd_pod(acct: AccountingCluster, fake: str, password: str, **database):
    """A second slurmdbd pod's files under ``fake``: the slurmdbd.conf rendered for ``database`` (at this host's
    database port) and the password Secret."""
    root = fake_pod(acct, fake)
    template = slurm_conf.render_slurmdbd_conf(accounting_spec(**database)).replace(
        "StoragePort=3306\n", "StoragePort=%d\n" % acct.db_port)
    (root / "etc/soperator/slurmdbd/slurmdbd.conf").write_text(template)
    acct.secret_file(names.DB_PASSWORD_MOUNT + "/password", (password + "\n").encode(), root)
    return root


def run_dbd_pod(acct: AccountingCluster, fake: str):
    res = acct.entrypoint(["/usr/sbin/slurmdbd", "-D"], {"SOPERATOR_ROOT": fake, "SOPERATOR_DB_WAIT_TIMEOUT": "10",
                                                          "SOPERATOR_TERMINATION_LOG": fake + "/t"},
                          user=names.SLURM_USER)
    return res, (acct.root / fake.lstrip("/") / "t").read_text().strip()


def test_a_server_certificate_another_ca_signed_is_refused_before_the_password(acct):
    fake = "/tmp/other-ca-root"
    dbd_pod(acct, fake, acct.password, tls={"caSecretRef": {"name": "db-ca", "key": "other.pem"}})
    acct.write("%s/other.pem" % names.DB_CA_MOUNT, _pem(acct.other_ca[1]).decode(), 0o444)
    res, message = run_dbd_pod(acct, fake)
    assert res.returncode == 1, res.output
    assert message.startswith("DatabaseCertificateRefused: the database at %s:%d has no certificate for %s signed "
                              "by the CA of spec.accounting.database.tls.caSecretRef" % (DB_HOST, acct.db_port,
                                                                                          DB_HOST)), message
    assert acct.password not in res.output + message


def test_a_certificate_of_the_ca_for_another_host_is_refused(acct):
    """MariaDB listens on OTHER_DB_HOST too, with its certificate for DB_HOST: the right CA, the wrong name."""
    fake = "/tmp/other-host-root"
    dbd_pod(acct, fake, acct.password, host=OTHER_DB_HOST)
    res, message = run_dbd_pod(acct, fake)
    assert res.returncode == 1, res.output
    assert message.startswith("DatabaseCertificateRefused: the database at %s:%d" % (OTHER_DB_HOST, acct.db_port))
    assert "Hostname verification failed" in message, message


def test_a_server_asking_for_the_password_in_clear_text_gets_nothing(acct):
    """A database user authenticated by PAM with pam_use_cleartext_plugin: the server asks the client for the
    password itself (mysql_clear_password), and PAM (pam_exec) writes down what it got. slurmdbd's entrypoint refuses
    and the server gets nothing; the stock client, the positive control, hands the password over."""
    captured = "/tmp/captured-password"
    acct.write("/usr/local/sbin/capture-password", "#!/bin/sh\ntr -d '\\000' >%s\n" % captured, 0o755)
    acct.write("/etc/pam.d/soperator-clear", "auth required pam_exec.so expose_authtok quiet "
               "/usr/local/sbin/capture-password\naccount required pam_permit.so\n", 0o644)
    # As root over MariaDB's socket (no TLS needed there).
    acct.run(["mariadb", "--socket=/run/mysqld/mysqld.sock", "--skip-ssl", "-e",
              "CREATE USER IF NOT EXISTS clear@'%' IDENTIFIED VIA pam USING 'soperator-clear'; "
              "GRANT ALL ON {0}.* TO clear@'%'".format(DB_NAME)]).check()
    target = acct.root / captured.lstrip("/")
    fake = "/tmp/clear-text-root"
    secret = "never-sent-" + acct.password
    dbd_pod(acct, fake, secret, user="clear")
    target.unlink(missing_ok=True)
    res, message = run_dbd_pod(acct, fake)
    assert res.returncode == 1, res.output
    assert message.startswith("DatabaseAuthenticationRefused: the database at %s:%d asks user clear for an "
                              "authentication that would hand it the password" % (DB_HOST, acct.db_port)), message
    assert "mysql_clear_password" in message
    # PAM ran (the server's authentication failed without a password from the client), and got nothing.
    got = target.read_text() if target.exists() else ""
    assert got == "" and secret not in res.output + message, got
    # The positive control: the same server, the same user, the stock client (TLS verified against the same CA).
    control = acct.run(["mariadb", "-h", DB_HOST, "-P", str(acct.db_port), "-u", "clear", "-psent-by-default",
                        "--ssl-ca=%s/%s" % (names.DB_CA_MOUNT, DB_CA_KEY), "-e", "select 1"])
    assert control.returncode == 0, control.output
    assert target.read_text() == "sent-by-default"


def test_a_password_slurmdbd_conf_cannot_hold_is_refused_by_name(acct):
    fake = "/tmp/bad-password-root"
    root = fake_pod(acct, fake)
    (root / "etc/soperator/slurmdbd/slurmdbd.conf").write_text("StorageHost=127.0.0.1\n")
    acct.secret_file(names.DB_PASSWORD_MOUNT + "/password", b"two words\n", root)
    res = acct.entrypoint(["/usr/sbin/slurmdbd", "-D"], {"SOPERATOR_ROOT": fake,
                                                          "SOPERATOR_TERMINATION_LOG": fake + "/t"},
                          user=names.SLURM_USER)
    assert res.returncode == 1
    assert (root / "t").read_text().startswith("InvalidDatabasePassword: the database password "
                                               "(spec.accounting.database.passwordSecretRef) must be one token")
    assert "two words" not in res.output


def _get(port: int, path: str, token: str | None = None):
    headers = {"X-SLURM-USER-TOKEN": token} if token else {}
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


@pytest.fixture(scope="module")
def rest(acct):
    """slurmrestd with the rendered container's arguments and environment, on this host's port, without munge."""
    c = ClusterContext(accounting_spec(), [])
    container = slurmrestd(c, "")["spec"]["template"]["spec"]["containers"][0]
    args = [a if not a.startswith("0.0.0.0:") else "127.0.0.1:%d" % acct.rest_port for a in container["args"]]
    env = {e["name"]: e["value"] for e in container["env"] if e["name"] != "SLURM_CONF"}
    assert "rest_auth/jwt" in args and "rest_auth/local" not in " ".join(args)
    proc = acct.start_slurmrestd(args, env)
    yield acct.rest_port
    proc.terminate()
    proc.wait(10)


def test_slurmrestd_answers_ping_and_diag_with_a_token(acct, rest):
    token = acct.run(["scontrol", "token", "lifespan=300"]).check().stdout.strip().split("=", 1)[1]
    status, body = _get(rest, "/slurm/%s/ping" % API, token)
    assert status == 200 and body["pings"][0]["pinged"] == "UP" and body["pings"][0]["responding"] is True
    status, body = _get(rest, "/slurm/%s/diag" % API, token)
    assert status == 200 and body["statistics"]["jobs_submitted"] >= 1, body
    # Accounting through the same token (slurmdbd verifies it with the same key).
    status, body = _get(rest, "/slurmdb/%s/jobs" % API, token)
    assert status == 200 and body["jobs"], body
    # A user's own token, from `scontrol token` as that user: the documented way.
    user_token = acct.run(["scontrol", "token"], user=USER).check().stdout.strip().split("=", 1)[1]
    status, body = _get(rest, "/slurm/%s/diag" % API, user_token)
    assert status == 200, body


def test_tokens_still_work_after_scontrol_reconfigure(acct, rest):
    """`scontrol reconfigure` (every config change) re-executes slurmctld as SlurmUser, which reads the JWT key
    again: its own copy, not the Secret's root-only file."""
    before = acct.process("slurmctld")["Pid"].strip()
    acct.run(["scontrol", "reconfigure"]).check()
    wait_for(lambda: acct.run(["scontrol", "ping"], timeout=10).returncode == 0 and
             acct.run(["pgrep", "-xo", "slurmctld"]).stdout.strip() not in ("", before), 60,
             "a re-executed slurmctld to answer")
    token = acct.run(["scontrol", "token", "lifespan=300"]).check().stdout.strip().split("=", 1)[1]
    status, body = _get(rest, "/slurm/%s/diag" % API, token)
    assert status == 200 and "statistics" in body, body
    status, body = _get(rest, "/slurmdb/%s/jobs" % API, token)
    assert status == 200, body


def test_slurmrestd_refuses_requests_without_a_valid_token(acct, rest):
    status, body = _get(rest, "/slurm/%s/ping" % API)
    assert status == 401, body
    status, body = _get(rest, "/slurm/%s/diag" % API)
    assert status == 401, body
    token = acct.run(["scontrol", "token", "lifespan=300"]).check().stdout.strip().split("=", 1)[1]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    status, body = _get(rest, "/slurm/%s/diag" % API, forged)
    assert status != 200 or "statistics" not in body, body
    assert node_name(0)  # the cluster is the module's: nodes stay up for the exporter tests


def test_the_database_init_file_with_the_password_is_gone_once_mariadb_answers(acct):
    """The entrypoint hands MariaDB the database user's password in an init file (in memory in the pod) and removes
    it once the server has read it: once it answers, not when its socket appears (MariaDB 11.8 creates the socket
    first and reads the file after; removing it then aborted the server)."""
    wait_for(lambda: acct.run(["test", "-e", "/run/mysqld/soperator-init.sql"]).returncode != 0, 30,
             "the init file removed")
    assert acct.run(["mariadb-admin", "--no-defaults", "--skip-ssl", "--socket=/run/mysqld/mysqld.sock",
                     "ping"]).returncode == 0
    assert "Aborting" not in acct.run(["cat", "/var/log/slurm/mariadb.log"]).check().stdout
