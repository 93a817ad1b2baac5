"""Directory users end to end on the real node: examples/ldap-cluster-local.yaml (accounting with
AccountingStorageEnforce=associations, the REST API, spec.identity) converged by site.yml once, beside the demo
directory of examples/directory/openldap-local.yaml (Debian's slapd, LDAPS with a CA of the test's), every pod of the
cluster with its sssd sidecar.

dora and her groups exist only in the directory (uid, gid and groups in no /etc/passwd or /etc/group of the jail or
the images): she logs in over SSH through the login Service with the key the directory holds (sshPublicKey), gets
a home, `id` shows the directory's ids; her `sbatch -N2` runs as her on both workers; sacct and sshare know her by
name; a token slurmctld signs for her submits, through slurmrestd, a job that runs as her. With the directory
stopped she still logs in and runs a job (sssd's cache) and IdentityReady says DirectoryUnreachable; started
again, a user added then logs in and runs a job with no pod restarted. A wrong bind password in the Secret makes
IdentityReady False (BindRefused, naming the fields) with no pod restarted, and users seen before still work. The
bind password is in no ConfigMap, no pod's environment, no container's log and no `kubectl describe`. Prints the
figures (login, first job, recovery).

The tests share one cluster and run in file order.
"""

import base64
import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml
from conftest import E2E, ROOT, wait_until

CLUSTER_EXAMPLE = os.path.join(ROOT, "examples", "ldap-cluster-local.yaml")
DIRECTORY_EXAMPLE = os.path.join(ROOT, "examples", "directory", "openldap-local.yaml")
NAMESPACE = "e2e-identity"
API = "v0.0.42"
SUFFIX = "dc=example,dc=org"
BIND_PASSWORD = 'e2e bind#pw;="x'
DORA, DORA_UID, DORA_GID, PHYSICS = "dora", 20001, 20001, 20100
EVE, EVE_UID = "eve", 20002
IDENTITY_LABEL = "slurm.soperator.dev/identity-secret-for"


def _openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def _certificates(d, namespace):
    """A CA and the directory's certificate for the names pods use: directory, directory.<ns>.svc[.cluster.local]."""
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
             d + "/ca.key", "-out", d + "/ca.crt", "-days", "2", "-subj", "/CN=e2e-identity-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", d + "/tls.key",
             "-out", d + "/tls.csr", "-subj", "/CN=directory")
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=DNS:directory,DNS:directory.{ns}.svc,DNS:directory.{ns}.svc.cluster.local\n"
                "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n".format(ns=namespace))
    _openssl("x509", "-req", "-in", d + "/tls.csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key", "-CAcreateserial",
             "-out", d + "/tls.crt", "-days", "2", "-extfile", d + "/ext")


def _person(name, uid, gid, key):
    return ("dn: uid={n},ou=people,{s}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n"
            "objectClass: ldapPublicKey\nuid: {n}\ncn: {n}\nsn: {n}\nuidNumber: {u}\ngidNumber: {g}\n"
            "homeDirectory: /home/{n}\nloginShell: /bin/bash\nsshPublicKey: {k}\n").format(
                n=name, s=SUFFIX, u=uid, g=gid, k=key)


def _group(name, gid, members=()):
    return "dn: cn={n},ou=groups,{s}\nobjectClass: posixGroup\ncn: {n}\ngidNumber: {g}\n{m}".format(
        n=name, s=SUFFIX, g=gid, m="".join("memberUid: %s\n" % m for m in members))


def _secret(name, data, labels=None, secret_type="Opaque"):
    return {"apiVersion": "v1", "kind": "Secret", "type": secret_type,
            "metadata": {"name": name, "labels": labels or {}},
            "data": dict((k, base64.b64encode(v.encode()).decode()) for k, v in data.items())}


