"""Fixtures for the login tests: one jail, one Secret of host keys and one login node per session.

Needs root (mount namespaces, chroot, file ownership): skipped without it, failed under CI=true
(tests/prerequisites.py). The jail is the trixie rootfs of
hack/slurm-rootfs.sh (cached tarball, unpacked once per session). SOPERATOR_LOGIN_KEEP=1 keeps the work directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from login_node import LoginNode, sh_quote
from login_site import HOST_TOOLS, UID, USER, Site
from prerequisites import require_root, require_tools


@pytest.fixture(scope="session")
def site():
    require_root("login: mount namespaces, chroot, file ownership")
    require_tools(HOST_TOOLS)
    s = Site(tempfile.mkdtemp(prefix="soperator-login-"))
    try:
        s.prepare()
        yield s
    finally:
        if os.environ.get("SOPERATOR_LOGIN_KEEP"):
            print("\nkept %s" % s.workdir)
        else:
            shutil.rmtree(s.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def login(site):
    """The login node every read-only test shares."""
    node = site.node("login").start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
def alice(site, login):
    """A user created INSIDE the jail by root, from a root session: useradd, then their authorized_keys."""
    home = "/home/%s" % USER
    script = " && ".join([
        sh_quote("useradd", "--create-home", "--shell", "/bin/bash", "--uid", str(UID), USER),
        "umask 077", sh_quote("mkdir", home + "/.ssh"), "cat > %s/.ssh/authorized_keys" % home,
        sh_quote("chown", "-R", "%s:%s" % (USER, USER), home + "/.ssh"),
    ])
    result = login.ssh("root", site.root_key, script, input=site.user_pub)
    assert result.returncode == 0, result.stderr + login.log()
    return USER


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach sshd's output of the login nodes the test used."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, LoginNode):
            rep.sections.append(("sshd output (%s)" % name, value.log()[-4000:]))

