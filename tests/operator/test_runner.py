"""The role runner as the operator runs it (a warm forkserver, children forked from it), with no cluster: a run finds
the collection's roles. A cold make test failed every operator run with "the role 'soperator.slurm.cluster' was not
found": runner.py had started importing extravars (a type name), which imports the collection's module_utils as a
plain package, before Ansible's collection finder was installed in the process the runs fork from, so the finder
never loaded the collection's metadata and knew none of its roles."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPERATOR = os.path.join(ROOT, "operator")

PROBE = """
import sys
sys.path.insert(0, %r)
import soperator_operator.runner
print(sorted(m for m in sys.modules if m.startswith("ansible_collections.soperator")))
""" % OPERATOR


def test_the_runner_imports_nothing_of_the_collection():
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections")))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]", res.stdout


RUN = """
import os, sys
sys.path.insert(0, %r)
from soperator_operator.runner import RoleRunner

if __name__ == "__main__":
    runner = RoleRunner(work_dir=sys.argv[1], env={"KUBECONFIG": os.devnull, "K8S_AUTH_KUBECONFIG": os.devnull})
    try:
        result = runner.run({"cluster_ref": {"name": "demo", "namespace": "nowhere"}}, role="soperator.slurm.cluster",
                            tasks_from="converge", ident="probe")
    finally:
        runner.close(helpers=True)
    print("RC", result.rc)
    print(result.stdout_tail)
""" % OPERATOR


def _script(tmp_path, text, timeout):
    """``text`` run as a script by this Python, its work directory in ``tmp_path``, the collection importable."""
    script = tmp_path / "script.py"
    script.write_text(text)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    return subprocess.run([sys.executable, str(script), str(tmp_path / "work")], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_a_forked_run_finds_the_collections_role(tmp_path):
    """The run fails (there is no cluster), but in the role: its tasks ran, its role was found."""
    res = _script(tmp_path, RUN, 300)
    out = res.stdout + res.stderr
    assert "was not found" not in out, out[-3000:]
    assert "TASK [soperator.slurm.cluster" in out or "TASK [Run soperator.slurm.cluster" in out, out[-3000:]


RESTART = """
import os, signal, sys
sys.path.insert(0, %r)
from soperator_operator.runner import RoleRunner

if __name__ == "__main__":
    runner = RoleRunner(work_dir=sys.argv[1], env={"KUBECONFIG": os.devnull, "K8S_AUTH_KUBECONFIG": os.devnull},
                        warm=False)
    try:
        runner.start()
        first = runner.server.pid
        os.kill(first, signal.SIGKILL)
        proc = runner.server.Process(target=os._exit, args=(3,), name="after")
        proc.start()
        proc.join()
        print("NEW", runner.server.pid != first, "EXIT", proc.exitcode)
    finally:
        runner.close(helpers=True)
""" % OPERATOR


def test_a_killed_forkserver_is_forked_again_at_the_next_run(tmp_path):
    """The forkserver is a fork of the operator: killed (the OOM killer), the next run forks a new one."""
    res = _script(tmp_path, RESTART, 120)
    assert "NEW True EXIT 3" in res.stdout, res.stdout + res.stderr
