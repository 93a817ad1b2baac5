"""The local cluster is a real Kubernetes: schema validation, scheduling, SSA conflicts, GC, clean shutdown."""

import json
import os
import socket
import subprocess
import sys

import pytest
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack"))
import localcluster  # noqa: E402
from polling import wait_until  # noqa: E402
from prerequisites import unavailable  # noqa: E402

pytestmark = pytest.mark.cluster

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.soperator.dev"},
    "spec": {
        "group": "test.soperator.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "x-kubernetes-validations": [{
                        "rule": "self.minReplicas <= self.replicas",
                        "message": "minReplicas must not exceed replicas"}],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0},
                        "minReplicas": {"type": "integer", "default": 0},
                        "size": {"type": "string", "default": "small", "enum": ["small", "large"]},
                    },
                    "required": ["replicas"],
                }},
            }},
        }],
    },
}


@pytest.fixture(scope="module")
def widget_crd(k8s):
    ext = client.ApiextensionsV1Api(k8s)
    try:
        ext.create_custom_resource_definition(WIDGET_CRD)
    except ApiException as e:
        if e.status != 409:
            raise

    def established():
        crd = ext.read_custom_resource_definition("widgets.test.soperator.dev")
        return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))

    wait_until(established, 30, "Widget CRD Established")
    yield
    ext.delete_custom_resource_definition("widgets.test.soperator.dev")


def test_crd_rejects_invalid_object_with_api_message(k8s, namespace, widget_crd):
    custom = client.CustomObjectsApi(k8s)
    bad = {"apiVersion": "test.soperator.dev/v1", "kind": "Widget", "metadata": {"name": "bad"},
           "spec": {"replicas": 1, "minReplicas": 3}}
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("test.soperator.dev", "v1", namespace, "widgets", bad)
    assert exc.value.status == 422
    assert "minReplicas must not exceed replicas" in exc.value.body

    wrong_enum = dict(bad, metadata={"name": "bad2"}, spec={"replicas": 1, "size": "huge"})
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("test.soperator.dev", "v1", namespace, "widgets", wrong_enum)
    assert exc.value.status == 422
    assert "spec.size" in exc.value.body and "supported values" in exc.value.body


def test_crd_applies_defaults_to_valid_object(k8s, namespace, widget_crd):
    custom = client.CustomObjectsApi(k8s)
    good = {"apiVersion": "test.soperator.dev/v1", "kind": "Widget", "metadata": {"name": "good"},
            "spec": {"replicas": 2}}
    created = custom.create_namespaced_custom_object("test.soperator.dev", "v1", namespace, "widgets", good)
    assert created["spec"] == {"replicas": 2, "minReplicas": 0, "size": "small"}


def test_statefulset_pods_run_on_kwok_nodes(k8s, namespace):
    apps, core = client.AppsV1Api(k8s), client.CoreV1Api(k8s)
    labels = {"app": "web"}
    sts = client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1StatefulSetSpec(
            replicas=3, service_name="web", selector=client.V1LabelSelector(match_labels=labels),
            pod_management_policy="Parallel",
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                # Pinned: a real node may be up too (after `make demo`), and it cannot pull this image.
                spec=client.V1PodSpec(node_selector={"type": "kwok"},
                                      containers=[client.V1Container(name="c", image="example.invalid/none")]))))
    apps.create_namespaced_stateful_set(namespace, sts)
    wait_until(lambda: (apps.read_namespaced_stateful_set(namespace=namespace, name="web").status.ready_replicas
                        or 0) == 3, 90, "3 ready replicas")
    pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
    assert len(pods) == 3
    kwok_nodes = {n.metadata.name for n in core.list_node(label_selector="type=kwok").items}
    for pod in pods:
        assert pod.spec.node_name in kwok_nodes
        assert pod.status.phase == "Running"


def test_gpu_pods_land_only_on_gpu_nodes(k8s, namespace):
    core = client.CoreV1Api(k8s)
    gpu_nodes = [n for n in core.list_node(label_selector="type=kwok").items
                 if "nvidia.com/gpu" in (n.status.allocatable or {})]
    assert gpu_nodes, "the default pool has a GPU node"
    assert gpu_nodes[0].metadata.labels["nvidia.com/gpu.present"] == "true"
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="gpu"), spec=client.V1PodSpec(containers=[
        client.V1Container(name="c", image="example.invalid/none", resources=client.V1ResourceRequirements(
            limits={"nvidia.com/gpu": "8"}))]))
    core.create_namespaced_pod(namespace, pod)
    node = wait_until(lambda: core.read_namespaced_pod("gpu", namespace).spec.node_name, 60, "gpu pod scheduled")
    assert node in {n.metadata.name for n in gpu_nodes}


