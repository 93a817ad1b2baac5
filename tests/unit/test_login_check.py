"""What the converge asks a login pod: open sessions (from sshd's process titles) and whether sshd takes a config.

The session script runs here for real, against processes titled the way OpenSSH's sshd-session titles its
privileged monitor; ``sshd -t`` and a real logged-in session are in tests/login (Debian's OpenSSH on this host),
the login image's sshd in tests/e2e. The stderr text is what OpenSSH 9.2's ``sshd -t`` printed for CONFIG.
"""

import base64
import os
import subprocess
import time

from ansible_collections.soperator.slurm.plugins.module_utils import login_check

CONFIG = "# Generated\nHostKey /etc/ssh/keys/ssh_host_ed25519_key\nPort 22\nClientAliveInterval soon\nLogLevel INFO\n"


def _titled(title):
    return subprocess.Popen(["bash", "-c", 'exec -a "$0" sleep 30', title])


def _count():
    res = subprocess.run(login_check.sessions_command(), capture_output=True, text=True)
    return login_check.parse_sessions(res.returncode, res.stdout)


def test_sessions_are_the_privileged_monitors_of_authenticated_connections():
    before = _count()
    assert before is not None
    procs = [_titled("sshd-session: alice [priv]"), _titled("sshd: bob [priv]"),
             # not sessions: the listener, a connection before authentication, the user half of a session
             _titled("sshd: /usr/sbin/sshd -D -e [listener] 0 of 10-100 startups"),
             _titled("sshd-session: unknown [preauth]"), _titled("sshd-session: alice@pts/0")]
    try:
        deadline = time.monotonic() + 10
        while not all(os.path.exists("/proc/%d/cmdline" % p.pid) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # exec -a has replaced bash's title
        assert _count() == before + 2
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert _count() == before


def test_an_answer_that_is_not_a_count_is_unknown():
    assert login_check.parse_sessions(0, "3\n") == 3
    assert login_check.parse_sessions(1, "3\n") is None
    assert login_check.parse_sessions(0, "sh: tr: not found\n") is None


def test_the_candidate_config_travels_as_base64_data_not_as_script():
    argv = login_check.sshd_test_command(CONFIG)
    assert argv[:3] == ["sh", "-c", login_check.SSHD_TEST_SCRIPT]
    assert base64.b64decode(argv[-1]).decode() == CONFIG
    assert "soon" not in " ".join(argv[:-1])


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
