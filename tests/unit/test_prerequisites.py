"""tests/prerequisites.py: under CI=true a missing prerequisite fails (a skip is not a pass); elsewhere it skips with
its reason; and every real-component suite asks it rather than deciding for itself."""

import os
import re

import prerequisites
import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_COMPONENT_SUITES = ("realnode", "slurm", "login", "images", "e2e", "integration", "kind")


def test_under_ci_a_missing_root_fails_naming_what_for():
    with pytest.raises(pytest.fail.Exception, match=r"CI=true \(a skip is not a pass\): needs root: mounts"):
        prerequisites.require_root("mounts", environ={"CI": "true"}, euid=1000)


@pytest.mark.parametrize("environ", [{}, {"CI": "false"}, {"CI": ""}])
def test_elsewhere_a_missing_root_is_a_skip_with_the_reason(environ):
    with pytest.raises(pytest.skip.Exception, match="needs root: mounts"):
        prerequisites.require_root("mounts", environ=environ, euid=1000)


@pytest.mark.parametrize("environ", [{}, {"CI": "true"}])
def test_root_is_enough(environ):
    assert prerequisites.require_root("mounts", environ=environ, euid=0) is None


def test_unavailable_fails_under_ci_and_skips_elsewhere():
    with pytest.raises(pytest.fail.Exception, match="the engine did not start"):
        prerequisites.unavailable("the engine did not start", environ={"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match="the engine did not start"):
        prerequisites.unavailable("the engine did not start", environ={})


def test_missing_host_tools_fail_everywhere_naming_them():
    present = {"tar", "mount"}.__contains__
    with pytest.raises(pytest.fail.Exception, match=r"hack/install-deps.sh installs them\): zstd, unshare"):
        prerequisites.require_tools(["tar", "zstd", "mount", "unshare"], which=present)
    assert prerequisites.require_tools(["tar", "mount"], which=present) is None


def _sources(suite):
    folder = os.path.join(TESTS, suite)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                yield name, handle.read()


def test_every_real_component_suite_asks_the_helper():
    """No suite checks root on its own (where a skip could hide under CI); each one imports the helper."""
    for suite in REAL_COMPONENT_SUITES:
        sources = dict(_sources(suite))
        assert any(re.search(r"^from prerequisites import", text, re.M) for text in sources.values()), suite
        own = [name for name, text in sources.items() if "geteuid" in text]
        assert own == [], "%s checks root itself: %s" % (suite, own)


SKIP = re.compile(r"pytest\.(skip|mark\.skipif)\(")
NO_PREREQUISITE = "# not a prerequisite:"


def test_every_other_skip_says_why_it_is_no_prerequisite():
    """A plain pytest.skip passes under CI=true, where a missing prerequisite must fail: a test skips through the
    helper (unavailable, require_root), or says on the skip's line or the two before why that skip is no missing
    prerequisite (a reused instance it must not stop, a machine that has what the test needs to be absent)."""
    helper = os.path.realpath(prerequisites.__file__)
    found = []
    for folder, _dirs, files in os.walk(TESTS):
        for name in sorted(files):
            path = os.path.realpath(os.path.join(folder, name))
            if not name.endswith(".py") or path in (helper, os.path.realpath(__file__)):
                continue
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
            found += ["%s:%d" % (os.path.relpath(path, TESTS), i + 1) for i, line in enumerate(lines)
                      if SKIP.search(line) and not any(NO_PREREQUISITE in x for x in lines[max(0, i - 2):i + 1])]
    assert found == [], "skips that pass under CI=true (use prerequisites.unavailable, or say %r why): %s" % (
        NO_PREREQUISITE, ", ".join(sorted(found)))
