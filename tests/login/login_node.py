"""A login node on this host: Debian's real OpenSSH with the sshd_config the collection renders, chrooting into a jail.

The adapter between the tests and sshd. It reproduces the login container's filesystem layout in a private mount
namespace (``unshare --mount``), so the rendered file is used as it is, apart from the few lines in
:func:`host_sshd_config`:

- ``/mnt/jail``   a tmpfs on ``/mnt`` (root-owned, 0755, like the image's) with the jail bind-mounted on
                  ``/mnt/jail`` (the pod's PersistentVolume), a fresh ``/proc`` and the ptys (``/dev/pts``)
                  inside it, as the login entrypoint must do (docs/login.md).
- ``/etc/passwd``, ``/etc/group``   the jail's (the cluster-wide user rule, docs/login.md). ``users="symlink"``
                  (default) does what the image does: ``/etc`` gets a tmpfs-backed overlay in which the two files
                  are symlinks into the jail. ``users="bind"`` bind-mounts the two files instead, which goes stale
                  as soon as a tool inside the jail replaces the file (useradd writes a new file and renames it).
                  ``users="symlink-with-shadow"`` links /etc/shadow too, which locks users out (see the tests).
- ``/run``        a private tmpfs with ``/run/sshd`` (privilege separation directory) and the PidFile.
- capabilities    sshd runs with its bounding set reduced to ``render_login.LOGIN_SESSION_CAPABILITIES``, like the
                  container.

Nothing on the host changes: every mount dies with the namespace, and the host's /etc/passwd is never written.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import yaml

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render import login as render_login

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cpu-cluster.yaml"
ROOTFS_SCRIPT = REPO / "hack" / "slurm-rootfs.sh"
SSHD = "/usr/sbin/sshd"


# ------------------------------------------------------------------------------------------- rendered config
def rendered_sshd_config(example=EXAMPLE):
    """The sshd_config of the example's login ConfigMap, exactly as the collection renders it for the cluster."""
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    cluster = next(d for d in docs if d["kind"] == names.CLUSTER_KIND)
    nodesets = [d for d in docs if d["kind"] == names.NODESET_KIND]
    wanted = names.sshd_config_name(cluster["metadata"]["name"])
    config_map = next(o for o in render.render_cluster(cluster, nodesets)
                      if o["kind"] == "ConfigMap" and o["metadata"]["name"] == wanted)
    return config_map["data"]["sshd_config"]


def host_sshd_config(rendered, port, host_keys_dir):
    """The rendered sshd_config with the only lines that must differ on a shared host.

    1. ``Port 22`` -> ``Port <port>``: a free port (22 may be the host's own sshd, and is not free in parallel runs).
    2. ``ListenAddress 127.0.0.1`` inserted after the Port line: loopback only (the pod listens on its own IP).
    3. ``HostKey /etc/soperator/ssh-host-keys/<file>`` -> ``HostKey <host_keys_dir>/<file>``: the directory standing
       for the ssh-host-keys Secret (a host has no /etc/soperator, and creating it would change the host).

    ``ChrootDirectory``, ``AuthorizedKeysFile`` and ``PidFile`` keep their paths: the mount namespace provides them.
    Returns the new text; :func:`config_diff` lists what changed.
    """
    prefix = "HostKey %s/" % names.SSH_HOST_KEYS_MOUNT
    lines = []
    for line in rendered.splitlines():
        if line == "Port %d" % names.SSH_PORT:
            lines += ["Port %d" % port, "ListenAddress 127.0.0.1"]
        elif line.startswith(prefix):
            lines.append("HostKey %s/%s" % (host_keys_dir, line[len(prefix):]))
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def config_diff(rendered, used):
    """(removed, added) lines between the rendered and the used sshd_config, order kept."""
    old, new = rendered.splitlines(), used.splitlines()
    return [x for x in old if x not in new], [x for x in new if x not in old]


