import importlib.util
import os

import yaml

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema

ROOT = os.path.abspath(__file__).rsplit(os.sep, 5)[0]


def _gen():
    loader = importlib.util.spec_from_file_location("gen_crds", os.path.join(ROOT, "hack", "gen-crds.py"))
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def test_committed_crds_are_up_to_date():
    gen = _gen()
    for name, text in gen.render().items():
        with open(os.path.join(gen.OUT_DIR, name)) as handle:
            assert handle.read() == text, "%s is stale: run hack/gen-crds.py" % name
    assert gen.main(["--check"]) == 0


def _nodes(node, path="", skip_description=False):
    yield path, node, skip_description
    for key, sub in (node.get("properties") or {}).items():
        yield from _nodes(sub, path + "." + key, key == "metadata" and path == "")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _nodes(node[key], path + "[" + key + "]")


def test_every_field_is_described_and_structural():
    for crd in schema.crds():
        root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, node, skip in _nodes(root):
            if not skip:
                assert node.get("description"), "%s %s has no description" % (crd["metadata"]["name"], path)
            assert node.get("type") or node.get("x-kubernetes-int-or-string"), path
            if node.get("type") == "array":
                assert "maxItems" in node, path
            if node.get("type") == "string" and "enum" not in node and "format" not in node:
                if path not in (".apiVersion", ".kind"):
                    assert "maxLength" in node, path
            if node.get("type") == "object" and path.startswith(".spec"):
                assert ("properties" in node or "additionalProperties" in node
                        or node.get("x-kubernetes-preserve-unknown-fields")), path
            if isinstance(node.get("additionalProperties"), dict):
                assert "maxProperties" in node, path


def test_defaults_are_valid():
    from ansible_collections.soperator.slurm.plugins.module_utils.api import walk

    for crd in schema.crds():
        root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, node, _skip in _nodes(root):
            if "default" in node:
                errors = []
                walk.validate_schema(walk.apply_defaults(node["default"], node), node, path, errors)
                assert not errors, errors


def test_crd_shape():
    cluster, nodeset = [yaml.safe_load(open(os.path.join(ROOT, "roles", "crds", "files", name)))
                        for name in ("slurmclusters.slurm.soperator.dev.yaml", "nodesets.slurm.soperator.dev.yaml")]
    assert cluster["spec"]["names"]["kind"] == "SlurmCluster"
    version = nodeset["spec"]["versions"][0]
    assert version["subresources"]["scale"] == {"specReplicasPath": ".spec.replicas",
                                                "statusReplicasPath": ".status.replicas",
                                                "labelSelectorPath": ".status.selector"}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Cluster", "Replicas", "Ready", "Idle", "Allocated", "Mixed", "Drained", "Down", "Roll Waits For", "Age"]
    columns = cluster["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == ["Ready", "Phase", "Age"]
    status = cluster["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
