"""Block topology (NVLink domains; jobs use ``--segment``) of an elastic NodeSet on real Slurm 24.11 (issue 25).

``spec.topology.plugin: block`` is accepted only when every NodeSet is elastic (``api/spec.py``): their names are
``NodeName`` records of slurm.conf from the start (``elastic_cluster``: the rendered power-saving lines and CLOUD
record), so a block lists nodes slurmctld knows before any of them registers; with dynamic workers slurmctld 24.11
exits at start (docs/slurm-24.11-findings.md D). topology.conf is the planner's (``plan/node_labels.plan_topology``,
``render/topology``): the Kubernetes side is given as the planner sees it (the elastic pods' nodes, the nodes' labels),
and ``ElasticHands`` powers the nodes up and down as the operator does.
"""

from __future__ import annotations

import pytest
from cloud_cluster import CloudCluster, node_name
from elastic_cluster import ElasticCluster, ElasticHands, elastic_config, prepare_started
from prerequisites import require_root
from resources import make_cluster, make_nodeset
from slurm_cluster import running, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model, node_labels
from ansible_collections.soperator.slurm.plugins.module_utils.render import topology as topo

CLIQUE = "nvidia.com/gpu.clique"
NAMES = [node_name("gpu", i) for i in range(6)]
# The Kubernetes nodes' NVLink domains; the cliques interleave the names, so Slurm's plain lowest-names-first -N2
# (nodes 0 and 1) crosses blocks and only the topology keeps a segment in one.
K8S = {"k-0": "nvl1", "k-1": "nvl2", "k-2": "nvl1", "k-3": "nvl2"}
RAN = dict((NAMES[i], "k-%d" % i) for i in range(4))  # nodes 0-3 ran once; 4 and 5 never did
BLOCKS = {"nvl1": ["demo-gpu-0", "demo-gpu-2"], "nvl2": ["demo-gpu-1", "demo-gpu-3"],
          "unknown": ["demo-gpu-4", "demo-gpu-5"]}
SEGMENT_RUNS = 5


