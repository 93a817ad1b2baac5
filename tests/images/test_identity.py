"""Directory users with the real images, outside Kubernetes: Debian's slapd (soperator/openldap) as the directory,
the sssd sidecar (soperator/sssd) beside slurmctld, slurmd and sshd as the rendered manifests run them (no
capability, read-only root filesystem, the socket directory shared read-only with the daemon and bound into the
jail), and the login image's sshd with the rendered sshd_config (AuthorizedKeysCommand, the first-login home).

A user and groups that exist only in the directory log in with their directory key, get a home, run a step as their
own uid and groups on the worker; a local user of the same name stays the local one; the sidecar reports each kind
of trouble by its reason (what the SlurmCluster's IdentityReady shows) and sssd serves known users while the
directory is down, and new ones once it is back, without a restart. The bind password is in no log and no
environment. The engine and the skip rules are test_smoke.py's.
"""

import os
import secrets
import subprocess
import time

import pytest
import yaml
from test_smoke import (  # noqa: F401  (engine, jail: fixtures used here)
    JAIL_IMAGE,
    Cluster,
    Docker,
    add_jail_user,
    engine,
    jail,
    login_port,
    make_host_keys,
    ssh_as,
    wait_until,
    write_files,
)

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as render_identity
from ansible_collections.soperator.slurm.plugins.module_utils.render import login as render_login

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SSSD_IMAGE = names.default_image("sssd")
DIRECTORY_IMAGE = "soperator/openldap:%s" % names.COLLECTION_VERSION
LOGIN_IMAGE = names.default_image("login")
SUFFIX = "dc=example,dc=org"
BIND_DN = "cn=sssd,ou=services," + SUFFIX
# What sssd.conf and the tools must carry as it is: '#' and ';' start comments in INI files, '=' separates.
BIND_PASSWORD = 'bind pw#;="x'
DORA, DORA_UID, PHYSICS, CHEMISTRY = "dora", 20001, 20100, 20200
# The jail's local alice (uid and group 2000), and directory users who would be someone else: erin with alice's uid,
# grace with alice's group as hers, mallory with SlurmUser's uid.
ALICE_UID = 2000
ERIN, GRACE, MALLORY = "erin", "grace", "mallory"


def _keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", os.path.basename(path), "-f", path],
                   check=True)
    with open(path + ".pub") as f:
        return f.read().strip()


def _certificates(directory):
    """A CA, the directory's certificate for the host name `directory` (signed by it), and another CA."""
    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True)
    d = directory
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                "%s/%s.key" % (d, ca), "-out", "%s/%s.crt" % (d, ca), "-days", "2", "-subj", "/CN=" + ca,
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", d + "/tls.key",
            "-out", d + "/tls.csr", "-subj", "/CN=directory")
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=DNS:directory\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n")
    openssl("x509", "-req", "-in", d + "/tls.csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key",
            "-CAcreateserial", "-out", d + "/tls.crt", "-days", "2", "-extfile", d + "/ext")


def _impostor(name, uid, gid, key):
    return """
dn: uid={n},ou=people,{s}
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: {n}
cn: {n}
sn: {n}
uidNumber: {u}
gidNumber: {g}
homeDirectory: /home/{n}
sshPublicKey: {k}
""".format(n=name, s=SUFFIX, u=uid, g=gid, k=key)


def _seed(dora_key, alice_key, impostors=""):
    return """dn: uid=dora,ou=people,{s}
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: dora
cn: Dora Directory
sn: Directory
uidNumber: {uid}
gidNumber: {uid}
homeDirectory: /nfs/home/dora
loginShell: /bin/bash
sshPublicKey: {dora_key}

dn: cn=dora,ou=groups,{s}
objectClass: posixGroup
cn: dora
gidNumber: {uid}

dn: cn=physics,ou=groups,{s}
objectClass: posixGroup
cn: physics
gidNumber: {physics}
memberUid: dora

dn: cn=chemistry,ou=groups,{s}
objectClass: posixGroup
cn: chemistry
gidNumber: {chemistry}
memberUid: dora

dn: uid=alice,ou=people,{s}
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: alice
cn: Alice of the directory
sn: Directory
uidNumber: 20003
gidNumber: {physics}
homeDirectory: /home/alice
sshPublicKey: {alice_key}
""".format(s=SUFFIX, uid=DORA_UID, physics=PHYSICS, chemistry=CHEMISTRY, dora_key=dora_key,
           alice_key=alice_key) + impostors


