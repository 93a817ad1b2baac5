"""Network topology on real Slurm 24.11 (issue 25; docs/slurm-24.11-findings.md, part B).

Four nodes with fixed names (``NodeName=... State=CLOUD`` lines, as elastic NodeSets render them; no power saving here,
so each comes up when its slurmd starts) on two leaf switches under one spine. The leaves interleave the names
(leaf1 = nodes 0 and 2), so Slurm's plain lowest-names-first choice for ``-N2`` (nodes 0 and 1) crosses leaves and
only the topology keeps a ``--switches=1`` job on one leaf. A dynamic node (``slurmd -Z``) listed in topology.conf
shows what 24.11 does with names that do not exist when the topology is read.
"""

from __future__ import annotations

import pytest
from cloud_cluster import CloudCluster, CloudConfig, CloudSet, node_name
from prerequisites import require_root
from slurm_cluster import running, wait_for

LEAVES = {"leaf1": ["demo-gpu-0", "demo-gpu-2", "demo-cpu-0"], "leaf2": ["demo-gpu-1", "demo-gpu-3"]}
TOPOLOGY = ("SwitchName=leaf1 Nodes=demo-gpu-[0,2],demo-cpu-0\n"
            "SwitchName=leaf2 Nodes=demo-gpu-[1,3]\n"
            "SwitchName=spine Switches=leaf[1-2]\n")
# The relabel: nodes 1 and 2 swap leaves.
RELABELLED = ("SwitchName=leaf1 Nodes=demo-gpu-[0-1],demo-cpu-0\n"
              "SwitchName=leaf2 Nodes=demo-gpu-[2-3]\n"
              "SwitchName=spine Switches=leaf[1-2]\n")
GPUS = [node_name("gpu", i) for i in range(4)]


@pytest.fixture(scope="module")
def topo():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    config = CloudConfig(cloud_sets=[CloudSet("gpu", 4)], dynamic_sets=["cpu"], power={},
                         topology_plugin="topology/tree", topology=TOPOLOGY)
    with running(CloudCluster(config)) as c:
        for name in GPUS:
            c.start_node(name)
        wait_for(lambda: all(c.state(n) == "idle" for n in GPUS), 30, "the four nodes idle")
        yield c


def sbatch_wait(c: CloudCluster, *args: str) -> str:
    """Run a short batch job to its end (polled: ``sbatch --wait`` sleeps seconds between its checks); its NodeList."""
    res = c.run(["sbatch", "--parsable", "-o", "/dev/null", *args, "--wrap", "true"], user="alice").check()
    job = res.stdout.strip()
    wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 60, f"job {job} to complete", interval=0.2)
    return c.job(job)["NodeList"]


def switches(c: CloudCluster, node: str) -> list[str]:
    """The switches whose node set holds ``node`` (``scontrol show topology <node>``)."""
    out = c.run(["scontrol", "show", "topology", node]).check().stdout
    return [line.split()[0].split("=", 1)[1] for line in out.splitlines() if line.startswith("SwitchName=")]


def test_tree_is_read_and_switches_one_stays_on_a_leaf(topo):
    assert {n: switches(topo, n) for n in GPUS} == {
        "demo-gpu-0": ["leaf1", "spine"], "demo-gpu-1": ["leaf2", "spine"],
        "demo-gpu-2": ["leaf1", "spine"], "demo-gpu-3": ["leaf2", "spine"]}
    leaves = (["demo-gpu-0", "demo-gpu-2"], ["demo-gpu-1", "demo-gpu-3"])
    placements = [topo.expand(sbatch_wait(topo, "-N2", "--switches=1")) for _ in range(10)]
    # Node 0 busy: the only leaf with two free nodes is leaf2.
    filler = topo.sbatch("-N1", "-w", "demo-gpu-0", "--exclusive", script="#!/bin/sh\nsleep 300\n")
    try:
        wait_for(lambda: topo.job(filler)["JobState"] == "RUNNING", 30, "the filler job running")
        busy = [topo.expand(sbatch_wait(topo, "-N2", "--switches=1")) for _ in range(10)]
    finally:
        topo.run(["scancel", filler]).check()
    assert all(p in leaves for p in placements), placements
    assert busy == [leaves[1]] * 10