def validated():
    """The SlurmCluster (block) and its one elastic NodeSet, through the rule that refuses block otherwise."""
    cluster = make_cluster({"topology": {"plugin": "block", "levels": [CLIQUE]}}, uid="c-uid")
    nodeset = make_nodeset("gpu", {"elastic": {"maxNodes": len(NAMES)},
                                   "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}, uid="n-uid")
    cluster, (nodeset,) = specs.validate_cluster_with_nodesets(cluster, [nodeset])
    return cluster, nodeset


def rendered(pods: dict[str, str], live: str | None = None) -> str:
    """The planner's topology.conf: ``pods`` {elastic node: its Kubernetes node}, ``live`` the file decided last."""
    cluster, nodeset = validated()
    observed = {"pods": dict((n, {"metadata": {"name": n}, "spec": {"nodeName": h}}) for n, h in pods.items()),
                "slurm": None, "live_topology": live,
                "k8s_nodes": dict((h, {"unschedulable": False, "conditions": {}, "labels": {CLIQUE: v}})
                                  for h, v in K8S.items())}
    p = model.Draft()
    return node_labels.plan_topology(p, model.Context(cluster, [nodeset], [], {}, observed, 0), {})


def file_at_start() -> str:
    learnt = rendered(RAN)
    # Every node powered down again (no pod): each keeps the block its last pod's node gave it.
    kept = rendered({}, live=learnt)
    assert kept == learnt
    return kept


@pytest.fixture(scope="module")
def blocks():
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    config = elastic_config(max_nodes=len(NAMES), topology_plugin="topology/block", topology=file_at_start())
    cluster = ElasticCluster(config)
    cluster.nodes = NAMES
    with running(cluster) as c:
        prepare_started(c)
        yield c


def sbatch_wait(c: CloudCluster, *args: str) -> list[str]:
    res = c.run(["sbatch", "--parsable", "-o", "/dev/null", *args, "--wrap", "true"], user="alice").check()
    job = res.stdout.strip()
    wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 90, f"job {job} to complete", interval=0.3)
    return c.expand(c.job(job)["NodeList"])


def shown(c: CloudCluster) -> str:
    return c.run(["scontrol", "show", "topology"]).check().stdout


def test_slurmctld_starts_with_the_rendered_blocks_while_no_node_is_registered(blocks):
    assert blocks.config.topology == topo.HEADER + "\n" + (
        "BlockName=nvl1 Nodes=demo-gpu-[0,2]\nBlockName=nvl2 Nodes=demo-gpu-[1,3]\n"
        "BlockName=unknown Nodes=demo-gpu-[4-5]\nBlockSizes=2\n")
    assert blocks.running_nodes() == []  # no slurmd ever started: every node powered down, none registered
    out = shown(blocks)
    assert "BlockName=nvl1 BlockIndex=0 Nodes=demo-gpu-[0,2] BlockSize=2" in out
    assert "BlockName=nvl2 BlockIndex=1 Nodes=demo-gpu-[1,3] BlockSize=2" in out
    assert "BlockName=unknown BlockIndex=2 Nodes=demo-gpu-[4-5] BlockSize=2" in out


def test_a_two_node_segment_lands_in_one_block_powering_up_only_its_nodes(blocks):
    groups = [set(b) for b in BLOCKS.values()]
    placements, busy = [], []
    with ElasticHands(blocks, nodes=NAMES) as hands:
        for _ in range(SEGMENT_RUNS):
            placements.append(sbatch_wait(blocks, "-N2", "--segment=2"))
        # Node 4 busy: unknown cannot hold a segment; the interleaved blocks can, which plain -N2 (nodes 0 and 1)
        # would cross.
        filler = blocks.sbatch("-N1", "-w", "demo-gpu-4", "--exclusive", script="#!/bin/sh\nsleep 300\n")
        try:
            wait_for(lambda: blocks.job(filler)["JobState"] == "RUNNING", 60, "the filler job running")
            for _ in range(SEGMENT_RUNS):
                busy.append(sbatch_wait(blocks, "-N2", "--segment=2"))
        finally:
            blocks.run(["scancel", filler]).check()
    assert not hands.errors, hands.errors
    print("block: -N2 --segment=2 placements %s; node 4 busy: %s" % (placements, busy))
    assert all(any(set(p) <= g for g in groups) and len(p) == 2 for p in placements), placements
    assert all(p in (BLOCKS["nvl1"], BLOCKS["nvl2"]) for p in busy), busy
    # Only nodes of those jobs were ever given a pod.
    jobs_nodes = set(n for p in placements + busy for n in p) | {"demo-gpu-4"}
    assert set(n for _t, a, n in hands.log if a == "create") <= jobs_nodes


def test_a_later_smaller_block_is_applied_by_reconfigure_and_caps_the_segment(blocks):
    """Node 4 powered up on an nvl1 node: nvl1 grows to 3, unknown shrinks to 1. Without ``BlockSizes`` 24.11 would take
    the first block's 3 as the base size and exit at this reconfigure; the rendered BlockSizes=1 keeps it running, and
    the base size (the smallest block) is then the largest segment a job may ask."""
    before = blocks.config.topology
    after = rendered({"demo-gpu-4": "k-0"}, live=before)
    assert after.splitlines()[1:] == ["BlockName=nvl1 Nodes=demo-gpu-[0,2,4]", "BlockName=nvl2 Nodes=demo-gpu-[1,3]",
                                      "BlockName=unknown Nodes=demo-gpu-5", "BlockSizes=1"]
    pid = blocks.slurmctld_pids()
    blocks.config.topology = after
    blocks.write_conf()
    try:
        blocks.reconfigure().check()
        wait_for(lambda: "Nodes=demo-gpu-[0,2,4]" in shown(blocks), 20, "nvl1 with node 4")
        assert blocks.slurmctld_pids() == pid
        res = blocks.run(["sbatch", "-N2", "--segment=2", "-o", "/dev/null", "--wrap", "true"], user="alice")
        print("block: -N2 --segment=2 with BlockSizes=1: rc %d %s" % (res.returncode, res.output.strip()))
        assert res.returncode != 0 and "Requested topology configuration is not available" in res.output
        with ElasticHands(blocks, nodes=NAMES) as hands:
            assert len(sbatch_wait(blocks, "-N1", "--segment=1")) == 1
        assert not hands.errors, hands.errors
    finally:
        blocks.config.topology = before
        blocks.write_conf()
        blocks.reconfigure().check()
    wait_for(lambda: "Nodes=demo-gpu-[0,2] " in shown(blocks), 20, "the first file back")


def test_without_block_sizes_a_later_smaller_block_ends_slurmctld():
    """Why the renderer states BlockSizes: 24.11 takes the first block's node count as the base size and exits when a
    later block has fewer (the file of the test above, its BlockSizes line left out)."""
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    unsized = "\n".join(line for line in rendered({"demo-gpu-4": "k-0"}, live=file_at_start()).splitlines()
                        if not line.startswith("BlockSizes=")) + "\n"
    c = ElasticCluster(elastic_config(max_nodes=len(NAMES), topology_plugin="topology/block", topology=unsized))
    c.nodes = NAMES
    try:
        c.prepare()
        with pytest.raises(Exception):  # noqa: B017  slurmctld never answers: start() gives up
            c.start(timeout=15)
        assert "children count lower than bblock_node_cnt" in c.log("slurmctld.log")
    finally:
        c.stop()
        c.remove()