def _rendered():
    """The cpu example with a directory at ldaps://directory:1636 (the test network's alias): the ConfigMaps."""
    with open(os.path.join(ROOT, "examples", "cpu-cluster.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    docs[0]["spec"]["identity"] = {"ldap": {
        "uris": ["ldaps://directory:1636"], "baseDN": SUFFIX, "userBaseDN": "ou=people," + SUFFIX,
        "groupBaseDN": "ou=groups," + SUFFIX, "bindDN": BIND_DN,
        "bindPasswordSecretRef": {"name": "ldap-bind", "key": "password"},
        "tls": {"caSecretRef": {"name": "ldap-ca", "key": "ca.crt"}}}}
    objects = render.render_cluster(docs[0], docs[1:])
    name = docs[0]["metadata"]["name"]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    worker = by_name[("StatefulSet", names.worker_name(name, docs[1]["metadata"]["name"]))]
    return {
        "cluster": name, "namespace": docs[0]["metadata"]["namespace"], "nodeset": docs[1]["metadata"]["name"],
        "slurm_config": by_name[("ConfigMap", names.slurm_config_name(name))]["data"],
        "sshd_config": by_name[("ConfigMap", names.sshd_config_name(name))]["data"],
        "sssd_config": by_name[("ConfigMap", names.sssd_config_name(name))]["data"],
        "health_config": by_name[("ConfigMap", names.health_config_name(name))]["data"],
        "worker": worker,
        "sidecar": next(c for c in worker["spec"]["template"]["spec"]["initContainers"] if c["name"] == "sssd"),
    }