# ------------------------------------------------------------------------------------------- jail requirements
def chroot_problems(path, parents=False):
    """Why sshd's ChrootDirectory would refuse ``path``: the directory and every component above it must be
    root-owned and not writable by group or others (sshd's safely_chroot()). Empty when fit to be a jail.

    In the login container the components above the jail are ``/`` and ``/mnt`` of the image (fine); what the
    populate step must get right is the jail directory itself, the volume's root, hence ``parents=False``.
    """
    problems = []
    current = Path(path).resolve()
    for component in [current] + (list(current.parents) if parents else []):
        st = os.stat(component)
        if not stat.S_ISDIR(st.st_mode):
            problems.append("%s is not a directory" % component)
        if st.st_uid != 0:
            problems.append("%s is owned by uid %d, not root" % (component, st.st_uid))
        if st.st_mode & 0o022:
            problems.append("%s is writable by group or others (mode %04o)" % (component, st.st_mode & 0o7777))
    return problems


# ------------------------------------------------------------------------------------------- keys and jail
def ssh_keygen(path, key_type="ed25519", comment=""):
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", comment, "-f", str(path)], check=True)
    return Path(str(path) + ".pub").read_text()


def make_host_keys(directory):
    """The ssh-host-keys Secret: one key per file, mode 0400 (the volume's defaultMode)."""
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for key_file in names.SSH_HOST_KEY_FILES:
        key_type = key_file[len("ssh_host_"):-len("_key")]
        ssh_keygen(directory / key_file, key_type, comment="soperator-test-host")
        os.chmod(directory / key_file, 0o400)
    return directory


def extract_jail(directory):
    """Unpack the cached trixie rootfs (hack/slurm-rootfs.sh: bash, coreutils, util-linux, passwd, Slurm clients)."""
    subprocess.run([str(ROOTFS_SCRIPT), "--extract", str(directory)], check=True, stdout=subprocess.DEVNULL)
    return Path(directory)


def install_authorized_key(home, public_key, uid=0, gid=0):
    """``<home>/.ssh/authorized_keys`` as sshd's StrictModes wants it: owned by the user, 0700 / 0600."""
    ssh_dir = Path(home) / ".ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    keys = ssh_dir / "authorized_keys"
    keys.write_text(public_key)
    os.chmod(keys, 0o600)
    for p in (ssh_dir, keys):
        os.chown(p, uid, gid)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------- the login node
_NAMESPACE_SETUP = r"""
set -eu
mount -t tmpfs -o mode=0755,size=1m soperator-mnt /mnt
mkdir /mnt/jail
mount --bind "$JAIL" /mnt/jail
mount -t proc proc /mnt/jail/proc
mount --bind /dev/pts /mnt/jail/dev/pts
mount -t tmpfs -o mode=0755,size=8m soperator-run /run
mkdir -m 0755 /run/sshd
case "$USERS" in
symlink|symlink-with-shadow)
  mkdir /run/etc-upper /run/etc-work
  mount -t overlay soperator-etc -o lowerdir=/etc,upperdir=/run/etc-upper,workdir=/run/etc-work /etc
  ln -sfn /mnt/jail/etc/passwd /etc/passwd
  ln -sfn /mnt/jail/etc/group /etc/group
  if [ "$USERS" = symlink-with-shadow ]; then ln -sfn /mnt/jail/etc/shadow /etc/shadow; fi ;;
bind)
  mount --bind /mnt/jail/etc/passwd /etc/passwd
  mount --bind /mnt/jail/etc/group /etc/group ;;
*) echo "unknown USERS=$USERS" >&2; exit 2 ;;
esac
exec setpriv --bounding-set="$BOUNDING" "$@"
"""


