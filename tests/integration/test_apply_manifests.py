"""apply_manifests against a real kube-apiserver: request economy, check mode, diff, create-only secrets,
prune, conflicts, hand edits, and the module run by ansible-playbook.

Fixtures from tests/conftest.py: ``kubeconfig`` (path), ``namespace`` (a fresh namespace per test),
``collections_path``.
"""

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import uuid
from urllib.parse import urlsplit

import pytest
import yaml

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import apply_manifests
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import dynamic_client
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects

pytestmark = pytest.mark.cluster

CLUSTER_LABEL = "slurm.soperator.dev/cluster"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Requests(object):
    """Every request a DynamicClient sends, discovery apart: (method, path, query)."""

    def __init__(self):
        self.calls = []

    def reset(self):
        self.calls = []

    @staticmethod
    def is_discovery(path):
        parts = path.strip("/").split("/")
        return (parts in (["version"], ["api"], ["apis"]) or (parts[0] == "api" and len(parts) == 2)
                or (parts[0] == "apis" and len(parts) in (2, 3)))

    @property
    def api(self):
        return [c for c in self.calls if not self.is_discovery(c[1])]

    @property
    def writes(self):
        return [c for c in self.api if c[0] in WRITES]

    def count(self, method):
        return len([c for c in self.api if c[0] == method])


@pytest.fixture
def client(kubeconfig):
    """A DynamicClient whose requests are recorded in ``client.requests``."""
    dyn = dynamic_client({"kubeconfig": kubeconfig})
    api = dyn.client
    real = api.call_api
    dyn.requests = Requests()

    def counting(method, url, *args, **kwargs):
        parsed = urlsplit(url)
        dyn.requests.calls.append((method.upper(), parsed.path, parsed.query))
        return real(method, url, *args, **kwargs)

    api.call_api = counting
    yield dyn
    api.close()


def cm(name, namespace, data=None, cluster="demo", annotations=None):
    md = {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data or {"key": name}}


def service(name, namespace, cluster="demo"):
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}},
            "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"name": "slurmctld", "port": 6817}]}}


def service_account(name, namespace, cluster="demo"):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}}}


def secret(name, namespace, generate=None, cluster="demo", **body):
    md = {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}}
    if generate:
        md["annotations"] = {objects.CREATE_ONLY: "true", objects.GENERATE: generate}
    out = {"apiVersion": "v1", "kind": "Secret", "metadata": md, "type": "Opaque"}
    out.update(body)
    return out


def read(client, kind, name, namespace, api_version="v1"):
    resource = client.resources.get(api_version=api_version, kind=kind)
    try:
        return resource.get(name=name, namespace=namespace).to_dict()
    except Exception as e:  # NotFoundError
        if getattr(e, "status", None) == 404:
            return None
        raise


def actions(result):
    return dict(("%s/%s" % (o["kind"], o["name"]), o["action"]) for o in result["objects"])


def desired_set(namespace):
    return [service_account("demo-slurm", namespace), cm("demo-slurm-conf", namespace),
            cm("demo-cgroup-conf", namespace), cm("demo-gres-conf", namespace), service("demo-controller", namespace)]


def test_create_then_noop_costs_one_list_per_kind(client, namespace):
    manifests = desired_set(namespace)
    prune = dict(prune_selector="%s=demo" % CLUSTER_LABEL)

    first = apply_manifests(client, manifests, "soperator.slurm", **prune)
    assert first["changed"] is True
    assert set(actions(first).values()) == {"created"}
    assert first["counts"] == {"created": 5, "updated": 0, "unchanged": 0, "pruned": 0}
    # 3 kinds: 3 lists, then one apply per object.
    assert client.requests.count("GET") == 3
    assert client.requests.count("PATCH") == 5
    assert len(client.requests.writes) == 5
    print("\nrequests, create of 5 objects of 3 kinds: %d (%d writes)" % (
        len(client.requests.api), len(client.requests.writes)))

    client.requests.reset()
    second = apply_manifests(client, manifests, "soperator.slurm", **prune)
    assert second["changed"] is False
    assert set(actions(second).values()) == {"unchanged"}
    assert client.requests.writes == []
    assert len(client.requests.api) == 3  # grows with kinds, not objects
    print("requests, no-op of 5 objects of 3 kinds: %d" % len(client.requests.api))