class Identity(E2E):
    """The E2E helpers for the directory example's cluster (``ldap``) and the directory."""

    def slurm(self, command, timeout=120):
        return self.exec("ldap-controller-0", "slurmctld", command, timeout=timeout)

    def jail(self, command, timeout=180):
        return self.exec("ldap-login-0", "sshd", "chroot /mnt/jail sh -c %s" % shlex.quote(command), timeout)

    def definition(self, **_ignored):
        with open(CLUSTER_EXAMPLE) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            doc["metadata"]["namespace"] = self.namespace
        return docs

    def conditions(self):
        status = (self.get("slurmcluster", "ldap") or {}).get("status") or {}
        return dict((c["type"], c) for c in status.get("conditions") or [])

    def service_ip(self, name):
        return self.get("service", name)["spec"]["clusterIP"]

    def ssh(self, user, command, key=None, timeout=90):
        """``command`` in ``user``'s SSH session through the login Service (port 22 of its ClusterIP)."""
        argv = ["ssh", "-i", key or self.keys[user], "-o", "StrictHostKeyChecking=no", "-o",
                "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "%s@%s" % (user, self.service_ip("ldap-login")), command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def sidecar_status(self, pod):
        return self.exec(pod, "sssd", "cat /run/soperator/identity-status").stdout.strip()

    def directory(self, command, input_text=None):
        return self.kubectl("exec", *(["-i"] if input_text else []), "-n", self.namespace, "directory-0", "-c",
                            "slapd", "--", "sh", "-c", command, input=input_text, check=False)

    def pods_state(self):
        """{pod: (uid, restarts of every container)} of the cluster's pods."""
        pods = self.get("pods", "-l", "app.kubernetes.io/instance=ldap")["items"]
        return dict((p["metadata"]["name"], (p["metadata"]["uid"], sorted(
            (s["name"], s.get("restartCount", 0)) for s in (p["status"].get("containerStatuses") or [])
            + (p["status"].get("initContainerStatuses") or [])))) for p in pods)

    def explain(self):
        out = [self.kubectl("get", "pods", "-n", self.namespace, "-o", "wide", check=False).stdout,
               json.dumps((self.get("slurmcluster", "ldap") or {}).get("status"), indent=1)]
        for pod, container in (("ldap-controller-0", "sssd"), ("ldap-controller-0", "slurmctld"),
                               ("ldap-login-0", "sshd"), ("ldap-cpu-0", "sssd"), ("ldap-cpu-0", "slurmd"),
                               ("directory-0", "slapd")):
            out.append("--- %s/%s ---\n%s" % (pod, container, self.kubectl(
                "logs", "-n", self.namespace, pod, "-c", container, "--tail=20", check=False).stdout))
        return "\n".join(out)

    def job_state(self, job):
        res = self.slurm("sacct -j %s -X -n -P -o State,User" % job)
        return res.stdout.strip().split("|") if res.returncode == 0 and res.stdout.strip() else []


def _new_key(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", os.path.basename(path), "-f", path],
                   check=True)
    with open(path + ".pub") as f:
        return f.read().strip()


def _remove_namespace(c):
    c.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
    # Nothing reconciles this namespace after the test: the finalizer site.yml's converge puts on NodeSets (removed
    # by the next converge once their pods are gone) would hold it for ever.
    for name in c.kubectl("get", "nodesets", "-n", NAMESPACE, "-o", "name", check=False).stdout.split():
        c.kubectl("patch", "-n", NAMESPACE, name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                  check=False)


@pytest.fixture(scope="module")
def ldap(real_node_cluster, tmp_path_factory):
    c = Identity(real_node_cluster, namespace=NAMESPACE)
    tmp = str(tmp_path_factory.mktemp("identity"))
    c.keys = {}
    public = {}
    for user in (DORA, EVE):
        c.keys[user] = os.path.join(tmp, user)
        public[user] = _new_key(c.keys[user])
    _certificates(tmp, NAMESPACE)
    # A namespace left by an earlier run holds a directory with its CA and keys: start from none.
    _remove_namespace(c)
    wait_until(lambda: c.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0, 300,
               "the namespace of an earlier run gone")
    c.kubectl("create", "namespace", NAMESPACE)
    ca = open(tmp + "/ca.crt").read()
    c.public = public
    seed = "\n".join([_person(DORA, DORA_UID, DORA_GID, public[DORA]), _group(DORA, DORA_GID),
                      _group("physics", PHYSICS, [DORA])])
    objects = [
        _secret("directory-tls", {"tls.crt": open(tmp + "/tls.crt").read(), "tls.key": open(tmp + "/tls.key").read()}),
        _secret("directory-admin", {"password": "admin-e2e-pw"}),
        _secret("directory-service", {"password": BIND_PASSWORD}),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "directory-seed"},
         "data": {"10-people.ldif": seed}},
        # The cluster's: marked for SlurmCluster ldap by their owner.
        _secret("ldap-bind", {"password": BIND_PASSWORD}, {IDENTITY_LABEL: "ldap"}),
        _secret("ldap-ca", {"ca.crt": ca}, {IDENTITY_LABEL: "ldap"}),
    ]
    with open(DIRECTORY_EXAMPLE) as f:
        objects += [d for d in yaml.safe_load_all(f) if d]
    for obj in objects:
        obj["metadata"]["namespace"] = NAMESPACE
    try:
        c.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))
        t0 = time.monotonic()
        c.site(c.definition())
        wait_until(lambda: all(c.sinfo().get(n) == "idle" for n in ("ldap-cpu-0", "ldap-cpu-1")), 240,
                   "ldap workers idle", c.explain)
        print("\ne2e identity: the example applied -> Ready, workers idle in %.1f s" % (time.monotonic() - t0))
        yield c
    finally:
        _remove_namespace(c)


