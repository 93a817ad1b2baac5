"""node_labels.py's planners alone: features and topology from the labels of the workers' Kubernetes nodes."""

import pytest
from planning import NOW, context, slurm, workers

from ansible_collections.soperator.slurm.plugins.module_utils.plan import decided, model, node_labels
from ansible_collections.soperator.slurm.plugins.module_utils.render import topology as topo
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

PREFIX = "feature.node.kubernetes.io/"
FEATURED = {"featureLabelPrefix": PREFIX, "features": ["fast"]}
TREE = {"topology": {"levels": ["net/leaf", "net/spine"]}}


def line(name, features="cpu,fast"):
    return "NodeName=%s CPUAlloc=0 CPUTot=2 State=IDLE+DYNAMIC_NORM AvailableFeatures=%s ActiveFeatures=%s" % (
        name, features, features)


def observed(lines, labels, count=2, hosts=None):
    """``count`` workers of NodeSet cpu, pod i on node-i (``hosts``: {pod: node or None}), nodes labelled."""
    statefulsets, pods = workers(count)
    for i, pod_name in enumerate(sorted(pods)):
        host = (hosts or {}).get(pod_name, "node-%d" % i)
        pods[pod_name]["spec"] = {"nodeName": host} if host else {}
    k8s_nodes = dict((host, {"unschedulable": False, "conditions": {}, "labels": lab}) for host, lab in labels.items())
    return {"statefulsets": statefulsets, "pods": pods, "slurm": slurm(*lines), "k8s_nodes": k8s_nodes}


def plan_features(obs, status=None, spec=FEATURED):
    ctx = context(nodesets=(("cpu", spec),), observed=obs)
    if status is not None:
        ctx.valid[0]["status"] = status
    p = model.Draft()
    p.nodesets["cpu"] = {}
    node_labels.plan_features(p, ctx)
    return p


@pytest.mark.parametrize("labels, expect", [
    ({PREFIX + "ib": "true"}, ["ib"]),
    ({PREFIX + "ib": ""}, ["ib"]),
    ({PREFIX + "ib": "false"}, []),
    ({PREFIX + "gpu.model": "h100"}, ["gpu.model_h100"]),
    ({"other/ib": "true", PREFIX + "b": "true", PREFIX + "a": "true"}, ["a", "b"]),
])
def test_features_from_labels(labels, expect):
    assert node_labels.features_from_labels(labels, PREFIX) == (expect, [])


@pytest.mark.parametrize("value", ["a b", "a=b", "a,b", "a\nb", "x" * 70, "a\n"])
def test_a_label_that_cannot_be_a_feature_is_refused(value):
    features, problems = node_labels.features_from_labels({PREFIX + "ib": value, PREFIX + "ok": "true"}, PREFIX)
    assert features == ["ok"] and len(problems) == 1 and PREFIX + "ib" in problems[0]


def test_a_new_label_adds_its_feature_and_records_it():
    p = plan_features(observed([line("demo-cpu-0"), line("demo-cpu-1")], {
        "node-0": {PREFIX + "ib": "true"}, "node-1": {}}))
    assert p.set_features == {"demo-cpu-0": ["cpu", "fast", "ib"]}
    assert p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}
    assert decided.freeze(p).slurm.any


def test_a_removed_label_removes_only_its_feature_never_an_administrators():
    # An administrator added "rack7" by scontrol; "ib" was ours; the label is gone.
    p = plan_features(observed([line("demo-cpu-0", "cpu,fast,rack7,ib")], {"node-0": {}}, count=1),
                      status={"labelFeatures": {"demo-cpu-0": ["ib"]}})
    assert p.set_features == {"demo-cpu-0": ["cpu", "fast", "rack7"]}
    assert p.nodesets["cpu"]["labelFeatures"] == {}


def test_a_label_naming_a_feature_someone_else_set_is_not_claimed():
    # "fast" is the NodeSet's, "rack7" the administrator's: a label giving them changes nothing, and its removal
    # later removes neither.
    obs = observed([line("demo-cpu-0", "cpu,fast,rack7")], {"node-0": {PREFIX + "fast": "true",
                                                                        PREFIX + "rack7": "true"}}, count=1)
    p = plan_features(obs)
    assert p.set_features == {} and p.nodesets["cpu"]["labelFeatures"] == {}