def test_noop_cost_does_not_grow_with_objects(client, namespace):
    manifests = [cm("demo-cm-%02d" % i, namespace) for i in range(30)]
    apply_manifests(client, manifests, "soperator.slurm", prune_selector="%s=demo" % CLUSTER_LABEL)
    client.requests.reset()
    again = apply_manifests(client, manifests, "soperator.slurm", prune_selector="%s=demo" % CLUSTER_LABEL)
    assert again["changed"] is False
    assert len(client.requests.api) == 1 and client.requests.writes == []
    print("\nrequests, no-op of 30 ConfigMaps: %d" % len(client.requests.api))


def test_noop_without_prune_selector_lists_by_kind_too(client, namespace):
    manifests = desired_set(namespace)
    apply_manifests(client, manifests, "soperator.slurm")
    client.requests.reset()
    again = apply_manifests(client, manifests, "soperator.slurm")
    assert again["changed"] is False
    assert len(client.requests.api) == 3 and client.requests.writes == []


def test_check_mode_predicts_the_real_run(client, namespace):
    manifests = [cm("demo-slurm-conf", namespace, {"slurm.conf": "ClusterName=demo\n"}),
                 service_account("demo-slurm", namespace)]

    check = apply_manifests(client, manifests, "soperator.slurm", check_mode=True, diff=True)
    assert check["changed"] is True
    assert set(actions(check).values()) == {"would-create"}
    assert read(client, "ConfigMap", "demo-slurm-conf", namespace) is None
    assert all(c[2].find("dryRun=All") >= 0 for c in client.requests.writes)

    real = apply_manifests(client, manifests, "soperator.slurm", diff=True)
    assert dict((k, "would-" + v[:-1]) for k, v in actions(real).items()) == actions(check)
    assert [d["after"] for d in check["diff"]] == [d["after"] for d in real["diff"]]

    # idempotent check mode, idempotent run
    client.requests.reset()
    assert apply_manifests(client, manifests, "soperator.slurm", check_mode=True)["changed"] is False
    assert client.requests.writes == []
    assert apply_manifests(client, manifests, "soperator.slurm")["changed"] is False

    # a change: check mode predicts it, changes nothing, the real run does what it said
    manifests[0]["data"]["slurm.conf"] = "ClusterName=demo\nMaxNodeCount=8\n"
    check = apply_manifests(client, manifests, "soperator.slurm", check_mode=True, diff=True)
    assert actions(check) == {"ConfigMap/demo-slurm-conf": "would-update", "ServiceAccount/demo-slurm": "unchanged"}
    assert read(client, "ConfigMap", "demo-slurm-conf", namespace)["data"]["slurm.conf"] == "ClusterName=demo\n"
    real = apply_manifests(client, manifests, "soperator.slurm", diff=True)
    assert actions(real) == {"ConfigMap/demo-slurm-conf": "updated", "ServiceAccount/demo-slurm": "unchanged"}
    assert check["diff"] == real["diff"]


def test_check_mode_in_a_namespace_to_be_created(client):
    name = "t-newns-%s" % uuid.uuid4().hex[:6]
    manifests = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, cm("demo-slurm-conf", name)]
    try:
        check = apply_manifests(client, manifests, "soperator.slurm", check_mode=True)
        assert actions(check) == {"Namespace/%s" % name: "would-create", "ConfigMap/demo-slurm-conf": "would-create"}
        assert read(client, "Namespace", name, None) is None
        real = apply_manifests(client, manifests, "soperator.slurm")
        assert actions(real) == {"Namespace/%s" % name: "created", "ConfigMap/demo-slurm-conf": "created"}
    finally:
        client.resources.get(api_version="v1", kind="Namespace").delete(name=name)


