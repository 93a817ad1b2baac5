"""Where the modules take their Kubernetes connection from (the order kubernetes.core documents)."""

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import client as _k8s_client


def test_an_explicit_kubeconfig_wins(monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    assert _k8s_client._kubeconfig_source("~/given").endswith("/given")
    assert _k8s_client._kubeconfig_source({"clusters": []}) == {"clusters": []}


def test_kubeconfig_from_the_environment_only_without_a_host(monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    assert _k8s_client._kubeconfig_source(None) == "/from/env"
    # A stale KUBECONFIG (a stopped local cluster's removed file) must not break explicit host options.
    assert _k8s_client._kubeconfig_source(None, host="https://127.0.0.1:6443") is None


def test_a_host_alone_builds_a_configuration_without_any_kubeconfig(monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    cfg = _k8s_client.configuration({"host": "https://127.0.0.1:1", "api_key": "t", "validate_certs": False})
    assert cfg.host == "https://127.0.0.1:1" and cfg.verify_ssl is False
    assert cfg.api_key == {"authorization": "Bearer t"}
