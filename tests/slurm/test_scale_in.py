"""Scale-in against real Slurm 24.11 with dynamic nodes: drain first, no job lost, no ghost node, admin
drains untouched, a cancelled scale-in resumed.

The converge's own scale-in (plan/scale.py: ``shrink`` and ``resume_ours``, on plan/drains.py's decisions) is planned
on what scontrol prints and carried out as the converger does, through the Slurm adapter
(plugins/module_utils/k8s/slurm_exec.py), whose local transport runs scontrol inside the cluster's namespaces
(dynamic_cluster.py). Every command is bounded (`timeout`, `srun --immediate`).

SOPERATOR_RECORD_FIXTURES=1 rewrites tests/unit/fixtures/scontrol/*.yaml from what scontrol prints here:
the unit tests replay those recordings, so their inputs are real outputs, never invented ones.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from dynamic_cluster import NODE_CONF, STATEFULSET, DynamicCluster, node_addr, node_name
from slurm_cluster import running, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import slurm_exec as _slurm
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import LocalTransport, Slurm
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains, model, scale
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "scontrol"
RECORD = os.environ.get("SOPERATOR_RECORD_FIXTURES") == "1"
REASON = "soperator: scale-in"
ADMIN_REASON = "bad DIMM, ticket=42 [hw]"
NODES = 3


class Recorder:
    """A local transport that can save the next call's argv, rc and output as a fixture."""

    def __init__(self, inner):
        self.inner = inner
        self.label = None

    def __call__(self, argv):
        rc, out, err = self.inner(argv)
        if RECORD and self.label:
            FIXTURES.mkdir(parents=True, exist_ok=True)
            doc = {"command": list(argv), "rc": rc, "stdout": out, "stderr": err}
            header = f"# Recorded from Slurm 24.11 by tests/slurm/test_scale_in.py ({self.label}); do not edit.\n"
            (FIXTURES / f"{self.label}.yaml").write_text(header + yaml.safe_dump(doc, sort_keys=False, width=1000))
            self.label = None
        return rc, out, err

    def record(self, label):
        self.label = label
        return self


@pytest.fixture(scope="module")
def dyn(real_slurm_host):
    with running(DynamicCluster()) as c:
        yield c


@pytest.fixture(scope="module")
def recorder(dyn):
    return Recorder(LocalTransport(dyn.command_prefix(), timeout=30))


@pytest.fixture
def slurm(dyn, recorder):
    """Three idle workers demo-cpu-0..2, no job, no drain: the StatefulSet at 3 replicas."""
    dyn.run(["scancel", "--full", "-u", "root"])
    if RECORD and not dyn._known(node_name(0)):
        Slurm(recorder.record("no-nodes")).show_nodes()
    for i in range(NODES):
        if not dyn._known(node_name(i)):
            dyn.start_node(i)
    dyn.run(["scontrol", "update", f"nodename={STATEFULSET}-[0-{NODES - 1}]", "state=resume"])
    wait_for(lambda: all(dyn.node_state(node_name(i)).rstrip("*") == "idle" for i in range(NODES)), 20,
             "all workers idle")
    return Slurm(recorder)


def submit(dyn, node, seconds):
    out = dyn.run(["sbatch", "--parsable", "-w", node, "-n1", "-o", "/tmp/job-%j.out",
                   "--wrap", f"sleep {seconds}; echo finished"]).check().stdout
    job = out.strip().split(";")[0]
    wait_for(lambda: job_state(dyn, job) == "RUNNING", 15, f"job {job} running")
    return job


def job_state(dyn, job):
    res = dyn.run(["scontrol", "show", "job", "-o", job], timeout=10)
    for field in res.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return None


def node_fields(dyn, name):
    return scontrol.parse_show_node(dyn.run(["scontrol", "show", "node", "-o", name]).check().stdout)[name]


class Pass:
    """What one converge pass decides for the NodeSet's StatefulSet going from ``current`` to ``target`` pods
    (``count``: the replicas it may have now; ``plan``: its drains and resumes), and what it did."""

    def __init__(self, count, plan, entries, resumed):
        self.count, self.plan, self.entries, self.resumed = count, plan, entries, resumed

    @property
    def drained(self):
        return self.plan.drain.get(REASON, [])

    @property
    def actions(self):
        return [e["action"] for e in self.entries]