def test_dynamic_node_named_in_topology_is_unplaced_until_a_reconfigure(topo):
    """24.11: a ``slurmd -Z`` node that did not exist when topology.conf was read is in no switch; jobs on it are
    refused. A reconfigure while it exists places it. (Fixed names do not have this problem.)"""
    name = topo.start_node("demo-cpu-0", dynamic_conf="CPUs=2 RealMemory=500 Feature=cpu")
    res = topo.run(["sbatch", "-o", "/dev/null", "-w", name, "--wrap", "true"], user="alice")
    assert res.returncode != 0 and "Requested topology configuration is not available" in res.output
    assert "spine" not in switches(topo, name)
    pid = topo.slurmctld_pids()
    topo.reconfigure().check()
    wait_for(lambda: "spine" in switches(topo, name), 20, f"{name} placed after the reconfigure")
    assert switches(topo, name) == ["leaf1", "spine"]
    assert topo.slurmctld_pids() == pid
    assert topo.expand(sbatch_wait(topo, "-w", name)) == [name]


def test_relabel_applies_by_reconfigure_without_restart(topo):
    pid = topo.slurmctld_pids()
    topo.config.topology = RELABELLED
    topo.write_conf()
    try:
        topo.reconfigure().check()
        wait_for(lambda: switches(topo, "demo-gpu-1") == ["leaf1", "spine"], 20, "demo-gpu-1 moved to leaf1")
        assert switches(topo, "demo-gpu-2") == ["leaf2", "spine"]
        # The same slurmctld process: reconfigure re-executes slurmctld -D in place.
        assert topo.slurmctld_pids() == pid
        # Both one-leaf pairs of the new layout cross leaves in the old one.
        assert topo.expand(sbatch_wait(topo, "-N2", "--switches=1")) in (["demo-gpu-0", "demo-gpu-1"],
                                                                         ["demo-gpu-2", "demo-gpu-3"])
    finally:
        topo.config.topology = TOPOLOGY
        topo.write_conf()
        topo.reconfigure().check()


@pytest.fixture(scope="module")
def blocks():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    config = CloudConfig(cloud_sets=[CloudSet("gpu", 4)], power={}, topology_plugin="topology/block",
                         topology="BlockName=b1 Nodes=demo-gpu-[0,2]\nBlockName=b2 Nodes=demo-gpu-[1,3]\n"
                                  "BlockSizes=2,4\n")
    with running(CloudCluster(config)) as c:
        for name in GPUS:
            c.start_node(name)
        wait_for(lambda: all(c.state(n) == "idle" for n in GPUS), 30, "the four nodes idle")
        yield c


def test_block_segment(blocks):
    out = blocks.run(["scontrol", "show", "topology"]).check().stdout
    assert "BlockName=b1 BlockIndex=0 Nodes=demo-gpu-[0,2] BlockSize=2" in out
    assert "AggregatedBlock=b[1-2] BlockIndex=2 Nodes=demo-gpu-[0-3] BlockSize=4" in out
    # A 2-node segment is one block, whichever is free.
    assert blocks.expand(sbatch_wait(blocks, "-N2", "--segment=2")) in (["demo-gpu-0", "demo-gpu-2"],
                                                                         ["demo-gpu-1", "demo-gpu-3"])
    assert blocks.expand(sbatch_wait(blocks, "-N4", "--segment=2")) == GPUS
    # The segment size must divide the node count: refused at submission.
    res = blocks.run(["sbatch", "-N3", "--segment=2", "-o", "/dev/null", "--wrap", "true"], user="alice")
    assert res.returncode != 0 and "Requested topology configuration is not available" in res.output