def test_unchanged_labels_change_nothing():
    p = plan_features(observed([line("demo-cpu-0", "cpu,fast,ib")], {"node-0": {PREFIX + "ib": "true"}}, count=1),
                      status={"labelFeatures": {"demo-cpu-0": ["ib"]}})
    assert p.set_features == {} and not decided.freeze(p).slurm.any
    assert p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}


def test_a_bad_label_value_leaves_the_node_as_it_is_with_an_event():
    obs = observed([line("demo-cpu-0", "cpu,fast,ib")], {"node-0": {PREFIX + "x": "a b"}}, count=1)
    p = plan_features(obs, status={"labelFeatures": {"demo-cpu-0": ["ib"]}})
    assert p.set_features == {}
    assert p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}
    assert len(p.label_events) == 1 and p.label_events[0][0] == "cpu" and PREFIX + "x" in p.label_events[0][1]


def plan_features_beside(obs, other, status=None):
    """plan_features with NodeSet ``other`` beside cpu (Slurm's NodeSet=<other> Feature=<other>)."""
    ctx = context(nodesets=(("cpu", FEATURED), (other, {})), observed=obs)
    if status is not None:
        ctx.valid[0]["status"] = status
    p = model.Draft()
    p.nodesets["cpu"] = {}
    node_labels.plan_features(p, ctx)
    return p


@pytest.mark.parametrize("key", ["gpu", "GPU"])
def test_a_label_naming_another_nodeset_is_refused_and_the_other_labels_apply(key):
    # A label giving "gpu" (or "GPU": features are compared without case, as spec.features is) would put the node
    # into the partitions of NodeSet gpu; spec.features refuses that name at validation, a label is refused here.
    obs = observed([line("demo-cpu-0")], {"node-0": {PREFIX + key: "true", PREFIX + "ib": "true"}}, count=1)
    p = plan_features_beside(obs, "gpu")
    assert p.set_features == {"demo-cpu-0": ["cpu", "fast", "ib"]}
    assert p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}
    assert len(p.label_events) == 1 and p.label_events[0][0] == "cpu"
    assert "NodeSet gpu" in p.label_events[0][1] and PREFIX in p.label_events[0][1]


def test_a_label_feature_added_before_its_nodeset_came_is_removed():
    # "gpu" was ours (from a label) before NodeSet gpu was created: it goes, the administrator's rack7 stays.
    obs = observed([line("demo-cpu-0", "cpu,fast,rack7,gpu")], {"node-0": {PREFIX + "gpu": "true"}}, count=1)
    p = plan_features_beside(obs, "gpu", status={"labelFeatures": {"demo-cpu-0": ["gpu"]}})
    assert p.set_features == {"demo-cpu-0": ["cpu", "fast", "rack7"]}
    assert p.nodesets["cpu"]["labelFeatures"] == {}
    assert any("NodeSet gpu" in m for _s, m in p.label_events)


def test_beside_a_bad_label_value_a_feature_naming_another_nodeset_still_goes():
    obs = observed([line("demo-cpu-0", "cpu,fast,ib,gpu")], {"node-0": {PREFIX + "x": "a b", PREFIX + "gpu": ""}},
                   count=1)
    p = plan_features_beside(obs, "gpu", status={"labelFeatures": {"demo-cpu-0": ["ib", "gpu"]}})
    assert p.set_features == {"demo-cpu-0": ["cpu", "fast", "ib"]}
    assert p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}
    assert len(p.label_events) == 2


def test_a_label_naming_the_nodesets_own_name_is_no_refusal():
    # The NodeSet's own name is always a feature of its nodes (registered with slurmd --conf): nothing to refuse.
    obs = observed([line("demo-cpu-0")], {"node-0": {PREFIX + "cpu": "true"}}, count=1)
    p = plan_features(obs)
    assert p.set_features == {} and p.label_events == []


def test_the_nodesets_a_label_may_not_name_are_every_nodeset_of_the_cluster():
    ctx = context(nodesets=(("cpu", {}), ("big", {"elastic": {"maxNodes": 2}}), ("old", {})), leaving=("old",))
    ctx.invalid = {"broken": ["spec.replicas: bad"]}
    assert sorted(node_labels.nodeset_names(ctx)) == ["big", "broken", "cpu", "old"]


