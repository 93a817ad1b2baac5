"""Login into the jail with Debian's real OpenSSH and the sshd_config the collection renders (docs/login.md)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest
from login_node import (
    chroot_problems,
    config_diff,
    fingerprints,
    free_port,
    host_sshd_config,
    rendered_sshd_config,
)
from login_site import JAIL_HOSTNAME, MARKER, UID, USER

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import login_check


def test_rendered_config_is_used_with_only_the_documented_substitutions(login):
    rendered = rendered_sshd_config()
    used = login.config.read_text()
    assert used == host_sshd_config(rendered, login.port, login.host_keys)
    removed, added = config_diff(rendered, used)
    keys = ["HostKey %s/%s" % (names.SSH_HOST_KEYS_MOUNT, f) for f in names.SSH_HOST_KEY_FILES]
    assert removed == keys + ["Port 22"]
    assert added == ["HostKey %s/%s" % (login.host_keys, f) for f in names.SSH_HOST_KEY_FILES] + [
        "Port %d" % login.port, "ListenAddress 127.0.0.1"]
    # Everything that makes the login secure is used exactly as rendered.
    for line in ("ChrootDirectory /mnt/jail", "AuthorizedKeysFile /mnt/jail%h/.ssh/authorized_keys",
                 "PasswordAuthentication no", "PermitRootLogin prohibit-password", "UsePAM no"):
        assert line in rendered.splitlines() and line in used.splitlines()


def test_jail_meets_the_chroot_requirements(site):
    assert chroot_problems(site.jail) == []
    # Why the harness binds the jail on /mnt/jail instead of naming its host path: /tmp is world-writable.
    assert "/tmp is writable by group or others (mode 1777)" in chroot_problems(site.jail, parents=True)


def test_root_logs_in_with_a_key_and_lands_in_the_jail(site, login):
    st = os.stat(site.jail)
    result = login.ssh("root", site.root_key, "id -u; cat %s; stat -c %%d:%%i /" % MARKER)
    assert result.returncode == 0, result.stderr
    uid, marker, root = result.stdout.split()
    assert uid == "0"
    assert marker == site.marker  # a file that exists only in the jail is at /
    assert root == "%d:%d" % (st.st_dev, st.st_ino)  # "/" of the session IS the jail directory
    host_root = os.stat("/")
    assert root != "%d:%d" % (host_root.st_dev, host_root.st_ino)


def test_user_created_inside_the_jail_logs_in_with_their_key(site, login, alice):
    result = login.ssh(alice, site.user_key, "id -un; id -u; pwd; cat %s" % MARKER)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [alice, str(UID), "/home/" + alice, site.marker]
    # sshd resolved the user from the jail's files: the host has no such user.
    assert subprocess.run(["getent", "passwd", alice], capture_output=True).returncode == 2


def test_password_authentication_is_refused(site, login, alice):
    result = login.ssh(alice, None, "true", "PreferredAuthentications=password,keyboard-interactive",
                       "PubkeyAuthentication=no", "NumberOfPasswordPrompts=1")
    assert result.returncode == 255
    # The server offers public keys only.
    assert "Permission denied (publickey)." in result.stderr


def test_a_key_not_in_authorized_keys_is_refused(site, login, alice):
    result = login.ssh(alice, site.root_key, "true")
    assert result.returncode == 255
    assert "Permission denied (publickey)." in result.stderr


def test_host_keys_stay_the_same_across_an_sshd_restart(site):
    node = site.node("restart").start()
    try:
        before = node.keyscan()
        node.restart()
        after = node.keyscan()
    finally:
        node.stop()
    secret = "".join((site.host_keys / (f + ".pub")).read_text() for f in names.SSH_HOST_KEY_FILES)
    assert before == after == fingerprints(secret)
    assert set(before) == {"ED25519", "RSA"}


def test_a_session_cannot_leave_the_jail(site, login, alice):
    jail_listing = sorted(os.listdir(site.jail))
    result = login.ssh(alice, site.user_key, "ls -A /; echo --; cat /etc/hostname; echo --; cd /../..; ls -A .; "
                       "echo --; test -e %s && echo host-visible; ls /proc/1/root/ >/dev/null 2>&1 || echo denied"
                       % site.workdir)
    assert result.returncode == 0, result.stderr
    listing, hostname, after_cd, pid1_root = result.stdout.split("--\n")
    assert sorted(listing.split()) == jail_listing
    assert hostname.strip() == JAIL_HOSTNAME
    assert sorted(after_cd.split()) == jail_listing  # ".." of the jail's root is the jail's root
    # The host's files are not there, and the root of PID 1 (the container's) is not the user's to read.
    assert pid1_root.strip() == "denied"


@pytest.mark.parametrize("owner, mode, refusal", [
    # A jail owned by a user (a volume chowned by fsGroup or squashed by NFS): that user authenticates (StrictModes
    # accepts their own directory) and sshd then refuses the chroot.
    (UID, 0o755, 'bad ownership or modes for chroot directory "/mnt/jail"'),
    # A group-writable jail: StrictModes already refuses the keys below it, before any chroot.
    (0, 0o775, "Authentication refused: bad ownership or modes for directory /mnt/jail"),
])
def test_a_jail_with_bad_ownership_or_modes_is_refused(site, alice, owner, mode, refusal):
    bad = site.tiny_jail("bad-jail-%d-%o" % (owner, mode), owner, mode)
    with pytest.raises(RuntimeError, match="cannot be a ChrootDirectory"):
        site.node("checked-%d-%o" % (owner, mode), jail=bad).start()  # the harness says so first
    node = site.node("bad-%d-%o" % (owner, mode), jail=bad, check_jail=False).start()
    try:
        result = node.ssh(alice, site.user_key, "echo inside")
        assert result.returncode == 255
        assert "inside" not in result.stdout
        node.wait_for_log(refusal)  # sshd says why, in its own output (the container's log)
    finally:
        node.stop()


def test_sshd_needs_its_privilege_separation_user_in_the_jail(site, alice):
    jail = site.tiny_jail("jail-without-sshd-user", users=("root", alice))
    with pytest.raises(RuntimeError, match="Privilege separation user sshd does not exist"):
        site.node("no-privsep-user", jail=jail).start()


def test_an_interactive_session_gets_a_tty_in_the_jail(site, login, alice):
    result = login.ssh(alice, site.user_key, "tty; stat -c %U /proc/self/fd/0; cat " + MARKER, "RequestTTY=force")
    assert result.returncode == 0, result.stderr
    tty, owner, marker = result.stdout.split()
    assert tty.startswith("/dev/pts/") and owner == alice and marker == site.marker


def test_user_namespaces_are_refused_inside_the_chroot(site, login, alice):
    """The trade-off of ChrootDirectory (docs/security.md): the kernel refuses a chrooted process a new user
    namespace, so rootless container tools (podman, enroot, apptainer) do not work in login sessions."""
    host = subprocess.run(["setpriv", "--reuid", str(UID), "--regid", str(UID), "--clear-groups",
                           "unshare", "--user", "--map-root-user", "true"], capture_output=True, text=True)
    assert host.returncode == 0, host.stderr  # the same user, same kernel, outside the chroot: allowed
    result = login.ssh(alice, site.user_key, "unshare --user --map-root-user true")
    assert result.returncode == 1
    assert "unshare failed: Operation not permitted" in result.stderr


def test_users_bind_mounted_as_single_files_go_stale(site, login):
    """Why the login image must SYMLINK /etc/passwd and /etc/group into the jail (docs/login.md): useradd writes a
    new file and renames it over the old one, so a bind mount of the file keeps showing the old user list."""
    stale = site.node("users-bind-mounted", users="bind").start()
    try:
        add = "useradd --create-home bob && umask 077 && mkdir ~bob/.ssh && cat > ~bob/.ssh/authorized_keys " \
              "&& chown -R bob: ~bob/.ssh"
        created = stale.ssh("root", site.root_key, add, input=site.user_pub)
        assert created.returncode == 0, created.stderr
        assert stale.ssh("bob", site.user_key, "true").returncode == 255
        stale.wait_for_log("Invalid user bob from 127.0.0.1")
    finally:
        stale.stop()
    # With symlinks, the same new user logs in at once.
    result = login.ssh("bob", site.user_key, "id -un")
    assert (result.returncode, result.stdout) == (0, "bob\n"), result.stderr


def test_linking_shadow_too_would_lock_out_users_created_by_useradd(site, alice):
    """Why only passwd and group are the jail's (docs/login.md): useradd gives a new user the password "!" in
    /etc/shadow, and with UsePAM no, sshd refuses a locked account even with a valid key. The login image's own
    shadow does not list the jail's users, so sshd does not consider them locked."""
    node = site.node("shadow-linked", users="symlink-with-shadow").start()
    try:
        assert node.ssh(alice, site.user_key, "true").returncode == 255
        node.wait_for_log("User %s not allowed because account is locked" % alice)
    finally:
        node.stop()


