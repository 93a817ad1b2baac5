"""Elastic NodeSets on real Slurm 24.11 (issue 24): the collection's own pieces against a real slurmctld
(``elastic_cluster``: the rendered power saving, the controller image's program, ``plan/elastic.decide``).

Test-only: ``power_save_interval=1`` (the harness's default SlurmctldParameters) so Slurm looks every second, and
short SuspendTime/ResumeTimeout.
"""

from __future__ import annotations

import time

import pytest
from cloud_cluster import parse_oneliner
from elastic_cluster import (
    POWER,
    ElasticCluster,
    ElasticHands,
    elastic_config,
    power_log,
    powered_down,
    prepare_started,
)
from prerequisites import require_root
from slurm_cluster import running, wait_for


@pytest.fixture(scope="module")
def cloud():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    with running(ElasticCluster(elastic_config())) as c:
        prepare_started(c)
        yield c


def test_a_two_node_job_powers_up_exactly_two_pods_which_go_when_idle(cloud):
    wait_for(lambda: powered_down(cloud), 60, "3 powered-down nodes", interval=0.5)
    assert cloud.running_nodes() == []
    with ElasticHands(cloud) as hands:
        submitted = time.time()
        job = cloud.sbatch("-N2", script="#!/bin/sh\nsleep 3\n")
        wait_for(lambda: cloud.job(job)["JobState"] in ("RUNNING", "COMPLETED"), 90, "the job to run", interval=0.2)
        started = time.time()
        wait_for(lambda: cloud.job(job)["JobState"] == "COMPLETED", 90, "the job to complete", interval=0.5)
        allocated = cloud.expand(cloud.job(job)["NodeList"])
        assert len(set(allocated)) == 2
        # After SuspendTime idle: no pod left, all three powered down again.
        wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 90, "the nodes powered down",
                 interval=0.5)
    assert not hands.errors, hands.errors
    # Sampled every half second: never more than the two allocated nodes had a pod.
    assert max(len(live) for _t, live in hands.samples) == 2
    assert set(n for _t, live in hands.samples for n in live) == set(allocated)
    assert sorted(n for _t, a, n in hands.log if a == "create") == sorted(allocated)
    assert sorted(n for _t, a, n in hands.log if a == "delete") == sorted(allocated)
    # No pod went while the job ran: every deletion came after the job's end.
    end = int(parse_oneliner(cloud.run(["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "job", "-o", job])
                             .check().stdout)["EndTime"])
    assert all(t >= end for t, a, _n in hands.log if a == "delete")
    # The program recorded Slurm's two requests, with the job in the resume record.
    actions = [(rec[1], rec[2]) for rec in power_log(cloud)]
    assert ("resume", cloud.job(job)["NodeList"]) in actions and any(a == "suspend" for a, _h in actions)
    resume = next(rec for rec in power_log(cloud) if rec[1] == "resume")
    assert '"job_id":%s' % job in resume[3]
    print("elastic: submit -> running %.1f s (SuspendTime=%d, power_save_interval=1)"
          % (started - submitted, POWER["suspendTime"]))


def test_a_node_whose_pod_never_starts_is_handed_back_and_its_job_requeued(cloud):
    wait_for(lambda: powered_down(cloud), 60, "3 powered-down nodes", interval=0.5)
    with ElasticHands(cloud, fail={"demo-gpu-1"}) as hands:
        job = cloud.sbatch("-N2", "-w", "demo-gpu-[0-1]", script="#!/bin/sh\nsleep 1\n")
        wait_for(lambda: cloud.job(job)["Restarts"] == "1", 90, "the job requeued after ResumeTimeout",
                 interval=0.5)
        # Handed back by the planner (power down force): powered down and usable again, never a pod.
        wait_for(lambda: cloud.state("demo-gpu-1") == "idle~", 60, "demo-gpu-1 handed back", interval=0.5)
        assert ("power down force", "demo-gpu-1") in [(a, n) for _t, a, n in hands.log]
        assert "demo-gpu-1" not in [n for _t, a, n in hands.log if a == "create"]
        info = cloud.job(job)
        assert info["JobState"] == "PENDING"
        # The cause is fixed: the requeued job (made eligible now) gets both nodes and completes.
        hands.fail.clear()
        cloud.run(["scontrol", "update", f"jobid={job}", "StartTime=now"]).check()
        wait_for(lambda: cloud.job(job)["JobState"] == "COMPLETED", 120, "the requeued job to complete",
                 interval=0.5)
        assert cloud.job(job)["Restarts"] == "1"
        wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 90, "the nodes powered down",
                 interval=0.5)
    assert not hands.errors, hands.errors
    assert any(rec[1] == "resume-fail" and "demo-gpu-1" in rec[2] for rec in power_log(cloud))


def test_a_job_larger_than_the_set_is_refused_at_submission_and_powers_nothing(cloud):
    wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 60, "3 powered-down nodes, no pod",
             interval=0.5)
    before = len(power_log(cloud))
    path = cloud.root / "tmp/big.sh"
    path.write_text("#!/bin/sh\ntrue\n")
    res = cloud.run(["sbatch", "-N4", "/tmp/big.sh"], user="alice")
    assert res.returncode != 0 and "Requested node configuration is not available" in res.stderr
    assert len(power_log(cloud)) == before and cloud.running_nodes() == []


