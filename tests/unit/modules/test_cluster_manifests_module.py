"""cluster_manifests' main(): renders without touching a cluster; a bad spec fails with every field path."""

import json
import os

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.modules import cluster_manifests as module

CLUSTER = {"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
           "metadata": {"name": "demo", "namespace": "slurm"}, "spec": {}}
NODESET = {"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "NodeSet",
           "metadata": {"name": "cpu", "namespace": "slurm"}, "spec": {"replicas": 2}}


def run(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        module.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def render(monkeypatch):
    seen = {}

    def fake(cluster, nodesets):
        seen.update(cluster=cluster, nodesets=nodesets)
        if "raise" in seen:
            raise seen["raise"]
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-slurm-conf"}}]

    monkeypatch.setattr(module, "render_cluster", fake)
    return seen


@pytest.mark.parametrize("check_mode", [False, True])
def test_renders_and_never_changes(capsys, render, check_mode):
    rc, out = run(capsys, {"cluster": CLUSTER, "nodesets": [NODESET], "_ansible_check_mode": check_mode})
    assert rc == 0 and out["changed"] is False
    assert out["cluster_name"] == "demo"
    assert out["manifests"][0]["metadata"]["name"] == "demo-slurm-conf"
    assert render["nodesets"] == [NODESET]


def test_nodesets_default_to_none(capsys, render):
    run(capsys, {"cluster": CLUSTER})
    assert render["nodesets"] == []


def test_one_spec_error(capsys, render):
    render["raise"] = SpecError("spec.partitions[0].name", "must not be empty")
    rc, out = run(capsys, {"cluster": CLUSTER})
    assert rc == 1
    assert out["msg"] == "spec.partitions[0].name: must not be empty"
    assert out["field"] == "spec.partitions[0].name"
    assert out["errors"] == [{"path": "spec.partitions[0].name", "message": "must not be empty"}]


def test_several_spec_errors(capsys, render):
    render["raise"] = SpecErrors([SpecError("spec.a", "bad"), SpecError("spec.nodeSets[1].replicas", "must be >= 0")])
    rc, out = run(capsys, {"cluster": CLUSTER})
    assert rc == 1
    assert out["msg"] == "spec.a: bad; spec.nodeSets[1].replicas: must be >= 0"
    assert out["field"] == "spec.a"
    assert out["errors"] == [{"path": "spec.a", "message": "bad"},
                             {"path": "spec.nodeSets[1].replicas", "message": "must be >= 0"}]


def load_example(name):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, "examples", name)) as handle:
        docs = [d for d in yaml.safe_load_all(handle) if d]
    return docs[0], docs[1:]


def test_renders_the_cpu_example_with_the_real_renderer(capsys):
    cluster, nodesets = load_example("cpu-cluster.yaml")
    rc, out = run(capsys, {"cluster": cluster, "nodesets": nodesets})
    assert rc == 0 and out["changed"] is False and out["cluster_name"] == "demo"
    kinds = set(o["kind"] for o in out["manifests"])
    assert {"Secret", "ConfigMap", "Service", "StatefulSet"} <= kinds
    assert all(o["metadata"]["namespace"] == "slurm" for o in out["manifests"])


def test_real_renderer_reports_every_bad_field(capsys):
    cluster, nodesets = load_example("cpu-cluster.yaml")
    cluster["spec"]["jail"]["size"] = "lots"
    nodesets[0]["spec"]["replicas"] = -1
    rc, out = run(capsys, {"cluster": cluster, "nodesets": nodesets})
    assert rc == 1
    assert out["field"] == "spec.jail.size" and out["msg"].startswith("spec.jail.size: ")
    assert [e["path"] for e in out["errors"]] == ["spec.jail.size", "nodesets[cpu].spec.replicas"]