def test_diff_is_normalized_and_hides_secrets(client, namespace):
    manifests = [cm("demo-slurm-conf", namespace, {"slurm.conf": "a"}),
                 secret("demo-db", namespace, stringData={"password": "correct-horse"})]
    first = apply_manifests(client, manifests, "soperator.slurm", diff=True)
    assert [d["before"] for d in first["diff"]] == [{}, {}]
    manifests[0]["data"]["slurm.conf"] = "b"
    manifests[1]["stringData"]["password"] = "battery-staple"
    second = apply_manifests(client, manifests, "soperator.slurm", diff=True)
    assert actions(second) == {"ConfigMap/demo-slurm-conf": "updated", "Secret/demo-db": "updated"}
    cm_diff, secret_diff = second["diff"]
    assert cm_diff["before_header"] == "ConfigMap %s/demo-slurm-conf" % namespace
    assert cm_diff["before"]["data"] == {"slurm.conf": "a"} and cm_diff["after"]["data"] == {"slurm.conf": "b"}
    for side in ("before", "after"):
        md = cm_diff[side]["metadata"]
        assert not set(md) & {"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"}
        assert objects.APPLIED_HASH not in md.get("annotations", {})
        assert secret_diff[side]["data"] == {"password": objects.HIDDEN}
    text = json.dumps(second)
    for value in ("correct-horse", "battery-staple", base64.b64encode(b"battery-staple").decode()):
        assert value not in text


def test_create_only_secrets_are_generated_once_and_never_rotated(client, namespace):
    manifests = [secret("demo-munge-key", namespace, "munge-key"),
                 secret("demo-ssh-host-keys", namespace, "ssh-host-keys")]
    seen = []
    first = apply_manifests(client, manifests, "soperator.slurm", diff=True, on_secret=seen.append)
    assert actions(first) == {"Secret/demo-munge-key": "created", "Secret/demo-ssh-host-keys": "created"}

    munge = read(client, "Secret", "demo-munge-key", namespace)
    ssh = read(client, "Secret", "demo-ssh-host-keys", namespace)
    assert len(base64.b64decode(munge["data"]["munge.key"])) == 1024
    keys = sorted(ssh["data"])
    assert keys == sorted("%s%s" % (f, s) for f in names.SSH_HOST_KEY_FILES for s in ("", ".pub"))
    assert base64.b64decode(ssh["data"]["ssh_host_ed25519_key"]).startswith(b"-----BEGIN OPENSSH PRIVATE KEY")
    assert base64.b64decode(ssh["data"]["ssh_host_rsa_key.pub"]).startswith(b"ssh-rsa ")
    # OpenSSH reads the private keys and derives the same public keys from them.
    for key_file in names.SSH_HOST_KEY_FILES:
        with tempfile.NamedTemporaryFile("wb") as handle:
            handle.write(base64.b64decode(ssh["data"][key_file]))
            handle.flush()
            derived = subprocess.run(["ssh-keygen", "-y", "-f", handle.name], capture_output=True, text=True,
                                     check=True, stdin=subprocess.DEVNULL).stdout.split()[:2]
        assert derived == base64.b64decode(ssh["data"][key_file + ".pub"]).decode().split()[:2]

    generated = [munge["data"]["munge.key"]] + list(ssh["data"].values())
    assert set(generated) <= set(seen)  # handed to the module for no_log
    text = json.dumps(first)
    assert not [v for v in generated if v in text]
    assert all(d["after"]["data"] == dict((k, objects.HIDDEN) for k in d["after"]["data"]) for d in first["diff"])

    # second run, and a run with a changed manifest: nothing rotates
    client.requests.reset()
    second = apply_manifests(client, manifests, "soperator.slurm")
    assert second["changed"] is False and client.requests.writes == []
    manifests[0]["metadata"]["labels"]["extra"] = "label"
    manifests[0]["data"] = {"munge.key": base64.b64encode(b"x" * 1024).decode()}
    third = apply_manifests(client, manifests, "soperator.slurm")
    assert third["changed"] is False
    assert read(client, "Secret", "demo-munge-key", namespace)["data"] == munge["data"]
    assert read(client, "Secret", "demo-ssh-host-keys", namespace)["data"] == ssh["data"]


