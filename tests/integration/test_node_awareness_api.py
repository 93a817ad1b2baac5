"""Node awareness against the real kube-apiserver, scheduler and kwok nodes: the rendered one-per-node placement
(more workers than nodes: the extra stay Pending, never two on a node, the scheduler's reason in the NodeSet's
status), the converge adapter reading node labels that the planner turns into Slurm features, pinned workers, and
every-node NodeSets following node labels and cordons."""


import pytest
from kubernetes import client, dynamic
from polling import wait_until
from prerequisites import unavailable
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.converger import Converger
from ansible_collections.soperator.slurm.plugins.module_utils.plan import (
    decided,
    every_node,
    model,
    modes,
    node_labels,
    pins,
    projection,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import (
    every_node_pods as render_every_node_pods,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

pytestmark = pytest.mark.cluster


def schedulable_kwok_nodes(core):
    """The kwok nodes a pod may land on; none is a missing prerequisite (the local cluster has some): a failure under
    CI=true, a skip elsewhere."""
    found = sorted(n.metadata.name for n in core.list_node(label_selector="type=kwok").items
                   if not n.spec.taints and not n.spec.unschedulable)
    if not found:
        unavailable("no schedulable kwok node (type=kwok, no taint, not cordoned)")
    return found


def worker_statefulset(nodeset_spec, namespace):
    """The rendered worker StatefulSet of NodeSet cpu, its pod reduced to one container that needs nothing (kwok
    runs no image): the placement, labels and selector are the rendered ones."""
    cluster = make_cluster(namespace=namespace)
    rendered = render_cluster(cluster, [make_nodeset("cpu", nodeset_spec, namespace=namespace)])
    sts = next(m for m in rendered if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-cpu")
    pod = sts["spec"]["template"]["spec"]
    kept = dict((k, pod[k]) for k in ("affinity", "nodeSelector", "tolerations") if k in pod)
    sts["spec"]["template"]["spec"] = dict(kept, containers=[{"name": "slurmd", "image": "example.invalid/none"}])
    sts["spec"]["volumeClaimTemplates"] = []
    return sts


def test_one_per_node_leaves_the_extra_worker_pending_and_says_why(k8s, namespace):
    core, apps = client.CoreV1Api(k8s), client.AppsV1Api(k8s)
    hosts = schedulable_kwok_nodes(core)
    replicas = len(hosts) + 1
    spec = {"replicas": replicas, "placement": {"onePerNode": True, "nodeSelector": {"type": "kwok"}}}
    apps.create_namespaced_stateful_set(namespace, worker_statefulset(spec, namespace))

    def settled():
        pods = core.list_namespaced_pod(namespace, label_selector=names.LABEL_NODESET + "=cpu").items
        placed = [p for p in pods if p.spec.node_name]
        pending = [p for p in pods if any(c.type == "PodScheduled" and c.status == "False"
                                          for c in p.status.conditions or ())]
        return (pods, placed, pending) if len(placed) == len(hosts) and len(pending) == 1 else None

    pods, placed, pending = wait_until(settled, 60, "%d workers placed and one Pending" % len(hosts))
    assert sorted(p.spec.node_name for p in placed) == hosts  # one on each node, never two on one
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    observed = {"pods": dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_NODESET + "=cpu"))}
    ctx = model.Context(specs.validate_cluster(make_cluster(namespace=namespace)),
                        [specs.validate_nodeset(make_nodeset("cpu", spec, namespace=namespace))], [], {}, observed, 0)
    p = model.Draft()
    p.nodesets["cpu"] = {"desired": replicas, "replicas": replicas, "readyReplicas": len(hosts),
                         "serving": len(hosts), "currentReplicas": replicas}
    node_labels.plan_unplaced(p, ctx)
    status = st.nodeset_status({}, ctx.valid[0], decided.freeze(p), p.nodesets["cpu"], None,
                              "2026-11-26T00:00:00Z")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert pending[0].metadata.name in ready["message"] and "anti-affinity" in ready["message"], ready["message"]


def test_node_labels_read_by_the_adapter_become_features(k8s, namespace):
    core = client.CoreV1Api(k8s)
    hosts = schedulable_kwok_nodes(core)
    host = hosts[0]
    prefix = "test.soperator.dev/%s-" % namespace[-12:]  # this test's own label keys: others' tests see none
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "demo-cpu-0", "labels": {names.LABEL_CLUSTER: "demo"}},
        "spec": {"nodeName": host, "containers": [{"name": "slurmd", "image": "example.invalid/none"}]}})
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    nodeset = specs.validate_nodeset(make_nodeset("cpu", {"featureLabelPrefix": prefix}, namespace=namespace))
    def plan(features="cpu"):
        line = "NodeName=demo-cpu-0 State=IDLE+DYNAMIC_NORM AvailableFeatures=%s ActiveFeatures=%s" % (features,
                                                                                                   features)
        pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_CLUSTER + "=demo"))
        found, error = conv.kubernetes_nodes(pods)
        assert error is None
        ctx = model.Context(specs.validate_cluster(make_cluster(namespace=namespace)), [nodeset], [], {},
                            {"pods": pods, "slurm": scontrol.parse_show_node(line), "k8s_nodes": found}, 0)
        p = model.Draft()
        p.nodesets["cpu"] = {}
        node_labels.plan_features(p, ctx)
        return p

    try:
        core.patch_node(host, {"metadata": {"labels": {prefix + "ib": "true", prefix + "model": "h100"}}})
        p = plan()
        assert p.set_features == {"demo-cpu-0": ["cpu", "ib", "model_h100"]}
        assert p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib", "model_h100"]}
    finally:
        core.patch_node(host, {"metadata": {"labels": {prefix + "ib": None, prefix + "model": None}}})
    # Applied and recorded; the labels gone: exactly those features go.
    nodeset["status"] = {"labelFeatures": {"demo-cpu-0": ["ib", "model_h100"]}}
    assert plan("cpu,ib,model_h100").set_features == {"demo-cpu-0": ["cpu"]}


