"""The shared test site of tests/login: one jail, one Secret of host keys, client keys (used by conftest.py).

A module of its own, not conftest.py, so that tests import its names without clashing with other conftest modules.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from login_node import LoginNode, extract_jail, install_authorized_key, make_host_keys, ssh_keygen

HOST_TOOLS = ("unshare", "setpriv", "mount", "ssh", "ssh-keygen", "ssh-keyscan", "/usr/sbin/sshd", "zstd", "tar")
JAIL_HOSTNAME = "soperator-jail"
MARKER = "/JAIL_MARKER"  # exists only in the jail
USER, UID = "alice", 1000


def add_privsep_user(jail):
    """What the jail image must do (docs/login.md): sshd's privilege separation user, as Debian's openssh-server
    postinst creates it. sshd reads the jail's /etc/passwd, so without it sshd does not start."""
    subprocess.run(["useradd", "--root", str(jail), "--system", "--no-create-home", "--home-dir", "/run/sshd",
                    "--shell", "/usr/sbin/nologin", "sshd"], check=True)


class Site:
    """What the tests share: paths, the jail, client keys."""

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.jail = self.workdir / "jail"
        self.host_keys = self.workdir / "secret-ssh-host-keys"
        self.marker = uuid.uuid4().hex
        self.root_key = self.workdir / "client" / "root_ed25519"
        self.user_key = self.workdir / "client" / "alice_ed25519"

    def prepare(self):
        extract_jail(self.jail)
        (self.jail / MARKER.lstrip("/")).write_text(self.marker + "\n")
        (self.jail / "etc" / "hostname").write_text(JAIL_HOSTNAME + "\n")
        add_privsep_user(self.jail)
        self.root_key.parent.mkdir(mode=0o700)
        self.root_pub = ssh_keygen(self.root_key, comment="root@client")
        self.user_pub = ssh_keygen(self.user_key, comment="alice@client")
        install_authorized_key(self.jail / "root", self.root_pub)
        make_host_keys(self.host_keys)

    def tiny_jail(self, name, owner=0, mode=0o755, users=("root", USER, "sshd")):
        """A jail with no programs, for tests that fail before a shell starts: the mount points, /etc/passwd and
        /etc/group with ``users`` (taken from the real jail), alice's authorized_keys."""
        jail = self.workdir / name
        for sub in ("etc", "proc", "dev/pts", "home/" + USER + "/.ssh"):
            (jail / sub).mkdir(parents=True, exist_ok=True)
        for f in ("passwd", "group"):
            lines = (self.jail / "etc" / f).read_text().splitlines()
            (jail / "etc" / f).write_text("".join(x + "\n" for x in lines if x.split(":")[0] in users))
        install_authorized_key(jail / "home" / USER, self.user_pub, UID, UID)
        os.chown(jail / "home" / USER, UID, UID)
        os.chown(jail, owner, 0)
        os.chmod(jail, mode)
        return jail

    def node(self, name, **kwargs):
        return LoginNode(kwargs.pop("jail", self.jail), self.host_keys, self.workdir / name, **kwargs)
