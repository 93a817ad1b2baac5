"""Every example is applied through playbooks/site.yml and its expected outcome is checked.

- examples/cpu-cluster.yaml: every workload ready, pods Running on the kwok nodes.
- examples/gpu-cluster.yaml as written: all objects exist with the GPU configuration; its workers ask for
  1800Gi nodes with 8 H100s, so here they stay Pending (Unschedulable), which is the right outcome.
- examples/gpu-cluster.yaml adapted to the local cluster (storage class `standard`, smaller memory): GPU
  workers run on GPU nodes only, CPU workers anywhere.
- The README's feature examples, on two kwok nodes of the test's own (its label and taint):
  examples/elastic-cluster.yaml refused by site.yml converging alone, naming the field, and applied as written for
  the operator (soperator_converge: operator); examples/placement-cluster.yaml's workers one per node, pinned (a
  deleted worker comes back to its node), and one every-node worker per labelled node, named for it;
  examples/node-labels-cluster.yaml converged, one worker per node (no slurmctld here: its workers under `unknown`).
"""

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml
from kubernetes import client
from polling import wait_until  # noqa: E402

from ansible_collections.soperator.slurm.plugins.module_utils import names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.cluster


def load(name, namespace):
    """An example for the shared local cluster: in ``namespace`` and placed on kwok nodes only.

    The local cluster may also have a real node (after ``make demo``); it is untainted, and the examples'
    host paths, storage classes and sizes exist only in the fiction the kwok nodes play.
    """
    with open(os.path.join(ROOT, "examples", name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    placement = docs[0]["spec"].setdefault("placement", {})
    placement.setdefault("nodeSelector", {})["soperator.dev/localcluster"] = "kwok"
    return docs


# What examples/gpu-cluster.yaml asks of the installer: its scratch is a host path.
GPU_POLICY = {"allowed_host_path_prefixes": ["/mnt/local-nvme"]}


def site(kubeconfig, collections_path, tmp_path, resources, wait, policy=None, check=True, extra=None):
    varfile = tmp_path / "clusters.json"
    varfile.write_text(json.dumps(dict({"soperator_clusters": [{"resources": resources, "wait": wait}],
                                        "soperator_policy": policy or {}}, **(extra or {}))))
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=kubeconfig, ANSIBLE_COLLECTIONS_PATH=collections_path,
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    res = subprocess.run(["ansible-playbook", os.path.join(ROOT, "playbooks", "site.yml"), "-e", "@%s" % varfile],
                         env=env, capture_output=True, text=True)
    if check:
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
        return res.stdout
    return res


def statefulsets_ready(k8s, namespace, count):
    apps = client.AppsV1Api(k8s)

    def ready():
        items = apps.list_namespaced_stateful_set(namespace).items
        return len(items) == count and all((s.status.ready_replicas or 0) == s.spec.replicas for s in items) \
            and {s.metadata.name: s for s in items}
    return wait_until(ready, 120, "%d StatefulSets ready" % count)


def test_cpu_example_converges_and_runs(kubeconfig, collections_path, k8s, namespace, tmp_path):
    # kwok pods run nothing: no slurmctld answers, so the cluster cannot be Ready in Slurm's sense (wait=False).
    site(kubeconfig, collections_path, tmp_path, load("cpu-cluster.yaml", namespace), wait=False)
    core = client.CoreV1Api(k8s)
    sts = statefulsets_ready(k8s, namespace, 3)
    assert sorted(sts) == ["demo-controller", "demo-cpu", "demo-login"]
    pods = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component=worker").items
    assert sorted(p.metadata.name for p in pods) == ["demo-cpu-0", "demo-cpu-1"]
    assert all(p.status.phase == "Running" for p in pods)
    # site.yml wrote the status, and it says what is missing rather than claiming Ready.
    cr = client.CustomObjectsApi(k8s).get_namespaced_custom_object("slurm.soperator.dev", "v1alpha1", namespace,
                                                                   "slurmclusters", "demo")
    ready = next(c for c in cr["status"]["conditions"] if c["type"] == "Ready")
    assert cr["status"]["observedGeneration"] == cr["metadata"]["generation"]
    assert ready["status"] == "False" and "slurmctld does not answer" in ready["message"]


def test_gpu_example_as_written_renders_gpu_cluster(kubeconfig, collections_path, k8s, namespace, tmp_path):
    core = client.CoreV1Api(k8s)
    site(kubeconfig, collections_path, tmp_path, load("gpu-cluster.yaml", namespace), wait=False, policy=GPU_POLICY)
    apps = client.AppsV1Api(k8s)
    h100 = apps.read_namespaced_stateful_set("ml-h100", namespace)
    worker = h100.spec.template.spec.containers[0]
    assert worker.resources.limits["nvidia.com/gpu"] == "8"
    conf_params = next(e.value for e in worker.env if e.name == "SLURMD_CONF_PARAMS")
    assert "Gres=gpu:h100:8" in conf_params and "Feature=h100,nvlink,ib" in conf_params
    cm = core.read_namespaced_config_map("ml-slurm-config", namespace).data
    assert "GresTypes=gpu" in cm["slurm.conf"]
    assert "PartitionName=gpu Nodes=h100" in cm["slurm.conf"]
    assert "PartitionName=cpu Nodes=cpu Default=YES" in cm["slurm.conf"]
    assert "AutoDetect=nvidia" in cm["gres.conf"]
    login = core.read_namespaced_service("ml-login", namespace)
    assert login.spec.type == "LoadBalancer" and login.spec.load_balancer_source_ranges == ["203.0.113.0/24"]
    # Nodes with 1800Gi of memory and a `nfs-rwx` storage class do not exist here: the workers wait, unscheduled.
    pod = wait_until(lambda: next((p for p in core.list_namespaced_pod(
        namespace, label_selector="slurm.soperator.dev/nodeset=h100").items if p.status.conditions), None),
        30, "an h100 pod with conditions")
    cond = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert cond.status == "False" and cond.reason == "Unschedulable"


# not a prerequisite: an external cluster (SOPERATOR_KUBECONFIG) was chosen, and it is not ours to resize.
@pytest.mark.skipif(os.environ.get("SOPERATOR_KUBECONFIG") is not None,
                    reason="resizes the local cluster's kwok node pool")
def test_gpu_example_on_local_cluster_puts_gpu_workers_on_gpu_nodes(kubeconfig, collections_path, k8s, namespace,
                                                                     tmp_path):
    subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "nodes", "6", "--gpu-nodes", "4"],
                   check=True, capture_output=True)
    core = client.CoreV1Api(k8s)
    core.create_namespaced_persistent_volume_claim(namespace, client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="datasets"), spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteMany"], storage_class_name="standard",
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    docs = load("gpu-cluster.yaml", namespace)
    cluster = docs[0]
    cluster["spec"]["jail"]["storageClassName"] = "standard"
    cluster["spec"]["controller"]["spool"]["storageClassName"] = "standard"
    for ns in docs[1:]:  # small workers: the point is where GPU workers land, not how big they are
        ns["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
    site(kubeconfig, collections_path, tmp_path, copy.deepcopy(docs), wait=False, policy=GPU_POLICY)
    statefulsets_ready(k8s, namespace, 4)
    gpu_nodes = {n.metadata.name for n in core.list_node().items
                 if "nvidia.com/gpu" in (n.status.allocatable or {})}
    h100 = core.list_namespaced_pod(namespace, label_selector="slurm.soperator.dev/nodeset=h100").items
    assert len(h100) == 4 and all(p.status.phase == "Running" for p in h100)
    assert {p.spec.node_name for p in h100} <= gpu_nodes
    assert len({p.spec.node_name for p in h100}) == 4, "8 GPUs per pod: one pod per 8-GPU node"


def test_gpu_example_without_the_installers_leave_is_refused_naming_the_host_path(kubeconfig, collections_path, k8s,
                                                                                 namespace, tmp_path):
    res = site(kubeconfig, collections_path, tmp_path, load("gpu-cluster.yaml", namespace), wait=False, check=False)
    assert res.returncode != 0
    assert "spec.jail.subMounts[1].hostPath" in res.stdout and "no host path is allowed" in res.stdout, res.stdout
    # Nothing was written: no SlurmCluster, no object of it.
    custom = client.CustomObjectsApi(k8s)
    assert custom.list_namespaced_custom_object("slurm.soperator.dev", "v1alpha1", namespace,
                                                "slurmclusters")["items"] == []
    assert client.CoreV1Api(k8s).list_namespaced_config_map(namespace, label_selector="app.kubernetes.io/managed-by"
                                                            "=soperator.slurm").items == []


# --- The README's feature examples (elastic NodeSets; one per node, pinned, every node; features and topology from
# node labels): tests/unit/test_readme_examples.py holds the sections to them and runs the converge's planner on them.
EVERY_LABEL = "slurm.example.com/every-node"  # examples/placement-cluster.yaml's every-node selector
LEAF, SPINE = "network.example.com/leaf", "network.example.com/spine"  # examples/node-labels-cluster.yaml's levels
PIN_GATE = "slurm.soperator.dev/pin"


def on_own_nodes(name, namespace):
    """An example in ``namespace`` with every pod of it on the test's own two nodes (their label, their taint)."""
    with open(os.path.join(ROOT, "examples", name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    docs[0]["spec"]["placement"] = {
        "nodeSelector": {"soperator-test": namespace},
        "tolerations": [{"key": "soperator-test", "value": namespace, "effect": "NoSchedule"}]}
    return docs


def custom(k8s, namespace, plural, name):
    try:
        return client.CustomObjectsApi(k8s).get_namespaced_custom_object("slurm.soperator.dev", "v1alpha1",
                                                                         namespace, plural, name)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def worker_pods(k8s, namespace, nodeset):
    pods = client.CoreV1Api(k8s).list_namespaced_pod(namespace, label_selector="slurm.soperator.dev/nodeset=%s"
                                                     % nodeset).items
    return dict((p.metadata.name, p) for p in pods if not p.metadata.deletion_timestamp)


def test_elastic_example_needs_the_operator_and_is_applied_for_it_as_written(kubeconfig, collections_path, k8s,
                                                                            namespace, tmp_path):
    docs = load("elastic-cluster.yaml", namespace)
    res = site(kubeconfig, collections_path, tmp_path, docs, wait=False, check=False)
    assert res.returncode != 0
    assert "nodesets[burst].spec.elastic" in res.stdout and "needs the operator" in res.stdout, res.stdout[-3000:]
    assert custom(k8s, namespace, "slurmclusters", "demo") is None  # nothing written
    # For the operator (already running: not installed by this play), the definition is judged whole, dry runs
    # included, and applied as written; the operator would do the rest.
    site(kubeconfig, collections_path, tmp_path, docs, wait=False,
         extra={"soperator_converge": "operator", "soperator_operator_install": False})
    burst = custom(k8s, namespace, "nodesets", "burst")
    assert burst["spec"]["elastic"] == {"maxNodes": 4, "minNodes": 0}
    assert custom(k8s, namespace, "nodesets", "cpu")["spec"]["replicas"] == 1
    cluster = custom(k8s, namespace, "slurmclusters", "demo")
    assert cluster["spec"]["slurm"]["powerSaving"] == {"suspendTime": 120, "suspendTimeout": 30, "resumeTimeout": 300}
    # site.yml made no workload: the converge is the operator's.
    assert client.AppsV1Api(k8s).list_namespaced_stateful_set(namespace).items == []


def test_placement_example_one_per_node_pinned_and_every_node(kubeconfig, collections_path, k8s, namespace,
                                                              tmp_path, own_nodes):
    core = client.CoreV1Api(k8s)
    first, second = own_nodes
    core.patch_node(first, {"metadata": {"labels": {EVERY_LABEL: "true"}}})
    docs = on_own_nodes("placement-cluster.yaml", namespace)

    def converged_cpu():
        """Both cpu workers created (the StatefulSet controller), run site.yml again while one is still gated (the
        converge lets gated workers go once they exist)."""
        for _ in range(3):
            wait_until(lambda: len(worker_pods(k8s, namespace, "cpu")) == 2, 60, "both cpu workers created")
            if not any(p.spec.scheduling_gates for p in worker_pods(k8s, namespace, "cpu").values()):
                break
            site(kubeconfig, collections_path, tmp_path, copy.deepcopy(docs), wait=False)
        return wait_until(lambda: (lambda pods: len(pods) == 2 and all(p.spec.node_name for p in pods.values())
                                   and dict((n, p.spec.node_name) for n, p in pods.items()))(
            worker_pods(k8s, namespace, "cpu")), 60, "both cpu workers placed")

    site(kubeconfig, collections_path, tmp_path, copy.deepcopy(docs), wait=False)
    placed = converged_cpu()
    assert sorted(placed.values()) == sorted(own_nodes), placed  # one per node
    every = dict((n, p.spec.node_name) for n, p in worker_pods(k8s, namespace, "every").items())
    assert every == {names.every_node_worker("demo", "every", first): first}  # the labelled node only
    site(kubeconfig, collections_path, tmp_path, copy.deepcopy(docs), wait=False)  # records the pins
    status = custom(k8s, namespace, "nodesets", "cpu")["status"]
    assert status["pins"] == placed, status
    assert custom(k8s, namespace, "nodesets", "every")["status"]["workerNodes"] == every

    # A pinned worker deleted comes back to its node; labelling the second node makes its every-node worker.
    gone = sorted(placed)[1]
    old_uid = worker_pods(k8s, namespace, "cpu")[gone].metadata.uid
    core.delete_namespaced_pod(gone, namespace, grace_period_seconds=0)
    core.patch_node(second, {"metadata": {"labels": {EVERY_LABEL: "true"}}})

    def made_again():
        pod = worker_pods(k8s, namespace, "cpu").get(gone)
        return pod is not None and pod.metadata.uid != old_uid and pod
    gated = wait_until(made_again, 60, "%s made again by its StatefulSet" % gone)
    assert [g.name for g in gated.spec.scheduling_gates or ()] == [PIN_GATE]  # waits for its pin
    site(kubeconfig, collections_path, tmp_path, copy.deepcopy(docs), wait=False)
    assert converged_cpu() == placed
    every = dict((n, p.spec.node_name) for n, p in worker_pods(k8s, namespace, "every").items())
    assert every == dict((names.every_node_worker("demo", "every", n), n) for n in own_nodes)


def test_node_labels_example_is_applied_one_worker_per_node_with_its_topology(kubeconfig, collections_path, k8s,
                                                                            namespace, tmp_path, own_nodes):
    """The example as written converges: topology/tree in slurm.conf, the feature prefix stored, one worker per node.
    kwok runs no slurmctld, and the converge reads node labels only while Slurm answers (it would have nothing to
    place): every worker stays under `unknown` here, whatever its node's labels. Placement by labels is the planner's
    (tests/unit/test_readme_examples.py) and, with Slurm, tests/e2e/test_operator.py's."""
    core = client.CoreV1Api(k8s)
    for host, leaf in zip(own_nodes, ("leaf1", "leaf2")):
        core.patch_node(host, {"metadata": {"labels": {LEAF: leaf, SPINE: "spine1"}}})
    site(kubeconfig, collections_path, tmp_path, on_own_nodes("node-labels-cluster.yaml", namespace), wait=False)
    placed = wait_until(lambda: (lambda pods: len(pods) == 2 and all(p.spec.node_name for p in pods.values())
                                 and dict((n, p.spec.node_name) for n, p in pods.items()))(
        worker_pods(k8s, namespace, "cpu")), 60, "both cpu workers placed")
    assert sorted(placed.values()) == sorted(own_nodes)  # onePerNode
    data = core.read_namespaced_config_map("demo-slurm-config", namespace).data
    assert "TopologyPlugin=topology/tree" in data["slurm.conf"]
    assert [line for line in data["topology.conf"].splitlines() if not line.startswith("#")] == [
        "SwitchName=unknown Nodes=demo-cpu-[0-1]", "SwitchName=root Switches=unknown"]
    assert custom(k8s, namespace, "nodesets", "cpu")["spec"]["featureLabelPrefix"] == "slurm-feature.example.com/"