def converge(slurm, current, target, now=None, drain_timeout="30m", on_timeout="Wait", check_mode=False):
    """One pass of the converge's scale-in (plan/scale.py's ``shrink``, ``resume_ours``) on Slurm's node table, carried
    out as the converger's ``act`` does (drain, then resume: only nodes whose reason is still ours)."""
    now = time.time() if now is None else now
    nodeset = {"metadata": {"name": "cpu"}, "spec": {"drainTimeout": drain_timeout, "onDrainTimeout": on_timeout}}
    nodes = slurm.show_nodes()
    p = model.Draft()
    count = scale.shrink(p, nodes, nodeset, STATEFULSET, current, target, now, REASON, "NodeSet cpu")
    if target >= current:
        scale.resume_ours(p, nodes, [names.pod_name(STATEFULSET, o) for o in range(target)], (REASON,))
    victims = drains.scale_in_victims(current, target, STATEFULSET)
    entries = drains.plan_scale_in(nodes, victims, now=now, drain_timeout=model.drain_timeout(nodeset))
    resumed = []
    if not check_mode:
        for reason, node_names in sorted(p.drain.items()):
            slurm.drain(node_names, reason)
        resumed = slurm.resume(p.resume) if p.resume else []
    return Pass(count, p, entries, resumed)


def test_drain_wait_remove_delete_leaves_no_ghost(dyn, slurm, recorder):
    job = submit(dyn, node_name(2), 6)
    Slurm(recorder.record("idle-and-busy")).show_nodes()

    # 3 -> 1: demo-cpu-2 runs a job, demo-cpu-1 is idle. Both drained; the top one still runs its job, so
    # nothing may go yet (the StatefulSet would remove demo-cpu-2 first).
    first = converge(slurm, 3, 1)
    assert first.drained == [node_name(2), node_name(1)] and first.count == 3
    Slurm(recorder.record("draining")).show_nodes()
    second = converge(slurm, 3, 1)
    assert second.actions == [drains.WAIT, drains.READY] and second.count == 3 and not second.drained
    for i in (1, 2):
        assert node_fields(dyn, node_name(i))["reason"] == REASON
    # A drained node takes no new job (bounded: srun would wait forever).
    refused = dyn.run(["srun", "--immediate=3", "-w", node_name(1), "true"], timeout=20)
    assert refused.returncode != 0

    # Wait for the job: it completes untouched, then both victims are removable.
    start = time.monotonic()
    wait_for(lambda: converge(slurm, 3, 1).count == 1, 20, "both victims removable")
    assert time.monotonic() - start < 20
    assert job_state(dyn, job) == "COMPLETED"
    assert "finished" in (dyn.root / f"tmp/job-{job}.out").read_text()
    Slurm(recorder.record("drained")).show_nodes()

    # The StatefulSet shrinks: the pods (slurmd) go; then their node records are deleted.
    dyn.stop_node(2)
    dyn.stop_node(1)
    slurm.delete([node_name(2), node_name(1)])
    assert dyn.nodes() == [node_name(0)]
    res = recorder.record("unknown-node")(["scontrol", "show", "node", "-o", node_name(2)])
    assert res[0] != 0 and "not found" in (res[1] + res[2])
    Slurm(recorder.record("after-delete")).show_nodes()
    with pytest.raises(_slurm.SlurmError) as failed:
        Slurm(recorder.record("update-unknown-node")).drain([node_name(2)], REASON)
    assert failed.value.details["rc"] == 1 and "Invalid node name" in failed.value.details["stderr"]


def test_admin_drain_is_never_overwritten_nor_resumed(dyn, slurm, recorder):
    dyn.run(["scontrol", "update", f"nodename={node_name(2)}", "state=drain", f"reason={ADMIN_REASON}"]).check()
    busy_job = submit(dyn, node_name(0), 30)  # a node that stays: never touched
    res = converge(slurm, 3, 1)
    assert res.actions == [drains.BLOCKED, drains.DRAIN] and res.drained == [node_name(1)]
    res = converge(slurm, 3, 1)
    assert res.count == 1 and not res.drained  # an admin's drained, idle node goes
    Slurm(recorder.record("admin-drained")).show_nodes()
    assert node_fields(dyn, node_name(2))["reason"] == ADMIN_REASON

    # The scale-in is cancelled (replicas back to 3): our drain is undone, the admin's is not.
    cancel = converge(slurm, 3, 3)
    assert cancel.resumed == [node_name(1)] and cancel.entries == []
    Slurm(recorder.record("resumed")).show_nodes()
    one, two = node_fields(dyn, node_name(1)), node_fields(dyn, node_name(2))
    assert not one["drain"] and not one["busy"]  # Slurm 24.11 keeps the old reason on a resumed node
    assert two["drain"] and two["reason"] == ADMIN_REASON
    assert job_state(dyn, busy_job) == "RUNNING"
    assert not converge(slurm, 3, 3).resumed
    # Nor is a resume forced on an admin's node by name.
    assert slurm.resume([node_name(2)]) == []
    assert node_fields(dyn, node_name(2))["reason"] == ADMIN_REASON
    dyn.run(["scancel", busy_job])


