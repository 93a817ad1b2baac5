"""The README's "Try it on kind" lines, run as written: read from README.md and run as one script in a new bash login
shell in the checkout that inherits nothing but HOME (a user's new terminal), errors stopping it. Then what the
lines' comments promise: a job step on each of the two Slurm workers, and the cluster gone at the end.

Run by hack/molecule-kind.sh after molecule's kind scenario (make test's kind stage), with the same engine rules: a
Docker engine that answers, or root to start the project's own.
"""

import os
import re
import subprocess

import pytest
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KIND_SH = os.path.join(ROOT, "hack", "kind.sh")


def readme_lines():
    """The shell block of the README's "Try it on kind" section."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("\n## Try it on kind\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def login_shell(script, timeout):
    return subprocess.run(["/bin/bash", "-l", "-c", "set -euo pipefail\n" + script], cwd=ROOT, text=True,
                          env={"HOME": os.environ["HOME"]}, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def engine_answers():
    return login_shell('eval "$(hack/kind.sh env)" >/dev/null && docker info >/dev/null', 120).returncode == 0


def test_the_section_is_what_this_suite_runs():
    lines = readme_lines()
    for expected in ("make kind images", 'eval "$(hack/kind.sh env)"', "hack/kind.sh up",
                     "kind load image-archive --name soperator", "ansible-galaxy collection install",
                     "ansible-playbook soperator.slurm.site", "srun -N2 hostname", "hack/kind.sh down"):
        assert expected in lines, expected


def test_try_it_on_kind_as_written_in_a_new_shell():
    if not engine_answers():
        require_root("starting the project's kind engine (dockerd): no Docker engine answers")
        pytest.fail("the project's kind engine did not start (hack/kind.sh env)", pytrace=False)
    if login_shell('eval "$(hack/kind.sh env)" >/dev/null && hack/kind.sh status soperator', 120).returncode == 0:
        pytest.fail("a kind cluster named soperator is up: the README's lines would use it and delete it "
                    "(hack/kind.sh down soperator first)", pytrace=False)
    try:
        res = login_shell(readme_lines(), 1500)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-6000:]
        steps = [line for line in res.stdout.splitlines() if re.fullmatch(r"demo-cpu-[01]", line)]
        assert sorted(steps) == ["demo-cpu-0", "demo-cpu-1"], out[-6000:]
        gone = login_shell('eval "$(hack/kind.sh env)" >/dev/null && hack/kind.sh status soperator', 120)
        assert gone.returncode != 0, gone.stdout
    finally:
        login_shell('eval "$(hack/kind.sh env)" >/dev/null && hack/kind.sh down soperator', 300)
