"""NodeSet modes behind one interface (plan/modes.py): a fourth mode, defined here and nowhere in the planners, is
drained for maintenance and resumed after it, given features from its nodes' labels, placed in topology.conf and
rolled, by the planners as they are; and the planners that span every NodeSet never look at mode-specific lists."""

import ast
import os

import pytest
from planning import NOW, context, line, pod, slurm

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import maintenance, model, modes, node_labels, rolls

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLAN = os.path.join(ROOT, "plugins", "module_utils", "plan")
DUMMY = "batch-pool"
HOSTS = {"demo-pool-a": "k1", "demo-pool-b": "k2"}  # its workers, named for the pool's slots, on two nodes


class BatchPool(modes.Mode):
    """A mode no planner knows: a fixed list of named slots (``spec.slots``), a pod each, Slurm knowing each slot by its
    pod's name. It implements the protocol and nothing else."""

    key = DUMMY

    def pods(self, ctx, view):
        return dict((n, p) for n, p in ctx.pods.items() if n in HOSTS and not model.deleting(p))

    def nodes(self, ctx, view):
        return sorted(HOSTS)

    def maintenance(self, p, ctx, view):
        busy = []
        for node_name in self.nodes(ctx, view):
            node = ctx.slurm.get(node_name)
            if node is not None and not node["drain"]:
                p.drain_node(node_name, names.REASON_MAINTENANCE)
            if node is not None and node["busy"]:
                busy.append(node_name)
        return busy

    def maintenance_done(self, p, ctx, view):
        p.pending.append("batch-pool: maintenance done")


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setitem(modes.MODES, DUMMY, BatchPool())

    def ctx(slurm_lines, cluster_spec=None, k8s_nodes=None, nodeset_spec=None):
        pods = {}
        for pod_name, host in HOSTS.items():
            pods[pod_name] = pod(pod_name)
            pods[pod_name]["spec"] = {"nodeName": host}
        observed = {"pods": pods, "slurm": slurm(*slurm_lines), "k8s_nodes": k8s_nodes,
                    "statefulsets": {names.controller_name("demo"): {"metadata": {"name": "demo-controller"},
                                                                     "spec": {"replicas": 1}}}}
        c = context(cluster_spec=cluster_spec, nodesets=(("pool", dict(nodeset_spec or {})),), observed=observed)
        c.views[0].mode = DUMMY  # the classification (values.mode) knows no such mode: the view says it
        return c
    return ctx


def test_maintenance_drains_the_fourth_modes_workers_waits_for_their_jobs_and_resumes_them_after(pool):
    ctx = pool([line("demo-pool-a", "ALLOCATED", cpus_alloc=1), line("demo-pool-b")], {"maintenance": True})
    p = model.Draft()
    assert maintenance.plan_maintenance(p, ctx) is False
    assert p.drain == {names.REASON_MAINTENANCE: ["demo-pool-a", "demo-pool-b"]}
    assert "maintenance waits for demo-pool-a to drain" in p.pending
    ctx = pool([line("demo-pool-a", "IDLE+DRAIN", names.REASON_MAINTENANCE),
                line("demo-pool-b", "IDLE+DRAIN", names.REASON_MAINTENANCE)], {"maintenance": True})
    p = model.Draft()
    assert maintenance.plan_maintenance(p, ctx) is True and p.pending == ["batch-pool: maintenance done"]
    # Maintenance over: our drains on its nodes are resumed; a health drain is resumed once the program is off.
    ctx = pool([line("demo-pool-a", "IDLE+DRAIN", names.REASON_MAINTENANCE),
                line("demo-pool-b", "IDLE+DRAIN", names.HEALTH_REASON_PREFIX + " gpu: lost")],
               {"healthChecks": {"enabled": False}})
    p = model.Draft()
    maintenance.plan_maintenance(p, ctx)
    assert p.resume == ["demo-pool-a", "demo-pool-b"]


def test_its_workers_running_keep_slurmctlds_older_slurm_user(pool):
    ctx = pool([line("demo-pool-a")])
    ctx.statefulsets[names.controller_name("demo")]["spec"]["template"] = {
        "metadata": {"annotations": {names.ANNOTATION_SLURM_USER: names.SLURM_USER_BEFORE_ANNOTATION}}}
    p = model.Draft()
    assert maintenance.plan_slurm_user(p, ctx, False) == names.SLURM_USER_BEFORE_ANNOTATION
    assert p.slurm_user_kept


