"""The real node runs real containers: logs, exec, ClusterIP Services, DNS, in-cluster API access, shared
volumes, imported images; and `down` leaves the host as it found it (that test runs last)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, Instance, host_snapshot, wait_until
from kubernetes import client

sys.path.insert(0, os.path.join(ROOT, "hack"))
import localcluster  # noqa: E402
from realnode import image as rnimage  # noqa: E402

pytestmark = pytest.mark.cluster
NODE_SELECTOR = {localcluster.REAL_NODE_LABEL[0]: localcluster.REAL_NODE_LABEL[1]}


def pod(name, command, labels=None, image=localcluster.TEST_IMAGE, volumes=None, mounts=None):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            node_selector=NODE_SELECTOR, termination_grace_period_seconds=0, volumes=volumes,
            restart_policy="Never",
            containers=[client.V1Container(name="c", image=image, image_pull_policy="Never",
                                           command=["sh", "-c", command], volume_mounts=mounts)]))


def running(core, ns, name, timeout=60):
    def check():
        p = core.read_namespaced_pod(name, ns)
        if p.status.phase in ("Failed", "Succeeded"):
            pytest.fail("pod %s ended: %s" % (name, p.status))
        return p if p.status.phase == "Running" else None
    return wait_until(check, timeout, "pod %s Running" % name)


def finished(core, ns, name, timeout=60):
    phase = wait_until(lambda: core.read_namespaced_pod(name, ns).status.phase in ("Succeeded", "Failed")
                       and core.read_namespaced_pod(name, ns).status.phase, timeout, "pod %s finished" % name)
    return phase, core.read_namespaced_pod_log(name, ns)


def test_real_node_registers_beside_kwok_nodes(api):
    core = client.CoreV1Api(api)
    node = core.read_node(localcluster.REAL_NODE)
    assert node.metadata.labels[localcluster.REAL_NODE_LABEL[0]] == localcluster.REAL_NODE_LABEL[1]
    assert localcluster.KWOK_ANNOTATION[0] not in (node.metadata.annotations or {})
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert node.status.node_info.container_runtime_version.startswith("containerd://")
    assert node.spec.pod_cidr == localcluster.POD_SUBNET
    assert core.list_node(label_selector="type=kwok").items, "kwok nodes stay available"


def test_pod_runs_and_its_logs_are_readable_through_the_api(api, ns):
    core = client.CoreV1Api(api)
    t0 = time.monotonic()
    core.create_namespaced_pod(ns, pod("hello", "echo hello from $(hostname); sleep 3600"))
    p = running(core, ns, "hello")
    print("pod Running after %.2fs" % (time.monotonic() - t0))
    assert p.spec.node_name == localcluster.REAL_NODE
    assert p.status.pod_ip.startswith("10.85.0.")
    wait_until(lambda: "hello from hello" in core.read_namespaced_pod_log("hello", ns), 30, "log line")


def test_kubectl_exec(realnode, api, ns):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod("box", "sleep 3600"))
    running(core, ns, "box")
    out = realnode.kubectl("exec", "-n", ns, "box", "--", "sh", "-c", "echo $((6*7)) $(cat /etc/hostname)")
    assert out.stdout.split() == ["42", "box"]


@pytest.fixture()
def web(api, ns):
    """An httpd pod behind a ClusterIP Service `web`."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod(
        "web", "mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www",
        labels={"app": "web"}))
    svc = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80, target_port=8080)])))
    running(core, ns, "web")
    return svc.spec.cluster_ip


def http_get_via_nc(host):
    # busybox's wget crashes in this static image (glibc NSS); nc speaks enough HTTP.
    return "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 %s 80" % host


def test_pod_reaches_a_clusterip_service_backed_by_another_pod(api, ns, web):
    core = client.CoreV1Api(api)
    # kube-proxy programs the Service a moment after the endpoint appears: retry inside the pod.
    cmd = "for i in $(seq 30); do %s | grep hello-from-web && exit 0; sleep 1; done; exit 1" % http_get_via_nc(web)
    core.create_namespaced_pod(ns, pod("client", cmd))
    phase, log = finished(core, ns, "client")
    assert phase == "Succeeded", log
    assert "hello-from-web" in log


def test_host_reaches_a_clusterip_service(web):
    import urllib.request

    def fetch():
        try:
            with urllib.request.urlopen("http://%s/" % web, timeout=2) as r:
                return r.read().decode()
        except OSError:
            return None
    assert "hello-from-web" in wait_until(fetch, 30, "ClusterIP from the host")


def test_dns_resolves_a_service_name_from_a_pod(api, ns, web):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod("dns", "nslookup web.%s.svc.cluster.local && "
                                              "nslookup kubernetes.default.svc.cluster.local" % ns))
    phase, log = finished(core, ns, "dns")
    assert phase == "Succeeded", log
    assert "Address: %s" % web in log
    assert "Address: %s" % localcluster.SERVICE_IP in log


