"""What the converge asks a login pod: open sessions (from what the kernel says about sshd's processes) and whether
sshd takes a config.

The session rule is judged here on process tables in the script's own output format, each case a way a logged-in
user (or an unauthenticated client) might try to look like a session; the script itself runs here for real over
this host's /proc. A real sshd's sessions (Debian's OpenSSH) are counted in tests/login, the login image's in
tests/e2e. The stderr text is what OpenSSH 9.2's ``sshd -t`` printed for CONFIG.
"""

import base64
import os
import subprocess
import time

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import login_check

CONFIG = "# Generated\nHostKey /etc/ssh/keys/ssh_host_ed25519_key\nPort 22\nClientAliveInterval soon\nLogLevel INFO\n"
PRIVSEP = "100"  # sshd's privilege separation user
ALICE = "1000"
LISTENER = ("1", "0", "0", "sshd: /usr/sbin/sshd -D -e -f /etc/soperator/sshd/sshd_config [listener] 0 of 10-100 "
            "startups")


def table(*procs, privsep=PRIVSEP):
    """The session script's output for processes (pid, ppid, real uid, title), as it prints them: the title of
    root's processes only."""
    out = [privsep]
    for pid, ppid, uid, title in procs:
        out += ["/proc/%s/status:PPid:\t%s" % (pid, ppid),
                "/proc/%s/status:Uid:\t%s\t%s\t%s\t%s" % ((pid,) + (uid,) * 4)]
        if uid == "0":
            out.append("/proc/%s/cmdline:%s " % (pid, title))
    return "\n".join(out) + "\n"


def count(*procs, **kw):
    return login_check.parse_sessions(0, table(*procs, **kw))


def session(pid, user="alice", uid=ALICE):
    """An authenticated session as OpenSSH >= 9.8 runs it: the connection process (root, a child of the listener)
    and its post-authentication child running as the user, with the user's shell below."""
    return [(str(pid), "1", "0", "sshd-session: %s [priv]" % user),
            (str(pid + 1), str(pid), uid, "sshd-session: %s@notty" % user),
            (str(pid + 2), str(pid + 1), uid, "sleep 600")]


def test_an_authenticated_session_counts_once_whatever_runs_in_it():
    assert count(LISTENER) == 0
    assert count(LISTENER, *session(10)) == 1
    assert count(LISTENER, *session(10), *session(20, "bob", "1001"), (str(13), "12", ALICE, "make -j8")) == 2
    # OpenSSH before 9.8 titles it "sshd: alice [priv]"; a root login has no unprivileged child: the connection
    # process runs root's commands itself.
    assert count(LISTENER, ("10", "1", "0", "sshd: alice [priv]"), ("11", "10", ALICE, "sshd: alice@pts/0")) == 1
    assert count(LISTENER, ("10", "1", "0", "sshd-session: root@notty"), ("11", "10", "0", "sleep 600")) == 1


def test_a_connection_still_authenticating_is_no_session():
    """OpenSSH titles the connection "<user> [priv]" as soon as the client names a user, before any key is
    checked; its child then runs as the privilege separation user."""
    assert count(LISTENER, ("10", "1", "0", "sshd-session: alice [priv]"),
                 ("11", "10", PRIVSEP, "sshd-auth: alice [net]")) == 0
    assert count(LISTENER, ("10", "1", "0", "sshd-session: unknown [priv]")) == 0


@pytest.mark.parametrize("forged", [
    # exec -a "sshd-session: alice [priv]" sleep inf, left behind at logout: the container's PID 1 (the listener)
    # adopts it, with its child, but its real uid stays alice's.
    [("30", "1", ALICE, "sshd-session: alice [priv]"), ("31", "30", ALICE, "sleep 600")],
    # the same through a setuid-root program: the effective uid is 0, the real uid is not (the script reads the
    # real one, the first of the Uid line)
    [("30", "1", ALICE, "sshd: alice [priv]"), ("31", "30", ALICE, "sleep 600")],
    # a forged listener with a forged session below it
    [("30", "1", ALICE, "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"),
     ("31", "30", ALICE, "sshd-session: alice [priv]"), ("32", "31", ALICE, "sleep 600")],
    # a forged session inside a real one: still one session
    session(10) + [("30", "12", ALICE, "sshd-session: alice [priv]"), ("31", "30", ALICE, "sleep 600")],
])
def test_a_process_a_user_can_make_is_never_a_session(forged):
    real = 1 if forged[0][0] == "10" else 0
    assert count(LISTENER, *forged) == real
    # What counting by titles alone (the earlier rule) saw: each forged title a session.
    titles = [t for dummy, dummy, dummy, t in forged if t.endswith("[priv]")]
    assert len(titles) > real


