"""The README's "Try it on kind" lines, run as written: read from README.md and run as one script in a new bash login
shell in the checkout that inherits nothing but HOME (a user's new terminal), errors stopping it. Then what the
lines' comments promise: a job step on each of the two Slurm workers, and the cluster gone at the end.

The lines run in the session fixture ``kind_cluster`` (conftest.py), which keeps the cluster up for the multi-node
tests (test_multinode.py) between the lines before ``hack/kind.sh down`` and that line, run last as written (its
finalizer asserts the cluster is gone). Run by hack/molecule-kind.sh after molecule's kind scenario (make test's last
stage), with the same engine rules: a Docker engine that answers, or root to start the project's own.
"""

import re

from kindreadme import REUSE, readme_lines, split_readme


def test_the_section_is_what_this_suite_runs():
    lines = readme_lines()
    for expected in ("make kind images", 'eval "$(hack/kind.sh env)"', "hack/kind.sh up",
                     "kind load image-archive --name soperator", "ansible-galaxy collection install",
                     "ansible-playbook soperator.slurm.site", "srun -N2 hostname", "hack/kind.sh down"):
        assert expected in lines, expected
    setup, env_line, teardown = split_readme(lines)
    # Every line runs: the setup in the fixture, the teardown in its finalizer, after the README's env line.
    assert setup + teardown == lines
    assert teardown.startswith("hack/kind.sh down")


def test_try_it_on_kind_as_written_in_a_new_shell(kind_cluster):
    if REUSE and not kind_cluster.stdout:
        return  # a reused cluster: its README lines ran earlier
    steps = [line for line in kind_cluster.stdout.splitlines() if re.fullmatch(r"demo-cpu-[01]", line)]
    assert sorted(steps) == ["demo-cpu-0", "demo-cpu-1"], kind_cluster.stdout[-6000:]
