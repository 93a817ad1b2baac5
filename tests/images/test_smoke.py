"""Smoke tests: the built images run as the rendered manifests run them.

The engine is the project's own dockerd (hack/images.sh start); the images are built first when their inputs
changed (hack/images.sh build: a no-op when they are current). Each container gets the capabilities the
manifests give it (render.py's lists, everything else dropped) and the mounts the manifests give it, with
host directories in place of volumes. Skipped when the engine cannot start (or without root), except in CI
(CI=true), where that is a failure (tests/prerequisites.py).
"""

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import uuid

import pytest
import yaml
from prerequisites import require_root, unavailable

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    cluster as render,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    common as render_common,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    controller as render_controller,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    jail as render_jail,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    login as render_login,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import (
    worker as render_worker,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGES_SH = os.path.join(ROOT, "hack", "images.sh")
DOCKER = "/usr/bin/docker"
VERSION = names.COLLECTION_VERSION
CONTROLLER_IMAGE = names.default_image("controller")
WORKER_IMAGE = names.default_image("worker")
LOGIN_IMAGE = names.default_image("login")
JAIL_IMAGE = names.default_image("jail")
POPULATE_IMAGE = names.default_image("populateJail")


# Capability numbers (linux/capability.h) of the names the manifests use.
_CAP_NUMBERS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
                "SETUID": 7,
                "SETPCAP": 8,
                "NET_BIND_SERVICE": 10, "SYS_CHROOT": 18, "SYS_ADMIN": 21, "SYS_NICE": 23, "SYS_RESOURCE": 24,
                "AUDIT_WRITE": 29, "SETFCAP": 31}


def host_capabilities(caps):
    """``caps`` less those this host's root lacks (runc cannot grant them: "unable to apply caps").

    The manifests ask for nothing this VM's root lacks; this guards a host with a smaller bounding set.
    """
    with open("/proc/self/status") as f:
        bounding = int([line.split()[1] for line in f if line.startswith("CapBnd:")][0], 16)
    return [cap for cap in caps if bounding >> _CAP_NUMBERS[cap] & 1]


@pytest.fixture(scope="session")
def engine():
    """DOCKER_HOST of the project's engine with every image built; stopped at the end if started here."""
    require_root("the project's dockerd (hack/images.sh)")
    env_line = subprocess.run([IMAGES_SH, "env"], capture_output=True, text=True, check=True).stdout
    docker_host = env_line.strip().split("=", 1)[1]
    env = dict(os.environ, DOCKER_HOST=docker_host)
    already_up = subprocess.run([DOCKER, "version"], env=env, capture_output=True).returncode == 0
    if not already_up:
        started = subprocess.run([IMAGES_SH, "start"], capture_output=True, text=True)
        if started.returncode != 0:
            unavailable("the engine did not start: " + started.stderr[-2000:])
    try:
        built = subprocess.run([IMAGES_SH, "build"], capture_output=True, text=True)
        assert built.returncode == 0, "hack/images.sh build failed:\n" + built.stderr[-4000:]
        yield docker_host
    finally:
        if not already_up:
            subprocess.run([IMAGES_SH, "stop"], check=False)


class Docker(object):
    """docker CLI against the engine; every container and network it makes is removed by cleanup()."""

    def __init__(self, docker_host):
        self.env = dict(os.environ, DOCKER_HOST=docker_host)
        self.suffix = uuid.uuid4().hex[:8]
        self.containers = []
        self.networks = []

    def __call__(self, *args, check=True, timeout=120, input_text=None):
        result = subprocess.run([DOCKER] + list(args), env=self.env, capture_output=True, text=True,
                                timeout=timeout, input=input_text)
        if check and result.returncode != 0:
            raise AssertionError("docker %s failed (%d): %s" % (" ".join(args), result.returncode, result.stderr))
        return result

    def network(self):
        name = "soperator-smoke-" + self.suffix
        self("network", "create", "--label", "soperator.test=1", name)
        self.networks.append(name)
        return name

    def run(self, name, image, args, caps, volumes=(), options=(), detach=True):
        """A container as the manifests make it: capabilities dropped but ``caps``, no privilege escalation."""
        argv = ["run", "--label", "soperator.test=1", "--name", "%s-%s" % (name, self.suffix), "--cap-drop", "ALL"]
        argv += ["--cap-add=" + cap for cap in host_capabilities(caps)]
        for host, path in volumes:
            argv += ["-v", "%s:%s" % (host, path)]
        argv += list(options)
        argv += ["-d"] if detach else ["--rm"]
        argv += [image] + list(args)
        if detach:
            self.containers.append("%s-%s" % (name, self.suffix))
        return self(*argv)

    def name(self, name):
        return "%s-%s" % (name, self.suffix)

    def logs(self, name):
        result = self("logs", self.name(name), check=False)
        return result.stdout + result.stderr

    def cleanup(self):
        for name in self.containers:
            self("rm", "-f", name, check=False)
        for name in self.networks:
            self("network", "rm", name, check=False)