def test_setuid_is_told_by_the_real_uid():
    """The script prints the Uid line whole; the real uid (first) decides, not the effective one."""
    out = (PRIVSEP + "\n/proc/30/status:PPid:\t1\n/proc/30/status:Uid:\t1000\t0\t0\t0\n"
           "/proc/31/status:PPid:\t30\n/proc/31/status:Uid:\t1000\t1000\t1000\t1000\n")
    assert login_check.parse_sessions(0, table(LISTENER) + out.split("\n", 1)[1]) == 0


def test_an_answer_that_is_not_a_process_table_is_unknown():
    assert count(LISTENER, *session(10), privsep="-") is None  # no privilege separation user: cannot tell
    assert login_check.parse_sessions(1, table(LISTENER, *session(10))) is None
    assert login_check.parse_sessions(0, "") is None
    assert login_check.parse_sessions(0, "sh: 1: grep: not found\n") is None
    # A title cannot add a line of its own (the script makes newlines spaces); a line that is not the script's is
    # ignored.
    assert login_check.parse_sessions(0, table(LISTENER) + "garbage\n/proc/x/status:Uid:\t0\n") == 0


def _titled(title, *argv):
    return subprocess.Popen(["bash", "-c", 'exec -a "$0" "$@"', title] + list(argv or ["sleep", "30"]))


def _count_here():
    res = subprocess.run(login_check.sessions_command(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    privsep, procs = login_check.parse_processes(res.stdout)
    assert str(os.getpid()) in procs and procs[str(os.getpid())]["uid"] == str(os.getuid())
    return login_check.count_sessions(privsep or "65534", procs)


def test_the_script_reads_this_hosts_processes_and_forged_titles_change_nothing():
    before = _count_here()
    procs = [_titled("sshd-session: alice [priv]", "sh", "-c", "sleep 30; true"), _titled("sshd: bob [priv]"),
             _titled("sshd: /usr/sbin/sshd -D -e [listener] 0 of 10-100 startups")]
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                open("/proc/%d/cmdline" % p.pid, "rb").read().startswith(b"sshd") for p in procs):
            time.sleep(0.05)
        assert _count_here() == before
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_the_candidate_config_travels_as_base64_on_stdin_not_in_argv():
    argv, stdin = login_check.sshd_test_command(CONFIG)
    assert argv == ["sh", "-c", login_check.SSHD_TEST_SCRIPT, "soperator-sshd-test"]
    assert stdin.endswith("\n") and base64.b64decode(stdin).decode() == CONFIG


def test_the_test_script_hands_sshd_the_candidate_byte_for_byte(tmp_path):
    """The script under a real shell, sshd stubbed by a copy (no sshd needed here): $(...) stays text."""
    fake = tmp_path / "usr" / "sbin"
    fake.mkdir(parents=True)
    argv, stdin = login_check.sshd_test_command(CONFIG + "Banner $(touch %s/pwned)\n" % tmp_path)
    script = argv[2].replace("/usr/sbin/sshd", str(fake / "sshd"))
    (fake / "sshd").write_text('#!/bin/sh\ncp "$3" %s/seen\n' % tmp_path)
    (fake / "sshd").chmod(0o755)
    res = subprocess.run(argv[:2] + [script] + argv[3:], input=stdin, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "seen").read_text() == base64.b64decode(stdin).decode()
    assert not (tmp_path / "pwned").exists()


def test_a_refused_value_names_the_users_field():
    stderr = ("/tmp/tmp.AbC/sshd_config line 4: invalid time value.\n"
              "/tmp/tmp.AbC/sshd_config: terminating, 1 bad configuration options\n")
    field, message = login_check.sshd_problem(255, stderr, CONFIG, {"sshdConfig": {"ClientAliveInterval": "soon"}})
    assert field == "spec.login.sshdConfig.ClientAliveInterval"
    assert message == ("sshd_config refused by this cluster's sshd (nothing was applied): sshd_config line 4: "
                       "invalid time value.")
    # A line the user did not write (or no line at all): the section is named.
    assert login_check.sshd_problem(255, "line 2: bad", CONFIG, {"sshdConfig": {}})[0] == "spec.login.sshdConfig"
    assert login_check.sshd_problem(1, "no hostkeys available -- exiting.", CONFIG, {})[0] == "spec.login.sshdConfig"
    assert login_check.sshd_problem(0, "", CONFIG, {}) is None
