"""One table of the kinds a cluster owns: everything that prunes, tears down, caches or grants RBAC derives from it."""

import os

import pytest
import yaml
from resources import load_example

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names
from ansible_collections.soperator.slurm.plugins.module_utils.api import errors
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster

ROOT = os.path.abspath(__file__).rsplit(os.sep, 4)[0]


@pytest.mark.parametrize("example", ["cpu-cluster.yaml", "gpu-cluster.yaml", "cpu-cluster-local.yaml"])
def test_the_renderer_produces_no_kind_missing_from_the_table(example):
    cluster, nodesets = load_example(example)
    for obj in render_cluster(cluster, nodesets):
        kind = kinds.by_name(obj["kind"])
        assert kinds.api_version(kind) == obj["apiVersion"], obj["kind"]
        assert kind.data == (obj["kind"] in ("Secret", "PersistentVolumeClaim", "MariaDB"))


def test_prune_kinds_are_the_applied_ones_and_data_is_never_pruned():
    assert kinds.prune_kinds() == ["apps/v1/StatefulSet", "v1/Service", "v1/ConfigMap",
                                   "policy/v1/PodDisruptionBudget", "batch/v1/Job", "batch/v1/CronJob",
                                   "networking.k8s.io/v1/NetworkPolicy", "monitoring.coreos.com/v1/ServiceMonitor"]
    assert {k.kind for k in kinds.data()} == {"Secret", "PersistentVolumeClaim", "MariaDB"}
    # The operator caches (watches) only the kinds every cluster serves.
    assert "ServiceMonitor" not in {k.kind for k in kinds.applied()}
    assert kinds.optional_names() == ("ServiceMonitor", "MariaDB")
    with pytest.raises(KeyError):
        kinds.by_name("Deployment")


def test_operator_rules_grant_exactly_the_table():
    rules = kinds.operator_rules()
    by_resource = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                by_resource[(group, resource)] = set(rule["verbs"])
    for kind in kinds.applied():
        assert by_resource[(kind.group, kind.plural)] == {"get", "list", "watch", "create", "patch", "delete"}
    # Not cached by the operator: no watch.
    assert by_resource[("monitoring.coreos.com", "servicemonitors")] == {"get", "list", "create", "patch", "delete"}
    assert by_resource[("", "secrets")] == by_resource[("", "persistentvolumeclaims")] == {"get", "create"}
    assert by_resource[("k8s.mariadb.com", "mariadbs")] == {"get", "create"}
    assert by_resource[("", "pods/exec")] == {"get", "create"}
    assert by_resource[("", "pods/status")] == {"patch"}  # each worker's SlurmNodeReady condition
    assert by_resource[("", "pods/eviction")] == {"create"}  # an unhealthy worker moved (evictUnhealthyAfter)
    assert ("", "nodes") not in by_resource  # cluster-scoped: opt-in, a ClusterRole of its own
    assert by_resource[(names.GROUP, names.CLUSTER_PLURAL)] == {"get", "list", "watch", "patch"}
    assert not any("*" in verbs for verbs in by_resource.values())
    deleting = {(r["apiGroups"][0], res): set(r["verbs"]) for r in kinds.operator_rules(True) for res in r["resources"]}
    assert "delete" in deleting[("", "secrets")]


def test_the_operator_role_renders_these_rules(root):
    """The role's template takes the rules from the filter: no second list to keep in step."""
    with open(os.path.join(root, "roles", "operator", "templates", "manifests.yml.j2")) as handle:
        template = handle.read()
    assert "workload_rules = _operator_rules" in template and "secrets" not in template
    with open(os.path.join(root, "roles", "operator", "vars", "main.yml")) as handle:
        assert "soperator.slurm.operator_rbac_rules" in yaml.safe_load(handle)["_operator_rules"]


def test_molecule_verifies_every_owned_kind_through_the_filter(root):
    """molecule's verify reads the cluster's objects by the collection's table, not by a list of its own."""
    from ansible_collections.soperator.slurm.plugins.filter.kinds import owned_kinds

    assert [k["kind"] for k in owned_kinds(True)] == [k.kind for k in kinds.OWNED] + ["Pod"]
    assert owned_kinds(False) == [{"api_version": kinds.api_version(k), "kind": k.kind} for k in kinds.OWNED]
    with open(os.path.join(root, "molecule", "default", "verify.yml")) as handle:
        verify = handle.read()
    assert "soperator.slurm.owned_kinds" in verify
    assert not any("|%s" % k.kind in verify for k in kinds.OWNED + (kinds.POD,))


@pytest.mark.parametrize("status,reason", [(0, errors.UNAVAILABLE), (403, errors.FORBIDDEN), (404, errors.NOT_FOUND),
                                           (409, errors.CONFLICT), (422, errors.INVALID_SPEC),
                                           (400, errors.INVALID_SPEC), (429, errors.UNAVAILABLE),
                                           (503, errors.UNAVAILABLE), (418, errors.API_ERROR)])
def test_failure_reasons_from_api_status(status, reason):
    assert errors.reason_of_status(status) == reason


def test_only_an_invalid_spec_or_a_vanished_object_is_permanent():
    assert [r for r in (errors.INVALID_SPEC, errors.FORBIDDEN, errors.CONFLICT, errors.UNAVAILABLE,
                        errors.API_ERROR, errors.NOT_FOUND) if not errors.retryable(r)] == \
        [errors.INVALID_SPEC, errors.NOT_FOUND]
    assert errors.retryable(None)  # a failure no module classified: retried with backoff


def test_reading_nodes_is_opt_in(root):
    assert kinds.NODE_RULES == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    with open(os.path.join(root, "roles", "operator", "templates", "manifests.yml.j2")) as handle:
        template = handle.read()
    # the ClusterRole and the runtime's Node watch exist only when operator_read_nodes asks for them
    assert "{% if _operator_node_rules %}" in template and "{% if operator_read_nodes | bool %}" in template
    assert kinds.NODE_CORDON_RULES == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    with open(os.path.join(root, "roles", "operator", "vars", "main.yml")) as handle:
        assert "operator_read_nodes | soperator.slurm.operator_node_rbac_rules(operator_cordon_nodes)" in \
            yaml.safe_load(handle)["_operator_node_rules"]
