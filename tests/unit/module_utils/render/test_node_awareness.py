"""Node awareness in the rendered objects: one worker per node, topology.conf in the configuration (reread by a
reconfigure, never a reason to restart slurmctld), TopologyPlugin; and the API's refusals naming the field."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster

TREE = {"topology": {"levels": ["net/leaf", "net/spine"]}}


def by_kind(manifests, kind, name):
    return next(m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name)


def test_one_per_node_is_a_required_anti_affinity_to_the_nodesets_own_workers():
    user_term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
    nodeset = make_nodeset("gpu", {"placement": {"onePerNode": True, "affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [user_term]}}}})
    sts = by_kind(render_cluster(make_cluster(), [nodeset]), "StatefulSet", "demo-gpu")
    terms = sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0] == user_term
    assert terms[1] == {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]}}
    assert sts["spec"]["selector"]["matchLabels"][names.LABEL_NODESET] == "gpu"
    # The NodeSet as written is not changed by rendering.
    assert len(nodeset["spec"]["placement"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]) == 1


def test_without_one_per_node_no_anti_affinity():
    sts = by_kind(render_cluster(make_cluster(), [make_nodeset("gpu")]), "StatefulSet", "demo-gpu")
    assert "affinity" not in sts["spec"]["template"]["spec"]


def test_topology_conf_is_in_the_configuration_and_its_change_restarts_nothing():
    cluster, nodeset = make_cluster(TREE), make_nodeset("cpu", {"replicas": 2})
    first = render_cluster(cluster, [nodeset], topology="SwitchName=a Nodes=demo-cpu-[0-1]\n")
    second = render_cluster(cluster, [nodeset], topology="SwitchName=b Nodes=demo-cpu-[0-1]\n")
    config = by_kind(first, "ConfigMap", "demo-slurm-config")["data"]
    assert config["topology.conf"] == "SwitchName=a Nodes=demo-cpu-[0-1]\n"
    assert "TopologyPlugin=topology/tree" in config["slurm.conf"].splitlines()
    for kind, name in (("StatefulSet", "demo-controller"), ("StatefulSet", "demo-login"),
                       ("StatefulSet", "demo-cpu")):
        assert by_kind(first, kind, name) == by_kind(second, kind, name)
    assert by_kind(first, "ConfigMap", "demo-slurm-config") != by_kind(second, "ConfigMap", "demo-slurm-config")


def test_without_a_placement_every_worker_is_unknown():
    config = by_kind(render_cluster(make_cluster(TREE), [make_nodeset("cpu", {"replicas": 3})]), "ConfigMap",
                     "demo-slurm-config")["data"]
    assert config["topology.conf"].splitlines()[1:] == ["SwitchName=unknown Nodes=demo-cpu-[0-2]",
                                                        "SwitchName=root Switches=unknown"]


def test_no_topology_no_file_and_no_plugin():
    config = by_kind(render_cluster(make_cluster(), [make_nodeset("cpu")]), "ConfigMap", "demo-slurm-config")["data"]
    assert "topology.conf" not in config and "TopologyPlugin" not in config["slurm.conf"]


def errors_of(call):
    with pytest.raises(SpecErrors) as info:
        call()
    return [(e.path, e.message) for e in info.value.errors]


@pytest.mark.parametrize("topology, path", [
    ({"plugin": "block", "levels": ["a", "b"]}, "spec.topology.levels"),
    ({"levels": []}, "spec.topology.levels"),
    ({"plugin": "dragonfly", "levels": ["a"]}, "spec.topology.plugin"),
    ({"levels": ["not a key"]}, "spec.topology.levels[0]"),
    ({}, "spec.topology.levels"),
])
def test_bad_topology_names_the_field(topology, path):
    found = errors_of(lambda: specs.validate_cluster(make_cluster({"topology": topology})))
    assert path in [p for p, _m in found], found


def test_topology_plugin_twice_is_refused():
    cluster = make_cluster(dict(TREE, slurm={"slurmConf": {"TopologyPlugin": "topology/tree"}}))
    assert "spec.slurm.slurmConf.TopologyPlugin" in [p for p, _m in errors_of(lambda: specs.validate_cluster(cluster))]


@pytest.mark.parametrize("nodeset_spec, path", [
    ({"featureLabelPrefix": "Bad Prefix/"}, "spec.featureLabelPrefix"),
    ({"featureLabelPrefix": ""}, "spec.featureLabelPrefix"),
    ({"placement": {"pinned": True}}, "spec.placement.pinned"),
])
def test_bad_nodeset_fields_name_the_field(nodeset_spec, path):
    found = errors_of(lambda: specs.validate_nodeset(make_nodeset("cpu", nodeset_spec)))
    assert path in [p for p, _m in found], found


BLOCK = {"topology": {"plugin": "block", "levels": ["nvidia.com/gpu.clique"]}}
ELASTIC = {"elastic": {"maxNodes": 4}}


@pytest.mark.parametrize("dynamic, why", [
    ({"replicas": 2}, "cpu (replicas)"),
    ({"replicas": 0}, "cpu (replicas)"),  # scaled to zero: kubectl scale brings dynamic workers back any time
    ({"placement": {"everyNode": True}}, "cpu (everyNode)"),
])
def test_block_topology_is_refused_with_any_nodeset_of_dynamic_workers(dynamic, why):
    found = errors_of(lambda: specs.validate_cluster_with_nodesets(
        make_cluster(BLOCK), [make_nodeset("gpu", ELASTIC), make_nodeset("cpu", dynamic)]))
    assert [p for p, _m in found] == ["spec.topology.plugin"], found
    assert why in found[0][1] and "Block not contains any nodes" in found[0][1] and "gpu" not in found[0][1]


def test_block_topology_is_accepted_when_every_nodeset_is_elastic():
    cluster, sets = specs.validate_cluster_with_nodesets(
        make_cluster(BLOCK), [make_nodeset("gpu", ELASTIC), make_nodeset("gpu2", ELASTIC)])
    assert cluster["spec"]["topology"]["plugin"] == "block" and len(sets) == 2
    # The cluster alone cannot know its NodeSets (its CEL cannot either): the rule is the planner's.
    specs.validate_cluster(make_cluster(BLOCK))
    # Tree takes dynamic workers as before.
    specs.validate_cluster_with_nodesets(make_cluster(TREE), [make_nodeset("cpu", {"replicas": 2})])


def test_block_topology_conf_of_an_elastic_nodeset():
    text = next(m for m in render_cluster(make_cluster(BLOCK), [make_nodeset("gpu", ELASTIC)])
                if m["kind"] == "ConfigMap" and "topology.conf" in m.get("data", {}))["data"]["topology.conf"]
    # Nothing ran yet: every name in the block unknown, which sets the base block size.
    assert text.splitlines()[1:] == ["BlockName=unknown Nodes=demo-gpu-[0-3]", "BlockSizes=4"]


def test_good_node_awareness_fields_are_accepted():
    specs.validate_cluster(make_cluster({"topology": {"plugin": "tree", "levels": ["net/leaf"]}}))
    ns = specs.validate_nodeset(make_nodeset("cpu", {"featureLabelPrefix": "feature.node.kubernetes.io/",
                                                     "placement": {"onePerNode": True}}))
    assert ns["spec"]["placement"]["pinned"] is False


def test_pinned_workers_are_created_gated():
    sts = by_kind(render_cluster(make_cluster(), [make_nodeset("gpu", {"placement": {"onePerNode": True,
                                                                                      "pinned": True}})]),
                  "StatefulSet", "demo-gpu")
    assert sts["spec"]["template"]["spec"]["schedulingGates"] == [{"name": names.PIN_GATE}]