def test_cancelled_scale_in_resumes_a_draining_node_its_job_untouched(dyn, slurm, recorder):
    job = submit(dyn, node_name(2), 30)
    res = converge(slurm, 3, 2)
    assert res.drained == [node_name(2)] and res.count == 3
    cancel = converge(slurm, 3, 3)
    assert cancel.resumed == [node_name(2)]
    node = node_fields(dyn, node_name(2))
    assert not node["drain"] and node["busy"] and job_state(dyn, job) == "RUNNING"
    dyn.run(["scancel", job])


def test_expired_drain_and_down_nodes_are_removable(dyn, slurm, recorder):
    job = submit(dyn, node_name(2), 30)
    dyn.run(["scontrol", "update", f"nodename={node_name(1)}", "state=down", "reason=pod evicted"]).check()
    converge(slurm, 3, 1)
    res = converge(slurm, 3, 1)
    assert res.actions == [drains.WAIT, drains.READY] and res.count == 3
    Slurm(recorder.record("down-and-draining")).show_nodes()
    # Drained by us long enough ago (now is 1 h later): given up, by the NodeSet's drainTimeout (and set DOWN).
    later = converge(slurm, 3, 1, now=time.time() + 3600, on_timeout="Proceed", check_mode=True)
    assert later.count == 1 and [g["node"] for g in later.plan.give_up] == [node_name(2)]
    assert later.plan.down == {REASON: [node_name(2)]}
    assert job_state(dyn, job) == "RUNNING"  # removing the pod is what ends it, not the plan
    dyn.run(["scancel", job])


def test_the_jobs_on_each_node_are_named_by_squeue(dyn, slurm):
    """What a rolling update's status and a DrainTimeoutExpired Event name: the jobs on each node, a job on two
    nodes under both, a node Slurm does not know left out (not reported empty)."""
    one = submit(dyn, node_name(2), 30)
    out = dyn.run(["sbatch", "--parsable", "-N2", "-w", f"{node_name(0)},{node_name(1)}", "-o", "/dev/null",
                   "--wrap", "srun sleep 30"]).check().stdout
    two = out.strip().split(";")[0]
    wait_for(lambda: job_state(dyn, two) == "RUNNING", 15, f"job {two} running")
    try:
        jobs = slurm.jobs_on([node_name(0), node_name(1), node_name(2), f"{STATEFULSET}-9"])
        assert jobs == {node_name(0): [two], node_name(1): [two], node_name(2): [one]}, jobs
    finally:
        dyn.run(["scancel", one, two])
    wait_for(lambda: slurm.jobs_on([node_name(2)]) == {node_name(2): []}, 15, "no job left")


def test_a_pod_replaced_with_its_job_is_set_down_first_and_its_new_slurmd_is_resumed(dyn, slurm):
    """A rolling update past proceedAfter (plan/rolls.py): Slurm 24.11 never ends a batch job that the node's new
    slurmd does not report (docs/slurm-24.11-findings.md D.2), so the converge sets the node DOWN before deleting
    its pod: the job ends as on a node failure (NODE_FAIL), and the new slurmd's node is still drained by us
    (ReturnToService=2 lifts only the DOWN), for the roll to resume."""
    name = node_name(2)
    job = dyn.run(["sbatch", "--parsable", "--no-requeue", "-w", name, "-o", "/dev/null", "--wrap", "sleep 3600"]
                  ).check().stdout.strip()
    wait_for(lambda: job_state(dyn, job) == "RUNNING", 15, f"job {job} running")
    slurm.drain([name], names.REASON_UPDATE)
    slurm.down([name], names.REASON_UPDATE)
    wait_for(lambda: job_state(dyn, job) == "NODE_FAIL", 15, f"job {job} ended by the node's DOWN")
    # The pod goes (its slurmd and every step with it); the replacement's slurmd registers under the same name.
    pid = dyn.run(["cat", f"/run/slurmd-{name}.pid"]).check().stdout.strip()
    dyn.run(["sh", "-c", f"kill -9 {pid}; pkill -9 slurmstepd; true"])
    wait_for(lambda: dyn.run(["kill", "-0", pid]).returncode != 0, 15, "the old slurmd gone")
    dyn.start_slurmd(name, node_addr(2), NODE_CONF).check()
    node = wait_for(lambda: (lambda n: n if not n["down"] and n["state"] == "IDLE" else None)(node_fields(dyn, name)),
                    30, f"{name} registered again")
    assert node["drain"] and node["reason"] == names.REASON_UPDATE, node
    assert slurm.resume([name]) == [name]
    wait_for(lambda: dyn.node_state(name).rstrip("*") == "idle", 15, f"{name} idle")
