"""What a suite needs from the host (root, a binary, a container engine): the one place that decides what a missing
prerequisite means.

Under CI (``CI=true``) the host is prepared by the project's own files (hack/install-deps.sh, hack/*.sh) and runs as
root, so a missing prerequisite is a failure: a skipped suite is not a passed one. Elsewhere (a developer without
root) the suite is skipped, with the reason. Host tools the project installs (hack/install-deps.sh) are never
skipped: missing, they fail everywhere, naming the fix.
"""

import os
import shutil

import pytest


def in_ci(environ=None):
    return (os.environ if environ is None else environ).get("CI") == "true"


def unavailable(reason, environ=None):
    """A prerequisite is missing: fail under CI=true, skip (with ``reason``) elsewhere. Never returns."""
    if in_ci(environ):
        pytest.fail("prerequisite missing under CI=true (a skip is not a pass): %s" % reason, pytrace=False)
    pytest.skip(reason)


def require_root(why, environ=None, euid=None):
    """The suite needs root (``why``: what for)."""
    if (os.geteuid() if euid is None else euid) != 0:
        unavailable("needs root: %s" % why, environ)


def require_tools(tools, which=shutil.which):
    """Host tools hack/install-deps.sh installs: missing ones fail, named (locally too)."""
    missing = [tool for tool in tools if not which(tool)]
    if missing:
        pytest.fail("host tools missing (hack/install-deps.sh installs them): %s" % ", ".join(missing), pytrace=False)