@pytest.fixture
def docker(engine):
    client = Docker(engine)
    yield client
    client.cleanup()


def wait_until(predicate, timeout, what, diagnose=lambda: ""):
    """Poll ``predicate`` until it returns a true value; fail with ``diagnose()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail("timed out after %d s waiting for %s\n%s" % (timeout, what, diagnose()))
        time.sleep(0.5)


@pytest.fixture(scope="module")
def manifests():
    with open(os.path.join(ROOT, "examples", "cpu-cluster.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    cluster = [d for d in docs if d["kind"] == names.CLUSTER_KIND][0]
    nodesets = [d for d in docs if d["kind"] == names.NODESET_KIND]
    objects = render.render_cluster(cluster, nodesets)
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    name = cluster["metadata"]["name"]
    return {
        "cluster": name,
        "namespace": cluster["metadata"]["namespace"],
        "slurm_config": by_name[("ConfigMap", names.slurm_config_name(name))]["data"],
        "sshd_config": by_name[("ConfigMap", names.sshd_config_name(name))]["data"],
        "worker": by_name[("StatefulSet", names.worker_name(name, nodesets[0]["metadata"]["name"]))],
        "health_config": by_name[("ConfigMap", names.health_config_name(name))]["data"],
        "nodeset": nodesets[0]["metadata"]["name"],
    }


def write_files(directory, files, mode=0o644):
    os.makedirs(directory, exist_ok=True)
    for name, text in files.items():
        path = os.path.join(directory, name)
        with open(path, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.chmod(path, mode)
    return directory


def populate(docker, target):
    """The populate Job: the tool copied from the populate image, run in the jail image."""
    tools = os.path.join(os.path.dirname(target), "tools")
    os.makedirs(tools, exist_ok=True)
    docker.run("install-tool", POPULATE_IMAGE, ["/usr/local/bin/populate-jail", "/opt/soperator/bin/populate-jail"],
               [], volumes=[(tools, names.POPULATE_TOOL_DIR)], options=["--entrypoint", "cp"], detach=False)
    return docker.run("populate", JAIL_IMAGE, ["--source", "/", "--target", names.JAIL_MOUNT],
                      render_jail.POPULATE_CAPABILITIES,
                      volumes=[(target, names.JAIL_MOUNT), (tools, names.POPULATE_TOOL_DIR)],
                      options=["--entrypoint", names.POPULATE_TOOL_DIR + "/" + names.POPULATE_TOOL,
                               "--security-opt", "no-new-privileges"], detach=False)


@pytest.fixture(scope="module")
def jail(engine, tmp_path_factory):
    """A jail directory populated from the jail image, shared by the tests of this module."""
    client = Docker(engine)
    target = str(tmp_path_factory.mktemp("jail") / "jail")
    os.makedirs(target)
    try:
        populate(client, target)
    finally:
        client.cleanup()
    return target


# ------------------------------------------------------------------------------------------------ tests
def test_populate_jail_fills_an_empty_dir_from_the_jail_image(docker, tmp_path):
    target = str(tmp_path / "jail")
    os.makedirs(target)
    result = populate(docker, target)
    assert "populated %s" % names.JAIL_MOUNT in result.stderr
    with open(os.path.join(target, ".soperator-populated")) as f:
        assert "image=" + JAIL_IMAGE in f.read()
    for path in ("usr/bin/srun", "usr/bin/python3", "usr/bin/ssh", "usr/lib/x86_64-linux-gnu/slurm/spank_chroot.so"):
        assert os.path.isfile(os.path.join(target, path)), path
    assert os.readlink(os.path.join(target, "etc/slurm")) == "/run/slurm/conf"
    assert os.listdir(os.path.join(target, "proc")) == []
    assert os.listdir(os.path.join(target, "mnt")) == []  # not itself
    assert not os.path.exists(os.path.join(target, "opt/soperator"))
    # A second run of the initial Job refuses: the jail is populated.
    again = docker("run", "--rm", "--cap-drop", "ALL", "-v", "%s:%s" % (target, names.JAIL_MOUNT),
                   "-v", "%s:%s" % (os.path.join(str(tmp_path), "tools"), names.POPULATE_TOOL_DIR),
                   "--entrypoint", names.POPULATE_TOOL_DIR + "/" + names.POPULATE_TOOL, JAIL_IMAGE,
                   "--source", "/", "--target", names.JAIL_MOUNT, check=False)
    assert again.returncode == 3 and "already populated" in again.stderr


class Cluster(object):
    """The demo cluster's pods as containers on one network: controller, one worker, one login node."""

    def __init__(self, docker, manifests, jail, tmp):
        self.docker, self.manifests, self.jail, self.tmp = docker, manifests, jail, tmp
        cluster, namespace = manifests["cluster"], manifests["namespace"]
        self.conf_server = names.conf_server(cluster, namespace)
        self.controller_host = names.controller_name(cluster) + "-0"
        self.node = names.worker_name(cluster, manifests["nodeset"]) + "-0"
        self.login_host = names.login_name(cluster) + "-0"
        self.net = docker.network()
        self.config = write_files(os.path.join(tmp, "slurm-config"), manifests["slurm_config"])
        self.key = write_files(os.path.join(tmp, "munge-key"), {names.MUNGE_KEY_FILE: secrets.token_bytes(1024)},
                               0o400)

    def emptydir(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path)
        return path

    def run(self, name, image, args, caps, hostname, volumes=(), options=()):
        return self.docker.run(name, image, args, caps, volumes=volumes,
                               options=["--network", self.net, "--hostname", hostname] + list(options))

    def munge(self, pod, image, hostname):
        """The native munge sidecar of a pod; returns the pod's munge-run directory."""
        run_dir = self.emptydir(pod + "-munge-run")
        self.run(pod + "-munge", image, ["munged", "--foreground"], render_common.MUNGE_CAPABILITIES, hostname,
                 volumes=[(self.key, names.MUNGE_KEY_MOUNT), (run_dir, names.MUNGE_RUN_DIR)],
                 options=["--security-opt", "no-new-privileges"])
        return run_dir

    def controller(self, volumes=(), options=()):
        munge_run = self.munge("controller", CONTROLLER_IMAGE, self.controller_host)
        self.run("controller", CONTROLLER_IMAGE, ["/usr/sbin/slurmctld", "-D"],
                 render_controller.CONTROLLER_CAPABILITIES,
                 self.controller_host,
                 # + the jail, read-only: the manifests lack it (see images/README.md); slurmctld needs the jail's
                 # users for job credentials.
                 volumes=[(self.config, names.SLURM_CONFIG_DIR), (self.emptydir("spool"), names.SLURMCTLD_SPOOL),
                          (munge_run, names.MUNGE_RUN_DIR), (self.jail, names.JAIL_MOUNT + ":ro")]
                 + list(volumes),
                 options=["--network-alias", self.conf_server.rsplit(":", 1)[0],
                          "--security-opt", "no-new-privileges"] + list(options))

    def worker(self, extra_volumes=(), options=()):
        container = self.manifests["worker"]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        munge_run = self.munge("worker", WORKER_IMAGE, self.node)
        # The NodeSet's file of the health ConfigMap, where the manifest mounts it (key -> health.json).
        health = write_files(os.path.join(self.tmp, "health"), {names.HEALTH_CONFIG_FILE: self.manifests[
            "health_config"]["%s.json" % self.manifests["nodeset"]]})
        # The pod's runtime directories at their paths only, as the manifests mount them: the entrypoint binds them
        # into the jail itself (read-only).
        volumes = [(self.jail, names.JAIL_MOUNT), (health, names.HEALTH_CONFIG_MOUNT + ":ro"),
                   (self.emptydir("slurmd-spool"), names.SLURMD_SPOOL), (munge_run, names.MUNGE_RUN_DIR),
                   (self.emptydir("worker-slurm-run"), names.SLURM_RUN_DIR)]
        self.run("worker", WORKER_IMAGE,
                 ["/usr/sbin/slurmd", "-D", "-Z", "-N", self.node, "--conf-server", self.conf_server,
                  "--conf", env["SLURMD_CONF_PARAMS"]],
                 render_worker.WORKER_CAPABILITIES, self.node, volumes=volumes + list(extra_volumes),
                 # As the manifest: seccomp and AppArmor unconfined (pivot_root, mount).
                 options=["--network-alias", self.node, "--security-opt", "seccomp=unconfined",
                          "--security-opt", "apparmor=unconfined", "--shm-size", "64m"] + list(options))

    def login(self, host_keys, sshd_config, volumes=(), options=()):
        munge_run = self.munge("login", LOGIN_IMAGE, self.login_host)
        slurm_run = self.emptydir("login-slurm-run")
        self.run("sackd", LOGIN_IMAGE, ["/usr/sbin/sackd", "-D", "--conf-server", self.conf_server], [],
                 self.login_host,
                 volumes=[(munge_run, names.MUNGE_RUN_DIR), (slurm_run, names.SLURM_RUN_DIR)],
                 options=["--security-opt", "no-new-privileges"])
        self.run("login", LOGIN_IMAGE, ["/usr/sbin/sshd", "-D", "-e", "-f", names.SSHD_CONFIG_MOUNT + "/sshd_config"],
                 # SYS_ADMIN among them is for the entrypoint's jail binds; it drops it before sshd.
                 render_login.LOGIN_CAPABILITIES, self.login_host,
                 volumes=[(self.jail, names.JAIL_MOUNT), (host_keys, names.SSH_HOST_KEYS_MOUNT),
                          (sshd_config, names.SSHD_CONFIG_MOUNT), (munge_run, names.MUNGE_RUN_DIR),
                          (slurm_run, names.SLURM_RUN_DIR)] + list(volumes),
                 options=["-p", "127.0.0.1::22"] + list(options))

    def exec(self, name, *command, input_text=None):
        if input_text is not None:
            return self.docker("exec", "-i", self.docker.name(name), *command, check=False, input_text=input_text)
        return self.docker("exec", self.docker.name(name), *command, check=False)

    def logs(self, *containers):
        return "".join("--- %s\n%s" % (c, self.docker.logs(c)) for c in containers)