def test_create_only_in_check_mode_generates_nothing(client, namespace):
    seen = []
    check = apply_manifests(client, [secret("demo-munge-key", namespace, "munge-key")], "soperator.slurm",
                            check_mode=True, on_secret=seen.append)
    assert actions(check) == {"Secret/demo-munge-key": "would-create"}
    assert seen == [] and read(client, "Secret", "demo-munge-key", namespace) is None


def test_prune_removes_only_what_this_set_owned(client, namespace):
    selector = "%s=demo" % CLUSTER_LABEL
    kinds = ["v1/ConfigMap", "v1/Secret", "v1/PersistentVolumeClaim", "v1/Service"]
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "demo-jail", "namespace": namespace, "labels": {CLUSTER_LABEL: "demo"}},
           "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}}
    keep = cm("demo-slurm-conf", namespace)
    everything = [keep, cm("demo-gone", namespace), service("demo-gone-svc", namespace),
                  cm("demo-exempt", namespace, annotations={objects.PRUNE: "false"}),
                  secret("demo-db", namespace, stringData={"password": "x" * 12}), pvc]
    apply_manifests(client, everything, "soperator.slurm", prune_selector=selector, prune_kinds=kinds)
    other_cluster = [cm("other-slurm-conf", namespace, cluster="other")]
    apply_manifests(client, other_cluster, "soperator.slurm", prune_selector="%s=other" % CLUSTER_LABEL)

    check = apply_manifests(client, [keep], "soperator.slurm", prune_selector=selector, prune_kinds=kinds,
                            check_mode=True)
    assert actions(check) == {"ConfigMap/demo-slurm-conf": "unchanged", "ConfigMap/demo-gone": "would-prune",
                              "Service/demo-gone-svc": "would-prune"}
    assert read(client, "ConfigMap", "demo-gone", namespace) is not None

    client.requests.reset()
    real = apply_manifests(client, [keep], "soperator.slurm", prune_selector=selector, prune_kinds=kinds)
    assert actions(real) == {"ConfigMap/demo-slurm-conf": "unchanged", "ConfigMap/demo-gone": "pruned",
                             "Service/demo-gone-svc": "pruned"}
    assert real["counts"]["pruned"] == 2 and real["changed"] is True
    deletes = [c for c in client.requests.api if c[0] == "DELETE"]
    assert len(deletes) == 2 and all("propagationPolicy=Background" in c[2] for c in deletes)
    assert read(client, "ConfigMap", "demo-gone", namespace) is None
    assert read(client, "Service", "demo-gone-svc", namespace) is None
    for kind, name in (("ConfigMap", "demo-exempt"), ("Secret", "demo-db"), ("PersistentVolumeClaim", "demo-jail"),
                       ("ConfigMap", "other-slurm-conf")):
        assert read(client, kind, name, namespace) is not None, (kind, name)

    again = apply_manifests(client, [keep], "soperator.slurm", prune_selector=selector, prune_kinds=kinds)
    assert again["changed"] is False


def test_conflict_with_another_applier_is_reported(client, namespace):
    manifests = [cm("demo-slurm-conf", namespace, {"slurm.conf": "ours"})]
    apply_manifests(client, manifests, "soperator.slurm")
    resource = client.resources.get(api_version="v1", kind="ConfigMap")
    client.server_side_apply(resource, body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "demo-slurm-conf", "namespace": namespace}, "data": {"slurm.conf": "theirs"}},
        field_manager="other-operator", force_conflicts=True)

    with pytest.raises(KubernetesError) as err:
        apply_manifests(client, manifests, "soperator.slurm")
    assert "ConfigMap %s/demo-slurm-conf" % namespace in err.value.msg
    assert ".data.slurm.conf" in err.value.msg and '"other-operator"' in err.value.msg
    assert err.value.details["fields"] == [".data.slurm.conf"]
    assert err.value.details["managers"] == ["other-operator"]
    with pytest.raises(KubernetesError):
        apply_manifests(client, manifests, "soperator.slurm", check_mode=True)

    forced = apply_manifests(client, manifests, "soperator.slurm", force_conflicts=True)
    assert actions(forced) == {"ConfigMap/demo-slurm-conf": "updated"}
    assert read(client, "ConfigMap", "demo-slurm-conf", namespace)["data"] == {"slurm.conf": "ours"}


