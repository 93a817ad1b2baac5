"""Features and topology from Kubernetes node labels on real Slurm 24.11 (issue 25), decided by the planner.

The workers are dynamic nodes (``slurmd -Z``, as render/worker.py starts them) named as their pods. The Kubernetes
side is given as the planner sees it (pods on nodes, the nodes' labels); Slurm's side is read from the real
slurmctld (``scontrol show node -o``, ``scontrol show topology``) and the file the controller has. What the plan says
is done as the adapter does it: topology.conf written (the ConfigMap reaching the pod), ``scontrol update`` of
features, ``scontrol reconfigure``.
"""

from __future__ import annotations

import pytest
from cloud_cluster import CloudCluster, CloudConfig, Partition, node_name
from prerequisites import require_root
from resources import make_cluster, make_nodeset
from slurm_cluster import running, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model, node_labels
from ansible_collections.soperator.slurm.plugins.module_utils.render.topology import render_topology_conf
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

NODES = [node_name("cpu", i) for i in range(4)]
PREFIX = "feature.node.kubernetes.io/"
LEAF, SPINE = "network.topology.example/leaf", "network.topology.example/spine"
# Leaves interleave the names, so plain lowest-names-first -N2 (nodes 0 and 1) crosses leaves.
TWO_LEAVES = {"node-0": {LEAF: "leaf1", SPINE: "spine"}, "node-1": {LEAF: "leaf2", SPINE: "spine"},
              "node-2": {LEAF: "leaf1", SPINE: "spine"}, "node-3": {LEAF: "leaf2", SPINE: "spine"}}
DYNAMIC = "CPUs=2 RealMemory=500 Feature=cpu"


class DynamicCluster(CloudCluster):
    """The harness with dynamic nodes only: no cloud node to wait for at start."""

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        return None


class Converge:
    """One reconcile against the real slurmctld: observe, plan (pure), act as the adapter does."""

    def __init__(self, c: CloudCluster, cluster_spec: dict, nodeset_spec: dict, others: tuple[str, ...] = ()):
        self.c = c
        self.cluster = specs.validate_cluster(make_cluster(cluster_spec, uid="c-uid"))
        self.nodeset = specs.validate_nodeset(make_nodeset("cpu", nodeset_spec, uid="n-uid"))
        self.others = [specs.validate_nodeset(make_nodeset(n, {}, uid="n-uid-" + n)) for n in others]
        self.labels: dict[str, dict[str, str]] = dict((f"node-{i}", {}) for i in range(4))
        self.reconfigures = 0
        self.features_set = 0

    def observed(self):
        sts = names.worker_name("demo", "cpu")
        pods = dict((n, {"metadata": {"name": n, "uid": "u-" + n}, "spec": {"nodeName": f"node-{i}"}})
                    for i, n in enumerate(NODES))
        topology = self.c.root / "etc/slurm/topology.conf"
        return {"statefulsets": {sts: {"metadata": {"name": sts}, "spec": {"replicas": len(NODES)}}}, "pods": pods,
                "slurm": scontrol.parse_show_node(self.c.run(["scontrol", "show", "node", "-o"]).check().stdout),
                "slurm_topology": scontrol.parse_show_topology(
                    self.c.run(["scontrol", "show", "topology"]).check().stdout),
                "mounted_topology": topology.read_text() if topology.exists() else None,
                "k8s_nodes": dict((h, {"unschedulable": False, "conditions": {}, "labels": dict(lab)})
                                  for h, lab in self.labels.items())}

    def plan(self) -> model.Draft:
        ctx = model.Context(self.cluster, [self.nodeset] + self.others, [], {}, self.observed(), 0)
        p = model.Draft()
        p.nodesets["cpu"] = {}
        node_labels.plan_topology(p, ctx, {"cpu": len(NODES)})
        node_labels.plan_features(p, ctx)
        return p

    def sync_file(self, p: model.Draft) -> None:
        """The ConfigMap reaching the controller pod (kubelet sync)."""
        if p.topology is not None:
            self.c.config.topology = p.topology
            self.c.write_conf()

    def act(self, p: model.Draft) -> None:
        for node, features in sorted(p.set_features.items()):
            self.c.run(scontrol.features_update(node, features)).check()
            self.features_set += 1
        if p.reconfigure:
            self.c.reconfigure().check()
            self.reconfigures += 1
        self.nodeset["status"] = {"labelFeatures": p.nodesets["cpu"].get("labelFeatures") or {}}

    def converge(self) -> model.Draft:
        p = self.plan()
        self.sync_file(p)
        self.act(self.plan())
        return p


