"""One kind cluster for every test of tests/kind: the README's "Try it on kind" cluster.

The session fixture ``kind_cluster`` runs the README's shell block as written, in one new bash login shell in the
checkout that inherits nothing but HOME (a user's new terminal), errors stopping it, except its teardown line(s)
(from the last ``hack/kind.sh down`` on). It asserts what the lines' comments promise (a job step on each of the two
Slurm workers); the multi-node tests (test_multinode.py) then run on that cluster. Its finalizer runs the README's
remaining line(s) as written, in a new login shell after the README's ``eval "$(hack/kind.sh env)"`` line, and
asserts the cluster is gone. A failure anywhere leaves no cluster behind (``hack/kind.sh down soperator`` last).

While iterating, ``SOPERATOR_KIND_REUSE=1`` uses a cluster ``soperator`` that is already up (made by the README's
lines) and leaves it up; the default (and make test) is the README-as-written flow.
"""

import re
import time

import pytest
from kindreadme import REUSE, Cluster, cluster_up, down, engine_answers, login_shell, readme_lines, split_readme
from prerequisites import require_root


@pytest.fixture(scope="session")
def kind_cluster():
    if REUSE and cluster_up().returncode == 0:
        yield Cluster("")
        return
    if not engine_answers():
        require_root("starting the project's kind engine (dockerd): no Docker engine answers")
        pytest.fail("the project's kind engine did not start (hack/kind.sh env)", pytrace=False)
    if cluster_up().returncode == 0:
        pytest.fail("a kind cluster named soperator is up: the README's lines would use it and delete it "
                    "(hack/kind.sh down soperator first)", pytrace=False)
    setup, env_line, teardown = split_readme(readme_lines())
    started = time.monotonic()
    try:
        res = login_shell(setup, 1500)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-6000:]
        steps = [line for line in res.stdout.splitlines() if re.fullmatch(r"demo-cpu-[01]", line)]
        assert sorted(steps) == ["demo-cpu-0", "demo-cpu-1"], out[-6000:]
        print("\nkind-multinode: the README's lines up to the teardown took %.0f s" % (time.monotonic() - started))
    except BaseException:
        down()
        raise
    try:
        yield Cluster(res.stdout)
        if REUSE:
            return
        started = time.monotonic()
        res = login_shell(env_line + "\n" + teardown, 300)
        assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
        gone = cluster_up()
        assert gone.returncode != 0, gone.stdout
        print("kind-multinode: the README's teardown line(s) took %.0f s" % (time.monotonic() - started))
    finally:
        if not REUSE:
            down()