class LoginNode:
    """One sshd on 127.0.0.1:<port>, chrooting sessions into ``jail``; start() / stop() / restart()."""

    def __init__(self, jail, host_keys, workdir, users="symlink", capabilities=None, rendered=None, check_jail=True):
        self.jail = Path(jail)
        self.host_keys = Path(host_keys)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.users = users
        self.capabilities = render_login.LOGIN_SESSION_CAPABILITIES if capabilities is None else capabilities
        self.rendered = rendered if rendered is not None else rendered_sshd_config()
        self.check_jail = check_jail
        self.port = None
        self.config = self.workdir / "sshd_config"
        self.log_path = self.workdir / "sshd.log"
        self.proc = None
        self._log_offset = 0

    def start(self, timeout=10):
        # The populate step's duty (docs/login.md): refuse a jail sshd would refuse, with the reason.
        problems = chroot_problems(self.jail) if self.check_jail else []
        if problems:
            raise RuntimeError("%s cannot be a ChrootDirectory: %s" % (self.jail, "; ".join(problems)))
        self.port = free_port()
        self.config.write_text(host_sshd_config(self.rendered, self.port, self.host_keys))
        # sshd checks its config first: a file it refuses fails here, with sshd's own message.
        check = subprocess.run(self._in_namespace(SSHD, "-t", "-f", str(self.config)), env=self._env(),
                               capture_output=True, text=True)
        if check.returncode:
            raise RuntimeError("sshd -t refused %s: %s" % (self.config, check.stderr))
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        # unshare and sh exec in place: self.proc.pid is sshd's pid.
        self.proc = subprocess.Popen(self._in_namespace(SSHD, "-D", "-e", "-f", str(self.config)), env=self._env(),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        ready = "Server listening on 127.0.0.1 port %d." % self.port
        deadline = time.monotonic() + timeout
        while ready not in self.log():
            if self.proc.poll() is not None:
                raise RuntimeError("sshd exited with %s:\n%s" % (self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("sshd not listening after %ss:\n%s" % (timeout, self.log()))
            time.sleep(0.02)
        return self

    def _in_namespace(self, *command):
        """argv running ``command`` in a new mount namespace laid out like the login container."""
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _NAMESPACE_SETUP, "login-node"] + list(
            command)

    def _env(self):
        bounding = ",".join(["-all"] + ["+" + c.lower() for c in self.capabilities])
        return dict(os.environ, JAIL=str(self.jail), USERS=self.users, BOUNDING=bounding)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self):
        """A new sshd process (a pod restart): same Secret, same jail, a new port."""
        self.stop()
        return self.start()

    def log(self):
        """sshd's output (-e: stderr) since the last start."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, text, timeout=10):
        """sshd logs a session's fatal error from the session's own process, shortly after the client sees it."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                raise AssertionError("%r not in sshd's output:\n%s" % (text, self.log()))
            time.sleep(0.02)

    # client side ----------------------------------------------------------------------------------------------
    def known_hosts(self):
        """known_hosts built from the Secret's public keys: the client accepts only the Secret's host keys."""
        path = self.workdir / "known_hosts"
        lines = []
        for key_file in names.SSH_HOST_KEY_FILES:
            key_type, key = (self.host_keys / (key_file + ".pub")).read_text().split()[:2]
            lines.append("[127.0.0.1]:%d %s %s" % (self.port, key_type, key))
        path.write_text("\n".join(lines) + "\n")
        return path

    def ssh_args(self, user, identity, *options):
        args = ["ssh", "-F", "/dev/null", "-p", str(self.port), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=%s" % self.known_hosts(),
                "-o", "LogLevel=ERROR"]
        if identity is not None:
            args += ["-o", "IdentitiesOnly=yes", "-i", str(identity)]
        for option in options:
            args += ["-o", option]
        return args + ["%s@127.0.0.1" % user]

    def ssh(self, user, identity, command, *options, input=None, timeout=30):
        """Run ``command`` (a shell string, run by the user's login shell in the jail); CompletedProcess (text)."""
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        # Without input, stdin is /dev/null: ssh -tt would otherwise leave the test runner's stdin non-blocking.
        stdin = None if input is not None else subprocess.DEVNULL
        return subprocess.run(self.ssh_args(user, identity, *options) + ["--", command], input=input, stdin=stdin,
                              capture_output=True, text=True, timeout=timeout, env=env)

    def keyscan(self):
        """{key type: SHA256 fingerprint} of the host keys sshd presents."""
        scan = subprocess.run(["ssh-keyscan", "-p", str(self.port), "-t", "ed25519,rsa", "127.0.0.1"],
                              capture_output=True, text=True, check=True, timeout=30)
        return fingerprints(scan.stdout)


def fingerprints(keys_text):
    """{key type: SHA256 fingerprint} of public keys in known_hosts or .pub format."""
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", "-"], input=keys_text, capture_output=True,
                         text=True, check=True).stdout
    result = {}
    for line in out.splitlines():
        match = re.match(r"\d+ (SHA256:\S+) .* \((\w+)\)$", line)
        if match:
            result[match.group(2)] = match.group(1)
    return result


def sh_quote(*args):
    return " ".join(shlex.quote(a) for a in args)