class Directory(Cluster):
    """The demo cluster's pods, each with its sssd sidecar, and the directory, on one network."""

    def __init__(self, docker, manifests, jail_dir, tmp):
        super(Directory, self).__init__(docker, manifests, jail_dir, tmp)
        self.tls = self.emptydir("tls")
        _certificates(self.tls)
        self.password = write_files(os.path.join(tmp, "bind-password"),
                                    {names.IDENTITY_BIND_PASSWORD_FILE: BIND_PASSWORD}, 0o400)
        self.ca = write_files(os.path.join(tmp, "ca"), {names.IDENTITY_CA_FILE: open(self.tls + "/ca.crt").read()})
        self.pipes = {}

    def directory(self, seed):
        admin = write_files(os.path.join(self.tmp, "admin"), {"password": "admin-" + secrets.token_hex(8)}, 0o444)
        service = write_files(os.path.join(self.tmp, "service"), {"password": BIND_PASSWORD}, 0o444)
        tls = write_files(os.path.join(self.tmp, "directory-tls"), {
            "tls.crt": open(self.tls + "/tls.crt").read(), "tls.key": open(self.tls + "/tls.key").read()}, 0o444)
        self.run("directory", DIRECTORY_IMAGE, [], [], "directory",
                 volumes=[(admin, "/etc/soperator-directory/admin:ro"),
                          (service, "/etc/soperator-directory/service:ro"), (tls, "/etc/soperator-directory/tls:ro"),
                          (write_files(os.path.join(self.tmp, "seed"), {"10-people.ldif": seed}),
                           "/etc/soperator-directory/seed:ro")],
                 options=["--network-alias", "directory", "--security-opt", "no-new-privileges", "--read-only",
                          "--tmpfs", "/var/lib/soperator-directory:uid=994,gid=994,mode=0700", "--tmpfs", "/tmp"])
        wait_until(lambda: "slapd starting" in self.docker.logs("directory"), 60, "slapd",
                   lambda: self.logs("directory"))

    def sssd(self, pod, config_key=render_identity.CONFIG_KEY, interval=2, sssd_conf=None, password=None, ca=None):
        """The sssd sidecar of ``pod`` as the manifest runs it; returns the pod's socket directory."""
        pipes = self.pipes.get(pod) or self.emptydir(pod + "-sssd-pipes")
        self.pipes[pod] = pipes
        config = write_files(os.path.join(self.tmp, pod + "-sssd-config"),
                             {"sssd.conf": sssd_conf or self.manifests["sssd_config"][config_key]})
        volumes = [(config, names.SSSD_CONFIG_MOUNT + ":ro"), (pipes, names.SSS_PIPES_DIR),
                   (self.emptydir(pod + "-sssd-private"), names.SSS_PIPES_DIR + "/private"),
                   (password or self.password, names.IDENTITY_BIND_PASSWORD_MOUNT + ":ro"),
                   (ca or self.ca, names.IDENTITY_CA_MOUNT + ":ro")]
        self.run(pod + "-sssd", SSSD_IMAGE, self.manifests["sidecar"]["args"], render_identity.SSSD_CAPABILITIES,
                 pod, volumes=volumes,
                 options=["--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/etc/sssd",
                          "--tmpfs", "/var/lib/sss/db", "--tmpfs", "/var/lib/sss/mc", "--tmpfs", "/run",
                          "-e", "SOPERATOR_IDENTITY_CHECK=always", "-e",
                          "SOPERATOR_IDENTITY_CHECK_INTERVAL=%d" % interval])
        wait_until(lambda: os.path.exists(os.path.join(pipes, "nss")), 60, "sssd's socket of " + pod,
                   lambda: self.logs(pod + "-sssd"))
        return pipes

    def status(self, pod):
        return self.exec(pod + "-sssd", "cat", names.IDENTITY_STATUS_FILE).stdout.strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """{name: (private key path, public key)}: dora's and the directory alice's are in the directory."""
    d = tmp_path_factory.mktemp("keys")
    return dict((name, (str(d / name), _keygen(str(d / name)))) for name in ("dora", "alice-directory",
                                                                              "alice-local", ERIN, GRACE, MALLORY))


def _with_identity(pipes):
    """What the manifests give a daemon with a directory: the sidecar's socket directory, read-only, and the env."""
    return [(pipes, names.SSS_PIPES_DIR + ":ro")], ["-e", "SOPERATOR_IDENTITY=sssd"]


@pytest.fixture(scope="module")
def ldap(engine, jail, keys, tmp_path_factory):  # noqa: F811
    """The directory, then controller, worker and login, each with its sssd sidecar; a local alice in the jail."""
    docker = Docker(engine)
    c = Directory(docker, _rendered(), jail, str(tmp_path_factory.mktemp("ldap")))
    try:
        c.directory(_seed(keys["dora"][1], keys["alice-directory"][1], "".join((
            _impostor(ERIN, ALICE_UID, PHYSICS, keys[ERIN][1]), _impostor(GRACE, 20004, ALICE_UID, keys[GRACE][1]),
            _impostor(MALLORY, names.SLURM_UID, PHYSICS, keys[MALLORY][1])))))
        volumes, env = _with_identity(c.sssd(c.controller_host))
        c.controller(volumes=volumes, options=env)
        wait_until(lambda: "is UP" in c.exec("controller", "scontrol", "ping").stdout, 60, "scontrol ping",
                   lambda: c.logs("controller", c.controller_host + "-sssd"))
        volumes, env = _with_identity(c.sssd(c.node))
        c.worker(extra_volumes=volumes, options=env)
        add_jail_user(jail, "alice", ALICE_UID, keys["alice-local"][0] + ".pub")
        volumes, env = _with_identity(c.sssd(c.login_host, render_identity.LOGIN_CONFIG_KEY))
        c.login(make_host_keys(os.path.join(c.tmp, "host-keys")),
                write_files(os.path.join(c.tmp, "sshd-config"), c.manifests["sshd_config"]), volumes=volumes,
                options=env)
        c.port = login_port(c)
        wait_until(lambda: "%s idle" % c.node in c.exec("controller", "sinfo", "-h", "-N", "-o", "%N %T").stdout, 90,
                   "the worker idle", lambda: c.logs("worker", c.node + "-sssd"))
        yield c
    finally:
        docker.cleanup()


