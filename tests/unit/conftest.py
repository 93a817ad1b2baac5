"""Unit tests import the collection as ``ansible_collections.soperator.slurm`` from a temporary symlink tree.

No cluster, no network: everything under tests/unit runs in seconds with plain pytest.
"""

import atexit
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _collections_path():
    base = tempfile.mkdtemp(prefix="soperator-unit-")
    atexit.register(shutil.rmtree, base, True)
    namespace_dir = os.path.join(base, "ansible_collections", "soperator")
    os.makedirs(namespace_dir)
    os.symlink(ROOT, os.path.join(namespace_dir, "slurm"))
    return base


sys.path.insert(0, _collections_path())

import copy  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "corpus"))

API = "slurm.soperator.dev/v1alpha1"


def make_cluster(spec=None, name="demo", namespace="hpc", uid=None):
    """A SlurmCluster object with a jail unless ``spec`` gives one."""
    body = {"jail": {"storageClassName": "standard", "size": "10Gi"}}
    body.update(copy.deepcopy(spec or {}))
    md = {"name": name, "namespace": namespace}
    if uid:
        md["uid"] = uid
    return {"apiVersion": API, "kind": "SlurmCluster", "metadata": md, "spec": body}


def make_nodeset(name="cpu", spec=None, cluster="demo", namespace="hpc", uid=None):
    body = {"clusterRef": {"name": cluster}}
    body.update(copy.deepcopy(spec or {}))
    md = {"name": name, "namespace": namespace}
    if uid:
        md["uid"] = uid
    return {"apiVersion": API, "kind": "NodeSet", "metadata": md, "spec": body}


def load_example(name):
    with open(os.path.join(ROOT, "examples", name)) as handle:
        docs = [d for d in yaml.safe_load_all(handle) if d]
    return docs[0], docs[1:]


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch):
    """Unit tests never see the developer's cluster: no kubeconfig or K8S_AUTH_* from the environment."""
    for name in list(os.environ):
        if name == "KUBECONFIG" or name.startswith("K8S_AUTH_") or name == "SOPERATOR_KUBECONFIG":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def root():
    return ROOT
