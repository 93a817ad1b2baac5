"""A partition setting changed through the SlurmCluster, applied in place on real Slurm 24.11 (issue 25).

slurmctld runs in the foreground (``-D``), as the controller container runs it. The planner (plan/slurm_config.py,
through the whole converge plan) decides from what it is shown: the SlurmCluster's status, the controller pod's
restart hash and its mounted slurm.conf; the harness does what the adapter and the kubelet do: the ConfigMap reaching
the pod (the rendered partition lines written into the harness's slurm.conf), ``scontrol reconfigure`` when the plan
asks, the pod replaced when its restart hash changed (slurmctld stopped and started again on its spool).
"""

from __future__ import annotations

import threading
import time

import pytest
from cloud_cluster import CloudCluster, CloudConfig, node_name
from prerequisites import require_root
from resources import make_cluster, make_nodeset
from slurm_cluster import running, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, decided, slurm_config
from ansible_collections.soperator.slurm.plugins.module_utils.render import controller
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

NODES = [node_name("cpu", i) for i in range(2)]
DYNAMIC = "CPUs=2 RealMemory=500 Feature=cpu"
UNLIMITED = [{"name": "main", "default": True}]
ONE_HOUR = [{"name": "main", "default": True, "maxTime": "1:00:00", "config": {"PriorityTier": "5"}}]
SAMPLE_EVERY = 0.2


class Lines:
    """A rendered slurm.conf line where the harness wants a Partition."""

    def __init__(self, text: str):
        self.text = text

    def line(self) -> str:
        return self.text


class DynamicCluster(CloudCluster):
    def wait_nodes_idle(self, timeout: float = 60) -> None:
        return None


class Converge:
    """The SlurmCluster's side: its spec now, its status, the controller pod's restart hash, its mounted file."""

    def __init__(self, partitions: list[dict]):
        self.spec: dict = {"partitions": partitions}
        self.status: dict | None = None
        self.files = self.render()
        self.pod_hash = controller.restart_digest(self.files)
        self.mounted = self.files["slurm.conf"]
        self.reconfigures = 0

    def objects(self):
        cluster = make_cluster(self.spec, uid="c-uid")
        if self.status:
            cluster["status"] = {"slurmConfig": self.status}
        return cluster, [make_nodeset("cpu", {"replicas": len(NODES)}, uid="n-uid")]

    def render(self) -> dict:
        cluster, nodesets = self.objects()
        p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": None}, time.time())
        return slurm_config.rendered_files(p.objects.manifests, "demo")

    def partition_lines(self) -> list[Lines]:
        return [Lines(line) for line in self.render()["slurm.conf"].splitlines() if line.startswith("PartitionName=")]

    def plan(self, c: CloudCluster) -> decided.Plan:
        cluster, nodesets = self.objects()
        pod = {"metadata": {"name": names.controller_pod("demo"), "uid": "ctl",
                            "annotations": {names.ANNOTATION_CONFIG_HASH: self.pod_hash}}}
        observed = {"statefulsets": {}, "pods": {pod["metadata"]["name"]: pod}, "mounted_slurm_conf": self.mounted,
                    "slurm": scontrol.parse_show_node(c.run(["scontrol", "show", "node", "-o"]).check().stdout)}
        return converge.plan(cluster, nodesets, observed, time.time())

    def sync(self, c: CloudCluster) -> None:
        """The kubelet: the ConfigMap's new slurm.conf in the controller pod."""
        c.config.partitions = self.partition_lines()
        c.write_conf()
        self.mounted = self.render()["slurm.conf"]

    def act(self, c: CloudCluster, p: decided.Plan) -> None:
        if p.slurm.reconfigure:
            c.reconfigure().check()
            self.reconfigures += 1
        self.status = p.report.slurm_config


class Sampler:
    """``squeue`` every 0.2 s in a thread: each answer's exit status and latency."""

    def __init__(self, c: CloudCluster):
        self.c = c
        self.samples: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            res = self.c.run(["squeue", "-h"], timeout=20)
            took = time.monotonic() - start
            self.samples.append((res.returncode, took))
            self._stop.wait(max(0.0, SAMPLE_EVERY - took))

    @property
    def failures(self) -> list[tuple[int, float]]:
        return [s for s in self.samples if s[0] != 0]


def partition(c: CloudCluster) -> dict[str, str]:
    out = c.run(["scontrol", "show", "partition", "main", "-o"]).check().stdout
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