@pytest.fixture(scope="module")
def cluster(engine, manifests, jail, tmp_path_factory):
    """Controller and one worker, started once for the tests of this module."""
    docker = Docker(engine)
    c = Cluster(docker, manifests, jail, str(tmp_path_factory.mktemp("cluster")))
    try:
        c.controller()
        wait_until(lambda: "is UP" in c.exec("controller", "scontrol", "ping").stdout, 60, "scontrol ping",
                   lambda: c.logs("controller", "controller-munge"))
        c.worker()
        yield c
    finally:
        docker.cleanup()


def slurmctld_procs(cluster, command):
    """``command`` for each slurmctld process of the controller container (``$p``: its /proc directory)."""
    return cluster.exec("controller", "sh", "-c", 'for p in /proc/[0-9]*; do [ "$(cat $p/comm)" = slurmctld ] && %s; '
                                                  'done; true' % command)


def test_slurmctld_answers_and_reconfigures_once_up(cluster):
    assert "Slurmctld(primary) at %s is UP" % cluster.controller_host in cluster.exec(
        "controller", "scontrol", "ping").stdout
    # The entrypoint's `scontrol reconfigure`, run once slurmctld answered.
    wait_until(lambda: "scontrol reconfigure: done" in cluster.docker.logs("controller"), 60, "scontrol reconfigure",
               lambda: cluster.logs("controller"))