def test_server_side_apply_conflict_between_field_managers(k8s, namespace):
    dyn = dynamic.DynamicClient(k8s)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "namespace": namespace},
            "data": {"slurm.conf": "ClusterName=a"}}
    cms.server_side_apply(body=body, name="owned", namespace=namespace, field_manager="first")
    rival = dict(body, data={"slurm.conf": "ClusterName=b"})
    with pytest.raises(ApiException) as exc:
        cms.server_side_apply(body=rival, name="owned", namespace=namespace, field_manager="second")
    assert exc.value.status == 409
    message = json.loads(exc.value.body)["message"]
    assert "conflict" in message.lower() and '"first"' in message and ".data.slurm.conf" in message
    assert client.CoreV1Api(k8s).read_namespaced_config_map("owned", namespace).data["slurm.conf"] == "ClusterName=a"


def test_garbage_collector_deletes_owned_objects(k8s, namespace):
    core = client.CoreV1Api(k8s)
    owner = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner")))
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid,
                                  block_owner_deletion=True, controller=True)
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="child", owner_references=[ref]), string_data={"k": "v"}))
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="bystander")))
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

    def child_gone():
        try:
            core.read_namespaced_secret("child", namespace)
            return False
        except ApiException as e:
            return e.status == 404

    wait_until(child_gone, 60, "garbage collection of the owned Secret")
    assert core.read_namespaced_config_map("bystander", namespace).metadata.name == "bystander"


def _listening(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# not a prerequisite: an external cluster (SOPERATOR_KUBECONFIG) was chosen; the local cluster tool is not tested.
@pytest.mark.skipif(os.environ.get("SOPERATOR_KUBECONFIG") is not None,
                    reason="uses the local cluster tool; SOPERATOR_KUBECONFIG points at an external cluster")
def test_down_leaves_no_process_and_no_port(tmp_path):
    """A second, private instance: up, then down; nothing of it may remain."""
    env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=str(tmp_path / "lc"))
    env.pop("SOPERATOR_KUBECONFIG", None)
    tool = os.path.join(ROOT, "hack", "localcluster.py")
    subprocess.run([sys.executable, tool, "up", "--nodes", "1", "--gpu-nodes", "0"], env=env, check=True)
    with open(tmp_path / "lc" / "state.json") as f:
        state = json.load(f)
    pids = [p["pid"] for p in state["processes"].values()]
    ports = list(state["ports"].values())
    assert len(pids) == 6 and all(localcluster.pid_alive(p) for p in pids)
    assert _listening(state["ports"]["apiserver"])
    subprocess.run([sys.executable, tool, "down"], env=env, check=True)
    assert [p for p in pids if localcluster.pid_alive(p)] == []
    assert [p for p in ports if _listening(p)] == []
    assert not (tmp_path / "lc").exists()


# not a prerequisite: an external cluster (SOPERATOR_KUBECONFIG) was chosen, with a provisioner of its own.
@pytest.mark.skipif(os.environ.get("SOPERATOR_KUBECONFIG") is not None,
                    reason="the hostPath provisioner belongs to the local cluster tool")
def test_readwritemany_claim_is_provisioned_and_reclaimed(k8s, namespace):
    core = client.CoreV1Api(k8s)
    pvc = client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="jail"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteMany"], storage_class_name="standard",
            resources=client.V1VolumeResourceRequirements(requests={"storage": "2Gi"})))
    core.create_namespaced_persistent_volume_claim(namespace, pvc)
    bound = wait_until(lambda: core.read_namespaced_persistent_volume_claim("jail", namespace).status.phase == "Bound"
                       and core.read_namespaced_persistent_volume_claim("jail", namespace), 30, "PVC Bound")
    pv = core.read_persistent_volume(bound.spec.volume_name)
    assert pv.spec.access_modes == ["ReadWriteMany"] and pv.spec.capacity["storage"] == "2Gi"
    assert os.path.isdir(pv.spec.host_path.path)
    core.delete_namespaced_persistent_volume_claim("jail", namespace)

    def pv_gone():
        try:
            core.read_persistent_volume(pv.metadata.name)
            return False
        except ApiException as e:
            return e.status == 404

    wait_until(pv_gone, 30, "released PV deleted")
    assert not os.path.exists(pv.spec.host_path.path)


def test_pki_satisfies_a_strict_x509_verifier(kubeconfig):
    """Python >= 3.13 (the operator image) verifies with VERIFY_X509_STRICT: a CA without keyUsage is refused.

    The same flag on this interpreter, with the kubeconfig's CA and client certificate, must reach /readyz.
    """
    import base64
    import ssl
    import tempfile
    import urllib.request

    import yaml

    with open(kubeconfig) as f:
        cfg = yaml.safe_load(f)
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
            if key not in cluster and key not in user:
                unavailable("kubeconfig without inline %s: not the local cluster's" % key)
            paths[key] = os.path.join(tmp, key)
            with open(paths[key], "wb") as out:
                out.write(base64.b64decode(cluster.get(key) or user[key]))
        ctx = ssl.create_default_context(cafile=paths["certificate-authority-data"])
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
        ctx.load_cert_chain(paths["client-certificate-data"], paths["client-key-data"])
        with urllib.request.urlopen(cluster["server"] + "/readyz", context=ctx, timeout=10) as resp:
            assert resp.status == 200 and resp.read() == b"ok"