def ssh(ldap, user, key, command, *options):
    return ssh_as(user, key, ldap.port, command, *options)


def test_the_sidecar_finds_the_directory_with_no_capability_on_a_read_only_root(ldap):
    for pod in (ldap.controller_host, ldap.node, ldap.login_host):
        status = wait_until(lambda pod=pod: ldap.status(pod), 30, "a status from %s's sidecar" % pod)
        assert status.startswith("Ready - the directory (ldaps://directory:1636) answers the bind of %s" % BIND_DN)
        # Every sssd process (monitor, backend, responders): root, no capability in any set.
        found = ldap.exec(pod + "-sssd", "sh", "-c", 'for p in /proc/[0-9]*; do case "$(cat $p/comm)" in sssd*) '
                          'cat $p/status ;; esac; done').stdout
        caps = [line.split() for line in found.splitlines() if line.startswith("Cap")]
        uids = [line.split()[1:] for line in found.splitlines() if line.startswith("Uid:")]
        assert len(uids) >= 3 and all(u == ["0"] * 4 for u in uids), (pod, uids)
        assert all(int(v, 16) == 0 for _k, v in caps), (pod, caps)
        written = ldap.exec(pod + "-sssd", "touch", "/etc/soperator-probe")
        assert written.returncode != 0 and "Read-only file system" in written.stderr
    # The socket directory is read-only where the daemons see it, and in the jail.
    for container in ("controller", "worker", "login"):
        probe = ldap.exec(container, "touch", names.SSS_PIPES_DIR + "/probe")
        assert probe.returncode != 0 and "Read-only" in probe.stderr, (container, probe.stderr)


def test_a_directory_user_logs_in_with_the_key_the_directory_holds_and_gets_a_home(ldap, keys):
    for accounts in ("passwd", "group"):
        with open(os.path.join(ldap.jail, "etc", accounts)) as f:
            assert not [line for line in f if line.startswith(DORA + ":") or ":%d:" % DORA_UID in line]
    assert not os.path.exists(os.path.join(ldap.jail, "home", DORA))
    started = time.monotonic()
    result = wait_until(lambda: (lambda r: r.returncode == 0 and r)(ssh(
        ldap, DORA, keys["dora"][0], "id; pwd; stat -c '%a %u %g' $HOME; cat /etc/soperator/jail-image; "
        "touch /var/lib/sss/pipes/probe 2>&1 || true")), 60, "dora's login", lambda: ldap.logs("login"))
    print("\nidentity smoke: first login of a directory user %.2f s" % (time.monotonic() - started))
    lines = result.stdout.splitlines()
    assert lines[0] == "uid=%d(dora) gid=%d(dora) groups=%d(dora),%d(physics),%d(chemistry)" % (
        DORA_UID, DORA_UID, DORA_UID, PHYSICS, CHEMISTRY), lines
    # The directory says /nfs/home/dora: the cluster's homes are /home/<name> in the jail (override_homedir).
    assert lines[1:4] == ["/home/dora", "700 %d %d" % (DORA_UID, DORA_UID), JAIL_IMAGE], lines
    assert "Read-only file system" in lines[4]
    assert "made /home/dora (0700, %d:%d) for dora's first login" % (DORA_UID, DORA_UID) in ldap.docker.logs("login")
    again = ssh(ldap, DORA, keys["dora"][0], "true")
    assert again.returncode == 0 and ldap.docker.logs("login").count("made /home/dora") == 1
    # A key the directory does not hold for her opens nothing.
    assert ssh(ldap, DORA, keys["alice-directory"][0], "true").returncode == 255