def test_slurmctld_with_the_rest_api_signs_tokens_before_and_after_a_reconfigure(engine, manifests, jail, tmp_path):
    """spec.restApi on: slurmctld reads its JWT key at start, still root but with only the pod's capabilities (no
    CAP_DAC_*), and again as SlurmUser after `scontrol reconfigure` re-executes it; the mounted Secret file is
    root's 0400. A token it signs is the proof that it holds the key."""
    with open(os.path.join(ROOT, "examples", "cpu-cluster.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    docs[0]["spec"]["restApi"] = {"enabled": True}
    config = [o for o in render.render_cluster(docs[0], docs[1:]) if o["kind"] == "ConfigMap"
              and o["metadata"]["name"] == names.slurm_config_name(manifests["cluster"])][0]["data"]
    assert "jwt_key=" + names.SLURMCTLD_JWT_KEY_PATH in config["slurm.conf"]
    docker = Docker(engine)
    try:
        c = Cluster(docker, dict(manifests, slurm_config=config), jail, str(tmp_path))
        key = write_files(str(tmp_path / "jwt-key"), {names.JWT_KEY_FILE: secrets.token_bytes(32)}, 0o400)
        c.controller(volumes=[(key, names.JWT_KEY_MOUNT + ":ro")])

        def token():
            res = c.exec("controller", "scontrol", "token", "username=root", "lifespan=60")
            return res.returncode == 0 and res.stdout.startswith("SLURM_JWT=") and res

        wait_until(token, 60, "a token from slurmctld", lambda: c.logs("controller"))
        assert c.exec("controller", "scontrol", "reconfigure").returncode == 0
        wait_until(lambda: "is UP" in c.exec("controller", "scontrol", "ping").stdout and token(), 60,
                   "a token after the reconfigure", lambda: c.logs("controller"))
        uids = slurmctld_procs(c, "grep ^Uid: $p/status").stdout.split()
        assert uids == ["Uid:"] + [str(names.SLURM_UID)] * 4, uids
    finally:
        docker.cleanup()


def test_dynamic_slurmd_registers_idle_and_runs_steps_in_the_jail(cluster):
    def idle():
        return "%s idle" % cluster.node in cluster.exec("controller", "sinfo", "-h", "-N", "-o", "%N %T").stdout
    wait_until(idle, 90, "%s idle in sinfo" % cluster.node, lambda: cluster.logs("worker", "controller"))
    logs = cluster.docker.logs("worker")
    assert "jail completed" in logs and "cannot" not in logs, logs
    # Root may not run jobs (DisableRootJobs=YES, the default of the example): Slurm says "Invalid user id".
    root = cluster.exec("controller", "timeout", "60", "srun", "-N1", "--immediate=30", "true")
    assert root.returncode != 0 and "invalid user id" in root.stderr.lower(), root.stdout + root.stderr
    # A user's step runs in the jail (spank_chroot, from the configless plugstack.conf), and the jail's own
    # clients (the worker's, bound in) read the configuration slurmd cached in /run/slurm/conf. slurmctld, which
    # runs as SlurmUser slurm, knows the user from the jail's passwd.
    add_jail_user(cluster.jail, "bob", 2001, None)
    step = cluster.exec("controller", "setpriv", "--reuid=2001", "--regid=2001", "--clear-groups", "--", "timeout",
                        "60", "srun", "-N1", "--immediate=30", "--chdir=/tmp", "sh", "-c",
                        "id -un; cat /etc/soperator/jail-image; sinfo -h -N -o %N; grep CapBnd /proc/self/status")
    assert step.returncode == 0, step.stderr + cluster.logs("worker")
    assert step.stdout.splitlines()[:3] == ["bob", JAIL_IMAGE, cluster.node]
    # The jail plugin dropped what only entering the jail needed (SYS_ADMIN 21, SYS_CHROOT 18, SETPCAP 8) from
    # the task's bounding set, with the worker's manifest capabilities.
    bounding = int(step.stdout.splitlines()[3].split()[1], 16)
    assert not bounding & (1 << 21 | 1 << 18 | 1 << 8), "%x" % bounding
    owners = slurmctld_procs(cluster, "stat -c %U $p")
    assert set(owners.stdout.split()) == {names.SLURM_USER}, owners.stdout + owners.stderr


def add_jail_user(jail, name, uid, public_key):
    """A user of the jail: passwd, group, shadow ('*': no password, not locked), a home with the key."""
    for path, line in (("etc/passwd", "%s:x:%d:%d::/home/%s:/bin/bash" % (name, uid, uid, name)),
                       ("etc/group", "%s:x:%d:" % (name, uid)), ("etc/shadow", "%s:*:20000:0:99999:7:::" % name)):
        with open(os.path.join(jail, path), "a") as f:
            f.write(line + "\n")
    if public_key is None:
        return
    ssh_dir = os.path.join(jail, "home", name, ".ssh")
    os.makedirs(ssh_dir)
    shutil.copy(public_key, os.path.join(ssh_dir, "authorized_keys"))
    for path, mode in ((os.path.dirname(ssh_dir), 0o700), (ssh_dir, 0o700),
                       (os.path.join(ssh_dir, "authorized_keys"), 0o600)):
        os.chown(path, uid, uid)
        os.chmod(path, mode)


def make_host_keys(directory):
    """The ssh-host-keys Secret's files."""
    os.makedirs(directory)
    for kind, file_name in (("ed25519", "ssh_host_ed25519_key"), ("rsa", "ssh_host_rsa_key")):
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", os.path.join(directory, file_name)],
                       check=True)
        os.chmod(os.path.join(directory, file_name), 0o400)
    return directory


def login_port(cluster):
    return wait_until(lambda: cluster.docker("port", cluster.docker.name("login"), "22", check=False).stdout.strip(),
                      30, "the login port").rsplit(":", 1)[1]


def ssh_as(user, key, port, command, *options):
    """``command`` in an ssh session of ``user`` with the private key ``key``, through the login container."""
    return subprocess.run(
        ["ssh"] + list(options) + ["-i", key, "-p", port, "-o", "StrictHostKeyChecking=no",
                                   "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                                   "-o", "ConnectTimeout=5", "%s@127.0.0.1" % user, command],
        capture_output=True, text=True, timeout=90)


def test_sshd_in_the_login_image_lands_a_key_user_in_the_jail(cluster, manifests, tmp_path):
    key = str(tmp_path / "id_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    add_jail_user(cluster.jail, "alice", 2000, key + ".pub")
    cluster.login(make_host_keys(str(tmp_path / "host-keys")),
                  write_files(str(tmp_path / "sshd-config"), manifests["sshd_config"]))
    port = login_port(cluster)

    def ssh(command, *options):
        return ssh_as("alice", key, port, command, *options)

    result = wait_until(lambda: (lambda r: r.returncode == 0 and r)(ssh("id -un; cat /etc/soperator/jail-image; pwd")),
                        30, "an ssh login", lambda: cluster.logs("login"))
    assert result.stdout.splitlines() == ["alice", JAIL_IMAGE, "/home/alice"]
    assert "cannot" not in cluster.docker.logs("login")  # every bind and mount of the jail completion worked
    # An interactive session: a pty, and the pod's /dev inside the jail.
    session = ssh("tty; echo discarded >/dev/null && echo dev-ok", "-tt")
    assert session.returncode == 0, session.stderr + cluster.logs("login")
    assert session.stdout.splitlines()[0].startswith("/dev/pts/") and "dev-ok" in session.stdout
    # The container has CAP_SYS_ADMIN and CAP_SETPCAP for the entrypoint; no session may hold either
    # (bits 21 and 8 of CapBnd), while the ones sshd needs stay (SYS_CHROOT, bit 18).
    bounding = int(ssh("grep CapBnd /proc/self/status").stdout.split()[1], 16)
    assert not bounding & (1 << 21 | 1 << 8), "SYS_ADMIN or SETPCAP in a session's bounding set: %x" % bounding
    assert bounding & (1 << 18), "%x" % bounding
    # Slurm from the session: configless through sackd, a step as alice on the worker, in the jail.
    wait_until(lambda: "%s idle" % cluster.node in ssh("sinfo -h -N -o '%N %T'").stdout, 90, "sinfo from the jail",
               lambda: cluster.logs("sackd", "login", "worker"))
    step = ssh("srun -N1 --immediate=30 sh -c 'id -un; cat /etc/soperator/jail-image'")
    assert step.returncode == 0, step.stderr + cluster.logs("worker")
    assert step.stdout.splitlines() == ["alice", JAIL_IMAGE]


def test_the_login_sackd_ends_on_sigterm(cluster):
    """The login's sackd as the manifest runs it (SlurmUser, beside the login's munge). As its container's PID 1
    sackd ignored SIGTERM: every login pod took its whole grace period (30 s) to go, and meanwhile still read Ready
    (found by the backup e2e step). Under tini it ends on the signal, its exit status 128 + 15 (a SIGKILL after the
    stop's timeout would be 137)."""
    munge_run = os.path.join(cluster.tmp, "login-munge-run")
    assert os.path.exists(os.path.join(munge_run, "munge.socket.2")), "the login's munge sidecar is not up"
    slurm_run = cluster.emptydir("sackd-stop-run")
    os.chmod(slurm_run, 0o777)  # as a Kubernetes emptyDir: SlurmUser's sackd writes its cache there
    cluster.run("sackd-stop", LOGIN_IMAGE, ["/usr/sbin/sackd", "-D", "--conf-server", cluster.conf_server], [],
                cluster.login_host,
                volumes=[(munge_run, names.MUNGE_RUN_DIR), (slurm_run, names.SLURM_RUN_DIR)],
                options=["--security-opt", "no-new-privileges", "--read-only",
                         "--user", "%d:%d" % (names.SLURM_UID, names.SLURM_UID)])
    tree = wait_until(lambda: (lambda out: "/usr/sbin/sackd" in out and out)(
        cluster.exec("sackd-stop", "ps", "-o", "pid=,ppid=,user=,args=", "-e").stdout), 30, "sackd started",
        lambda: cluster.logs("sackd-stop"))
    procs = [line.split(None, 3) for line in tree.splitlines()]
    assert procs[0][0] == "1" and procs[0][3].startswith("tini -- /usr/sbin/sackd"), tree
    assert any(p[1] == "1" and p[2] == "slurm" and p[3].startswith("/usr/sbin/sackd") for p in procs), tree
    cluster.docker("stop", "-t", "60", cluster.docker.name("sackd-stop"), timeout=90)
    status = cluster.docker("inspect", "-f", "{{.State.ExitCode}}", cluster.docker.name("sackd-stop")).stdout
    assert int(status) == 128 + signal.SIGTERM, cluster.logs("sackd-stop")


def test_the_health_program_drains_its_node_on_a_failed_check_and_resumes_it(cluster):
    """slurmd's HealthCheckProgram, as installed in the worker image, against the real node: the rendered settings
    pass; a disk threshold this node cannot meet drains it with the check's words; the next healthy pass resumes it."""
    def state():
        out = cluster.exec("controller", "sinfo", "-h", "-N", "-n", cluster.node, "-o", "%T|%E").stdout.strip()
        return out.partition("|")[::2]
    wait_until(lambda: state()[0] == "idle", 90, "%s idle" % cluster.node, lambda: cluster.logs("worker"))
    passed = cluster.exec("worker", names.HEALTH_CHECK_PROGRAM)
    assert passed.returncode == 0 and "healthy" in passed.stdout, passed.stdout + passed.stderr
    strict = json.loads(cluster.manifests["health_config"]["%s.json" % cluster.manifests["nodeset"]])
    strict["checks"]["disks"][1]["minFreeMiB"] = 1 << 40  # /tmp: more than any disk has
    cluster.exec("worker", "sh", "-c", "cat > /tmp/strict.json", input_text=json.dumps(strict))
    failed = cluster.exec("worker", names.HEALTH_CHECK_PROGRAM, "/tmp/strict.json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    wait_until(lambda: state()[0] == "drained", 30, "drained", lambda: cluster.logs("worker"))
    assert state()[1].startswith("soperator: health: disk: /tmp has ")
    resumed = cluster.exec("worker", names.HEALTH_CHECK_PROGRAM)
    assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed.stdout + resumed.stderr
    wait_until(lambda: state()[0] == "idle", 30, "resumed", lambda: cluster.logs("worker"))
