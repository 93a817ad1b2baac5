"""The README's feature sections and their examples cannot drift apart: each section names its example, each example
is a definition ``site.yml`` takes with the installer's default policy (nothing granted), and the converge's own
planner, given the cluster states the section describes, does what the section says (no cluster: Slurm's answers are
``scontrol show node -o`` lines read by the real parser, Kubernetes nodes as the converge reads them).
tests/integration/test_examples.py applies the same examples to the real kube-apiserver through ``site.yml``."""

import os
import re

import pytest
import yaml

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import definition as definitions
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOW = 1_700_000_000

# README section heading -> the example it shows.
SECTIONS = {
    "### Capacity that follows the queue: elastic NodeSets": "elastic-cluster.yaml",
    "### Where workers run: one per node, pinned, every node": "placement-cluster.yaml",
    "### Slurm features and topology from node labels": "node-labels-cluster.yaml",
}
EVERY_LABEL = "slurm.example.com/every-node"
FEATURE_PREFIX = "slurm-feature.example.com/"
LEAF, SPINE = "network.example.com/leaf", "network.example.com/spine"


def readme_section(heading):
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert text.count(heading + "\n") == 1, heading
    body = text[text.index(heading + "\n") + len(heading):]
    return body[:body.index("\n### ")]


def load(name):
    with open(os.path.join(ROOT, "examples", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def judged(name):
    """The example as site.yml judges it before writing anything: one SlurmCluster and its NodeSets, valid with the
    installer's default policy. The live objects (a uid each, as the API server gives them)."""
    cluster, nodesets = definitions.split_definition(load(name))
    specs.validate_cluster_with_nodesets(cluster, nodesets, policy=policies.normalize({}))
    cluster["metadata"]["uid"] = "uid-demo"
    for ns in nodesets:
        ns["metadata"]["uid"] = "uid-" + ns["metadata"]["name"]
    return cluster, nodesets


def manifest(p, kind, name):
    return next(m for m in p.objects.manifests if m["kind"] == kind and m["metadata"]["name"] == name)


def slurm(*lines):
    return scontrol.parse_show_node("\n".join(lines))


def k8s_nodes(**labels):
    """Kubernetes nodes as the converge reads them (observe.node_facts)."""
    return dict((host, {"labels": dict(lab), "unschedulable": False, "taints": [], "conditions": {}})
                for host, lab in labels.items())


def worker_pod(name, nodeset, host, uid=None):
    return {"metadata": {"name": name, "uid": uid or "uid-" + name,
                         "labels": names.labels("demo", names.COMPONENT_WORKER, nodeset)},
            "spec": {"nodeName": host},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_each_section_links_its_example_and_the_api_reference(heading):
    section = readme_section(heading)
    example = SECTIONS[heading]
    assert "[`examples/%s`](examples/%s)" % (example, example) in section
    assert "(docs/api.md#" in section
    with open(os.path.join(ROOT, "docs", "api.md")) as f:
        headings = [line.lstrip("#").strip() for line in f if line.startswith("#")]
    anchors = set(re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings)
    for anchor in re.findall(r"\(docs/api\.md#([^)]+)\)", section):
        assert anchor in anchors, anchor


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_the_tests_a_section_names_exist(heading):
    section = readme_section(heading).replace("/\n", "/")
    named = re.findall(r"`(tests/[a-z0-9_/]+\.py)`", section)
    assert named
    for path in named:
        assert os.path.exists(os.path.join(ROOT, path)), path
    for path, cls in re.findall(r"`(tests/[a-z0-9_/]+\.py)`, `(Test\w+)`", section):
        with open(os.path.join(ROOT, path)) as f:
            assert "\nclass %s" % cls in f.read(), (path, cls)


@pytest.mark.parametrize("example", sorted(SECTIONS.values()))
def test_the_example_is_valid_with_the_installers_default_policy(example):
    cluster, nodesets = judged(example)
    assert cluster["metadata"]["name"] == "demo" and all(
        ns["spec"]["clusterRef"]["name"] == "demo" for ns in nodesets)


def test_the_elastic_example_needs_the_operator_and_site_yml_alone_refuses_it_naming_the_field():
    _cluster, nodesets = judged("elastic-cluster.yaml")
    assert [e.path for e in definitions.direct_converge_errors(nodesets)] == ["nodesets[burst].spec.elastic"]
    assert "`nodesets[burst].spec.elastic`" in readme_section("### Capacity that follows the queue: elastic NodeSets")
    for example in ("placement-cluster.yaml", "node-labels-cluster.yaml"):
        assert definitions.direct_converge_errors(judged(example)[1]) == []


def test_the_elastic_section_zero_pods_then_exactly_the_jobs_two_then_zero():
    cluster, nodesets = judged("elastic-cluster.yaml")
    burst = next(ns for ns in nodesets if ns["metadata"]["name"] == "burst")
    top = burst["spec"]["elastic"]["maxNodes"]
    every = ["demo-burst-%d" % i for i in range(top)]

    def table(**states):
        return slurm(*("NodeName=%s CPUAlloc=0 CPUTot=1 State=%s" % (n, states.get(n, "IDLE+CLOUD+POWERED_DOWN"))
                       for n in every))

    # Nothing queued: every name in Slurm, powered down, and no pod.
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": table()}, NOW)
    conf = manifest(p, "ConfigMap", "demo-slurm-config")["data"]["slurm.conf"]
    assert "NodeName=demo-burst-[0-%d] " % (top - 1) in conf and " State=CLOUD" in conf
    suspend = cluster["spec"]["slurm"]["powerSaving"]["suspendTime"]
    assert "SuspendTime=%d\n" % suspend in conf
    assert ("StatefulSet", "demo-burst") not in [(m["kind"], m["metadata"]["name"]) for m in p.objects.manifests]
    assert p.pods.create_pods == [] and p.report.nodesets["burst"]["poweredDown"] == top
    # sbatch -N2 -C burst: Slurm powers up two of them (any two: here 1 and 3) -> exactly their pods.
    up = {"demo-burst-1": "MIXED+CLOUD+POWERING_UP", "demo-burst-3": "MIXED+CLOUD+POWERING_UP"}
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": table(**up)}, NOW)
    assert sorted(m["metadata"]["name"] for m in p.pods.create_pods) == ["demo-burst-1", "demo-burst-3"]
    assert all(m["metadata"]["ownerReferences"][0]["uid"] == "uid-burst" for m in p.pods.create_pods)
    # The job runs: nothing goes.
    live = dict((n, worker_pod(n, "burst", "node-a")) for n in up)
    running = {"demo-burst-1": "ALLOCATED+CLOUD", "demo-burst-3": "ALLOCATED+CLOUD"}
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": live, "slurm": table(**running)}, NOW)
    assert p.pods.create_pods == [] and p.pods.delete_pods == []
    # suspendTime idle later Slurm powered them down: their pods go, zero again.
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": live, "slurm": table()}, NOW)
    assert sorted(n for n, _uid in p.pods.delete_pods) == ["demo-burst-1", "demo-burst-3"] and p.pods.create_pods == []
    # The README says which example sets what.
    section = readme_section("### Capacity that follows the queue: elastic NodeSets")
    assert "an elastic `burst` of up to %d nodes" % top in section
    assert "  elastic: {maxNodes: %d, minNodes: %d}" % (top, burst["spec"]["elastic"]["minNodes"]) in section


def test_the_placement_section_one_per_node_pinned_every_node():
    cluster, nodesets = judged("placement-cluster.yaml")
    by_name = dict((ns["metadata"]["name"], ns) for ns in nodesets)
    assert by_name["cpu"]["spec"]["placement"] == {"onePerNode": True, "pinned": True}
    assert by_name["every"]["spec"]["placement"] == {"everyNode": True, "nodeSelector": {EVERY_LABEL: "true"}}
    nodes = k8s_nodes(**{"n1": {EVERY_LABEL: "true"}, "n2": {}})
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": None, "k8s_nodes": nodes}, NOW)
    # onePerNode: a required anti-affinity on the hostname; pinned: created gated, let go by the converge.
    pod = manifest(p, "StatefulSet", "demo-cpu")["spec"]["template"]["spec"]
    [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert pod["schedulingGates"] == [{"name": "slurm.soperator.dev/pin"}]
    # everyNode: no StatefulSet; one worker on the labelled node only, named for it and bound to it.
    assert ("StatefulSet", "demo-every") not in [(m["kind"], m["metadata"]["name"]) for m in p.objects.manifests]
    [made] = p.pods.create_pods
    assert made["metadata"]["name"] == names.every_node_worker("demo", "every", "n1")
    assert made["spec"]["nodeName"] == "n1"
    assert p.report.nodesets["every"]["workerNodes"] == {made["metadata"]["name"]: "n1"}
    # The cpu workers ran on n1 and n2: pinned there; a deleted one, made again gated, goes back to its node.
    live = {"demo-cpu-0": worker_pod("demo-cpu-0", "cpu", "n1"), "demo-cpu-1": worker_pod("demo-cpu-1", "cpu", "n2")}
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": live, "slurm": None, "k8s_nodes": nodes}, NOW)
    assert p.report.nodesets["cpu"]["pins"] == {"demo-cpu-0": "n1", "demo-cpu-1": "n2"}
    pinned = [dict(ns, status={"pins": {"demo-cpu-0": "n1", "demo-cpu-1": "n2"}}) if ns["metadata"]["name"] == "cpu"
              else ns for ns in nodesets]
    again = dict(live, **{"demo-cpu-1": {"metadata": {"name": "demo-cpu-1", "uid": "uid-new"}, "spec": {
        "schedulingGates": [{"name": "slurm.soperator.dev/pin"}]}, "status": {"phase": "Pending"}}})
    p = converge.plan(cluster, pinned, {"statefulsets": {}, "pods": again, "slurm": None, "k8s_nodes": nodes}, NOW)
    assert p.pods.ungate["demo-cpu-1"][:2] == ("uid-new", "n2")
    # Unlabelling n1 drains its every-node worker first (its pod stays until the node is drained and idle).
    worker = made["metadata"]["name"]
    slurm_line = "NodeName=%s CPUAlloc=0 CPUTot=1 State=IDLE+DYNAMIC_NORM AvailableFeatures=every" % worker
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {worker: worker_pod(worker, "every", "n1")},
                                          "slurm": slurm(slurm_line), "k8s_nodes": k8s_nodes(n1={}, n2={})}, NOW)
    assert p.slurm.drain == {names.REASON_SCALE_IN: [worker]} and p.pods.delete_pods == []
    section = readme_section("### Where workers run: one per node, pinned, every node")
    assert "`kubectl label node n1 %s=true`" % EVERY_LABEL in section


def test_the_node_labels_section_features_and_topology():
    cluster, nodesets = judged("node-labels-cluster.yaml")
    [cpu] = nodesets
    assert cpu["spec"]["featureLabelPrefix"] == FEATURE_PREFIX
    assert cluster["spec"]["topology"] == {"plugin": "tree", "levels": [LEAF, SPINE]}
    nodes = k8s_nodes(n1={LEAF: "leaf1", SPINE: "spine1", FEATURE_PREFIX + "ib": "true"},
                      n2={LEAF: "leaf2", SPINE: "spine1"})
    live = {"demo-cpu-0": worker_pod("demo-cpu-0", "cpu", "n1"), "demo-cpu-1": worker_pod("demo-cpu-1", "cpu", "n2")}
    table = slurm(*("NodeName=%s CPUAlloc=0 CPUTot=1 State=IDLE+DYNAMIC_NORM AvailableFeatures=cpu "
                    "ActiveFeatures=cpu" % n for n in sorted(live)))
    p = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": live, "slurm": table, "k8s_nodes": nodes}, NOW)
    assert p.slurm.set_features == {"demo-cpu-0": ["cpu", "ib"]}
    conf = manifest(p, "ConfigMap", "demo-slurm-config")["data"]
    assert "TopologyPlugin=topology/tree" in conf["slurm.conf"]
    lines = [line for line in conf["topology.conf"].splitlines() if not line.startswith("#")]
    assert "SwitchName=leaf1 Nodes=demo-cpu-0" in lines and "SwitchName=leaf2 Nodes=demo-cpu-1" in lines
    assert "SwitchName=spine1 Switches=leaf1,leaf2" in lines
    section = readme_section("### Slurm features and topology from node labels")
    assert "`kubectl label node n1 %sib=true`" % FEATURE_PREFIX in section
    assert "levels: [%s, %s]" % (LEAF, SPINE) in section and "featureLabelPrefix: %s" % FEATURE_PREFIX in section


def test_the_defaults_the_sections_lean_on_are_the_codes():
    """The examples set what the sections describe, over the defaults the schema gives."""
    saving = schema.slurm_cluster_schema()["properties"]["spec"]["properties"]["slurm"]["properties"]["powerSaving"]
    cluster, _ = judged("elastic-cluster.yaml")
    given = cluster["spec"]["slurm"]["powerSaving"]
    assert given["suspendTime"] != saving["properties"]["suspendTime"]["default"]  # the example shortens it
    assert given["resumeTimeout"] == saving["properties"]["resumeTimeout"]["default"]