def test_a_directory_user_runs_a_step_as_her_uid_and_groups_on_the_worker(ldap, keys):
    step = ssh(ldap, DORA, keys["dora"][0], "srun -N1 --immediate=30 sh -c 'id; hostname; cat /proc/self/status' "
               "| grep -E '^(uid|Uid|Gid|Groups)' ; srun -N1 hostname")
    assert step.returncode == 0, step.stderr + ldap.logs("worker", "controller")
    lines = step.stdout.splitlines()
    assert lines[0].startswith("uid=%d(dora) gid=%d(dora) groups=" % (DORA_UID, DORA_UID)), lines
    status = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    assert status["Uid"].split() == [str(DORA_UID)] * 4 and status["Gid"].split() == [str(DORA_UID)] * 4
    assert set(status["Groups"].split()) == {str(DORA_UID), str(PHYSICS), str(CHEMISTRY)}, status
    assert lines[-1] == ldap.node


def test_a_local_user_of_the_same_name_is_the_local_one(ldap, keys):
    """alice is a user of the jail (uid 2000) and of the directory (uid 20003): the name is the local account's
    (nsswitch: files first), and the directory's key for alice opens nothing."""
    local = ssh(ldap, "alice", keys["alice-local"][0], "id -u; getent passwd alice | cut -d: -f3")
    assert local.returncode == 0 and local.stdout.split() == ["2000", "2000"], local.stderr
    directory = ssh(ldap, "alice", keys["alice-directory"][0], "id -u")
    assert directory.returncode == 255, directory.stdout + directory.stderr
    # What sshd's AuthorizedKeysCommand says for that name (sshd discards its error output): nothing.
    said = keys_command(ldap, "login", "alice", ALICE_UID)
    assert said.returncode == 0 and said.stdout == "" and "is the local account (uid 2000)" in said.stderr
    assert keys_command(ldap, "login", DORA, DORA_UID).stdout.strip() == keys["dora"][1]


def keys_command(ldap, container, user, uid, id_range=(1000, 60000)):
    """What sshd's AuthorizedKeysCommand prints for ``user`` as sshd runs it (as nobody, sshd's %u %U and the
    rendered idRange); sshd discards its error output, which says why it printed nothing."""
    return ldap.exec(container, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                     names.AUTHORIZED_KEYS_COMMAND, user, str(uid), *[str(n) for n in id_range])


def refused(login):
    """The outcome of ``login()`` (an ssh), once sshd has judged the key: refused ("Permission denied (publickey)").
    sshd's per-source penalties (OpenSSH >= 9.8: a source whose logins failed is turned away for some seconds) close
    the connection before the key exchange meanwhile: tried again. A login that works fails the test at once."""
    def judged():
        result = login()
        assert result.returncode != 0, result
        return "Permission denied (publickey)" in result.stderr and result
    return wait_until(judged, 60, "sshd's verdict on the key")


def test_a_directory_user_with_a_jail_users_uid_or_group_opens_nothing(ldap, keys):
    """erin has local alice's uid, grace has alice's group as her own: the directory says so, sssd gives it (both are
    in idRange), and neither logs in: their keys are not printed. mallory has SlurmUser's uid, outside idRange:
    sssd does not know her."""
    assert ldap.exec("login", "getent", "passwd", ERIN).stdout.split(":")[2] == str(ALICE_UID)
    assert ldap.exec("login", "getent", "passwd", GRACE).stdout.split(":")[3] == str(ALICE_UID)
    assert ldap.exec("login", "getent", "passwd", MALLORY).returncode == 2
    for user, uid, why in ((ERIN, ALICE_UID, "uid 2000 is the jail's account alice"),
                           (GRACE, 20004, "gid 2000 is the jail's group alice")):
        said = keys_command(ldap, "login", user, uid)
        assert (said.returncode, said.stdout) == (0, "") and why in said.stderr, said
    for user in (ERIN, GRACE, MALLORY):
        assert refused(lambda user=user: ssh(ldap, user, keys[user][0], "id")).returncode == 255
    assert not os.path.exists(os.path.join(ldap.jail, "home", ERIN))  # no session opened: no home made