def test_a_pending_pod_or_an_unread_node_keeps_its_record():
    obs = observed([line("demo-cpu-0", "cpu,fast,ib")], {}, count=1, hosts={"demo-cpu-0": None})
    p = plan_features(obs, status={"labelFeatures": {"demo-cpu-0": ["ib"]}})
    assert p.set_features == {} and p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}


def test_without_the_nodes_nothing_is_decided_and_the_reason_is_said():
    obs = observed([line("demo-cpu-0")], {}, count=1)
    obs["k8s_nodes"], obs["k8s_nodes_error"] = None, "cannot read Kubernetes nodes: (403) forbidden"
    p = plan_features(obs)
    assert p.set_features == {} and any("403" in d for d in p.deferred)


def test_nodesets_without_a_prefix_are_not_touched():
    p = plan_features(observed([line("demo-cpu-0", "cpu,fast,ib")], {"node-0": {}}, count=1), spec={})
    assert p.set_features == {} and "labelFeatures" not in p.nodesets["cpu"]


# ---- topology ----------------------------------------------------------------------------------------------
def leafs(**placement):
    """{node-i: labels} from node-i=leaf/spine."""
    return dict((host, {"net/leaf": where.split("/")[0], "net/spine": where.split("/")[1]})
                for host, where in placement.items())


def plan_topology(obs, spec=TREE, count=4):
    ctx = context(spec, observed=obs)
    p = model.Draft()
    text = node_labels.plan_topology(p, ctx, {"cpu": count})
    return p, text


def four(labels, shown=None, mounted=None, hosts=None):
    obs = observed([line("demo-cpu-%d" % i) for i in range(4)], labels, count=4, hosts=hosts)
    obs["slurm_topology"] = shown
    obs["mounted_topology"] = mounted
    return obs


TWO_LEAVES = leafs(**{"node-0": "leaf1/spine", "node-1": "leaf2/spine", "node-2": "leaf1/spine",
                      "node-3": "leaf2/spine"})
EXPECTED = ("SwitchName=leaf1 Nodes=demo-cpu-[0,2]\nSwitchName=leaf2 Nodes=demo-cpu-[1,3]\n"
            "SwitchName=spine Switches=leaf1,leaf2\n")


def test_labels_give_the_tree_and_every_name_is_listed():
    p, text = plan_topology(four(TWO_LEAVES))
    assert text == topo.HEADER + "\n" + EXPECTED
    assert p.topology == text
    _p, partial = plan_topology(four(leafs(**{"node-0": "leaf1/spine"})))
    assert partial == (topo.HEADER + "\nSwitchName=leaf1 Nodes=demo-cpu-0\nSwitchName=spine Switches=leaf1\n"
                       "SwitchName=unknown Nodes=demo-cpu-[1-3]\nSwitchName=root Switches=spine,unknown\n")


def test_pod_churn_keeps_the_file():
    _p, text = plan_topology(four(TWO_LEAVES))
    # Pods 1 and 3 being replaced (no node yet): they keep the placement the controller has now.
    p, again = plan_topology(four({"node-0": TWO_LEAVES["node-0"], "node-2": TWO_LEAVES["node-2"]}, mounted=text,
                                  hosts={"demo-cpu-1": None, "demo-cpu-3": None}))
    assert again == text and not p.label_events


def test_a_relabel_moves_the_node_and_asks_one_reconfigure_once_the_controller_has_the_file():
    _p, before = plan_topology(four(TWO_LEAVES))
    shown = {"demo-cpu-0": "leaf1", "demo-cpu-1": "leaf2", "demo-cpu-2": "leaf1", "demo-cpu-3": "leaf2"}
    relabelled = dict(TWO_LEAVES, **leafs(**{"node-1": "leaf1/spine", "node-2": "leaf2/spine"}))
    p, after = plan_topology(four(relabelled, shown=shown, mounted=before))
    assert after != before and p.reconfigure is None and p.requeue_after  # the pod does not have it yet
    p, again = plan_topology(four(relabelled, shown=shown, mounted=after))
    assert again == after and "demo-cpu-1" in p.reconfigure and decided.freeze(p).slurm.any
    now_shown = dict(shown, **{"demo-cpu-1": "leaf1", "demo-cpu-2": "leaf2"})
    p, dummy = plan_topology(four(relabelled, shown=now_shown, mounted=after))
    assert p.reconfigure is None and not p.pending