@pytest.fixture(scope="module")
def ctl():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    conv = Converge(UNLIMITED)
    config = CloudConfig(cloud_sets=[], dynamic_sets=["cpu"], power={}, partitions=conv.partition_lines())
    with running(DynamicCluster(config)) as c:
        for name in NODES:
            c.start_node(name, dynamic_conf=DYNAMIC)
        wait_for(lambda: all(c.state(n) == "idle" for n in NODES), 30, "the nodes idle")
        # Settled: slurmctld has the file it started with (the first converge records it).
        conv.act(c, conv.plan(c))
        yield c, conv


def test_a_partition_change_is_applied_by_one_reconfigure_and_squeue_answers_throughout(ctl):
    c, conv = ctl
    jobs = [c.sbatch("-N1", script="#!/bin/sh\nsleep 300\n") for _ in range(2)]
    wait_for(lambda: all(c.job(j)["JobState"] == "RUNNING" for j in jobs), 30, "two jobs running")
    assert partition(c)["MaxTime"] == "UNLIMITED"
    pid, before = c.slurmctld_pids(), conv.reconfigures
    conv.spec["partitions"] = ONE_HOUR
    # The controller pod's template is the same: the pod is not replaced.
    assert controller.restart_digest(conv.render()) == conv.pod_hash
    with Sampler(c) as sampler:
        waiting = conv.plan(c)  # the ConfigMap written, the pod's copy not yet
        conv.act(c, waiting)
        assert not waiting.slurm.reconfigure and any("see the new file" in w for w in waiting.report.pending)
        conv.sync(c)
        applied = conv.plan(c)
        conv.act(c, applied)
        assert applied.slurm.reconfigure and applied.report.slurm_config["appliedBy"] == "Reconfigured"
        wait_for(lambda: partition(c)["MaxTime"] == "01:00:00", 20, "MaxTime applied")
        again = conv.plan(c)
        assert not again.slurm.reconfigure and not again.read_mounted_config and not again.report.pending
        time.sleep(2)  # samples after the reconfigure, too
    assert partition(c)["PriorityTier"] == "5"
    assert conv.reconfigures == before + 1
    assert c.slurmctld_pids() == pid
    assert sampler.failures == [] and len(sampler.samples) >= 5, sampler.samples
    print("\nin place: %d squeue samples, 0 failed, slowest %.3f s; slurmctld pid %s kept"
          % (len(sampler.samples), max(s[1] for s in sampler.samples), pid))
    # Running jobs keep their limit; a new job gets the partition's.
    assert all(c.job(j)["JobState"] == "RUNNING" and c.job(j)["TimeLimit"] == "UNLIMITED" for j in jobs)
    held = c.sbatch("--hold", script="#!/bin/sh\ntrue\n")
    assert c.job(held)["TimeLimit"] == "01:00:00"


def test_a_key_that_needs_a_restart_waits_for_the_new_pod_and_the_queue_is_kept(ctl):
    """CommunicationParameters is a listening setting (config_keys.RESTART_KEYS): the planner leaves it to the pod's
    replacement. The harness keeps its own CommunicationParameters (its nodes need NoInAddrAny): what is real here is
    the decision and slurmctld restarted on its spool with the queue."""
    c, conv = ctl
    queue = sorted(c.run(["squeue", "-h", "-o", "%i:%T"]).check().stdout.split())
    assert queue, "the previous test's jobs"
    pid = c.slurmctld_pids()
    conv.spec.setdefault("slurm", {})["slurmConf"] = {"CommunicationParameters": "NoInAddrAny,block_null_hash"}
    new_hash = controller.restart_digest(conv.render())
    assert new_hash != conv.pod_hash
    conv.sync(c)  # the ConfigMap reaches the old pod too: still no reconfigure for a restart key
    rolling = conv.plan(c)
    conv.act(c, rolling)
    assert not rolling.slurm.reconfigure and any("needs a restart" in w for w in rolling.report.pending)
    # The StatefulSet replaces the pod: slurmctld stops and starts again on the same spool.
    c.run(["kill", "-TERM", *pid]).check()
    wait_for(lambda: not c.slurmctld_pids(), 30, "slurmctld to stop")
    c.run(["sh", "-c", "/usr/sbin/slurmctld -D >/dev/null 2>&1 </dev/null &"]).check()
    wait_for(lambda: c.run(["scontrol", "ping"]).returncode == 0, 60, "the new slurmctld to answer")
    conv.pod_hash = new_hash
    restarted = conv.plan(c)
    conv.act(c, restarted)
    assert restarted.report.slurm_config["appliedBy"] == "Restarted"
    assert c.slurmctld_pids() != pid
    assert sorted(c.run(["squeue", "-h", "-o", "%i:%T"]).check().stdout.split()) == queue
    assert partition(c)["MaxTime"] == "01:00:00"
