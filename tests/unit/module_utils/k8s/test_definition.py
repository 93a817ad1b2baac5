"""site.yml's definition: one SlurmCluster and its NodeSets; any document it does not understand is an error
naming it, before anything is written (split_definition runs before the first request)."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api.definition import split_definition
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors


def problems(docs):
    with pytest.raises(SpecErrors) as info:
        split_definition(docs, "hpc")
    return dict((e.path, e.message) for e in info.value.errors)


def test_a_cluster_and_its_nodesets_are_split_with_the_namespace():
    cluster = make_cluster()
    del cluster["metadata"]["namespace"]
    got, nodesets = split_definition([cluster, make_nodeset("cpu"), make_nodeset("gpu")], "hpc")
    assert got["metadata"]["namespace"] == "hpc" and [n["metadata"]["name"] for n in nodesets] == ["cpu", "gpu"]


def test_a_kind_typo_is_named():
    typo = dict(make_nodeset("gpu"), kind="NodeSets")
    found = problems([make_cluster(), typo])
    assert "does not know what to do with it" in found["definition[1] (NodeSets gpu)"]


def test_another_api_version_is_named():
    found = problems([make_cluster(), dict(make_nodeset("gpu"), apiVersion="slurm.soperator.dev/v1")])
    assert "definition[1] (NodeSet gpu)" in found


def test_a_nodeset_of_a_cluster_the_file_does_not_hold_is_named():
    found = problems([make_cluster(), make_nodeset("gpu", cluster="other")])
    assert "holds 'demo'" in found["nodesets[gpu].spec.clusterRef.name"]


@pytest.mark.parametrize("docs,path", [
    ([make_cluster(), make_cluster(name="two")], "definition"),
    ([make_nodeset()], "definition"),
    ([make_cluster(), "text"], "definition[1]"),
    ([make_cluster(), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
     "definition[1] (ConfigMap x)"),
])
def test_anything_else_is_refused(docs, path):
    assert path in problems(docs)