def test_a_burst_of_label_changes_is_one_reconfigure_however_soon_the_controller_pod_has_a_file():
    """Each render of a burst rewrites the ConfigMap; a controller pod that already has an intermediate file (the
    kubelet synced it between two changes) is not reconfigured until the ConfigMap has gone unwritten for
    TOPOLOGY_QUIET seconds, so the burst's later changes are in the one reconfigure."""
    shown = {"demo-cpu-0": "leaf1", "demo-cpu-1": "leaf2", "demo-cpu-2": "leaf1", "demo-cpu-3": "leaf2"}
    first = dict(TWO_LEAVES, **leafs(**{"node-1": "leaf1/spine"}))
    _p, text1 = plan_topology(four(first))
    obs = four(first, shown=shown, mounted=text1)
    obs["live_topology"], obs["live_config_written"] = text1, NOW - 2
    p, again = plan_topology(obs)
    assert again == text1 and p.reconfigure is None and "one reconfigure per burst" in p.pending[0], p.pending
    assert p.requeue_after == node_labels.TOPOLOGY_QUIET - 2
    # The burst goes on: a second change, the ConfigMap rewritten; the pod's copy is the first file.
    second = dict(first, **leafs(**{"node-2": "leaf2/spine"}))
    obs = four(second, shown=shown, mounted=text1)
    obs["live_topology"], obs["live_config_written"] = text1, NOW - 2
    p, text2 = plan_topology(obs)
    assert text2 != text1 and p.reconfigure is None and p.pending
    # The pod has the last file, written just under TOPOLOGY_QUIET ago: still waiting; at TOPOLOGY_QUIET, the one.
    obs = four(second, shown=shown, mounted=text2)
    obs["live_topology"], obs["live_config_written"] = text2, NOW - node_labels.TOPOLOGY_QUIET + 1
    p, dummy = plan_topology(obs)
    assert p.reconfigure is None and p.requeue_after == 1
    obs["live_config_written"] = NOW - node_labels.TOPOLOGY_QUIET
    p, dummy = plan_topology(obs)
    assert "demo-cpu-1" in p.reconfigure and "demo-cpu-2" in p.reconfigure


def test_a_dynamic_node_slurm_left_unplaced_gets_a_reconfigure():
    _p, text = plan_topology(four(TWO_LEAVES))
    shown = {"demo-cpu-0": "leaf1", "demo-cpu-1": "leaf2", "demo-cpu-2": "leaf1"}  # demo-cpu-3 registered later
    p, dummy = plan_topology(four(TWO_LEAVES, shown=shown, mounted=text))
    assert p.reconfigure and "demo-cpu-3" in p.reconfigure


def test_a_node_slurm_lists_on_its_leaf_but_did_not_place_gets_a_reconfigure():
    """24.11 echoes a leaf's Nodes= from the file; the switch above lists the nodes it placed (findings B.1). A dynamic
    node registered after the last reconfigure is in the leaf line only: jobs needing it are refused ("Requested
    topology configuration is not available") until a reconfigure."""
    text = topo.render_topology_conf("tree", ["demo-cpu-%d" % i for i in range(4)], {})
    shown = scontrol.parse_show_topology("SwitchName=unknown Level=0 LinkSpeed=1 Nodes=demo-cpu-[0-3]\n"
                                         "SwitchName=root Level=1 LinkSpeed=1 Nodes=(null) Switches=unknown\n")
    p, again = plan_topology(four({}, shown=shown, mounted=text))
    assert again == text and p.reconfigure and "demo-cpu-0" in p.reconfigure
    placed = scontrol.parse_show_topology("SwitchName=unknown Level=0 LinkSpeed=1 Nodes=demo-cpu-[0-3]\n"
                                          "SwitchName=root Level=1 LinkSpeed=1 Nodes=demo-cpu-[0-3] "
                                          "Switches=unknown\n")
    p, dummy = plan_topology(four({}, shown=placed, mounted=text))
    assert p.reconfigure is None and not p.pending


@pytest.mark.parametrize("value", ["unknown", "root", "a b", "a=b", "a,b", "a\nb", "x" * 64, "leaf1\n"])
def test_a_label_that_cannot_name_a_switch_is_refused_and_the_placement_kept(value):
    _p, text = plan_topology(four(TWO_LEAVES))
    bad = dict(TWO_LEAVES, **{"node-1": {"net/leaf": value, "net/spine": "spine"}})
    p, again = plan_topology(four(bad, mounted=text))
    assert again == text
    assert len(p.label_events) == 1 and "net/leaf" in p.label_events[0][1]