def test_a_label_slurm_cannot_take_is_one_warning_event_and_the_features_stay(k8s, namespace):
    """Label values with a space, a comma, '=' or a newline never reach the converge: the API server refuses them. One
    it accepts but Slurm cannot take (a feature longer than 63 characters) is refused by the planner: a Warning Event
    LabelRefused on the NodeSet, naming the label, and the node's features are left as they are."""
    core = client.CoreV1Api(k8s)
    hosts = schedulable_kwok_nodes(core)
    host = hosts[0]
    prefix = "test.soperator.dev/%s-" % namespace[-12:]
    for value in ("a b", "a,b", "a=b", "a\nb"):
        with pytest.raises(client.ApiException) as refused:
            core.patch_node(host, {"metadata": {"labels": {prefix + "x": value}}})
        assert refused.value.status == 422, value
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "demo-cpu-0", "labels": {names.LABEL_CLUSTER: "demo"}},
        "spec": {"nodeName": host, "containers": [{"name": "slurmd", "image": "example.invalid/none"}]}})
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    nodeset = specs.validate_nodeset(make_nodeset("cpu", {"featureLabelPrefix": prefix}, namespace=namespace))
    nodeset["status"] = {"labelFeatures": {"demo-cpu-0": ["ib"]}}
    long_value = "v" * 63  # a label value Kubernetes takes; the feature gpu_<value> is 67 characters
    try:
        core.patch_node(host, {"metadata": {"labels": {prefix + "ib": "true", prefix + "gpu": long_value}}})
        pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_CLUSTER + "=demo"))
        found, error = conv.kubernetes_nodes(pods)
        assert error is None
        line = "NodeName=demo-cpu-0 State=IDLE+DYNAMIC_NORM AvailableFeatures=cpu,ib ActiveFeatures=cpu,ib"
        ctx = model.Context(specs.validate_cluster(make_cluster(namespace=namespace)), [nodeset], [], {},
                            {"pods": pods, "slurm": scontrol.parse_show_node(line), "k8s_nodes": found}, 0)
        p = model.Draft()
        p.nodesets["cpu"] = {}
        node_labels.plan_features(p, ctx)
        node_labels.plan_label_events(p, ctx)
    finally:
        core.patch_node(host, {"metadata": {"labels": {prefix + "ib": None, prefix + "gpu": None}}})
    assert p.set_features == {} and p.nodesets["cpu"]["labelFeatures"] == {"demo-cpu-0": ["ib"]}
    for set_name, message in p.label_events:
        conv.label_event(set_name, message)
    events = [e for e in core.list_namespaced_event(namespace).items if e.reason == node_labels.EVENT_LABEL_REFUSED]
    assert len(events) == 1 and events[0].type == "Warning", events
    assert events[0].involved_object.kind == names.NODESET_KIND and events[0].involved_object.name == "cpu"
    assert prefix + "gpu" in events[0].message and "cannot be a Slurm feature" in events[0].message