def test_identity_ready_every_pod_with_its_sidecar_and_the_password_nowhere(ldap):
    cond = ldap.conditions()["IdentityReady"]
    assert cond["status"] == "True" and "the directory (ldaps://directory) answers the bind of cn=sssd" in cond[
        "message"], cond
    for pod in ("ldap-controller-0", "ldap-login-0", "ldap-cpu-0", "ldap-cpu-1", "ldap-accounting-0", "ldap-rest-0"):
        assert ldap.sidecar_status(pod).startswith("Ready"), pod
    # The bind password: in no ConfigMap, no pod's environment, no container's log (its Secrets' volumes only).
    configmaps = json.dumps(ldap.get("configmaps")["items"])
    assert BIND_PASSWORD not in configmaps and "ldap_default_authtok =" not in configmaps
    for pod in ldap.get("pods", "-l", "app.kubernetes.io/instance=ldap")["items"]:
        containers = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
        assert BIND_PASSWORD not in json.dumps([c.get("env") for c in containers]), pod["metadata"]["name"]
        assert "secretKeyRef" not in json.dumps([c.get("env") for c in containers])
        for container in containers:
            log = ldap.kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"], "-c", container["name"],
                               check=False).stdout
            assert BIND_PASSWORD not in log, (pod["metadata"]["name"], container["name"])
    described = ldap.kubectl("describe", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/instance=ldap").stdout
    assert BIND_PASSWORD not in described


def _ready(pod):
    return bool(pod) and any(c["type"] == "Ready" and c["status"] == "True"
                             for c in pod["status"].get("conditions", []))


def test_a_login_pod_is_ready_only_once_its_sessions_have_slurm_conf(ldap):
    """The cold e2e's sbatch in a login session once found no slurm.conf ("resolve_ctls_from_dns_srv ... Could not
    establish a configuration source"): the pod was Ready while its sackd, started before slurmctld answered, waited
    out its 10 s between fetches, and the jail's /etc/slurm (-> /run/slurm/conf, sackd's) led to an empty directory.
    Here a new login pod starts while slurmctld is away: it is not Ready and its sshd not started while sackd retries;
    once slurmctld is back it turns Ready, and its sessions have slurm.conf from that moment."""
    login = ldap.get("pod", "ldap-login-0")["metadata"]["uid"]
    ldap.kubectl("scale", "statefulset", "ldap-controller", "-n", NAMESPACE, "--replicas=0")
    try:
        wait_until(lambda: ldap.get("pod", "ldap-controller-0") is None, 120, "the controller gone", ldap.explain)
        ldap.kubectl("delete", "pod", "-n", NAMESPACE, "ldap-login-0", "--wait=false")
        wait_until(lambda: (lambda p: p and p["metadata"]["uid"] != login)(ldap.get("pod", "ldap-login-0")), 120,
                   "the new login pod", ldap.explain)
        wait_until(lambda: "Retrying in 10 seconds" in ldap.kubectl(
            "logs", "-n", NAMESPACE, "ldap-login-0", "-c", "sackd", check=False).stdout, 120,
            "the new login pod's sackd retrying its fetch", ldap.explain)
        pod = ldap.get("pod", "ldap-login-0")
        assert pod["metadata"]["uid"] != login and not _ready(pod), pod["status"]
        sshd = [c for c in pod["status"].get("containerStatuses", []) if c["name"] == "sshd"]
        assert not sshd or "running" not in sshd[0]["state"], sshd
    finally:
        ldap.kubectl("scale", "statefulset", "ldap-controller", "-n", NAMESPACE, "--replicas=1")
    wait_until(lambda: _ready(ldap.get("pod", "ldap-login-0")), 300, "the login pod Ready", ldap.explain)
    found = ldap.jail("test -s /etc/slurm/slurm.conf && echo present")
    assert found.stdout.strip() == "present", found.stdout + found.stderr
    wait_until(lambda: all(ldap.sinfo().get(n) == "idle" for n in ("ldap-cpu-0", "ldap-cpu-1")), 240,
               "ldap workers idle again", ldap.explain)


def test_a_directory_user_logs_in_over_ssh_with_her_directory_key(ldap):
    # dora is nobody's local account: not in the jail's files, nor in any image's (the daemons' are the jail's).
    for name in (DORA, str(DORA_UID)):
        assert ldap.jail("grep -h '^%s:\\|:%s:' /etc/passwd /etc/group" % (name, name)).stdout == ""
        for pod, container in (("ldap-controller-0", "slurmctld"), ("ldap-cpu-0", "slurmd"), ("ldap-login-0", "sshd")):
            assert ldap.exec(pod, container, "getent -s files passwd %s" % name).returncode == 2
    started = time.monotonic()
    res = wait_until(lambda: (lambda r: r.returncode == 0 and r)(ldap.ssh(DORA, "id; pwd; stat -c '%a %U' .")), 90,
                     "dora's login through the login Service", ldap.explain)
    ldap.figures = {"first login (s)": time.monotonic() - started}
    lines = res.stdout.splitlines()
    assert lines[0] == "uid=%d(dora) gid=%d(dora) groups=%d(dora),%d(physics)" % (DORA_UID, DORA_GID, DORA_GID,
                                                                                 PHYSICS), lines
    assert lines[1:] == ["/home/dora", "700 dora"], lines  # made at her first login, hers
    started = time.monotonic()
    again = ldap.ssh(DORA, "true")
    ldap.figures["second login (s)"] = time.monotonic() - started
    assert again.returncode == 0, again.stderr
    print("\ne2e identity: first login of a directory user %.2f s, a second one %.2f s"
          % (ldap.figures["first login (s)"], ldap.figures["second login (s)"]))


def test_her_batch_job_runs_as_her_on_two_workers_and_accounting_knows_her(ldap):
    for command in ("sacctmgr -i add account physics fairshare=10", "sacctmgr -i add user dora account=physics"):
        res = ldap.slurm(command)
        assert res.returncode == 0, res.stdout + res.stderr
    script = ("srun -N2 sh -c 'echo $(hostname) $(id -u) $(id -g) $(id -G | tr \" \" ,)' | sort > "
              "/home/dora/n2.out")
    started = time.monotonic()
    res = ldap.ssh(DORA, "sbatch --parsable --wait -N2 -o /home/dora/n2.log --wrap %s && cat /home/dora/n2.out"
                   % shlex.quote(script), timeout=240)
    ldap.figures["first job, sbatch -N2 to done (s)"] = time.monotonic() - started
    assert res.returncode == 0, res.stdout + res.stderr + ldap.explain()
    job, lines = res.stdout.splitlines()[0].split(";")[0], res.stdout.splitlines()[1:]
    groups = "%d,%d" % (DORA_GID, PHYSICS)
    assert lines == ["ldap-cpu-0 %d %d %s" % (DORA_UID, DORA_GID, groups),
                     "ldap-cpu-1 %d %d %s" % (DORA_UID, DORA_GID, groups)], lines
    print("\ne2e identity: dora's first job (sbatch -N2 --wait) %.1f s"
          % ldap.figures["first job, sbatch -N2 to done (s)"])
    # sacct by name; sshare shows her association under physics.
    listed = wait_until(lambda: (lambda out: job in out and out)(ldap.ssh(
        DORA, "sacct -u dora -X -n -P -o JobID,User,Account,State").stdout), 60, "sacct -u dora")
    assert "%s|dora|physics|COMPLETED" % job in listed, listed
    shares = ldap.ssh(DORA, "sshare -n -P -u dora -o Account,User,RawShares").stdout
    assert any(f[:2] == ["physics", "dora"] for f in (line.strip().split("|") for line in shares.splitlines())), \
        shares
    ldap.first_job = job


def _post(url, token, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": DORA, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def test_a_token_for_her_submits_through_slurmrestd_a_job_that_runs_as_her(ldap):
    token = wait_until(lambda: (lambda r: r.returncode == 0 and r.stdout.startswith("SLURM_JWT=") and r)(
        ldap.slurm("scontrol token username=dora lifespan=600")), 60, "a token for dora", ldap.explain)
    token = token.stdout.strip().split("=", 1)[1]
    url = "http://%s:6820/slurm/%s/job/submit" % (ldap.service_ip("ldap-rest"), API)
    body = {"job": {"script": "#!/bin/sh\nid > /home/dora/rest.out\n", "name": "from-rest", "account": "physics",
                    "current_working_directory": "/home/dora", "environment": ["PATH=/usr/bin:/bin"]}}
    status, answer = wait_until(lambda: (lambda r: r[0] == 200 and r)(_post(url, token, body)), 90,
                                "a job submitted through slurmrestd", ldap.explain)
    job = str(answer["job_id"])
    wait_until(lambda: ldap.job_state(job)[:1] == ["COMPLETED"], 120, "the REST job done", ldap.explain)
    assert ldap.job_state(job) == ["COMPLETED", DORA]
    out = ldap.jail("stat -c '%u %g' /home/dora/rest.out; cat /home/dora/rest.out").stdout.splitlines()
    assert out[0] == "%d %d" % (DORA_UID, DORA_GID), out
    assert out[1].startswith("uid=%d(dora) gid=%d(dora)" % (DORA_UID, DORA_GID)), out


def test_with_the_directory_down_she_still_works_and_a_new_user_works_once_it_is_back(ldap):
    before = ldap.pods_state()
    ldap.kubectl("scale", "statefulset", "directory", "-n", NAMESPACE, "--replicas=0")
    wait_until(lambda: ldap.get("pod", "directory-0") is None, 120, "the directory gone", ldap.explain)
    try:
        wait_until(lambda: ldap.sidecar_status("ldap-controller-0").startswith("DirectoryUnreachable"), 120,
                   "the controller's sidecar sees the directory down", ldap.explain)
        ldap.site(ldap.definition(), wait=False)
        cond = ldap.conditions()["IdentityReady"]
        assert (cond["status"], cond["reason"]) == ("False", "DirectoryUnreachable"), cond
        assert cond["message"].startswith("spec.identity.ldap.uris: cannot connect to ldaps://directory"), cond
        res = ldap.ssh(DORA, "id -u; srun -N1 id -u")
        assert res.returncode == 0 and res.stdout.split() == [str(DORA_UID)] * 2, res.stdout + res.stderr
    finally:
        ldap.kubectl("scale", "statefulset", "directory", "-n", NAMESPACE, "--replicas=1")
    wait_until(lambda: (lambda p: p and any(cd["type"] == "Ready" and cd["status"] == "True" for cd in p[
        "status"].get("conditions", [])))(ldap.get("pod", "directory-0")), 180, "the directory back", ldap.explain)
    # A new directory, from its seed: eve is added now, with her key.
    added = ldap.directory("ldapadd -x -H ldap://localhost:1389 -D cn=admin,%s -y /etc/soperator-directory/admin/"
                           "password" % SUFFIX, _person(EVE, EVE_UID, PHYSICS, ldap.public[EVE]))
    assert added.returncode == 0, added.stdout + added.stderr
    assert ldap.slurm("sacctmgr -i add user eve account=physics").returncode == 0
    started = time.monotonic()
    res = wait_until(lambda: (lambda r: r.returncode == 0 and r)(ldap.ssh(EVE, "id -u; srun -N1 id -u")), 180,
                     "eve logs in and runs a step", ldap.explain)
    print("\ne2e identity: a user added once the directory is back logs in and runs a step after %.1f s"
          % (time.monotonic() - started))
    assert res.stdout.split() == [str(EVE_UID)] * 2
    assert ldap.pods_state() == before  # the same pods, no container restarted
    wait_until(lambda: ldap.sidecar_status("ldap-controller-0").startswith("Ready"), 120, "Ready again")


def test_a_directory_the_policy_does_not_allow_is_refused_before_anything_is_written(ldap):
    """The installer allows only its own directory: the SlurmCluster's (ldaps://directory) is refused naming the field
    and the policy key, and the change the definition carried (a label of the SlurmCluster) is written nowhere."""
    cluster = ldap.get("slurmcluster", "ldap")
    docs = ldap.definition()
    docs[0]["metadata"].setdefault("labels", {})["e2e.soperator.dev/probe"] = "policy"
    refused = ldap.site(docs, wait=False, check=False, extra={
        "soperator_policy": {"allowed_directory_uris": ["ldaps://ldap.corp.example.com"]}})
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "spec.identity.ldap.uris[0]: directory ldaps://directory is not allowed by " \
        "the installer's policy" in said and "(allowed_directory_uris)" in said, said[-3000:]
    after = ldap.get("slurmcluster", "ldap")
    assert after["metadata"]["resourceVersion"] == cluster["metadata"]["resourceVersion"], after["metadata"]
    # Allowed, the same definition goes through (the label is written); then back as the example has it.
    ldap.site(docs, wait=False, extra={"soperator_policy": {"allowed_directory_uris": ["ldaps://directory"]}})
    assert ldap.get("slurmcluster", "ldap")["metadata"]["labels"]["e2e.soperator.dev/probe"] == "policy"
    ldap.site(ldap.definition(), wait=False)
    assert "e2e.soperator.dev/probe" not in (ldap.get("slurmcluster", "ldap")["metadata"].get("labels") or {})


def test_a_wrong_bind_password_is_a_condition_naming_the_field_not_a_crash_loop(ldap):
    wrong = 'wrong e2e#pw;="y'
    before = ldap.pods_state()
    patch = {"data": {"password": base64.b64encode(wrong.encode()).decode()}}
    ldap.kubectl("patch", "secret", "ldap-bind", "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))
    try:
        # The kubelet updates the Secret's volume; the controller's sidecar restarts sssd in place with it and looks.
        started = time.monotonic()
        wait_until(lambda: ldap.sidecar_status("ldap-controller-0").startswith("BindRefused"), 240,
                   "the controller's sidecar sees the bind refused", ldap.explain)
        print("\ne2e identity: a wrong bind password seen by the controller's sidecar after %.1f s"
              % (time.monotonic() - started))
        converged = ldap.site(ldap.definition(), wait=False)
        assert wrong not in converged.stdout + converged.stderr
        cond = ldap.conditions()["IdentityReady"]
        assert (cond["status"], cond["reason"]) == ("False", "BindRefused"), cond
        assert cond["message"].startswith("spec.identity.ldap.bindDN and spec.identity.ldap.bindPasswordSecretRef: "
                                          "the directory (ldaps://directory) refused the bind of cn=sssd"), cond
        assert "Invalid credentials (49)" in cond["message"] and wrong not in cond["message"], cond
        # A user sssd has seen still logs in and runs a step (its cache); nothing restarted, nothing crash-loops.
        res = ldap.ssh(DORA, "id -u; srun -N1 id -u")
        assert res.returncode == 0 and res.stdout.split() == [str(DORA_UID)] * 2, res.stdout + res.stderr
        assert ldap.pods_state() == before
        for pod in ldap.get("pods", "-l", "app.kubernetes.io/instance=ldap")["items"]:
            for container in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
                log = ldap.kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"], "-c", container["name"],
                                   check=False).stdout
                assert wrong not in log and BIND_PASSWORD not in log, (pod["metadata"]["name"], container["name"])
        described = ldap.kubectl("describe", "pods,slurmcluster", "-n", NAMESPACE).stdout
        assert wrong not in described and BIND_PASSWORD not in described
    finally:
        patch = {"data": {"password": base64.b64encode(BIND_PASSWORD.encode()).decode()}}
        ldap.kubectl("patch", "secret", "ldap-bind", "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))
    wait_until(lambda: ldap.sidecar_status("ldap-controller-0").startswith("Ready"), 240,
               "the right password back", ldap.explain)
    ldap.site(ldap.definition(), wait=False)
    assert ldap.conditions()["IdentityReady"]["status"] == "True"
    assert ldap.pods_state() == before
