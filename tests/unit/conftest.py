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


import pytest  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "corpus"))

from resources import API, load_example, make_cluster, make_nodeset  # noqa: E402,F401  (shared with suites)


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch):
    """Unit tests never see the developer's cluster: no kubeconfig or K8S_AUTH_* from the environment."""
    for name in list(os.environ):
        if name == "KUBECONFIG" or name.startswith("K8S_AUTH_") or name == "SOPERATOR_KUBECONFIG":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def root():
    return ROOT