def test_with_the_range_widened_a_jail_users_uid_and_slurm_users_uid_still_open_nothing(ldap, keys):
    """An administrator widened the range past what the API accepts (sssd.conf's min_id/max_id and the keys
    command's range, 1..70000, as if the ConfigMaps had been edited): sssd now gives mallory SlurmUser's uid and erin
    alice's, and still neither logs in: the uid is a local account of the jail (slurm, alice). dora does."""
    pod = "wide"
    conf = ldap.manifests["sssd_config"][render_identity.LOGIN_CONFIG_KEY]
    assert "min_id = 1000\nmax_id = 60000\n" in conf
    pipes = ldap.sssd(pod, render_identity.LOGIN_CONFIG_KEY,
                      sssd_conf=conf.replace("min_id = 1000\nmax_id = 60000\n", "min_id = 1\nmax_id = 70000\n"))
    sshd_config = ldap.manifests["sshd_config"]["sshd_config"]
    assert " %u %U 1000 60000\n" in sshd_config
    volumes, env = _with_identity(pipes)
    ldap.run("login-wide", LOGIN_IMAGE, ["/usr/sbin/sshd", "-D", "-e", "-f", names.SSHD_CONFIG_MOUNT + "/sshd_config"],
             render_login.LOGIN_CAPABILITIES, pod,
             volumes=[(ldap.jail, names.JAIL_MOUNT), (make_host_keys(os.path.join(ldap.tmp, "wide-host-keys")),
                                                      names.SSH_HOST_KEYS_MOUNT),
                      (write_files(os.path.join(ldap.tmp, "wide-sshd-config"), {"sshd_config": sshd_config.replace(
                          " %u %U 1000 60000\n", " %u %U 1 70000\n")}), names.SSHD_CONFIG_MOUNT)] + volumes,
             options=["-p", "127.0.0.1::22"] + env)
    port = wait_until(lambda: ldap.docker("port", ldap.docker.name("login-wide"), "22", check=False).stdout.strip(),
                      30, "the port of login-wide").rsplit(":", 1)[1]
    wait_until(lambda: ldap.exec("login-wide", "getent", "passwd", MALLORY).returncode == 0, 60,
               "mallory through the widened sssd", lambda: ldap.logs("login-wide", pod + "-sssd"))
    assert ldap.exec("login-wide", "getent", "passwd", MALLORY).stdout.split(":")[2] == str(names.SLURM_UID)
    assert ldap.exec("login-wide", "getent", "passwd", names.SLURM_USER).stdout.split(":")[2] == str(names.SLURM_UID)
    for user, uid, why in ((MALLORY, names.SLURM_UID, "uid %d is the jail's account slurm" % names.SLURM_UID),
                           (ERIN, ALICE_UID, "uid 2000 is the jail's account alice")):
        said = keys_command(ldap, "login-wide", user, uid, (1, 70000))
        assert (said.returncode, said.stdout) == (0, "") and why in said.stderr, said
        assert refused(lambda user=user: ssh_as(user, keys[user][0], port, "id")).returncode == 255
    # With the range the API accepts, SlurmUser's uid is refused before the files are read.
    said = keys_command(ldap, "login-wide", MALLORY, names.SLURM_UID)
    assert said.stdout == "" and "uid %d is outside idRange 1000..60000" % names.SLURM_UID in said.stderr
    dora = wait_until(lambda: (lambda r: r.returncode == 0 and r)(ssh_as(DORA, keys["dora"][0], port, "id -u")), 60,
                      "dora through login-wide", lambda: ldap.logs("login-wide"))
    assert dora.stdout.split() == [str(DORA_UID)]