def test_hand_edit_of_an_owned_field_is_repaired(client, namespace):
    manifests = [cm("demo-slurm-conf", namespace, {"slurm.conf": "ours"})]
    apply_manifests(client, manifests, "soperator.slurm")
    resource = client.resources.get(api_version="v1", kind="ConfigMap")
    client.patch(resource, name="demo-slurm-conf", namespace=namespace, body={"data": {"slurm.conf": "by hand"}},
                 content_type="application/merge-patch+json", field_manager="kubectl-edit")

    check = apply_manifests(client, manifests, "soperator.slurm", check_mode=True, diff=True)
    assert actions(check) == {"ConfigMap/demo-slurm-conf": "would-update"}
    assert check["diff"][0]["before"]["data"] == {"slurm.conf": "by hand"}
    real = apply_manifests(client, manifests, "soperator.slurm", diff=True)
    assert actions(real) == {"ConfigMap/demo-slurm-conf": "updated"}
    assert real["diff"] == check["diff"]
    assert read(client, "ConfigMap", "demo-slurm-conf", namespace)["data"] == {"slurm.conf": "ours"}
    assert apply_manifests(client, manifests, "soperator.slurm")["changed"] is False


def test_unknown_kind_and_bad_manifests_fail_clearly(client, namespace):
    with pytest.raises(KubernetesError) as err:
        apply_manifests(client, [{"apiVersion": "example.invalid/v1", "kind": "Nope",
                                  "metadata": {"name": "x", "namespace": namespace}}], "soperator.slurm")
    assert "Nope" in err.value.msg and "example.invalid/v1" in err.value.msg
    with pytest.raises(KubernetesError) as err:
        apply_manifests(client, [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
                        "soperator.slurm")
    assert "metadata.namespace is required" in err.value.msg
    with pytest.raises(KubernetesError) as err:
        apply_manifests(client, [cm("Not_A_Name", namespace)], "soperator.slurm")
    assert "Not_A_Name" in err.value.msg and err.value.details["status"] == 422


def test_an_unserved_optional_kind_is_left_out_and_listed(client, namespace):
    nope = {"apiVersion": "example.invalid/v1", "kind": "Nope", "metadata": {"name": "x", "namespace": namespace}}
    result = apply_manifests(client, [cm("kept", namespace), nope], "soperator.slurm",
                             skip_unserved=["example.invalid/v1/Nope"])
    assert result["skipped"] == ["Nope %s/x" % namespace]
    assert actions(result) == {"ConfigMap/kept": "created"}
    assert read(client, "ConfigMap", "kept", namespace) is not None
    # A served kind is never skipped: only a kind the server does not list.
    result = apply_manifests(client, [cm("kept", namespace)], "soperator.slurm", skip_unserved=["v1/ConfigMap"])
    assert result["skipped"] == [] and actions(result) == {"ConfigMap/kept": "unchanged"}


def test_host_keys_need_no_ssh_keygen_and_secrets_are_read_by_name(client, namespace, monkeypatch):
    """The operator image has no OpenSSH; and reading a create-only Secret needs `get` on it, never `list`."""
    monkeypatch.setenv("PATH", "/nonexistent")
    client.requests.reset()
    apply_manifests(client, [secret("demo-ssh-host-keys", namespace, "ssh-host-keys")], "soperator.slurm")
    assert sorted(read(client, "Secret", "demo-ssh-host-keys", namespace)["data"]) == sorted(
        "%s%s" % (f, s) for f in names.SSH_HOST_KEY_FILES for s in ("", ".pub"))
    secret_reads = [r for r in client.requests.api if "/secrets" in r[1] and r[0] == "GET"]
    assert secret_reads and all(r[1].rstrip("/").endswith("/secrets/demo-ssh-host-keys") for r in secret_reads)


def test_rendered_example_cluster_noop_costs_one_list_per_kind(client, namespace):
    """The real renderer's output (examples/cpu-cluster.yaml) converges, then costs one list per kind."""
    from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "examples", "cpu-cluster.yaml")) as handle:
        docs = [d for d in yaml.safe_load_all(handle) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    manifests = render_cluster(docs[0], docs[1:])
    kinds = set((o["apiVersion"], o["kind"]) for o in manifests)
    selector = "%s=%s" % (CLUSTER_LABEL, docs[0]["metadata"]["name"])

    first = apply_manifests(client, manifests, "soperator.slurm", prune_selector=selector)
    assert first["counts"]["created"] == len(manifests)
    print("\nrequests, create of the cpu example (%d objects, %d kinds): %d (%d writes)" % (
        len(manifests), len(kinds), len(client.requests.api), len(client.requests.writes)))

    client.requests.reset()
    again = apply_manifests(client, manifests, "soperator.slurm", prune_selector=selector)
    assert again["changed"] is False, [o for o in again["objects"] if o["action"] != "unchanged"]
    assert client.requests.writes == []
    # One list per kind the cluster prunes, one get per create-only object of a kind never listed (Secrets and
    # claims: never a list of Secrets); a create-only Job is found in the list of Jobs.
    create_only = [o for o in manifests if objects.is_create_only(o) and o["kind"] in objects.DEFAULT_PROTECT_KINDS]
    listed = set((o["apiVersion"], o["kind"]) for o in manifests if o["kind"] not in objects.DEFAULT_PROTECT_KINDS)
    assert len(client.requests.api) == len(listed) + len(create_only)
    assert not [r for r in client.requests.api if r[1].endswith("/secrets")]
    print("requests, no-op of the cpu example: %d" % len(client.requests.api))


# --- the module itself, through ansible-playbook ---------------------------------------------------------

PLAYBOOK = """
- name: Apply manifests
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Apply
      soperator.slurm.apply_manifests:
        kubeconfig: %(kubeconfig)s
        manifests: %(manifests)s
        prune:
          selector: slurm.soperator.dev/cluster=demo
      register: applied

    - name: Show the result to the test
      ansible.builtin.debug:
        var: applied
"""


def run_playbook(tmp_path, collections_path, kubeconfig, manifests, *flags):
    playbook = tmp_path / "apply.yml"
    playbook.write_text(PLAYBOOK % {"kubeconfig": kubeconfig, "manifests": json.dumps(manifests)})
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1")
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), str(playbook)] + list(flags),
                          env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    task = report["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return task, proc.stdout


def test_module_via_ansible_playbook(tmp_path, collections_path, kubeconfig, namespace):
    manifests = [cm("demo-slurm-conf", namespace), secret("demo-munge-key", namespace, "munge-key"),
                 secret("demo-db", namespace, stringData={"password": "correct-horse-battery"})]
    check, dummy = run_playbook(tmp_path, collections_path, kubeconfig, manifests, "--check", "--diff")
    assert check["changed"] is True
    assert [o["action"] for o in check["objects"]] == ["would-create"] * 3

    real, out = run_playbook(tmp_path, collections_path, kubeconfig, manifests, "--diff")
    assert real["changed"] is True and real["counts"]["created"] == 3
    assert "correct-horse-battery" not in out

    idem_check, dummy = run_playbook(tmp_path, collections_path, kubeconfig, manifests, "--check")
    idem, out = run_playbook(tmp_path, collections_path, kubeconfig, manifests)
    assert idem_check["changed"] is False and idem["changed"] is False
    assert idem["counts"] == {"created": 0, "updated": 0, "unchanged": 3, "pruned": 0}


def test_module_failure_names_the_object(tmp_path, collections_path, kubeconfig, namespace):
    playbook = tmp_path / "apply.yml"
    playbook.write_text(PLAYBOOK % {"kubeconfig": kubeconfig, "manifests": json.dumps(
        [cm("Bad_Name", namespace)])})
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)],
                          env=env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    task = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert task["failed"] is True
    assert re.search(r"apply ConfigMap \S+/Bad_Name: ", task["msg"]), task["msg"]
    assert task["status"] == 422