def start(plugin: str, levels: list[str], nodeset_spec: dict | None = None):
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    cluster_spec = {"topology": {"plugin": plugin, "levels": levels}}
    # As rendered before any label is read: every worker name under "unknown".
    first = render_topology_conf(plugin, NODES, {})
    config = CloudConfig(cloud_sets=[], dynamic_sets=["cpu"], power={}, topology_plugin="topology/" + plugin,
                         topology=first)
    return cluster_spec, config


def switches(c: CloudCluster, node: str) -> list[str]:
    out = c.run(["scontrol", "show", "topology", node]).check().stdout
    return [line.split()[0].split("=", 1)[1] for line in out.splitlines() if line.startswith(("SwitchName=",
                                                                                           "BlockName="))]


def sbatch_wait(c: CloudCluster, *args: str) -> list[str]:
    res = c.run(["sbatch", "--parsable", "-o", "/dev/null", *args, "--wrap", "true"], user="alice").check()
    job = res.stdout.strip()
    wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 60, f"job {job} to complete", interval=0.2)
    return c.expand(c.job(job)["NodeList"])


@pytest.fixture(scope="module")
def tree():
    cluster_spec, config = start("tree", [LEAF, SPINE])
    with running(DynamicCluster(config)) as c:
        for name in NODES:
            c.start_node(name, dynamic_conf=DYNAMIC)
        wait_for(lambda: all(c.state(n) == "idle" for n in NODES), 30, "the four nodes idle")
        yield c, Converge(c, cluster_spec, {"featureLabelPrefix": PREFIX, "features": ["fast"]})


def test_labels_give_the_tree_by_one_reconfigure_and_switches_one_stays_on_a_leaf(tree):
    c, conv = tree
    conv.labels = {h: dict(lab) for h, lab in TWO_LEAVES.items()}
    pid = c.slurmctld_pids()
    conv.converge()
    assert conv.reconfigures == 1
    assert {n: switches(c, n) for n in NODES} == {
        "demo-cpu-0": ["leaf1", "spine"], "demo-cpu-1": ["leaf2", "spine"],
        "demo-cpu-2": ["leaf1", "spine"], "demo-cpu-3": ["leaf2", "spine"]}
    out = c.run(["scontrol", "show", "topology"]).check().stdout
    assert [line.split()[0] for line in out.splitlines()] == ["SwitchName=leaf1", "SwitchName=leaf2",
                                                              "SwitchName=spine"]
    # Settled: another pass asks nothing.
    again = conv.plan()
    assert again.reconfigure is None and not again.pending
    assert c.slurmctld_pids() == pid
    placements = [sbatch_wait(c, "-N2", "--switches=1") for _ in range(20)]
    assert all(p in (["demo-cpu-0", "demo-cpu-2"], ["demo-cpu-1", "demo-cpu-3"]) for p in placements), placements


def test_a_relabel_burst_is_one_reconfigure_and_running_jobs_go_on(tree):
    c, conv = tree
    conv.labels = {h: dict(lab) for h, lab in TWO_LEAVES.items()}
    conv.converge()
    before = conv.reconfigures
    pid = c.slurmctld_pids()
    job = c.sbatch("-N1", "-w", "demo-cpu-1", script="#!/bin/sh\nsleep 60\n")
    wait_for(lambda: c.job(job)["JobState"] == "RUNNING", 30, "a job running on demo-cpu-1")
    # A burst: three label changes before the controller pod sees the file; each pass waits, none reconfigures.
    for host, leaf in (("node-1", "leaf1"), ("node-2", "leaf2"), ("node-3", "leaf2")):
        conv.labels[host][LEAF] = leaf
        p = conv.plan()
        conv.act(p)
        assert p.reconfigure is None and p.pending
    conv.sync_file(conv.plan())
    conv.act(conv.plan())
    conv.act(conv.plan())
    assert conv.reconfigures == before + 1
    assert switches(c, "demo-cpu-1") == ["leaf1", "spine"] and switches(c, "demo-cpu-2") == ["leaf2", "spine"]
    assert c.slurmctld_pids() == pid and c.job(job)["JobState"] == "RUNNING"
    c.run(["scancel", job]).check()