def test_hands_that_were_away_during_a_resume_catch_up_from_slurms_states(cloud):
    # The operator killed between Slurm's resume and the pods' creation: the request is not replayed from anywhere;
    # the next look at Slurm's node states makes the pods, and the job runs.
    wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 60, "3 powered-down nodes, no pod",
             interval=0.5)
    job = cloud.sbatch("-N2", script="#!/bin/sh\nsleep 1\n")
    wait_for(lambda: sum("POWERING_UP" in cloud.node(n).get("State", "") for n in ("demo-gpu-0", "demo-gpu-1",
                                                                                 "demo-gpu-2")) == 2,
             30, "Slurm powering up 2 nodes", interval=0.2)
    assert cloud.running_nodes() == []
    with ElasticHands(cloud) as hands:
        back = time.time()
        wait_for(lambda: len(cloud.running_nodes()) == 2, 30, "the 2 pods made", interval=0.2)
        caught_up = time.time() - back
        wait_for(lambda: cloud.job(job)["JobState"] == "COMPLETED", 90, "the job to complete", interval=0.5)
        wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 90, "the nodes powered down",
                 interval=0.5)
    assert not hands.errors, hands.errors
    print("elastic: pods made %.1f s after the hands came back" % caught_up)


def test_a_pod_left_from_an_earlier_power_up_is_replaced_at_the_resume(cloud):
    # The hands away for the whole power-down: demo-gpu-0's slurmd (its pod) keeps running though Slurm powered the
    # node down. At the next resume Slurm waits for a fresh slurmd (findings A.6); the planner tells the old pod by
    # Slurm's SlurmdStartTime and replaces it, so the job runs without waiting for ResumeTimeout (no requeue).
    wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 60, "3 powered-down nodes, no pod",
             interval=0.5)
    with ElasticHands(cloud) as hands:
        first = cloud.sbatch("-N1", "-w", "demo-gpu-0", script="#!/bin/sh\ntrue\n")
        wait_for(lambda: cloud.job(first)["JobState"] == "COMPLETED", 90, "the first job to complete", interval=0.5)
    assert not hands.errors, hands.errors
    wait_for(lambda: cloud.state("demo-gpu-0") == "idle~", 60, "demo-gpu-0 powered down by Slurm", interval=0.5)
    assert cloud.running_nodes() == ["demo-gpu-0"]  # its slurmd still runs: a pod nobody removed
    print("elastic: SlurmdStartTime of the powered-down node: %s" % cloud.node("demo-gpu-0").get("SlurmdStartTime"))
    job = cloud.sbatch("-N1", "-w", "demo-gpu-0", script="#!/bin/sh\ntrue\n")
    wait_for(lambda: "POWERING_UP" in cloud.node("demo-gpu-0").get("State", ""), 30, "demo-gpu-0 powering up",
             interval=0.2)
    with ElasticHands(cloud) as hands:
        wait_for(lambda: cloud.job(job)["JobState"] == "COMPLETED", 90, "the job to complete", interval=0.5)
        assert cloud.job(job)["Restarts"] == "0"
        assert [(a, n) for _t, a, n in hands.log][:2] == [("delete", "demo-gpu-0"), ("create", "demo-gpu-0")]
        wait_for(lambda: powered_down(cloud) and not cloud.running_nodes(), 90, "the nodes powered down",
                 interval=0.5)
    assert not hands.errors, hands.errors
