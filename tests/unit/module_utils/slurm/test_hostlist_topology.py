"""Hostlists, `scontrol show topology` and the feature update, as Slurm 24.11 prints and takes them."""

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.render import topology as topo
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import hostlist, scontrol


@pytest.mark.parametrize("names_, text", [
    (["demo-gpu-0", "demo-gpu-2"], "demo-gpu-[0,2]"),
    (["demo-gpu-3", "demo-gpu-0", "demo-gpu-1", "demo-gpu-2", "demo-cpu-0"], "demo-cpu-0,demo-gpu-[0-3]"),
    (["a-1", "a-2", "a-3", "a-7", "a-9", "a-10"], "a-[1-3,7,9-10]"),
    (["login"], "login"),
])
def test_compress_and_expand_are_inverse(names_, text):
    assert hostlist.compress(names_) == text
    assert sorted(hostlist.expand(text)) == sorted(names_)


def test_expand_keeps_zero_padding():
    assert hostlist.expand("n[08-10]") == ["n08", "n09", "n10"]


# Recorded from the harness (docs/slurm-24.11-findings.md B.2).
SHOW_TREE = """SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=demo-gpu-[0,2]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=demo-gpu-[1,3]
SwitchName=spine Level=1 LinkSpeed=1 Nodes=demo-gpu-[0-3] Switches=leaf[1-2]
"""
SHOW_BLOCK = """BlockName=b1 BlockIndex=0 Nodes=demo-gpu-[0-1] BlockSize=2
BlockName=b2 BlockIndex=1 Nodes=demo-gpu-[2-3] BlockSize=2
AggregatedBlock=b[1-2] BlockIndex=2 Nodes=demo-gpu-[0-3] BlockSize=4
"""


def test_show_topology_gives_each_nodes_leaf_or_block():
    assert scontrol.parse_show_topology(SHOW_TREE) == {"demo-gpu-0": "leaf1", "demo-gpu-2": "leaf1",
                                                      "demo-gpu-1": "leaf2", "demo-gpu-3": "leaf2"}
    assert scontrol.parse_show_topology(SHOW_BLOCK) == {"demo-gpu-0": "b1", "demo-gpu-1": "b1",
                                                       "demo-gpu-2": "b2", "demo-gpu-3": "b2"}


# Recorded from the harness (findings B.1): demo-cpu-[0-1] named in topology.conf, registered (slurmd -Z) after the
# last reconfigure. The leaf echoes the file; the spine lists the nodes Slurm placed.
SHOW_TREE_UNPLACED = """SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=demo-gpu-0,demo-cpu-0
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=demo-gpu-1,demo-cpu-1
SwitchName=spine Level=1 LinkSpeed=1 Nodes=demo-gpu-[0-1] Switches=leaf[1-2]
"""


def test_show_topology_places_a_node_only_when_a_switch_above_its_leaf_holds_it():
    assert scontrol.parse_show_topology(SHOW_TREE_UNPLACED) == {"demo-gpu-0": "leaf1", "demo-gpu-1": "leaf2"}
    # Leaves alone (no switch of switches): nothing is known to be placed.
    assert scontrol.parse_show_topology("SwitchName=unknown Level=0 LinkSpeed=1 Nodes=demo-cpu-[0-3]\n") == {}
    shown = ("SwitchName=unknown Level=0 LinkSpeed=1 Nodes=demo-cpu-[0-3]\n"
             "SwitchName=root Level=1 LinkSpeed=1 Nodes=demo-cpu-[0-3] Switches=unknown\n")
    assert scontrol.parse_show_topology(shown) == dict(("demo-cpu-%d" % i, "unknown") for i in range(4))


def tree_of(text):
    """({switch: [children]}, {switch: [nodes]}) of a rendered topology.conf."""
    children, nodes = {}, {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "Switches" in fields:
            children[fields["SwitchName"]] = fields["Switches"].split(",")
        elif "Nodes" in fields:
            nodes[fields["SwitchName"]] = hostlist.expand(fields["Nodes"])
    return children, nodes


@pytest.mark.parametrize("placement", [
    {},  # nothing placed yet: every name under unknown
    {"n-0": ["l1"], "n-1": ["l1"], "n-2": ["l1"], "n-3": ["l1"]},  # one level, one leaf
    {"n-0": ["l1"], "n-1": ["l2"]},  # one level, two leaves and unknown
    {"n-0": ["l1", "s1"], "n-1": ["l2", "s1"], "n-2": ["l1", "s1"], "n-3": ["l2", "s1"]},  # one spine
    {"n-0": ["l1", "s1"], "n-1": ["l2", "s2"], "n-2": ["l1", "s1"], "n-3": ["l2", "s2"]},  # two spines
    {"n-0": ["l1", "s1", "core"], "n-1": ["l2", "s1", "core"], "n-2": ["l3", "s2", "core"]},
])
def test_tree_has_one_top_switch_of_switches_that_reaches_every_node(placement):
    """The rendering rule: one switch no other names, a switch of switches (Slurm shows its nodes as placed, not as
    written), and every worker name under it."""
    all_names = ["n-0", "n-1", "n-2", "n-3"]
    children, nodes = tree_of(topo.render_topology_conf("tree", all_names, placement))
    named = set(c for cs in children.values() for c in cs)
    tops = [s for s in list(children) + list(nodes) if s not in named]
    assert len(tops) == 1 and tops[0] in children

    def below(switch):
        return nodes.get(switch, []) + [n for c in children.get(switch, ()) for n in below(c)]
    assert sorted(below(tops[0])) == all_names
    assert sorted(n for ns in nodes.values() for n in ns) == all_names  # each on exactly one leaf


def test_show_node_features():
    node = scontrol.parse_show_node("NodeName=a State=IDLE AvailableFeatures=cpu,ib ActiveFeatures=cpu")["a"]
    assert node["features"] == ["cpu", "ib"] and node["active_features"] == ["cpu"]
    assert scontrol.parse_show_node("NodeName=a State=IDLE AvailableFeatures=(null)")["a"]["features"] == []


def test_features_update_sets_available_and_active():
    assert scontrol.features_update("demo-cpu-0", ["cpu", "ib"]) == [
        "scontrol", "update", "nodename=demo-cpu-0", "availablefeatures=cpu,ib", "activefeatures=cpu,ib"]


@pytest.mark.parametrize("node, features", [("a,b", ["x"]), ("a", ["x y"]), ("a", ["x=y"]), ("a", ["x,y"]),
                                            ("a", ["x\ny"]), ("a", ["x|y"]), ("a", ["x\n"]), ("a\n", ["x"])])
def test_features_update_refuses_what_would_change_its_meaning(node, features):
    with pytest.raises(ValueError):
        scontrol.features_update(node, features)


def test_topology_conf_reads_back_what_it_wrote():
    text = topo.render_topology_conf("tree", ["n-0", "n-1", "n-2", "n-3"], {
        "n-0": ["l1", "s1", "core"], "n-1": ["l2", "s1", "core"], "n-2": ["l3", "s2", "core"]})
    assert "SwitchName=core Switches=s1,s2" in text and "SwitchName=root Switches=core,unknown" in text
    assert topo.parse_topology_conf(text) == {"n-0": ["l1", "s1", "core"], "n-1": ["l2", "s1", "core"],
                                              "n-2": ["l3", "s2", "core"]}


@pytest.mark.parametrize("switch", ["a\nSwitchName=x", "a\n"])
def test_topology_conf_refuses_a_name_that_could_inject(switch):
    with pytest.raises(ValueError):
        topo.render_topology_conf("tree", ["n-0"], {"n-0": [switch]})
