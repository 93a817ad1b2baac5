"""The converge adapter's projection against a real kube-apiserver: a worker pod's SlurmNodeReady condition written
through pods/status (and not rewritten when unchanged), and the Kubernetes nodes of the pods read for their cordon."""

import time

import pytest
from kubernetes import client, dynamic
from prerequisites import unavailable

from ansible_collections.soperator.slurm.plugins.module_utils import converge, names, projection, scale_in
from ansible_collections.soperator.slurm.plugins.module_utils._converge import Converger

pytestmark = pytest.mark.cluster

LINE = ("NodeName=demo-cpu-0 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 State=IDLE+DRAIN+DYNAMIC_NORM "
        "Reason=soperator: node cordoned [root@1700000000]")


def kwok_node(core):
    nodes = [n for n in core.list_node().items if (n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake"
             and not n.spec.taints]
    if not nodes:
        unavailable("no kwok node (the local cluster has them: hack/localcluster.py up)")
    return nodes[0].metadata.name


def wait(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def test_the_pod_condition_is_written_once_and_the_nodes_of_the_pods_are_read(k8s, namespace):
    core = client.CoreV1Api(k8s)
    host = kwok_node(core)
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "demo-cpu-0", "labels": {names.LABEL_CLUSTER: "demo"}},
        "spec": {"nodeName": host, "containers": [{"name": "slurmd", "image": "soperator/slurm-worker:0.1.0"}]}})
    wait(lambda: core.read_namespaced_pod("demo-cpu-0", namespace).status.phase == "Running", "the pod running")
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_CLUSTER + "=demo"))
    plan = converge.Plan()
    plan.pod_conditions = {"demo-cpu-0": projection.pod_condition(scale_in.parse_show_node(LINE)["demo-cpu-0"])}
    conv.report_pods({"pods": pods}, plan, "2026-11-24T00:00:00Z")

    live = core.read_namespaced_pod("demo-cpu-0", namespace)
    cond = next(c for c in live.status.conditions if c.type == "SlurmNodeReady")
    assert (cond.status, cond.reason) == ("False", "Drained")
    assert cond.message == "Slurm node IDLE+DRAIN+DYNAMIC_NORM: soperator: node cordoned"
    assert any(c.type == "Ready" for c in live.status.conditions)  # the kubelet's conditions stay
    # Unchanged: no second write.
    pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_CLUSTER + "=demo"))
    version = pods["demo-cpu-0"]["metadata"]["resourceVersion"]
    conv.report_pods({"pods": pods}, plan, "2026-11-24T00:01:00Z")
    assert core.read_namespaced_pod("demo-cpu-0", namespace).metadata.resource_version == version

    found, error = conv.kubernetes_nodes(pods)
    assert error is None and found[host]["unschedulable"] is False
    assert found[host]["conditions"].get("Ready") == "True"


def test_moving_an_unhealthy_worker_cordons_its_node_and_evicts_the_pod(k8s, namespace):
    core = client.CoreV1Api(k8s)
    host = kwok_node(core)
    pod = core.create_namespaced_pod(namespace, {
        "metadata": {"name": "demo-cpu-1", "labels": {names.LABEL_CLUSTER: "demo"}},
        "spec": {"nodeName": host, "containers": [{"name": "slurmd", "image": "soperator/slurm-worker:0.1.0"}]}})
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    try:
        # another pod's UID: the precondition refuses, nothing is evicted
        assert conv.move_pod("demo-cpu-1", "not-its-uid", None, "x") is False
        assert core.read_namespaced_pod("demo-cpu-1", namespace).metadata.deletion_timestamp is None
        assert conv.move_pod("demo-cpu-1", pod.metadata.uid, host, "soperator: health: gpu: 7 of 8 GPUs visible")
        node = core.read_node(host)
        assert node.spec.unschedulable is True
        assert node.metadata.annotations[names.ANNOTATION_CORDONED] == (
            "%s/demo-cpu-1: soperator: health: gpu: 7 of 8 GPUs visible" % namespace)

        def gone():
            try:
                return core.read_namespaced_pod("demo-cpu-1", namespace).metadata.deletion_timestamp is not None
            except client.ApiException as e:
                return e.status == 404
        wait(gone, "the pod evicted")
    finally:
        core.patch_node(host, {"spec": {"unschedulable": None},
                               "metadata": {"annotations": {names.ANNOTATION_CORDONED: None}}})