def test_a_pinned_worker_returns_to_its_node_and_its_nodes_deletion_releases_the_pin(k8s, namespace, own_nodes):
    core, apps = client.CoreV1Api(k8s), client.AppsV1Api(k8s)
    spec = {"replicas": 1, "placement": {
        "onePerNode": True, "pinned": True, "nodeSelector": {"soperator-test": namespace},
        "tolerations": [{"key": "soperator-test", "value": namespace, "effect": "NoSchedule"}]}}
    sts = worker_statefulset(spec, namespace)
    assert sts["spec"]["template"]["spec"].get("schedulingGates") is None  # the reduced pod: gate it as rendered
    rendered = render_cluster(make_cluster(namespace=namespace), [make_nodeset("cpu", spec, namespace=namespace)])
    gates = next(m for m in rendered if m["metadata"]["name"] == "demo-cpu" and m["kind"] == "StatefulSet")[
        "spec"]["template"]["spec"]["schedulingGates"]
    sts["spec"]["template"]["spec"]["schedulingGates"] = gates
    apps.create_namespaced_stateful_set(namespace, sts)
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    nodeset = specs.validate_nodeset(make_nodeset("cpu", spec, namespace=namespace))
    cluster = specs.validate_cluster(make_cluster(namespace=namespace))
    nodeset["status"] = {"pins": {}}

    def nodes():
        """The nodes as the converge reads them (observe.kubernetes_nodes: the pods' and the pins' nodes)."""
        pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_NODESET + "=cpu"))
        found, error = conv.kubernetes_nodes(pods, sorted(nodeset["status"]["pins"].values()))
        assert error is None
        return pods, found

    def converge():
        """One pass of the pins' concern: observe, plan, let a gated pod go; the status recorded."""
        pods, found = nodes()
        ctx = model.Context(cluster, [nodeset], [], {}, {"pods": pods, "k8s_nodes": found}, 0)
        p = model.Draft()
        pins.plan_pins(p, ctx)
        done = conv.ungate(p.ungate)
        nodeset["status"]["pins"] = p.nodesets["cpu"]["pins"]
        return done

    def placed_anew(old_uid):
        def placed():
            try:
                pod = core.read_namespaced_pod("demo-cpu-0", namespace)
            except client.ApiException as e:
                if e.status == 404:  # not made again yet by the StatefulSet controller
                    return None
                raise
            if pod.metadata.uid == old_uid:
                return None
            if pod.spec.scheduling_gates:
                converge()
                return None
            return pod.spec.node_name and (pod.metadata.uid, pod.spec.node_name)
        return wait_until(placed, 60, "a new demo-cpu-0 placed")

    uid, first = placed_anew(None)
    converge()
    assert nodeset["status"]["pins"] == {"demo-cpu-0": first}
    for _ in range(10):
        core.delete_namespaced_pod("demo-cpu-0", namespace, grace_period_seconds=0)
        uid, host = placed_anew(uid)
        assert host == first
    other = [n for n in own_nodes if n != first][0]
    core.delete_node(first)
    core.delete_namespaced_pod("demo-cpu-0", namespace, grace_period_seconds=0)
    uid, host = placed_anew(uid)
    assert host == other
    converge()
    assert nodeset["status"]["pins"] == {"demo-cpu-0": other}


