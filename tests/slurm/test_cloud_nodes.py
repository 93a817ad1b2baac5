"""Power-saving (cloud) nodes on real Slurm 24.11: the mechanism of elastic NodeSets (issue 24; findings part A).

Three ``State=CLOUD`` nodes of one NodeSet start powered down. The test plays the operator (``cloud_cluster.Operator``):
it starts the slurmd of every node Slurm's ResumeProgram names and stops those SuspendProgram names, and asserts that
Slurm asks for exactly the nodes a job needs, and that a node that never comes up is handed back and its job requeued.
"""

from __future__ import annotations

import time

import pytest
from cloud_cluster import CloudCluster, CloudConfig, CloudSet, Operator, node_name
from prerequisites import require_root
from slurm_cluster import running, wait_for

NODES = [node_name("gpu", i) for i in range(3)]


@pytest.fixture(scope="module")
def cloud():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    config = CloudConfig(cloud_sets=[CloudSet("gpu", 3)])
    config.power.update(SuspendTime=10, SuspendTimeout=5, ResumeTimeout=20)
    with running(CloudCluster(config)) as c:
        yield c


def slurm_uid(c: CloudCluster) -> int:
    for line in (c.root / "etc/passwd").read_text().splitlines():
        if line.startswith("slurm:"):
            return int(line.split(":")[2])
    raise AssertionError("no slurm user in the rootfs")


def since(c: CloudCluster, start: float, action: str):
    return [call for call in c.calls(action) if call.at >= start]


def all_powered_down(c: CloudCluster) -> bool:
    return all(c.state(n) == "idle~" for n in NODES)


def test_a_job_powers_up_exactly_its_nodes_and_idle_ones_power_down(cloud):
    wait_for(lambda: all_powered_down(cloud), 60, "every node powered down")
    start = time.time()
    with Operator(cloud) as op:
        job = cloud.sbatch("-N2", script="#!/bin/sh\nsleep 2\n")
        wait_for(lambda: cloud.job(job)["JobState"] == "COMPLETED", 150, "the job to complete", interval=0.5)
        allocated = cloud.expand(cloud.job(job)["NodeList"])
        assert len(allocated) == 2
        # One resume, for exactly the job's nodes, run as SlurmUser, with the job in SLURM_RESUME_FILE.
        [resume] = since(cloud, start, "resume")
        assert resume.names == allocated
        assert resume.uid == slurm_uid(cloud)
        assert [(j["job_id"], j["nodes_resume"]) for j in resume.resume_file["jobs"]] == [(int(job), resume.hostlist)]
        # Idle for SuspendTime: both handed back, their slurmd stopped; the third node was never asked for.
        wait_for(lambda: all_powered_down(cloud) and not cloud.running_nodes(), 90, "the nodes powered down again")
        suspended = sorted(n for call in since(cloud, start, "suspend") for n in call.names)
        assert suspended == allocated
        assert sorted(name for _, action, name in op.log if action == "resume") == allocated
        assert not op.errors


def test_a_node_that_never_comes_up_is_handed_back_and_its_job_requeued(cloud):
    wait_for(lambda: all_powered_down(cloud), 60, "every node powered down")
    start = time.time()
    with Operator(cloud, fail={"demo-gpu-1"}) as op:
        job = cloud.sbatch("-N2", "-w", "demo-gpu-[0-1]", script="#!/bin/sh\nsleep 1\n")
        # ResumeTimeout: the node is DOWN (still powered down) and the job goes back to the queue.
        wait_for(lambda: cloud.node("demo-gpu-1").get("State", "").startswith("DOWN+"), 60, "demo-gpu-1 down")
        node = cloud.node("demo-gpu-1")
        assert "POWERED_DOWN" in node["State"] and node["Reason"].startswith("ResumeTimeout reached")
        info = cloud.job(job)
        assert (info["JobState"], info["Restarts"]) == ("PENDING", "1")
        assert "demo-gpu-1" in [n for call in since(cloud, start, "resume-fail") for n in call.names]
        # The cause is fixed; the failed node is handed back (what ResumeFailProgram's side does), and the requeued
        # job, once eligible, powers up its nodes again and runs.
        op.fail.clear()
        cloud.run(["scontrol", "power", "down", "force", "demo-gpu-1"]).check()
        wait_for(lambda: cloud.state("demo-gpu-1") == "idle~", 30, "demo-gpu-1 powered down and usable")
        cloud.run(["scontrol", "update", f"jobid={job}", "StartTime=now"]).check()  # skip the requeue delay
        wait_for(lambda: cloud.job(job)["JobState"] == "COMPLETED", 150, "the requeued job to complete", interval=0.5)
        assert cloud.job(job)["Restarts"] == "1"
        assert not op.errors
