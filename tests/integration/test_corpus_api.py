"""One source of truth: the generated CRDs and the Python validator agree on the same corpus, on a real API server.

- every valid file is accepted, and the defaults the API server applies equal the Python defaults;
- every invalid file marked ``api: reject`` is refused by the API server (CEL message or field path in the answer);
- every invalid file marked ``api: accept`` is a Slurm-level rule only Python checks: the API accepts it, which
  proves the label true (and the renderer still refuses it: see the unit tests).
"""

import copy
import glob
import json
import os
import sys
import time

import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "corpus"))
import corpus  # noqa: E402

from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as pyspec

pytestmark = pytest.mark.cluster
GROUP, VERSION = "slurm.soperator.dev", "v1alpha1"
PLURAL = {"SlurmCluster": "slurmclusters", "NodeSet": "nodesets"}


@pytest.fixture(scope="module")
def crds(k8s):
    ext = client.ApiextensionsV1Api(k8s)
    dyn = dynamic.DynamicClient(k8s)
    api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "crds", "files", "*.yaml"))):
        with open(path) as f:
            body = yaml.safe_load(f)
        api.server_side_apply(body=body, name=body["metadata"]["name"], field_manager="corpus-test",
                              force_conflicts=True)
    for name in ("slurmclusters.slurm.soperator.dev", "nodesets.slurm.soperator.dev"):
        deadline = time.monotonic() + 30
        while not any(c.type == "Established" and c.status == "True"
                      for c in ext.read_custom_resource_definition(name).status.conditions or []):
            if time.monotonic() > deadline:
                pytest.fail("CRD %s not Established" % name)
            time.sleep(0.1)


def create(k8s, namespace, doc):
    """POST with fieldValidation=Strict (kubectl's default), so unknown fields are errors, not pruned."""
    return client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL[doc["kind"]], doc, field_validation="Strict")


def ids(paths):
    return [os.path.basename(p)[:-5] for p in paths]


VALID = corpus.files("valid")
INVALID = corpus.files("invalid")


@pytest.mark.parametrize("path", VALID, ids=ids(VALID))
def test_valid_files_are_accepted_with_python_defaults(k8s, namespace, crds, path):
    docs, _ = corpus.load(path)
    cluster, nodesets = corpus.split(docs)
    for doc in docs:
        stored = create(k8s, namespace, copy.deepcopy(doc))
        if doc["kind"] == "SlurmCluster":
            expected = pyspec.validate_cluster(doc)["spec"]
        else:
            expected = pyspec.validate_nodeset(doc)["spec"]
        # The API server applies schema defaults only; Python also derives a few values from other fields
        # (clusterName from metadata.name, image tags from the collection version). Every field the API set
        # must equal Python's value; every default Python applies from the schema must be there.
        assert _subset(stored["spec"], expected), json.dumps({"api": stored["spec"], "python": expected}, indent=1)
        derived = _derived_paths(doc["kind"])
        assert _strip(expected, derived) == _strip(stored["spec"], derived), path


def _subset(small, big):
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _subset(v, big[k]) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(small) == len(big) and all(map(_subset, small, big))
    return small == big


def _derived_paths(kind):
    # Values Python derives that a CRD default cannot express (they depend on other fields or on the release).
    return {"SlurmCluster": [("clusterName",), ("images",)], "NodeSet": []}[kind]


def _strip(spec, paths):
    spec = copy.deepcopy(spec)
    for path in paths:
        node = spec
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    return spec


@pytest.mark.parametrize("path", INVALID, ids=ids(INVALID))
def test_invalid_files_agree_with_the_api_server(k8s, namespace, crds, path):
    docs, expect = corpus.load(path)
    errors = []
    for doc in docs:
        try:
            create(k8s, namespace, copy.deepcopy(doc))
        except ApiException as e:
            errors.append((e.status, json.loads(e.body)["message"]))
    if expect["api"] == "accept":
        assert errors == [], "labelled api: accept, but the API server refused: %s" % errors
        return
    assert errors, "labelled api: reject, but the API server accepted every document"
    status, message = errors[0]
    assert status in (400, 422), errors
    leaf = expect["path"].split(".")[-1].split("[")[0]
    assert expect["message"] in message or leaf in message, (expect, message)