def test_a_feature_label_is_a_constraint_and_its_removal_leaves_the_others(tree):
    c, conv = tree
    c.run(["scontrol", "update", "nodename=demo-cpu-0", "availablefeatures=cpu,rack7",
           "activefeatures=cpu,rack7"]).check()  # an administrator's feature
    conv.labels["node-0"][PREFIX + "ib"] = "true"
    conv.converge()
    assert scontrol.parse_show_node(c.run(["scontrol", "show", "node", "-o", "demo-cpu-0"]).check().stdout)[
        "demo-cpu-0"]["features"] == ["cpu", "rack7", "ib"]
    # Placed by Slurm (a switch above its leaf holds it), else jobs needing it are refused "Requested topology
    # configuration is not available".
    assert "demo-cpu-0" in scontrol.parse_show_topology(c.run(["scontrol", "show", "topology"]).check().stdout)
    assert all(sbatch_wait(c, "--constraint=ib") == ["demo-cpu-0"] for _ in range(5))
    # Kept across a reconfigure (dynamic nodes: findings B.3).
    c.reconfigure().check()
    wait_for(lambda: "ib" in c.node("demo-cpu-0").get("AvailableFeatures", ""), 20, "ib kept")
    del conv.labels["node-0"][PREFIX + "ib"]
    conv.converge()
    assert c.node("demo-cpu-0")["AvailableFeatures"] == "cpu,rack7"
    # No node offers ib now: refused. 24.11 keeps a feature's name once seen (scontrol update clears only its nodes,
    # node_features_update_list) until the next reconfigure rebuilds the list, so the refusal says "no node" rather
    # than "no such feature".
    res = c.run(["sbatch", "-o", "/dev/null", "--constraint=ib", "--wrap", "true"], user="alice")
    assert res.returncode != 0 and ("Requested node configuration is not available" in res.output
                                    or "Invalid feature specification" in res.output), res.output


def test_a_bad_label_value_is_refused_and_nothing_changes(tree):
    c, conv = tree
    conv.converge()
    text = (c.root / "etc/slurm/topology.conf").read_text()
    features = c.node("demo-cpu-3")["AvailableFeatures"]
    conv.labels["node-3"] = {LEAF: "a,b", SPINE: "spine", PREFIX + "x": "a=b"}
    p = conv.converge()
    assert (c.root / "etc/slurm/topology.conf").read_text() == text
    assert c.node("demo-cpu-3")["AvailableFeatures"] == features
    assert len(p.label_events) == 2


def partition_nodes(c: CloudCluster, partition: str) -> list[str]:
    out = c.run(["scontrol", "show", "partition", partition, "-o"]).check().stdout
    nodes = next(w.split("=", 1)[1] for w in out.split() if w.startswith("Nodes="))
    return [] if nodes == "(null)" else c.expand(nodes)


def test_a_label_naming_another_nodeset_never_puts_the_node_into_its_partitions():
    """slurm.conf's NodeSet=gpu Feature=gpu takes every node with the feature gpu into NodeSet gpu's partitions (the
    control: set by hand, after a reconfigure); a label giving a cpu worker that feature is refused by the planner."""
    require_root("real-Slurm tests: namespaces, chroot and mounts")
    config = CloudConfig(cloud_sets=[], dynamic_sets=["cpu", "gpu"], power={},
                         partitions=[Partition("cpus", "cpu", "Default=YES MaxTime=INFINITE State=UP"),
                                     Partition("gpus", "gpu")])
    with running(DynamicCluster(config)) as c:
        c.start_node("demo-cpu-0", dynamic_conf=DYNAMIC)
        wait_for(lambda: c.state("demo-cpu-0") == "idle", 30, "demo-cpu-0 idle")
        conv = Converge(c, {}, {"featureLabelPrefix": PREFIX}, others=("gpu",))
        conv.labels["node-0"] = {PREFIX + "gpu": "true", PREFIX + "ib": "true"}
        p = conv.converge()
        assert c.node("demo-cpu-0")["AvailableFeatures"] == "cpu,ib"
        assert any("NodeSet gpu" in m for _set, m in p.label_events), p.label_events
        c.reconfigure().check()
        wait_for(lambda: c.state("demo-cpu-0") == "idle", 30, "demo-cpu-0 idle after the reconfigure")
        assert partition_nodes(c, "gpus") == [] and partition_nodes(c, "cpus") == ["demo-cpu-0"]
        # The control: the feature the planner refused, set by hand, moves the node into gpus.
        c.run(scontrol.features_update("demo-cpu-0", ["cpu", "ib", "gpu"])).check()
        c.reconfigure().check()
        wait_for(lambda: partition_nodes(c, "gpus") == ["demo-cpu-0"], 30, "demo-cpu-0 in partition gpus")
