"""Fixtures of the integration suite (the shared ones are in tests/conftest.py)."""

import pytest
from kubernetes import client
from polling import wait_until


@pytest.fixture
def own_nodes(k8s, namespace):
    """Two kwok nodes of this test only, labelled and tainted for its namespace (``soperator-test=<namespace>``),
    Ready and without the node controller's not-ready taint (a worker waits for that, as a DaemonSet's pod does);
    deleted afterwards (a test may delete one itself)."""
    core = client.CoreV1Api(k8s)
    made = []
    try:
        for suffix in ("a", "b"):
            name = "own-%s-%s" % (namespace[-20:], suffix)
            capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
            core.create_node({"metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                           "labels": {"kubernetes.io/hostname": name, "soperator-test": namespace}},
                              "spec": {"taints": [{"key": "soperator-test", "value": namespace,
                                                   "effect": "NoSchedule"}]},
                              "status": {"allocatable": capacity, "capacity": capacity}})
            made.append(name)

        def settled():
            for name in made:
                node = core.read_node(name)
                ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())
                if not ready or any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or ()):
                    return False
            return True
        wait_until(settled, 60, "both kwok nodes ready, no not-ready taint")
        yield made
    finally:
        for name in made:
            try:
                core.delete_node(name)
            except client.ApiException as e:
                if e.status != 404:
                    raise
