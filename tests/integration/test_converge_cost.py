"""What a converge costs at the API server, counted there (every request the module's clients send):

- a converge of an unchanged cluster, through a definition (site.yml) or by name (the operator's role), sends no
  write and no dry run, and as many requests whatever its number of workers (one list per kind, never a read per
  object or per pod); with its workers ready and no Slurm to ask, it does not read the worker pods;
- a replica change dry-runs and writes the worker StatefulSet only (its status aside).

The module's work is called in this process (``k8s.slurm_cluster.execute``, as its action plugin does); kwok pods run
nothing.
"""

import time
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import slurm_cluster as _converge

GROUP, VERSION = "slurm.soperator.dev", "v1alpha1"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
LISTED = ("pods", "statefulsets", "services", "configmaps", "jobs", "poddisruptionbudgets", "cronjobs",
          "networkpolicies")
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def crds(apply_crds):
    apply_crds("cost-test")


class Requests:
    """Every request of ``kubernetes.client.ApiClient`` (the module's DynamicClient included), discovery apart:
    (method, path, query dict)."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def discovery(path):
        parts = path.strip("/").split("/")
        return (parts in (["version"], ["api"], ["apis"]) or (parts[0] == "api" and len(parts) == 2)
                or (parts[0] == "apis" and len(parts) in (2, 3)))

    @property
    def api(self):
        return [c for c in self.calls if not self.discovery(c[1])]

    @property
    def dry_runs(self):
        return [c for c in self.api if c[2].get("dryRun")]

    @property
    def writes(self):
        """Writes that change something (dry runs apart)."""
        return [c for c in self.api if c[0] in WRITES and not c[2].get("dryRun")]


@pytest.fixture
def requests(monkeypatch):
    seen = Requests()
    real = client.ApiClient.call_api

    def counting(self, method, url, *args, **kwargs):
        parsed = urlsplit(url)
        seen.calls.append((method.upper(), parsed.path, parse_qs(parsed.query)))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(client.ApiClient, "call_api", counting)
    return seen


def docs(namespace, name, replicas, nodeset="cpu"):
    return [{"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "SlurmCluster",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"jail": {"storageClassName": "standard", "size": "1Gi"}, "controller": {"spool": {"size": "1Gi"}},
                      "placement": {"nodeSelector": {"soperator.dev/localcluster": "kwok"}}}},
            {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "NodeSet",
             "metadata": {"name": nodeset, "namespace": namespace},
             "spec": {"clusterRef": {"name": name}, "replicas": replicas,
                      "resources": {"requests": {"cpu": "10m", "memory": "600Mi"}, "limits": {"memory": "600Mi"}}}}]


def converge(kubeconfig, **params):
    return _converge.execute(dict({"kubeconfig": kubeconfig, "wait_timeout": 0, "prune_nodesets": True}, **params))


def wait_for_pods(k8s, namespace, name, replicas, nodeset="cpu", timeout=120):
    """Until the worker StatefulSet has made its pods and every StatefulSet of the cluster is ready (polled): a pod
    that becomes ready between two converges changes the status, which the second would then write."""
    deadline = time.monotonic() + timeout
    apps = client.AppsV1Api(k8s)
    while time.monotonic() < deadline:
        status = apps.read_namespaced_stateful_set(name + "-" + nodeset, namespace).status
        every = apps.list_namespaced_stateful_set(namespace, label_selector="slurm.soperator.dev/cluster=" + name).items
        if (status.replicas or 0) == (status.ready_replicas or 0) == (status.updated_replicas or 0) == replicas and all(
                (s.status.ready_replicas or 0) == (s.spec.replicas or 0) for s in every):
            return
        time.sleep(0.5)  # polling cadence
    raise AssertionError("%s/%s-%s made no %d pods in %ss" % (namespace, name, nodeset, replicas, timeout))


def settled_noop(kubeconfig, requests, **params):
    """A converge that finds nothing to do (the first one after a change may still write a status): the requests
    of the second of two."""
    converge(kubeconfig, **params)
    del requests.calls[:]
    result = converge(kubeconfig, **params)
    return result, list(requests.api)


def test_a_noop_converge_sends_no_write_no_dry_run_and_as_many_requests_for_any_size(kubeconfig, k8s, namespace,
                                                                                    crds, requests):
    costs = {}
    for name, replicas in (("small", 1), ("large", 6)):
        # Two clusters of one namespace: a NodeSet name each (a NodeSet cannot move between clusters).
        definition = docs(namespace, name, replicas, nodeset="cpu" + name)
        converge(kubeconfig, definition=definition)
        wait_for_pods(k8s, namespace, name, replicas, nodeset="cpu" + name)
        for how, params in (("definition", {"definition": definition}),
                            ("by name", {"name": name, "namespace": namespace})):
            result, sent = settled_noop(kubeconfig, requests, **params)
            assert result["changed"] is False, [o for o in result["objects"] if o["action"] != "unchanged"]
            assert [c for c in sent if c[0] in WRITES] == [], (name, how)
            assert [c for c in sent if c[2].get("dryRun")] == [], (name, how)
            # Reads by kind: no object of a listed kind is read by name (the create-only ones, Secrets and the
            # jail claim, are: listing them would read every Secret of the namespace).
            by_name = [c[1] for c in sent if c[0] == "GET" and c[1].split("/")[-2] in LISTED]
            assert by_name == [], (name, how)
            # Slurm does not answer (kwok) and every worker is ready: nothing asks for the worker pods.
            pod_lists = [c[2].get("labelSelector", [""])[0] for c in sent if c[1].endswith("/pods")]
            assert pod_lists and all("component!=worker" in s for s in pod_lists), pod_lists
            costs[(name, how)] = len(sent)
    assert costs[("small", "definition")] == costs[("large", "definition")], costs
    assert costs[("small", "by name")] == costs[("large", "by name")], costs


def test_a_replica_change_dry_runs_and_writes_the_worker_statefulset_only(kubeconfig, k8s, namespace, crds,
                                                                          requests):
    definition = docs(namespace, "demo", 1)
    converge(kubeconfig, definition=definition)
    converge(kubeconfig, name="demo", namespace=namespace)
    client.CustomObjectsApi(k8s).patch_namespaced_custom_object_scale(GROUP, VERSION, namespace, "nodesets", "cpu",
                                                                      {"spec": {"replicas": 3}})
    del requests.calls[:]
    result = converge(kubeconfig, name="demo", namespace=namespace)
    assert result["changed"] is True
    changed = [(o["kind"], o["name"], o["action"]) for o in result["objects"] if o["action"] != "unchanged"]
    assert changed == [("StatefulSet", "demo-cpu", "updated")]
    worker = "/apis/apps/v1/namespaces/%s/statefulsets/demo-cpu" % namespace
    assert [c[1] for c in requests.dry_runs] == [worker]
    objects = [c for c in requests.writes if not c[1].endswith("/status")]
    assert [(c[0], c[1]) for c in objects] == [("PATCH", worker)]
    assert client.AppsV1Api(k8s).read_namespaced_stateful_set("demo-cpu", namespace).spec.replicas == 3