def test_open_sessions_are_counted_and_sshd_t_names_a_refused_field(site, login, alice):
    """What the converge asks a login pod before replacing it (open sessions) and before writing a changed
    sshd_config (sshd -t), answered by the real sshd: a logged-in session counts until it ends; a connection that
    has not authenticated does not, nor a process a user titled like a session.

    In a pod the script sees its container's processes only (its own PID namespace); here sshd shares the host's,
    where other sshds (other suites', pods') run too. So the script walks a /proc holding this sshd's processes
    only: their real status and command lines, copied."""
    proc_copy = login.workdir / "sessions" / "proc"

    def count():
        return _sessions_below(login, proc_copy)

    assert count() == 0
    # A client connected but not authenticated (it sent its banner and waits): a connection process of the listener,
    # but no session.
    with socket.create_connection(("127.0.0.1", login.port), timeout=10) as raw:
        raw.sendall(b"SSH-2.0-soperator-test\r\n")
        assert raw.recv(64).startswith(b"SSH-2.0-")
        deadline = time.monotonic() + 5
        while not _below(login.proc.pid, 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _below(login.proc.pid, 2), "no connection process"
        assert count() == 0
    # A session whose command titles itself as sshd titles a session's privileged process (exec -a): still one.
    session = subprocess.Popen(login.ssh_args(USER, site.user_key, "RequestTTY=no")
                               + ["bash -c 'exec -a \"sshd: %s [priv]\" sleep 6'" % USER],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 5
        while count() != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert count() == 1
        # Positive control: the forged title is there, so a count of titles would have seen two sessions.
        titles = [(d / "cmdline").read_bytes().split(b"\0")[0] for d in proc_copy.iterdir()]
        assert titles.count(b"sshd: %s [priv]" % USER.encode()) == 2, titles
    finally:
        session.wait(timeout=30)
    assert session.returncode == 0, session.stderr.read()
    deadline = time.monotonic() + 5
    while count() != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert count() == 0

    config = host_sshd_config(rendered_sshd_config(), free_port(), site.host_keys)
    # In the login node's namespace (the container's layout: /run/sshd, the host keys' mount).
    argv, stdin = login_check.sshd_test_command(config)
    ok = subprocess.run(login._in_namespace(*argv), env=login._env(), input=stdin, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = config.replace("ClientAliveInterval 60", "ClientAliveInterval soon")
    argv, stdin = login_check.sshd_test_command(bad)
    refused = subprocess.run(login._in_namespace(*argv), env=login._env(), input=stdin, capture_output=True,
                             text=True)
    field, message = login_check.sshd_problem(refused.returncode, refused.stderr, bad,
                                              {"sshdConfig": {"ClientAliveInterval": "soon"}})
    assert field == "spec.login.sshdConfig.ClientAliveInterval", message
    assert "invalid time value" in message


def _children():
    children = {}
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % entry) as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return children


def _below(pid, depth):
    """Processes ``depth`` generations below ``pid``."""
    level, children = [pid], _children()
    for _generation in range(depth):
        level = [c for p in level for c in children.get(p, [])]
    return level


def _sessions_below(login, proc_copy):
    """The session script's answer over a /proc that holds sshd's process and its descendants (status and command
    lines copied), run in the login node's namespace (its /etc/passwd is the jail's, as in the login container)."""
    children = _children()
    if proc_copy.exists():
        shutil.rmtree(proc_copy)
    todo = [login.proc.pid]
    while todo:
        current = todo.pop()
        try:
            with open("/proc/%d/cmdline" % current, "rb") as f:
                cmdline = f.read()
            with open("/proc/%d/status" % current, "rb") as f:
                status = f.read()
        except OSError:
            continue
        (proc_copy / str(current)).mkdir(parents=True)
        (proc_copy / str(current) / "cmdline").write_bytes(cmdline)
        (proc_copy / str(current) / "status").write_bytes(status)
        todo += children.get(current, [])
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount --bind "$0" /proc && exec "$@"',
            str(proc_copy)] + login._in_namespace(*login_check.sessions_command())
    res = subprocess.run(argv, env=login._env(), capture_output=True, text=True)
    return login_check.parse_sessions(res.returncode, res.stdout)