def test_every_node_follows_labels_and_a_cordoned_node_keeps_its_worker(k8s, namespace, own_nodes):
    """spec.placement.everyNode against the real API server and kwok nodes: the converge's own reads (every Node,
    listed), planner and pod creation. Labelling the two nodes makes one worker on each, named for it; unlabelling one
    drains its worker first (Slurm's answers are `scontrol show node` lines: kwok runs no slurmd), removes its pod
    once idle and then its Slurm record; a cordoned node keeps its worker, drained (drainCordoned), and a worker
    deleted there is made again there (Slinky #259)."""
    core = client.CoreV1Api(k8s)
    label = "every.soperator.dev/t%s" % namespace[-6:]  # the namespace's random hex: a valid label name
    spec = {"placement": {"everyNode": True, "nodeSelector": {"soperator-test": namespace, label: "yes"},
                          "tolerations": [{"key": "soperator-test", "value": namespace, "effect": "NoSchedule"}]}}
    cluster = specs.validate_cluster(make_cluster({"healthChecks": {"kubernetesNodes": {"drainCordoned": True}}},
                                                  namespace=namespace))
    nodeset = specs.validate_nodeset(make_nodeset("cpu", spec, namespace=namespace))
    conv = Converger(dynamic.DynamicClient(k8s), namespace, "demo", "test", None)
    worker = dict((n, names.every_node_worker("demo", "cpu", n)) for n in own_nodes)

    def slurm(*lines):
        return scontrol.parse_show_node("\n".join(
            "NodeName=%s CPUAlloc=0 CPUTot=2 State=%s+DYNAMIC_NORM AvailableFeatures=cpu ActiveFeatures=cpu%s"
            % (worker[n], state, " Reason=%s [root@1]" % reason if reason else "") for n, state, reason in lines))

    def converge(table=None):
        """One pass of the every-node and projection concerns: observe (pods, every Node), plan, make the pods."""
        pods = dict((p["metadata"]["name"], p) for p in conv.list("v1", "Pod", names.LABEL_NODESET + "=cpu"))
        found, error = conv.kubernetes_nodes(pods, every=True)
        assert error is None
        ctx = model.Context(cluster, [nodeset], [], {}, {"pods": pods, "slurm": table, "k8s_nodes": found}, 0)
        p = model.Draft()
        p.valid_nodesets = [nodeset]
        hashes, render_pod = render_every_node_pods(cluster, [nodeset])
        every_node.plan_every_node(p, ctx, hashes, render_pod)
        projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
        done = {}
        conv.act_elastic(decided.freeze(p), None, done)
        for pod_name, uid in p.delete_pods:
            conv.api.delete("v1", "Pod", pod_name, namespace, uid=uid)
        return p, done

    def placed():
        pods = core.list_namespaced_pod(namespace, label_selector=names.LABEL_NODESET + "=cpu").items
        return sorted((p.metadata.name, p.spec.node_name) for p in pods if not p.metadata.deletion_timestamp)

    p, done = converge()
    assert done["created_pods"] == [] and placed() == []  # no node labelled: no worker
    for host in own_nodes:
        core.patch_node(host, {"metadata": {"labels": {label: "yes"}}})
    p, done = converge()
    assert sorted(done["created_pods"]) == sorted(worker.values())
    assert placed() == sorted((worker[n], n) for n in own_nodes)  # exactly those nodes, the derived names
    assert p.nodesets["cpu"]["workerNodes"] == dict((worker[n], n) for n in own_nodes)
    wait_until(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(
        namespace, label_selector=names.LABEL_NODESET + "=cpu").items), 60, "kwok runs both workers")
    p, done = converge(slurm((own_nodes[0], "IDLE", None), (own_nodes[1], "IDLE", None)))
    assert done["created_pods"] == [] and p.drain == {} and p.delete_pods == []  # a second pass changes nothing

    gone, kept = own_nodes
    core.patch_node(gone, {"metadata": {"labels": {label: None}}})
    p, done = converge(slurm((gone, "IDLE", None), (kept, "IDLE", None)))
    assert p.drain == {names.REASON_SCALE_IN: [worker[gone]]} and p.delete_pods == []  # drained first
    assert placed() == sorted((worker[n], n) for n in own_nodes)
    drained = slurm((gone, "IDLE+DRAIN", names.REASON_SCALE_IN), (kept, "IDLE", None))
    p, done = converge(drained)
    assert [n for n, uid in p.delete_pods] == [worker[gone]]
    wait_until(lambda: placed() == [(worker[kept], kept)], 60, "the unlabelled node's worker gone")
    # Gone for good, not only deleting (kwok finishes the deletion a moment later): only then is it forgotten.
    wait_until(lambda: worker[gone] not in [p.metadata.name for p in core.list_namespaced_pod(namespace).items],
               60, "the unlabelled node's worker pod deleted")
    p, done = converge(drained)
    assert p.delete_nodes == [worker[gone]]  # no ghost in sinfo

    core.patch_node(kept, {"spec": {"unschedulable": True}})
    p, done = converge(slurm((kept, "IDLE", None)))
    assert p.drain == {names.REASON_NODE_CORDONED: [worker[kept]]} and p.delete_pods == []
    assert placed() == [(worker[kept], kept)]  # the cordon keeps the pod
    core.delete_namespaced_pod(worker[kept], namespace, grace_period_seconds=0)
    wait_until(lambda: placed() == [], 60, "the worker deleted")
    p, done = converge(slurm((kept, "IDLE+DRAIN", names.REASON_NODE_CORDONED)))
    assert done["created_pods"] == [worker[kept]] and placed() == [(worker[kept], kept)]
    wait_until(lambda: core.read_namespaced_pod(worker[kept], namespace).status.phase == "Running", 60,
               "the worker running again on its cordoned node")
    core.patch_node(kept, {"spec": {"unschedulable": False}})
    p, done = converge(slurm((kept, "IDLE+DRAIN", names.REASON_NODE_CORDONED)))
    assert p.resume == [worker[kept]]  # uncordon resumes
