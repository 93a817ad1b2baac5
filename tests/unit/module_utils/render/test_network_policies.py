"""NetworkPolicies (spec.networkPolicies, on by default) in the pure core: the in-cluster MariaDB, slurmdbd,
slurmrestd and the exporter each accept their port only from the pods that need them; the policies select the pods
the StatefulSets really run, at the ports they really listen on. And the exporter's collection interval."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext
from ansible_collections.soperator.slurm.plugins.module_utils.render.exporter import exporter_args

ALL = {"accounting": {"enabled": True}, "restApi": {"enabled": True}, "exporter": {"enabled": True}}


def render(extra=None, base=ALL):
    spec = dict(base, **(extra or {}))
    return render_cluster(make_cluster(spec), [make_nodeset()])


def policies(objects):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "NetworkPolicy"}


def selected(selector, labels):
    """Whether a LabelSelector (matchLabels, matchExpressions with In) selects ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions") or ())


def pods(objects):
    """{StatefulSet name: (pod labels, container ports)} of the rendered workloads."""
    found = {}
    for o in objects:
        if o["kind"] == "StatefulSet":
            template = o["spec"]["template"]
            ports = {p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
            found[o["metadata"]["name"]] = (template["metadata"]["labels"], ports)
    return found


def clients(policy, objects):
    """The StatefulSets whose pods a policy admits through its cluster-pod peers."""
    return {name for name, (labels, _ports) in pods(objects).items()
            for peer in policy["spec"]["ingress"][0]["from"] if set(peer) == {"podSelector"}
            and peer["podSelector"] and selected(peer["podSelector"], labels)}


def test_each_policy_admits_exactly_the_pods_that_need_it_at_the_port_the_pod_listens_on():
    objects = render()
    found = policies(objects)
    assert sorted(found) == ["demo-accounting", "demo-accounting-db", "demo-exporter", "demo-rest"]
    workloads = pods(objects)
    for name, policy in found.items():
        # It selects its own component's pods only, and only for Ingress (their egress is untouched).
        assert [n for n, (labels, _p) in workloads.items() if selected(policy["spec"]["podSelector"], labels)] == [
            name]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        [rule] = policy["spec"]["ingress"]
        assert [p["port"] for p in rule["ports"]] == sorted(workloads[name][1]), name
    assert clients(found["demo-accounting-db"], objects) == {"demo-accounting"}
    # sacct/sacctmgr ask slurmdbd directly (login nodes, jobs), slurmctld sends it records, slurmrestd's
    # openapi/slurmdbd asks it; nothing else of the cluster does (the exporter's sshare asks slurmctld).
    assert clients(found["demo-accounting"], objects) == {"demo-controller", "demo-login", "demo-cpu", "demo-rest"}
    assert clients(found["demo-rest"], objects) == {"demo-login", "demo-cpu"}
    # The exporter by default: every pod of the cluster's namespace, nothing from elsewhere.
    assert found["demo-exporter"]["spec"]["ingress"][0]["from"] == [{"podSelector": {}}]


def test_policies_follow_the_components_that_run():
    assert policies(render(base={})) == {}
    only_accounting = policies(render(base={"accounting": {"enabled": True}}))
    assert sorted(only_accounting) == ["demo-accounting", "demo-accounting-db"]
    # Without slurmrestd, slurmdbd has no REST client to admit.
    peer = only_accounting["demo-accounting"]["spec"]["ingress"][0]["from"][0]["podSelector"]
    assert "rest" not in peer["matchExpressions"][0]["values"]
    external = {"accounting": {"enabled": True, "database": {
        "type": "External", "host": "db.example.org", "passwordSecretRef": {"name": "db", "key": "pw"}}}}
    assert sorted(policies(render(base=external))) == ["demo-accounting"]  # the database is not ours
    assert policies(render({"networkPolicies": {"enabled": False}})) == {}


def test_restapifrom_adds_clients_and_exporterfrom_replaces_the_namespace_default():
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    outside = {"ipBlock": {"cidr": "203.0.113.0/24", "except": ["203.0.113.8/29"]}}
    found = policies(render({"networkPolicies": {"restApiFrom": [outside], "exporterFrom": [monitoring]}}))
    assert found["demo-rest"]["spec"]["ingress"][0]["from"][1:] == [outside]
    assert found["demo-exporter"]["spec"]["ingress"][0]["from"] == [monitoring]


def errors_of(spec):
    with pytest.raises(SpecErrors) as err:
        validate_cluster(make_cluster(spec))
    return [(e.path, e.message) for e in err.value.errors]


@pytest.mark.parametrize("peer,path,says", [
    ({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}, "spec.networkPolicies.restApiFrom[0]",
     schema.NETWORK_PEER_RULE),
    ({}, "spec.networkPolicies.restApiFrom[0]", schema.NETWORK_PEER_RULE),
    ({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}},
     "spec.networkPolicies.restApiFrom[0].ipBlock.except[0]", "strictly inside"),
    ({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/8"]}},
     "spec.networkPolicies.restApiFrom[0].ipBlock.except[0]", "strictly inside"),
    ({"ipBlock": {"cidr": "10.0.0.999/8"}}, "spec.networkPolicies.restApiFrom[0].ipBlock.cidr", "not a CIDR"),
    ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
     "spec.networkPolicies.restApiFrom[0].podSelector.matchExpressions[0].values", "at least one value"),
])
def test_malformed_peers_are_refused_naming_the_field(peer, path, says):
    [(found, message)] = errors_of({"networkPolicies": {"restApiFrom": [peer]}})
    assert found == path and says in message, (found, message)


def test_the_exporter_collects_on_the_interval_it_is_given():
    default = validate_cluster(make_cluster({"exporter": {"enabled": True}}))
    assert "--collect.interval=30s" in exporter_args(ClusterContext(default, []))
    mine = validate_cluster(make_cluster({"exporter": {"enabled": True, "collectInterval": "2m"}}))
    assert "--collect.interval=2m" in exporter_args(ClusterContext(mine, []))
    assert errors_of({"exporter": {"collectInterval": "4s"}}) == [
        ("spec.exporter.collectInterval", "Invalid value: '4s': at least 5s (each collection is a set of Slurm "
                                          "calls)")]
    assert [p for p, _m in errors_of({"exporter": {"collectInterval": "often"}})] == ["spec.exporter.collectInterval"]


def test_the_policy_names_are_the_components_own():
    assert {names.accounting_name("demo"), names.database_name("demo"), names.rest_name("demo"),
            names.exporter_name("demo")} == set(policies(render()))