@pytest.mark.parametrize("change, reason", [
    ({"sssd_conf": "userBaseDN"}, "BaseDNNotFound ldap_user_search_base ou=nobody," + SUFFIX),
    ({"ca": "other"}, "CertificateRefused ldap_tls_cacert ldaps://directory:1636: "),
    ({"password": "missing"}, "BindPasswordMissing ldap_default_authtok"),
    ({"password": "wrong"}, "BindRefused ldap_default_bind_dn the directory (ldaps://directory:1636) refused the "
                            "bind of " + BIND_DN),
    ({"sssd_conf": "unreachable"}, "DirectoryUnreachable ldap_uri cannot connect to ldaps://directory:1637"),
])
def test_the_sidecar_names_what_is_wrong_and_sssd_keeps_running(ldap, change, reason, tmp_path):
    """Each kind of trouble a pod's sidecar reports (the controller's becomes the SlurmCluster's IdentityReady):
    a status, not a crash: sssd runs on."""
    pod = "probe-" + tmp_path.name[-12:].strip("_").lower()
    conf = ldap.manifests["sssd_config"][render_identity.CONFIG_KEY]
    kwargs = {}
    if change.get("sssd_conf") == "userBaseDN":
        kwargs["sssd_conf"] = conf.replace("ldap_user_search_base = ou=people,", "ldap_user_search_base = ou=nobody,")
    if change.get("sssd_conf") == "unreachable":
        kwargs["sssd_conf"] = conf.replace("ldaps://directory:1636", "ldaps://directory:1637")
    if change.get("ca") == "other":
        kwargs["ca"] = write_files(str(tmp_path / "ca"), {names.IDENTITY_CA_FILE: open(
            ldap.tls + "/other-ca.crt").read()})
    if change.get("password") == "missing":
        kwargs["password"] = str(tmp_path / "no-password")
        os.makedirs(kwargs["password"])
    if change.get("password") == "wrong":
        kwargs["password"] = write_files(str(tmp_path / "password"), {names.IDENTITY_BIND_PASSWORD_FILE: "wrong"},
                                         0o400)
    ldap.sssd(pod, interval=1, **kwargs)
    found = wait_until(lambda: (lambda s: s.startswith(reason) and s)(ldap.status(pod)), 60, reason,
                       lambda: ldap.status(pod) + ldap.logs(pod + "-sssd"))
    assert "directory: " + found in ldap.docker.logs(pod + "-sssd")
    assert ldap.exec(pod + "-sssd", "test", "-S", names.SSS_PIPES_DIR + "/nss").returncode == 0
    ldap.docker("rm", "-f", ldap.docker.name(pod + "-sssd"))


def test_a_new_password_in_the_secret_reaches_sssd_without_a_restart(ldap, tmp_path):
    pod = "rotation"
    password = write_files(str(tmp_path / "password"), {names.IDENTITY_BIND_PASSWORD_FILE: "wrong"}, 0o600)
    ldap.sssd(pod, interval=1, password=password)
    wait_until(lambda: ldap.status(pod).startswith("BindRefused"), 60, "BindRefused", lambda: ldap.logs(pod + "-sssd"))
    assert ldap.exec(pod + "-sssd", "getent", "passwd", DORA).returncode != 0  # sssd cannot bind: unknown
    # What the kubelet does when the Secret changes: the file changes under the running container.
    write_files(password, {names.IDENTITY_BIND_PASSWORD_FILE: BIND_PASSWORD}, 0o600)
    wait_until(lambda: ldap.status(pod).startswith("Ready"), 60, "Ready with the new password",
               lambda: ldap.logs(pod + "-sssd"))
    assert "sssd.conf, the bind password or the CA changed: restarting sssd" in ldap.docker.logs(pod + "-sssd")
    wait_until(lambda: ldap.exec(pod + "-sssd", "getent", "passwd", DORA).returncode == 0, 30, "dora through sssd")
    ldap.docker("rm", "-f", ldap.docker.name(pod + "-sssd"))