def test_a_switch_with_two_parents_is_refused():
    labels = dict(TWO_LEAVES, **leafs(**{"node-3": "leaf2/spine9"}))
    p, text = plan_topology(four(labels))
    assert "spine9" not in text and "demo-cpu-3" in p.label_events[0][1]


def test_block_topology_text_states_the_smallest_block_as_the_base_size():
    # 24.11 takes the base block size from the first block otherwise, and exits when a later one is smaller.
    placement = {"demo-gpu-0": ["b1"], "demo-gpu-1": ["b1"], "demo-gpu-2": ["b2"]}
    text = topo.render_topology_conf("block", ["demo-gpu-%d" % i for i in range(4)], placement)
    assert text == (topo.HEADER + "\nBlockName=b1 Nodes=demo-gpu-[0-1]\nBlockName=b2 Nodes=demo-gpu-2\n"
                    "BlockName=unknown Nodes=demo-gpu-3\nBlockSizes=1\n")
    assert topo.parse_topology_conf(text) == placement
    assert topo.render_topology_conf("block", [], {}) == topo.HEADER + "\n"


BLOCK = {"topology": {"plugin": "block", "levels": ["nvidia.com/gpu.clique"]}}


def elastic_obs(hosts, labels, shown=None, mounted=None, live=None):
    """Elastic NodeSet gpu (maxNodes 4): a pod for each name in ``hosts`` ({name: its node}), nodes labelled."""
    pods = dict((n, {"metadata": {"name": n}, "spec": {"nodeName": host}}) for n, host in hosts.items())
    return {"pods": pods, "slurm": None, "slurm_topology": shown, "mounted_topology": mounted, "live_topology": live,
            "k8s_nodes": dict((h, {"unschedulable": False, "conditions": {}, "labels": lab})
                              for h, lab in labels.items())}


def plan_block(obs, placement=None):
    ctx = context(BLOCK, nodesets=(("gpu", {"elastic": {"maxNodes": 4}, "placement": placement or {}}),),
                  observed=obs)
    p = model.Draft()
    return p, node_labels.plan_topology(p, ctx, {})


CLIQUES = {"node-a": {"nvidia.com/gpu.clique": "nvl1"}, "node-b": {"nvidia.com/gpu.clique": "nvl2"}}


def test_block_of_an_elastic_nodeset_lists_every_name_and_keeps_a_powered_down_nodes_last_block():
    # Nothing ran: every name in the block unknown (Slurm may plan a job onto any of them).
    _p, first = plan_block(elastic_obs({}, CLIQUES))
    assert first == topo.HEADER + "\nBlockName=unknown Nodes=demo-gpu-[0-3]\nBlockSizes=4\n"
    # Nodes 0 and 1 powered up on the two cliques: their blocks from the labels.
    _p, running = plan_block(elastic_obs({"demo-gpu-0": "node-a", "demo-gpu-1": "node-b"}, CLIQUES, live=first))
    assert running == (topo.HEADER + "\nBlockName=nvl1 Nodes=demo-gpu-0\nBlockName=nvl2 Nodes=demo-gpu-1\n"
                       "BlockName=unknown Nodes=demo-gpu-[2-3]\nBlockSizes=1\n")
    # Both powered down again (no pod): each keeps its last block, the file does not change.
    _p, after = plan_block(elastic_obs({}, CLIQUES, live=running))
    assert after == running


def test_an_elastic_nodeset_whose_selector_names_the_block_is_placed_before_any_pod_ran():
    _p, text = plan_block(elastic_obs({}, CLIQUES), placement={"nodeSelector": {"nvidia.com/gpu.clique": "nvl2"}})
    assert text == topo.HEADER + "\nBlockName=nvl2 Nodes=demo-gpu-[0-3]\nBlockSizes=4\n"


