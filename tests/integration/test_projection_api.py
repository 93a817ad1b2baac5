"""The converge adapter's projection against a real kube-apiserver: a worker pod's SlurmNodeReady condition written
through pods/status (and not rewritten when unchanged), and the Kubernetes nodes of the pods read for their cordon; a
rolling update's wait in a NodeSet's status and its printer column, and the Event of a node given up with its jobs."""

import json

import pytest
from kubernetes import client, dynamic
from polling import wait_until
from prerequisites import unavailable

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.converger import Converger
from ansible_collections.soperator.slurm.plugins.module_utils.plan import decided, lost, model, projection
from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

pytestmark = pytest.mark.cluster
NOW = "2026-11-24T00:00:00Z"

LINE = ("NodeName=demo-cpu-0 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 State=IDLE+DRAIN+DYNAMIC_NORM "
        "Reason=soperator: node cordoned [root@1700000000]")


def kwok_node(core):
    nodes = [n for n in core.list_node().items if (n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake"
             and not n.spec.taints]
    if not nodes:
        unavailable("no kwok node (the local cluster has them: hack/localcluster.py up)")
    return nodes[0].metadata.name


def test_the_pod_condition_is_written_once_and_the_nodes_of_the_pods_are_read(k8s, namespace):
    core = client.CoreV1Api(k8s)
    host = kwok_node(core)
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "demo-cpu-0", "labels": {names.LABEL_CLUSTER: "demo"}},
        "spec": {"nodeName": host, "containers": [{"name": "slurmd", "image": "soperator/slurm-worker:0.1.0"}]}})
    wait_until(lambda: core.read_namespaced_pod("demo-cpu-0", namespace).status.phase == "Running", 30,
               "the pod running")
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_CLUSTER + "=demo"))
    draft = model.Draft()
    draft.pod_conditions = {"demo-cpu-0": projection.pod_condition(scontrol.parse_show_node(LINE)["demo-cpu-0"])}
    plan = decided.freeze(draft)
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
        wait_until(gone, 30, "the pod evicted")
    finally:
        core.patch_node(host, {"spec": {"unschedulable": None},
                               "metadata": {"annotations": {names.ANNOTATION_CORDONED: None}}})


def test_a_pod_of_a_lost_node_is_deleted_at_once_and_only_that_incarnation(k8s, namespace):
    # A node no kubelet serves: a graceful delete would leave the pod Terminating (no one confirms).
    core = client.CoreV1Api(k8s)
    pod = core.create_namespaced_pod(namespace, {
        "metadata": {"name": "demo-cpu-2", "labels": {names.LABEL_CLUSTER: "demo"}},
        "spec": {"nodeName": "soperator-test-lost-node",
                 "containers": [{"name": "slurmd", "image": "soperator/slurm-worker:0.1.0"}]}})
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    why = "Kubernetes node soperator-test-lost-node not Ready (Unknown) for 61 s and its slurmd not responding"
    assert conv.replace_lost(model.LostPod("demo-cpu-2", "not-its-uid", "soperator-test-lost-node", "cpu", why)) \
        is False
    assert core.read_namespaced_pod("demo-cpu-2", namespace).metadata.deletion_timestamp is None
    assert conv.replace_lost(model.LostPod("demo-cpu-2", pod.metadata.uid, "soperator-test-lost-node", "cpu", why))
    with pytest.raises(client.ApiException) as gone:  # at once: no grace period to wait for
        core.read_namespaced_pod("demo-cpu-2", namespace)
    assert gone.value.status == 404
    events = [e for e in core.list_namespaced_event(namespace).items if e.involved_object.name == "cpu"
              and e.reason == lost.EVENT_LOST_WORKER_REPLACED]
    assert [(e.type, e.message) for e in events] == [
        ("Warning", "pod demo-cpu-2 deleted to be made again on a Ready node: " + why)]
    assert conv.replace_lost(model.LostPod("demo-cpu-2", pod.metadata.uid, "soperator-test-lost-node", "cpu", why)) \
        is False  # already gone: no second Event


def test_a_rolls_wait_shows_in_the_nodesets_status_and_table_and_a_given_up_node_in_an_event(k8s, namespace,
                                                                                              apply_crds):
    apply_crds("projection-test")
    custom = client.CustomObjectsApi(k8s)
    nodeset = custom.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.NODESET_PLURAL, {
        "apiVersion": names.API_VERSION, "kind": names.NODESET_KIND, "metadata": {"name": "cpu"},
        "spec": {"clusterRef": {"name": "demo"}, "replicas": 2, "updateStrategy": {"proceedAfter": "90s"}}})
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    plan = model.Draft()
    facts = {"statefulset": "demo-cpu", "replicas": 2, "desired": 2, "readyReplicas": 2, "currentReplicas": 2,
             "serving": 1, "leaving": False, "updatedReplicas": 1, "outdatedReplicas": 1, "note": None,
             "waitingFor": [{"node": "demo-cpu-0", "since": 1700000000, "proceedAt": 1700000090, "jobs": ["41"]}]}
    frozen = decided.freeze(plan)
    conv.patch_status(names.NODESET_KIND, "cpu", lambda old, obj: st.nodeset_status(old, obj, frozen, facts, "", NOW))
    stored = custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.NODESET_PLURAL, "cpu")
    assert stored["status"]["rollingUpdate"]["waitingFor"] == [
        {"node": "demo-cpu-0", "jobs": ["41"], "since": "2023-11-14T22:13:20Z", "proceedAt": "2023-11-14T22:14:50Z"}]
    # What `kubectl get nodeset` prints: the API server's table, from the CRD's printer columns.
    request = k8s.param_serialize("GET", "/apis/%s/%s/namespaces/%s/%s/cpu" % (
        names.GROUP, names.VERSION, namespace, names.NODESET_PLURAL),
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, auth_settings=["BearerToken"])
    response = k8s.call_api(*request)
    response.read()
    table = json.loads(response.data)
    row = dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"]))
    assert row["Roll Waits For"] == ("demo-cpu-0 (job 41) since 2023-11-14T22:13:20Z, replaced at "
                                     "2023-11-14T22:14:50Z"), row
    # Given up: the Event on the NodeSet, accepted by the API server as the converge writes it.
    entry = {"nodeset": "cpu", "nodeset_uid": nodeset["metadata"]["uid"], "node": "demo-cpu-0",
             "why": "rolling update", "setting": "spec.updateStrategy.proceedAfter", "value": "90s",
             "since": 1700000000, "pod_uid": "u", "jobs": [str(n) for n in range(400)]}
    message = conv.record_event(entry)
    assert conv.warnings == []
    events = client.CoreV1Api(k8s).list_namespaced_event(
        namespace, field_selector="involvedObject.name=cpu,reason=DrainTimeoutExpired").items
    assert len(events) == 1 and events[0].type == "Warning" and events[0].involved_object.uid == nodeset[
        "metadata"]["uid"]
    assert events[0].message == message and message.startswith("Pod demo-cpu-0 replaced by the rolling update")
    # The wait is over: the merge patch removes it.
    facts["waitingFor"] = []
    frozen = decided.freeze(plan)
    conv.patch_status(names.NODESET_KIND, "cpu", lambda old, obj: st.nodeset_status(old, obj, frozen, facts, "", NOW))
    stored = custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.NODESET_PLURAL, "cpu")
    assert "rollingUpdate" not in stored["status"]
