"""An External accounting database in the pure core: it takes only Secrets marked for its cluster (refused naming the
field before anything is rendered), the installer's policy may restrict its hosts, and the operator's cache check
(which never applies) does not judge Secrets it cannot see."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import components, converge

NOW = 1_700_000_000
MARK = {names.LABEL_DATABASE_SECRET: "demo"}
PASSWORD_FIELD = "spec.accounting.database.passwordSecretRef.name"
CA_FIELD = "spec.accounting.database.tls.caSecretRef.name"


def external(host="db.example.org", tls=False, enabled=True):
    database = {"type": "External", "host": host, "passwordSecretRef": {"name": "slurm-db", "key": "pw"}}
    if tls:
        database["tls"] = {"caSecretRef": {"name": "db-ca", "key": "ca.pem"}}
    return make_cluster({"accounting": {"enabled": enabled, "database": database}})


def observed(secrets=None):
    obs = {"statefulsets": {}, "pods": {}, "slurm": None}
    if secrets is not None:
        obs["secrets"] = secrets
    return obs


def refusal(cluster, secrets):
    with pytest.raises(SpecErrors) as err:
        converge.plan(cluster, [make_nodeset()], observed(secrets), NOW)
    return [(e.path, e.message) for e in err.value.errors]


# --- which Secrets are given away -----------------------------------------------------------------------------
def test_only_an_enabled_external_database_names_secrets_it_gives_away():
    assert values.database_secret_refs(external(tls=True)["spec"]) == [(PASSWORD_FIELD, "slurm-db"),
                                                                        (CA_FIELD, "db-ca")]
    assert values.database_secret_refs(external()["spec"]) == [(PASSWORD_FIELD, "slurm-db")]
    assert values.database_secret_refs(external(enabled=False)["spec"]) == []
    assert values.database_secret_refs(make_cluster({"accounting": {"enabled": True}})["spec"]) == []


# --- the mark, judged by the plan before anything is rendered ----------------------------------------------------
@pytest.mark.parametrize("labels,says", [
    (None, "Secret slurm-db does not exist"),
    ({}, "Secret slurm-db is not marked for SlurmCluster demo"),
    ({names.LABEL_DATABASE_SECRET: "other"}, "Secret slurm-db is not marked for SlurmCluster demo"),
    ({names.LABEL_CLUSTER: "demo"}, "Secret slurm-db is not marked for SlurmCluster demo"),
])
def test_an_unmarked_password_secret_makes_the_cluster_invalid_naming_the_field(labels, says):
    secrets = {} if labels is None else {"slurm-db": labels}
    [(path, message)] = refusal(external(), secrets)
    assert path == PASSWORD_FIELD and message.startswith(says), message
    assert "%s=demo" % names.LABEL_DATABASE_SECRET in message  # how to mark it


def test_the_ca_secret_must_be_marked_too():
    [(path, message)] = refusal(external(tls=True), {"slurm-db": MARK, "db-ca": {}})
    assert path == CA_FIELD and message.startswith("Secret db-ca is not marked for SlurmCluster demo")
    assert [p for p, _m in refusal(external(tls=True), {})] == [PASSWORD_FIELD, CA_FIELD]


def test_marked_secrets_render_slurmdbd_with_them():
    p = converge.plan(external(tls=True), [make_nodeset()], observed({"slurm-db": MARK, "db-ca": MARK}), NOW)
    slurmdbd = next(m for m in p.objects.manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] ==
                    "demo-accounting")
    mounted = components.mounted_secrets({"spec": slurmdbd["spec"]["template"]["spec"]})
    assert {"slurm-db", "db-ca"} <= set(mounted)


def test_the_operators_cache_check_does_not_judge_secrets_it_does_not_see():
    """drift.needs_run plans from its caches, which hold no Secret: no "secrets" observed, no judgement (the run it
    starts observes them and refuses)."""
    p = converge.plan(external(), [make_nodeset()], observed(None), NOW)
    assert any(m["metadata"]["name"] == "demo-accounting" for m in p.objects.manifests)


def test_other_database_types_ignore_the_secrets_observed():
    p = converge.plan(make_cluster({"accounting": {"enabled": True}}), [make_nodeset()], observed({}), NOW)
    assert any(m["metadata"]["name"] == "demo-accounting-db" for m in p.objects.manifests)


# --- the installer's policy: database hosts ------------------------------------------------------------------------
@pytest.mark.parametrize("allowed,host,ok", [
    ([], "anything.example.net", True),
    (["db.example.org"], "db.example.org", True),
    (["db.example.org"], "DB.Example.org", True),
    (["db.example.org"], "db.example.org.evil.net", False),
    (["*.example.org"], "db.example.org", True),
    (["*.example.org"], "a.b.example.org", True),
    (["*.example.org"], "example.org", False),
    (["*.example.org"], "evilexample.org", False),
    (["10.0.0.5"], "10.0.0.50", False),
])
def test_database_hosts_the_policy_allows(allowed, host, ok):
    policy = policies.normalize({"allowed_database_hosts": allowed})
    found = policies.check(specs.validate_cluster(external(host=host)), [], policy)
    assert (found == []) == ok, found
    if not ok:
        [error] = found
        assert error.path == "spec.accounting.database.host" and host in error.message


def test_a_disabled_external_database_is_not_judged_by_the_host_policy():
    policy = policies.normalize({"allowed_database_hosts": ["db.example.org"]})
    assert policies.check(specs.validate_cluster(external(host="x.evil.net", enabled=False)), [], policy) == []


@pytest.mark.parametrize("value", ["db.example.org", ["db;drop"], ["*"], ["a.*.org"], [1]])
def test_malformed_database_host_policies_are_refused_naming_the_key(value):
    with pytest.raises(ValueError, match="allowed_database_hosts"):
        policies.normalize({"allowed_database_hosts": value})