def test_a_block_change_of_a_powered_down_node_is_one_reconfigure():
    _p, before = plan_block(elastic_obs({}, CLIQUES))
    _p, after = plan_block(elastic_obs({"demo-gpu-0": "node-a"}, CLIQUES, live=before))
    shown = scontrol.parse_show_topology("BlockName=unknown BlockIndex=0 Nodes=demo-gpu-[0-3] BlockSize=4\n")
    ctx_obs = elastic_obs({"demo-gpu-0": "node-a"}, CLIQUES, shown=shown, mounted=after, live=after)
    ctx_obs["slurm"] = slurm(*["NodeName=demo-gpu-%d State=IDLE+CLOUD+POWERED_DOWN" % i for i in range(4)])
    p, text = plan_block(ctx_obs)
    assert text == after and p.reconfigure and "demo-gpu-0" in p.reconfigure


def test_no_topology_renders_none():
    p, text = plan_topology(four(TWO_LEAVES), spec={})
    assert text is None and p.topology is None and p.reconfigure is None


def test_a_worker_the_scheduler_cannot_place_is_named_in_the_nodesets_status():
    from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st
    statefulsets, pods = workers(3)
    message = "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    pods["demo-cpu-2"]["status"]["conditions"].append({"type": "PodScheduled", "status": "False",
                                                        "reason": "Unschedulable", "message": message})
    ctx = context(nodesets=(("cpu", {"placement": {"onePerNode": True}}),),
                  observed={"statefulsets": statefulsets, "pods": pods})
    p = model.Draft()
    p.nodesets["cpu"] = {"desired": 3, "replicas": 3, "readyReplicas": 2, "serving": 2, "currentReplicas": 3}
    node_labels.plan_unplaced(p, ctx)
    assert p.nodesets["cpu"]["unschedulable"] == ["demo-cpu-2: " + message]
    status = st.nodeset_status({}, ctx.valid[0], decided.freeze(p), p.nodesets["cpu"], None, "2026-01-01T00:00:00Z")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and message in ready["message"]


def test_the_live_configmaps_file_is_what_was_decided_last():
    _p, old = plan_topology(four(TWO_LEAVES))
    relabelled = dict(TWO_LEAVES, **leafs(**{"node-1": "leaf1/spine", "node-2": "leaf2/spine"}))
    _p, new = plan_topology(four(relabelled))
    # The controller still has the old file; pods 1 and 2 between pods: the live ConfigMap's places win.
    obs = four(TWO_LEAVES, mounted=old, hosts={"demo-cpu-1": None, "demo-cpu-2": None})
    obs["live_topology"] = new
    p, text = plan_topology(obs)
    assert text == new
    # Without Nodes (the operator's drift check): every worker keeps its place, the file is unchanged.
    obs = four({}, hosts=dict((n, None) for n in ("demo-cpu-0", "demo-cpu-1", "demo-cpu-2", "demo-cpu-3")))
    obs["live_topology"], obs["k8s_nodes"] = new, None
    p, text = plan_topology(obs)
    assert text == new and p.reconfigure is None


def test_a_refused_label_is_one_event_until_it_changes():
    obs = observed([line("demo-cpu-0", "cpu,fast")], {"node-0": {PREFIX + "x": "a b"}}, count=1)
    ctx = context(nodesets=(("cpu", FEATURED),), observed=obs)
    p = model.Draft()
    p.nodesets["cpu"] = {}
    node_labels.plan_features(p, ctx)
    node_labels.plan_label_events(p, ctx)
    assert len(p.label_events) == 1 and p.nodesets["cpu"]["labelsRefused"] == [p.label_events[0][1]]
    ctx.valid[0]["status"] = {"labelsRefused": p.nodesets["cpu"]["labelsRefused"]}
    again = model.Draft()
    again.nodesets["cpu"] = {}
    node_labels.plan_features(again, ctx)
    node_labels.plan_label_events(again, ctx)
    assert again.label_events == [] and again.nodesets["cpu"]["labelsRefused"] == p.nodesets["cpu"]["labelsRefused"]


def test_a_rewired_leaf_follows_the_labels_and_a_worker_between_pods_does_not_hold_it_back():
    _p, old = plan_topology(four(TWO_LEAVES))
    # leaf1 moves under spine2; demo-cpu-0 (on leaf1) is between pods and kept its old path [leaf1, spine].
    rewired = dict(TWO_LEAVES, **leafs(**{"node-2": "leaf1/spine2"}))
    p, text = plan_topology(four(rewired, mounted=old, hosts={"demo-cpu-0": None}))
    assert "SwitchName=spine2 Switches=leaf1" in text and not p.label_events
    assert "SwitchName=unknown Nodes=demo-cpu-0" in text