def test_pod_talks_to_the_api_server_with_its_service_account(api, ns):
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(ns, client.V1Role(
        metadata=client.V1ObjectMeta(name="read-pods"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get"])]))
    rbac.create_namespaced_role_binding(ns, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="read-pods"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="read-pods"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default", namespace=ns)]))
    # kubeget: KUBERNETES_SERVICE_HOST (the `kubernetes` Service, via kube-proxy), the token, TLS verified.
    core.create_namespaced_pod(ns, pod("incluster", "kubeget /api/v1/namespaces/%s/pods/incluster && echo; "
                                                    "kubeget /api/v1/namespaces/%s/secrets || echo DENIED" % (ns, ns)))
    phase, log = finished(core, ns, "incluster")
    assert phase == "Succeeded", log
    body = json.loads(log.splitlines()[0])
    assert body["metadata"]["name"] == "incluster"
    assert "403 Forbidden" in log and "system:serviceaccount:%s:default" % ns in log and "DENIED" in log


def test_rwx_volume_is_shared_by_two_pods(api, ns):
    core = client.CoreV1Api(api)
    core.create_namespaced_persistent_volume_claim(ns, client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="shared"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteMany"], storage_class_name="standard",
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    vol = [client.V1Volume(name="v", persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
        claim_name="shared"))]
    mnt = [client.V1VolumeMount(name="v", mount_path="/shared")]
    core.create_namespaced_pod(ns, pod("writer", "echo written-by-writer > /shared/note; sleep 3600",
                                       volumes=vol, mounts=mnt))
    core.create_namespaced_pod(ns, pod(
        "reader", "for i in $(seq 60); do cat /shared/note 2>/dev/null && exit 0; sleep 1; done; exit 1",
        volumes=vol, mounts=mnt))
    phase, log = finished(core, ns, "reader", timeout=90)
    assert phase == "Succeeded", log
    assert log.strip() == "written-by-writer"
    assert core.read_namespaced_pod("writer", ns).status.phase == "Running"


def test_imported_image_runs(realnode, api, ns, tmp_path):
    """What the images engineer's tarballs go through: import-image, then a pod with pullPolicy Never."""
    tar = str(tmp_path / "hello.tar")
    script = b"#!/bin/sh\necho imported-image-ok\n"
    entries = rnimage.base_entries() + [("hello.sh", ("file", 0o755, script))]
    # One layer, so it carries its own shell (the host's static busybox).
    with open(os.path.realpath(shutil.which("busybox")), "rb") as f:
        entries += [("bin/busybox", ("file", 0o755, f.read())), ("bin/sh", ("symlink", "busybox"))]
    rnimage.docker_archive(tar, "soperator.local/imported-check:1", rnimage.layer_tar(entries), cmd=["/hello.sh"])
    out = realnode.tool("import-image", tar).stdout
    assert "soperator.local/imported-check:1" in out
    core = client.CoreV1Api(api)
    p = pod("imported", "/hello.sh", image="soperator.local/imported-check:1")
    core.create_namespaced_pod(ns, p)
    phase, log = finished(core, ns, "imported")
    assert (phase, log.strip()) == ("Succeeded", "imported-image-ok")


def test_down_leaves_the_host_as_it_was(realnode):
    """Runs last (file order). Only for a private instance: a reused one stays up."""
    if not realnode.private:
        # not a prerequisite: the instance is someone's running cluster, reused; only a private one is stopped.
        pytest.skip("reusing a running instance: not stopping it")
    state = realnode.state
    real = state["real_node"]
    pids = [p["pid"] for p in state["processes"].values()]
    shims = localcluster.shim_pids(real["socket"])
    assert shims, "pods were running: their shims too"
    veths = os.listdir("/sys/class/net/%s/brif" % real["bridge"])
    assert veths, "the pods' host-side veths are on the bridge"
    t0 = time.monotonic()
    realnode.tool("down")
    print("down in %.1fs" % (time.monotonic() - t0))
    assert [p for p in pids + shims if localcluster.pid_alive(p)] == []
    after = host_snapshot(realnode.dir, real)
    assert after == realnode.before
    assert not os.path.exists(realnode.dir)
    for link in [real["bridge"]] + veths:
        assert subprocess.run(["ip", "link", "show", link], capture_output=True).returncode != 0, link


def test_a_real_node_killed_without_down_is_cleaned_by_the_next_up(realnode, tmp_path):
    """Runs after the clean down: a session that ends kills every process, yet the host keeps the dead instance's
    chains, bridge and mounts, which would block every later real node. The next `up` cleans them first."""
    if not realnode.private:
        # not a prerequisite: the instance is someone's running cluster, reused; only a private one is stopped.
        pytest.skip("reusing a running instance: not stopping it")
    dead = Instance(str(tmp_path / "dead"), private=True)
    dead.tool("up", "--real-node", "--nodes", "0")
    state = dead.state
    for pid in [p["pid"] for p in state["processes"].values()] + localcluster.shim_pids(state["real_node"]["socket"]):
        os.kill(pid, signal.SIGKILL)
    assert dead.tool("status", check=False).returncode != 0
    nxt = Instance(str(tmp_path / "next"), private=True)
    out = nxt.tool("up", "--real-node", "--nodes", "0")
    assert "the real node of %s is dead" % dead.dir in out.stderr + out.stdout
    assert not os.path.exists(dead.dir)
    nxt_real = nxt.state["real_node"]
    nxt.tool("down")
    assert host_snapshot(dead.dir, state["real_node"]) == realnode.before
    assert host_snapshot(nxt.dir, nxt_real) == realnode.before
