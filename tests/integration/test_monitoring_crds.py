"""prometheus-operator's own CRDs (monitoring.coreos.com, from the pinned Go module: hack/prometheus-operator-crds.sh)
in the real kube-apiserver. The exporter's ServiceMonitor (site.yml, spec.exporter) and the operator's PodMonitor
(roles/operator) are made only while the cluster serves their kinds, the CRDs' schemas accept what is rendered (and
refuse a malformed monitor), and each monitor selects what it is meant to scrape.

The CRDs are installed only for this module, and removed at its end unless they were there before (a cluster with
prometheus-operator keeps its own)."""

import json
import os
import subprocess
import time

import pytest
import yaml
from test_examples import load, site

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.cluster
GROUP = "monitoring.coreos.com"
PLURALS = {"ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors"}


@pytest.fixture(scope="module")
def monitoring_crds(kubectl):
    """``install()`` applies the CRDs this cluster lacks and waits until they are served; ``preinstalled`` says
    whether every one was there already. Ours are deleted at the end."""
    crd_dir = subprocess.run([os.path.join(ROOT, "hack", "prometheus-operator-crds.sh")], check=True,
                             capture_output=True, text=True).stdout.strip()
    missing = [p for p in PLURALS.values() if kubectl("get", "crd", "%s.%s" % (p, GROUP), check=False).returncode]
    installed = []

    class CRDs:
        preinstalled = not missing

        @staticmethod
        def install():
            for plural in missing:
                if "%s.%s" % (plural, GROUP) in installed:
                    continue
                kubectl("apply", "--server-side", "--field-manager", "soperator-tests", "-f",
                        os.path.join(crd_dir, "%s_%s.yaml" % (GROUP, plural)))
                installed.append("%s.%s" % (plural, GROUP))
            deadline = time.monotonic() + 60
            for plural in PLURALS.values():
                # Established, and served: discovery lists the resource (what the converge asks).
                while kubectl("get", plural + "." + GROUP, "-A", check=False).returncode:
                    assert time.monotonic() < deadline, "%s not served after 60 s" % plural
                    time.sleep(0.2)

        @staticmethod
        def remove():
            if installed:
                kubectl("delete", "crd", *installed, "--wait=true")
                installed.clear()

    yield CRDs
    CRDs.remove()


def _get(kubectl, kind, name, namespace):
    res = kubectl("get", "%s.%s" % (PLURALS[kind], GROUP), name, "-n", namespace, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def test_the_service_monitor_is_made_once_served_and_the_crd_accepts_it(kubeconfig, collections_path, kubectl, k8s,
                                                                       namespace, tmp_path, monitoring_crds):
    docs = load("cpu-cluster.yaml", namespace)
    docs[0]["spec"]["exporter"] = {"enabled": True, "serviceMonitor": {"interval": "15s", "labels": {
        "release": "kube-prometheus"}}}
    if not monitoring_crds.preinstalled:
        # Served, seen by the host's discovery cache (a file every process shares), then removed, as when
        # prometheus-operator is uninstalled: the converge asks the server, renders no ServiceMonitor (it would fail
        # to apply one) and succeeds.
        from kubernetes.dynamic import DynamicClient

        monitoring_crds.install()
        DynamicClient(k8s).resources.get(api_version=GROUP + "/v1", kind="ServiceMonitor")
        monitoring_crds.remove()
        site(kubeconfig, collections_path, tmp_path, docs, wait=False)
        assert kubectl("get", "service", "demo-exporter", "-n", namespace, check=False).returncode == 0
    monitoring_crds.install()
    site(kubeconfig, collections_path, tmp_path, docs, wait=False)
    monitor = _get(kubectl, "ServiceMonitor", "demo-exporter", namespace)
    assert monitor is not None, "no ServiceMonitor once the cluster serves the kind"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"  # what a Prometheus selects monitors by
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "15s"}
    # It selects the exporter's Service and names one of its ports: what prometheus-operator resolves.
    service = json.loads(kubectl("get", "service", "demo-exporter", "-n", namespace, "-o", "json").stdout)
    selected = monitor["spec"]["selector"]["matchLabels"]
    assert selected.items() <= service["metadata"]["labels"].items()
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]

    # The CRD's schema is the judge: a monitor with an interval Prometheus cannot parse is refused by the server.
    bad = {k: monitor[k] for k in ("apiVersion", "kind", "spec")}
    bad["metadata"] = {"name": "bad", "namespace": namespace}
    bad["spec"]["endpoints"] = [dict(endpoint, interval="soon")]
    refused = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=yaml.safe_dump(bad), check=False)
    assert refused.returncode != 0 and "spec.endpoints[0].interval" in refused.stderr, refused.stderr


def _operator_playbook(kubeconfig, collections_path, params):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, K8S_AUTH_KUBECONFIG=kubeconfig,
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    res = subprocess.run(["ansible-playbook", "-i", "localhost,", os.path.join(ROOT, "playbooks", "operator.yml"),
                          "-e", json.dumps(params)], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    return json.loads(res.stdout[res.stdout.index("{"):])["stats"]["localhost"]


def test_the_operator_pod_monitor_follows_the_served_kind_and_the_option(kubeconfig, collections_path, kubectl, k8s,
                                                                          namespace, monitoring_crds):
    params = {"operator_namespace": namespace, "operator_watch_namespaces": [namespace],
              "operator_create_namespace": False, "operator_image": "soperator/operator:test",
              "operator_node_selector": {"soperator.dev/localcluster": "kwok"},
              "operator_pod_monitor_labels": {"release": "kube-prometheus"}}
    try:
        if not monitoring_crds.preinstalled:
            # Served, in the host's discovery cache, then removed (prometheus-operator uninstalled): the install
            # leaves the PodMonitor out and succeeds (a CI run once failed here on another client's stale cache).
            from kubernetes.dynamic import DynamicClient

            monitoring_crds.install()
            DynamicClient(k8s).resources.get(api_version=GROUP + "/v1", kind="PodMonitor")
            monitoring_crds.remove()
            assert _operator_playbook(kubeconfig, collections_path, params)["failures"] == 0
            assert kubectl("get", "deployment", "soperator-operator", "-n", namespace, check=False).returncode == 0
        monitoring_crds.install()
        assert _operator_playbook(kubeconfig, collections_path, params)["failures"] == 0
        monitor = _get(kubectl, "PodMonitor", "soperator-operator", namespace)
        assert monitor is not None
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
        assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
        # It selects the operator's pods and names their metrics port.
        deploy = json.loads(kubectl("get", "deployment", "soperator-operator", "-n", namespace, "-o", "json").stdout)
        template = deploy["spec"]["template"]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        assert "http" in [p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])]
        assert _operator_playbook(kubeconfig, collections_path, params)["changed"] == 0  # idempotent

        # Asked off: the next install prunes it.
        _operator_playbook(kubeconfig, collections_path, dict(params, operator_pod_monitor=False))
        assert _get(kubectl, "PodMonitor", "soperator-operator", namespace) is None
        _operator_playbook(kubeconfig, collections_path, params)
        assert _get(kubectl, "PodMonitor", "soperator-operator", namespace) is not None
    finally:
        _operator_playbook(kubeconfig, collections_path, dict(params, operator_state="absent"))
    assert _get(kubectl, "PodMonitor", "soperator-operator", namespace) is None  # removed with the operator
