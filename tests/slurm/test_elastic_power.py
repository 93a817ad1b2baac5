"""Elastic NodeSets on real Slurm 24.11 (issue 24): the collection's own pieces against a real slurmctld.

slurm.conf's power-saving lines and the elastic set's ``State=CLOUD`` record are rendered by
``render/slurm_conf.power_saving_lines`` from a validated SlurmCluster and NodeSet (maximum 3); Slurm's
ResumeProgram/SuspendProgram/ResumeFailProgram are the controller image's ``soperator-power`` (run by slurmctld as
SlurmUser); every decision about the nodes' "pods" is ``plan/elastic.decide``, given Slurm's node table as the real
parser reads it. Only the hands are the harness's (``ElasticHands``): a pod is a slurmd started configless with the
rendered arguments (``-b``, no ``-Z``), a deleted pod a stopped slurmd, and ``scontrol power`` runs in the cluster,
as ``k8s/converger.act_elastic`` does through the API server and ``slurm_exec``.

Test-only: ``power_save_interval=1`` (the harness's default SlurmctldParameters) so Slurm looks every second, and
short SuspendTime/ResumeTimeout.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from cloud_cluster import CloudCluster, CloudConfig, parse_oneliner
from prerequisites import require_root
from resources import make_cluster, make_nodeset
from slurm_cluster import running, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.plan import elastic
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf, worker
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

PROGRAM = Path(__file__).resolve().parents[2] / "images/controller/soperator-power"
NODES = ["demo-gpu-0", "demo-gpu-1", "demo-gpu-2"]
TEMPLATE = "tmpl"  # the one template of these pods
POWER = {"suspendTime": 10, "suspendTimeout": 5, "resumeTimeout": 20}


def rendered_lines() -> str:
    cluster = spec.validate_cluster(make_cluster({"slurm": {"powerSaving": POWER}}))
    nodeset = spec.validate_nodeset(make_nodeset("gpu", {"elastic": {"maxNodes": 3},
                                                         "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}))
    return "\n".join(slurm_conf.power_saving_lines("demo", cluster["spec"]["slurm"], [nodeset])) + "\n"


class ElasticHands:
    """Carries out ``elastic.decide`` every ``poll`` seconds against the cluster; ``fail``: names whose pod never
    starts (unschedulable). ``samples``: the running "pods" at every look; ``log``: (time, action, name)."""

    def __init__(self, cluster: CloudCluster, fail=(), poll: float = 0.5):
        self.cluster, self.fail, self.poll = cluster, set(fail), poll
        self.samples: list[tuple[float, list[str]]] = []
        self.log: list[tuple[float, str, str]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self):
        while not self._stop.wait(self.poll):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001  the test reports what failed
                self.errors.append(repr(exc))

    def step(self):
        c = self.cluster
        out = c.run(["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "node", "-o"], timeout=20).check().stdout
        nodes = scontrol.parse_show_node(out)
        live = c.running_nodes()
        self.samples.append((time.time(), live))
        pods = {n: {"metadata": {"name": n, "uid": n, "annotations": {names.ANNOTATION_TEMPLATE_HASH: TEMPLATE}},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
                for n in live}
        d = elastic.decide(NODES, nodes, pods, TEMPLATE, 0)
        for name, _uid in d.delete:
            c.stop_node(name)
            self.log.append((time.time(), "delete", name))
        for name in d.create:
            if name in self.fail:
                continue
            # The rendered container's arguments, the pod name for $(SLURMD_NODENAME).
            args = worker.elastic_args()
            extra = tuple(a for a in args[args.index("-D") + 1:args.index("-N")])
            c.start_node(name, extra_args=extra, wait=None)
            self.log.append((time.time(), "create", name))
        for how, names_ in (("up", d.power_up), ("down asap", d.power_down), ("down force", d.power_down_force)):
            if names_:
                c.run(["scontrol", "power", *how.split(), ",".join(names_)]).check()
                self.log.append((time.time(), "power " + how, ",".join(names_)))


@pytest.fixture(scope="module")
def cloud():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    text = PROGRAM.read_text()
    config = CloudConfig(cloud_sets=[], dynamic_sets=["gpu"], power={}, extra=rendered_lines(),
                         programs=dict([(path, text) for _key, path in names.POWER_PROGRAMS]
                                       + [(names.WAIT_NODES_PROGRAM, text)]))
    with running(CloudCluster(config)) as c:
        # As the controller image does: SlurmUser owns slurmctld's log directory, where the program records.
        c.run(["chown", "slurm:slurm", "/var/log/slurm"]).check()
        yield c


def powered_down(c: CloudCluster) -> bool:
    states = c.states()
    return all(states.get(n) == "idle~" for n in NODES)


def power_log(c: CloudCluster) -> list[list[str]]:
    path = c.root / names.POWER_LOG.lstrip("/")
    return [line.split(" ", 3) for line in path.read_text().splitlines()] if path.exists() else []


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
    assert not hands.errors, hands.errors
    assert any(rec[1] == "resume-fail" and "demo-gpu-1" in rec[2] for rec in power_log(cloud))
