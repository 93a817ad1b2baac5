"""spec.elastic of a NodeSet and spec.slurm.powerSaving: bad input refused before anything is written, naming the
field (the CEL rules' Python twins and the rules between a cluster and its NodeSets)."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema, spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors


def errors_of(func, *args, **kwargs):
    with pytest.raises(SpecErrors) as info:
        func(*args, **kwargs)
    return [(e.path, e.message) for e in info.value.errors]


def test_an_elastic_nodeset_is_defaulted_to_a_minimum_of_zero():
    checked = spec.validate_nodeset(make_nodeset("gpu", {"elastic": {"maxNodes": 3}}))
    assert checked["spec"]["elastic"] == {"maxNodes": 3, "minNodes": 0}


def test_feature_labels_are_refused_on_an_elastic_nodeset_naming_the_field():
    """Its nodes exist powered down on no Kubernetes node: labels cannot give them features (modes.Elastic.labels)."""
    found = errors_of(spec.validate_nodeset, make_nodeset("gpu", {"elastic": {"maxNodes": 3},
                                                                  "featureLabelPrefix": "feature.example.com/"}))
    assert found == [("spec.featureLabelPrefix", schema.FEATURE_LABELS_ELASTIC)]
    checked = spec.validate_nodeset(make_nodeset("gpu", {"featureLabelPrefix": "feature.example.com/"}))
    assert checked["spec"]["featureLabelPrefix"] == "feature.example.com/"


@pytest.mark.parametrize("elastic, path, message", [
    ({"maxNodes": 2, "minNodes": 3}, "spec.elastic.minNodes", schema.ELASTIC_MIN_ABOVE_MAX),
    ({"minNodes": 1}, "spec.elastic.maxNodes", "Required value"),
    ({"maxNodes": 0}, "spec.elastic.maxNodes", "should be greater than or equal to 1"),
    ({"maxNodes": schema.ELASTIC_MAX_NODES + 1}, "spec.elastic.maxNodes", "less than or equal to 1024"),
])
def test_bad_elastic_bounds_name_the_field(elastic, path, message):
    found = errors_of(spec.validate_nodeset, make_nodeset("gpu", {"elastic": elastic}))
    assert any(p == path and message in m for p, m in found), found


@pytest.mark.parametrize("before, after", [({"replicas": 2}, {"elastic": {"maxNodes": 2}}),
                                           ({"elastic": {"maxNodes": 2}}, {"replicas": 2})])
def test_switching_between_fixed_and_elastic_is_refused(before, after):
    old = spec.validate_nodeset(make_nodeset("gpu", before))
    assert errors_of(spec.validate_nodeset, make_nodeset("gpu", after), old=old) == [
        ("spec.elastic", schema.ELASTIC_SWITCH)]
    # Changing the bounds of an elastic set is fine.
    if "elastic" in before:
        spec.validate_nodeset(make_nodeset("gpu", {"elastic": {"maxNodes": 4, "minNodes": 1}}), old=old)


def test_maxnodecount_holds_the_elastic_names_too():
    cluster = make_cluster({"slurm": {"maxNodeCount": 4}})
    sets = [make_nodeset("cpu", {"replicas": 2}), make_nodeset("gpu", {"elastic": {"maxNodes": 3}})]
    assert ("spec.slurm.maxNodeCount", "total NodeSet replicas and elastic maxNodes (5) exceed maxNodeCount (4)") in \
        errors_of(spec.validate_cluster_with_nodesets, cluster, sets)


def test_raw_power_saving_keys_are_refused_only_with_an_elastic_nodeset():
    cluster = make_cluster({"slurm": {"slurmConf": {"SuspendTime": "600", "ResumeRate": "10"}}})
    spec.validate_cluster_with_nodesets(cluster, [make_nodeset("cpu", {})])
    found = errors_of(spec.validate_cluster_with_nodesets, cluster,
                      [make_nodeset("cpu", {}), make_nodeset("gpu", {"elastic": {"maxNodes": 2}})])
    assert [p for p, _m in found] == ["spec.slurm.slurmConf.SuspendTime"]
    assert "spec.slurm.powerSaving.suspendTime" in found[0][1]


@pytest.mark.parametrize("key, value", [("suspendTime", 0), ("resumeTimeout", 0), ("suspendTimeout", 70000)])
def test_timeouts_slurm_would_refuse_name_the_field(key, value):
    found = errors_of(spec.validate_cluster, make_cluster({"slurm": {"powerSaving": {key: value}}}))
    assert [p for p, _m in found] == ["spec.slurm.powerSaving." + key]