def test_known_users_work_while_the_directory_is_down_and_new_ones_once_it_is_back(ldap, keys):
    """The directory stopped: the sidecars say so; dora, seen before, still logs in and runs a step (sssd's cache);
    eve, added while it was down, is unknown. Started again: eve resolves everywhere, no container restarted."""
    ldap.docker("stop", ldap.docker.name("directory"))
    try:
        for pod in (ldap.controller_host, ldap.node, ldap.login_host):
            wait_until(lambda pod=pod: ldap.status(pod).startswith("DirectoryUnreachable"), 60,
                       pod + " DirectoryUnreachable", lambda pod=pod: ldap.logs(pod + "-sssd"))
        step = ssh(ldap, DORA, keys["dora"][0], "id -u; srun -N1 --immediate=30 id -u")
        assert step.returncode == 0 and step.stdout.split() == [str(DORA_UID)] * 2, step.stderr + ldap.logs("worker")
        assert ldap.exec("login", "getent", "passwd", "eve").returncode == 2
    finally:
        ldap.docker("start", ldap.docker.name("directory"))
    # The directory's data were on a memory volume: it starts afresh from its seed; eve is added now.
    wait_until(lambda: ldap.exec("directory", "ldapsearch", "-x", "-H", "ldap://localhost:1389", "-s", "base", "-b",
                                 "", "namingContexts").returncode == 0, 60, "slapd again")
    eve = ("dn: uid=eve,ou=people,{s}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: eve\ncn: Eve\n"
           "sn: E\nuidNumber: 20002\ngidNumber: {g}\nhomeDirectory: /home/eve\n").format(s=SUFFIX, g=PHYSICS)
    added = ldap.exec("directory", "ldapadd", "-x", "-H", "ldap://localhost:1389", "-D", "cn=admin," + SUFFIX,
                      "-y", "/etc/soperator-directory/admin/password", input_text=eve)
    assert added.returncode == 0, added.stderr
    started = time.monotonic()
    for container in ("login", "worker", "controller"):
        wait_until(lambda c=container: ldap.exec(c, "getent", "passwd", "eve").returncode == 0, 120,
                   "eve in the %s container" % container, lambda c=container: ldap.logs(c))
    print("\nidentity smoke: a user added after the directory came back resolves everywhere in %.1f s"
          % (time.monotonic() - started))
    for pod in (ldap.controller_host, ldap.node, ldap.login_host):  # their next look (every 2 s here)
        wait_until(lambda pod=pod: ldap.status(pod).startswith("Ready"), 30, pod + " Ready",
                   lambda pod=pod: ldap.status(pod))
    restarts = ldap.docker("inspect", "-f", "{{.RestartCount}}", *[ldap.docker.name(n) for n in (
        "controller", "worker", "login", ldap.controller_host + "-sssd", ldap.node + "-sssd",
        ldap.login_host + "-sssd")]).stdout.split()
    assert set(restarts) == {"0"}


def test_the_bind_password_is_in_no_log_and_no_environment(ldap):
    for name in ldap.docker.containers:
        short = name[:-len(ldap.docker.suffix) - 1]
        logs = ldap.docker.logs(short)
        assert BIND_PASSWORD not in logs, short
        env = ldap.docker("inspect", "-f", "{{json .Config.Env}}", name, check=False).stdout
        assert BIND_PASSWORD not in env, short
    # It is in the sidecar's memory volume (0600, root's), as sssd.conf needs it, and nowhere else on the disk.
    conf = ldap.exec(ldap.login_host + "-sssd", "stat", "-c", "%a %U", "/etc/sssd/sssd.conf").stdout.split()
    assert conf == ["600", "root"]
    mounts = ldap.exec(ldap.login_host + "-sssd", "grep", " /etc/sssd ", "/proc/self/mounts").stdout
    assert " tmpfs " in mounts