def test_features_come_from_the_labels_of_its_workers_nodes(pool):
    k8s = {"k1": {"labels": {"feature.example.com/ib": "true"}}, "k2": {"labels": {}}}
    ctx = pool([line("demo-pool-a"), line("demo-pool-b")], k8s_nodes=k8s,
               nodeset_spec={"featureLabelPrefix": "feature.example.com/"})
    p = model.Draft()
    node_labels.plan_features(p, ctx)
    assert p.set_features == {"demo-pool-a": ["ib"]}
    assert p.nodesets["pool"]["labelFeatures"] == {"demo-pool-a": ["ib"]}


def test_topology_places_its_workers_by_their_nodes_labels(pool):
    k8s = {"k1": {"labels": {"topology.example.com/leaf": "leaf1"}},
           "k2": {"labels": {"topology.example.com/leaf": "leaf2"}}}
    ctx = pool([line("demo-pool-a"), line("demo-pool-b")], k8s_nodes=k8s,
               cluster_spec={"topology": {"levels": ["topology.example.com/leaf"]}})
    p = model.Draft()
    text = node_labels.plan_topology(p, ctx, {})
    assert "SwitchName=leaf1 Nodes=demo-pool-a" in text and "SwitchName=leaf2 Nodes=demo-pool-b" in text


def test_a_changed_template_rolls_its_pods_through_rolls_as_it_is(pool):
    """A mode's own planner replaces its outdated pods with rolls.roll_pods (drain, replace once idle, resume), as
    every-node does: nothing in rolls.py knows the mode."""
    ctx = pool([line("demo-pool-a"), line("demo-pool-b")])
    view = ctx.views[0]
    mine = modes.of(view).pods(ctx, view)
    p = model.Draft()
    p.nodesets["pool"] = {}
    rolls.roll_pods(p, view.nodeset, sorted(mine), mine, {"demo-pool-b"}, ctx.slurm, NOW)
    assert p.drain == {names.REASON_UPDATE: ["demo-pool-a"]} and p.delete_pods == []
    ctx = pool([line("demo-pool-a", "IDLE+DRAIN", names.REASON_UPDATE), line("demo-pool-b")])
    p = model.Draft()
    p.nodesets["pool"] = {}
    rolls.roll_pods(p, view.nodeset, sorted(mine), modes.of(view).pods(ctx, view), {"demo-pool-b"}, ctx.slurm, NOW)
    assert p.delete_pods == [("demo-pool-a", "uid-demo-pool-a")]


def test_the_three_modes_are_the_classification_and_each_says_its_kind():
    assert sorted(modes.MODES) == sorted([values.FIXED, values.ELASTIC, values.EVERY_NODE])
    assert values.mode({}) == values.FIXED
    assert values.mode({"elastic": {"maxNodes": 2}}) == values.ELASTIC
    assert values.mode({"placement": {"everyNode": True}}) == values.EVERY_NODE
    assert modes.MODES[values.ELASTIC].labels is False  # refused at validation (FEATURE_LABELS_ELASTIC)


# Planners that span every NodeSet: they reach NodeSets through views and their modes, never through the lists one
# mode keeps for itself (Context.of, .valid, .leaving, .workers) nor by asking which mode a set is.
SPANNING = ("maintenance.py", "node_labels.py", "projection.py", "components.py", "status.py")
MODE_LISTS = {"of", "valid", "leaving", "workers", "worker_nodes", "elastic", "every_node"}


@pytest.mark.parametrize("module", SPANNING)
def test_planners_that_span_every_nodeset_never_branch_on_a_mode(module):
    with open(os.path.join(PLAN, module)) as f:
        tree = ast.parse(f.read())
    found = sorted(set("%s.%s (line %d)" % (node.value.id, node.attr, node.lineno) for node in ast.walk(tree)
                       if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                       and (node.value.id == "ctx" and node.attr in MODE_LISTS
                            or node.value.id == "values" and node.attr in ("elastic", "every_node", "ELASTIC",
                                                                            "EVERY_NODE", "FIXED", "mode"))))
    assert found == [], "%s asks for a mode's own list or which mode a set is: %s" % (module, found)
