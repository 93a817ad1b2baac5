"""Test harness: one real Kubernetes per test session, a fresh namespace per test.

Fixtures (all lazy: unit tests that do not ask for them never start a cluster):
- ``kubeconfig``: path of a kubeconfig for a real kube-apiserver. Order of preference:
  ``SOPERATOR_KUBECONFIG`` (an existing cluster: kind, a real one), a running ``hack/localcluster.py``,
  else the local cluster is started for this session and stopped at its end (unless
  ``SOPERATOR_KEEP_CLUSTER=1``).
- ``k8s``: a ``kubernetes.client.ApiClient`` for it.
- ``namespace``: a new namespace for one test, deleted afterwards.

The collection is importable as ``ansible_collections.soperator.slurm`` through a symlink tree made here.
"""

import os
import subprocess
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "hack"))

import localcluster  # noqa: E402  (stdlib-only tool in hack/)


def _collections_path():
    """A directory holding ansible_collections/soperator/slurm -> the repo, for imports and ansible runs (made by
    hack/collection-link.sh when missing)."""
    base = os.path.join(ROOT, ".cache", "collections")
    if os.path.realpath(os.path.join(base, "ansible_collections", "soperator", "slurm")) != os.path.realpath(ROOT):
        subprocess.run([os.path.join(ROOT, "hack", "collection-link.sh")], check=True, stdout=subprocess.DEVNULL)
    return base


COLLECTIONS_PATH = _collections_path()
if COLLECTIONS_PATH not in sys.path:
    sys.path.insert(0, COLLECTIONS_PATH)


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: needs a real Kubernetes API (started or reused)")


@pytest.fixture(scope="session")
def collections_path():
    return COLLECTIONS_PATH


@pytest.fixture(scope="session")
def kubeconfig():
    external = os.environ.get("SOPERATOR_KUBECONFIG")
    if external:
        yield external
        return
    state = localcluster.load_state()
    if localcluster.running(state):
        yield localcluster.state_path("kubeconfig")
        return
    subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "up"], check=True)
    try:
        yield localcluster.state_path("kubeconfig")
    finally:
        if os.environ.get("SOPERATOR_KEEP_CLUSTER") != "1":
            subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "down"], check=False)


@pytest.fixture(scope="session")
def k8s(kubeconfig):
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    yield api
    api.close()


@pytest.fixture(scope="session")
def kubectl(kubeconfig):
    """Run the pinned kubectl against the test cluster; returns CompletedProcess (text)."""
    binary = localcluster.binpaths()["kubectl"]
    if not os.access(binary, os.X_OK):
        binary = "kubectl"

    def run(*args, input=None, check=True):
        return subprocess.run([binary, "--kubeconfig", kubeconfig] + list(args), input=input,
                              capture_output=True, text=True, check=check)

    return run


CRD_DIR = os.path.join(ROOT, "roles", "crds", "files")


@pytest.fixture(scope="session")
def apply_crds(kubectl):
    """Apply the collection's CRDs (server-side, as ``field_manager``) and wait until both are Established.

    Not `kubectl wait --for=condition=Established`: on a CRD the API server has not given conditions yet (the
    large SlurmCluster schema, right after the apply) it fails at once ("accessor error: <nil>") instead of
    waiting."""
    def apply(field_manager):
        kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", field_manager, "-f", CRD_DIR)
        names = ["slurmclusters.slurm.soperator.dev", "nodesets.slurm.soperator.dev"]
        deadline = time.monotonic() + 60
        while True:
            states = [kubectl("get", "crd", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Established\")]"
                              ".status}", check=False).stdout for name in names]
            if states == ["True", "True"]:
                return
            assert time.monotonic() < deadline, "CRDs not Established after 60 s: %s" % dict(zip(names, states))
            time.sleep(0.2)

    return apply


@pytest.fixture
def namespace(k8s, request):
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    name = "t-%s-%s" % (request.node.name.lower().replace("_", "-")[:40].strip("-"), uuid.uuid4().hex[:6])
    name = "".join(c if c.isalnum() or c == "-" else "-" for c in name)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={"soperator.dev/test": "true"})))
    # The ServiceAccount admission plugin rejects pods until the namespace's default SA exists.
    yield name
    if os.environ.get("SOPERATOR_KEEP_NAMESPACES") != "1":
        core.delete_namespace(name, propagation_policy="Background")
