"""Users from a directory (spec.identity) in one reconcile: the Secrets it takes must be marked for the cluster
before anything is rendered, and IdentityReady is written from the controller's sssd sidecar and removed with the
directory."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, status

NOW = 1_700_000_000
LDAP = {"uris": ["ldaps://ldap.example.org"], "baseDN": "dc=example,dc=org",
        "bindDN": "cn=sssd,ou=services,dc=example,dc=org",
        "bindPasswordSecretRef": {"name": "ldap-bind", "key": "password"},
        "tls": {"caSecretRef": {"name": "ldap-ca", "key": "ca.crt"}}}
MARK = {names.LABEL_IDENTITY_SECRET: "demo"}


def cluster(ldap=None, **spec):
    return make_cluster(dict({"identity": {"ldap": dict(LDAP, **(ldap or {}))}}, **spec))


# --- the Secrets it takes -------------------------------------------------------------------------------------
def test_the_secrets_must_be_marked_for_the_cluster_before_anything_is_rendered():
    obj = cluster()
    assert values.identity_secret_refs(obj["spec"]) == [
        ("spec.identity.ldap.bindPasswordSecretRef.name", "ldap-bind"),
        ("spec.identity.ldap.tls.caSecretRef.name", "ldap-ca")]
    observed = {"statefulsets": {}, "pods": {}, "slurm": None,
                "secrets": {"ldap-bind": {}, "ldap-ca": {names.LABEL_IDENTITY_SECRET: "other"}}}
    with pytest.raises(SpecErrors) as err:
        converge.plan(obj, [make_nodeset()], observed, NOW)
    found = dict((e.path, e.message) for e in err.value.errors)
    assert "not marked for SlurmCluster demo" in found["spec.identity.ldap.bindPasswordSecretRef.name"]
    assert "kubectl label secret ldap-ca %s=demo" % names.LABEL_IDENTITY_SECRET in found[
        "spec.identity.ldap.tls.caSecretRef.name"]
    observed["secrets"] = {"ldap-ca": MARK}
    with pytest.raises(SpecErrors) as err:
        converge.plan(obj, [make_nodeset()], observed, NOW)
    assert "does not exist" in str(err.value)
    observed["secrets"] = {"ldap-bind": MARK, "ldap-ca": MARK}
    assert converge.plan(obj, [make_nodeset()], observed, NOW).objects.manifests



def test_the_converge_writes_identity_ready_and_removes_it_with_the_directory():
    observed = {"statefulsets": {}, "pods": {}, "slurm": None,
                "identity": "BindRefused ldap_default_bind_dn refused (ldap_bind: Invalid credentials (49))"}
    plan = converge.plan(cluster(), [make_nodeset()], observed, NOW)
    assert plan.report.components["IdentityReady"][:2] == ("False", "BindRefused")
    written = status.cluster_status({}, cluster(), plan, "2024-01-01T00:00:00Z")
    cond = status.get_condition(written["conditions"], "IdentityReady")
    assert cond["status"] == "False" and cond["reason"] == "BindRefused" and "bindPasswordSecretRef" in cond["message"]
    plan = converge.plan(make_cluster(), [make_nodeset()], dict(observed, identity=None), NOW)
    assert "IdentityReady" not in plan.report.components
    again = status.cluster_status(written, make_cluster(), plan, "2024-01-01T00:00:01Z")
    assert status.get_condition(again["conditions"], "IdentityReady") is None


