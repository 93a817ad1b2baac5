"""Rendered examples compared with reviewed golden files. Regenerate with UPDATE_GOLDEN=1, then review the diff."""

import os

import pytest
import yaml
from resources import load_example

from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

GOLDEN = os.path.join(os.path.abspath(__file__).rsplit(os.sep, 3)[0], "golden")


class _Dumper(yaml.SafeDumper):
    """Block style with sequences indented under their key (yamllint's default), no aliases."""

    def increase_indent(self, flow=False, indentless=False):
        return super(_Dumper, self).increase_indent(flow, False)

    def ignore_aliases(self, data):
        return True


def _str_block(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_block)


def _compare(name, text):
    path = os.path.join(GOLDEN, name)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        with open(path, "w") as handle:
            handle.write(text)
    with open(path) as handle:
        assert handle.read() == text, "%s differs: UPDATE_GOLDEN=1 to regenerate, then review" % name


@pytest.mark.parametrize("example", ["cpu-cluster", "gpu-cluster", "accounting-cluster-local", "ldap-cluster-local",
                                     "mixed-cluster-local"])
def test_golden(example):
    cluster, nodesets = load_example(example + ".yaml")
    cluster["metadata"]["uid"] = "00000000-0000-0000-0000-0000000000c1"
    for index, nodeset in enumerate(nodesets):
        nodeset["metadata"]["uid"] = "00000000-0000-0000-0000-00000000000%d" % index
    objects = render.render_cluster(cluster, nodesets)
    _compare(example + ".manifests.yaml",
             yaml.dump_all(objects, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=120,
                           explicit_start=True))
    config = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-slurm-config")][0]
    _compare(example + ".slurm.conf", config["data"]["slurm.conf"])
    dbd = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-slurmdbd-config")]
    if dbd:
        _compare(example + ".slurmdbd.conf", dbd[0]["data"]["slurmdbd.conf"])
    sssd = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-sssd-config")]
    for key, text in sorted((sssd[0]["data"] if sssd else {}).items()):
        _compare("%s.%s" % (example, key), text)


def test_the_mixed_example_is_the_local_one_with_partitions_and_a_gpu_nodeset():
    """examples/mixed-cluster-local.yaml: what tests/e2e runs on the real node. Its cluster and CPU NodeSet are the
    local example's but for the partitions (so switching between them changes only those), and its three
    partitions hold the NodeSets they say."""
    local, (local_cpu,) = load_example("cpu-cluster-local.yaml")
    mixed, (cpu, gpu) = load_example("mixed-cluster-local.yaml")
    partitions = mixed["spec"].pop("partitions")
    assert mixed == local and [p["name"] for p in partitions] == ["cpu", "gpu", "all"]
    assert cpu["spec"].pop("partitions") == ["cpu", "all"] and cpu == local_cpu
    assert gpu["spec"]["partitions"] == ["gpu", "all"] and gpu["spec"]["gpu"] == {"count": 1, "type": "h100"}
    with open(os.path.join(GOLDEN, "mixed-cluster-local.slurm.conf")) as handle:
        lines = handle.read().splitlines()
    assert [line.split(" Default=")[0] for line in lines if line.startswith("PartitionName=")] == [
        "PartitionName=cpu Nodes=cpu", "PartitionName=gpu Nodes=gpu", "PartitionName=all Nodes=cpu,gpu"]
    assert "GresTypes=gpu" in lines
