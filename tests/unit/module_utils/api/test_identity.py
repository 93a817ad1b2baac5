"""Users from a directory (spec.identity) in the API: what is refused and where (before any write, naming the field),
what is accepted, the Secrets a directory takes, and what the controller's sssd sidecar found made into the
SlurmCluster's IdentityReady condition."""

import copy

import pytest
from resources import load_example, make_cluster

from ansible_collections.soperator.slurm.plugins.module_utils.api import identity
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

LDAP = {"uris": ["ldaps://ldap.example.org"], "baseDN": "dc=example,dc=org",
        "bindDN": "cn=sssd,ou=services,dc=example,dc=org",
        "bindPasswordSecretRef": {"name": "ldap-bind", "key": "password"},
        "tls": {"caSecretRef": {"name": "ldap-ca", "key": "ca.crt"}}}


def cluster(ldap=None, **spec):
    return make_cluster(dict({"identity": {"ldap": dict(LDAP, **(ldap or {}))}}, **spec))


def errors_of(obj):
    with pytest.raises(SpecErrors) as err:
        specs.validate_cluster(obj)
    return dict((e.path, e.message) for e in err.value.errors)


# --- what is refused, naming the field ------------------------------------------------------------------------
@pytest.mark.parametrize("change, path, fragment", [
    ({"uris": ["ldap://ldap.example.org"]}, "spec.identity.ldap.bindPasswordSecretRef", "over TLS only"),
    ({"uris": ["ldaps://a.example.org", "ldap://b.example.org"]}, "spec.identity.ldap.bindPasswordSecretRef",
     "over TLS only"),
    ({"uris": ["ldaps://a.example.org"], "tls": {"startTLS": True}}, "spec.identity.ldap.tls.startTLS",
     "for ldap:// URIs"),
    ({"uris": ["ldap//a.example.org"]}, "spec.identity.ldap.uris[0]", "an LDAP URI"),
    ({"uris": ["http://a.example.org"]}, "spec.identity.ldap.uris[0]", "an LDAP URI"),
    ({"uris": ["ldap://a.example.org/dc=example,dc=org"]}, "spec.identity.ldap.uris[0]", "an LDAP URI"),
    ({"uris": ["ldaps://a.example.org:0"]}, "spec.identity.ldap.uris[0]", "port 0 is not 1..65535"),
    ({"uris": ["ldaps://a.example.org:65536"]}, "spec.identity.ldap.uris[0]", "port 65536"),
    ({"uris": []}, "spec.identity.ldap.uris", "at least 1"),
    ({"uris": ["ldaps://a.example.org", "ldaps://a.example.org"]}, "spec.identity.ldap.uris[1]", "Duplicate"),
    ({"baseDN": "dc=example,dc=org\nldap_uri = ldap://evil.example.org"}, "spec.identity.ldap.baseDN",
     "a distinguished name"),
    ({"baseDN": "ou=a?sub?(uid=*),dc=example,dc=org"}, "spec.identity.ldap.baseDN", "no '?'"),
    ({"userBaseDN": "people"}, "spec.identity.ldap.userBaseDN", "is not attribute=value"),
    ({"groupBaseDN": 'ou=gr"oups,dc=example,dc=org'}, "spec.identity.ldap.groupBaseDN", "unescaped '\"'"),
    ({"bindDN": "cn=sssd,dc=example,dc=org\\"}, "spec.identity.ldap.bindDN", "lone backslash"),
    ({"bindDN": "cn=a\\zz,dc=example,dc=org"}, "spec.identity.ldap.bindDN", "bad escape"),
    ({"bindDN": "cn= sssd,dc=example,dc=org"}, "spec.identity.ldap.bindDN", "leading or trailing space"),
    ({"sshPublicKeyAttribute": "ssh key"}, "spec.identity.ldap.sshPublicKeyAttribute", "attribute name"),
    ({"schema": "nis"}, "spec.identity.ldap.schema", "Unsupported value"),
    ({"idRange": {"min": 5000, "max": 1000}}, "spec.identity.ldap.idRange", "must not exceed"),
    ({"bindPasswordSecretRef": {"name": "ldap-bind", "key": "../password"}},
     "spec.identity.ldap.bindPasswordSecretRef.key", "a Secret key"),
])
def test_bad_input_is_refused_naming_the_field(change, path, fragment):
    found = errors_of(cluster(change))
    assert path in found and fragment in found[path], found


def test_a_bind_dn_and_its_password_go_together():
    ldap = dict(LDAP)
    del ldap["bindPasswordSecretRef"]
    found = errors_of(make_cluster({"identity": {"ldap": ldap}}))
    assert "go together" in found["spec.identity.ldap"]
    ldap = dict(LDAP)
    del ldap["bindDN"]
    assert "go together" in errors_of(make_cluster({"identity": {"ldap": ldap}}))["spec.identity.ldap"]


def test_what_is_accepted():
    for ldap in ({"uris": ["ldap://10.0.0.5:389"], "tls": {"startTLS": True}},
                 {"uris": ["ldaps://[2001:db8::5]:636", "ldaps://ldap2.example.org/"]},
                 {"bindDN": "cn=sssd\\, reader+uid=x,ou=services,dc=example,dc=org"},
                 {"baseDN": "ou=Research \\28R\\26D\\29,dc=example,dc=org"},
                 {"schema": "ad", "idRange": {"min": 200000, "max": 2000000}}):
        specs.validate_cluster(cluster(ldap))
    # Anonymous, over plain LDAP: no secret is sent (the directory's answers are not authenticated: docs).
    specs.validate_cluster(make_cluster({"identity": {"ldap": {"uris": ["ldap://ldap.example.org"],
                                                               "baseDN": "dc=example,dc=org"}}}))


# --- IdentityReady --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line, state, reason, fragment", [
    ("Ready - the directory (ldaps://x) answers", "True", "Ready", "the directory (ldaps://x) answers"),
    ("BindRefused ldap_default_bind_dn the directory refused the bind", "False", "BindRefused",
     "spec.identity.ldap.bindDN and spec.identity.ldap.bindPasswordSecretRef: the directory refused"),
    ("DirectoryUnreachable ldap_uri cannot connect to ldaps://x (errno: 111 (Connection refused))", "False",
     "DirectoryUnreachable", "spec.identity.ldap.uris: cannot connect"),
    ("BaseDNNotFound ldap_user_search_base ou=nobody,dc=x does not exist", "False", "BaseDNNotFound",
     "spec.identity.ldap.userBaseDN: ou=nobody"),
    ("CertificateRefused ldap_tls_cacert ldaps://x: certificate verify failed", "False", "CertificateRefused",
     "spec.identity.ldap.tls.caSecretRef"),
    ("BindPasswordMissing ldap_default_authtok the Secret has no such key", "False", "BindPasswordMissing",
     "spec.identity.ldap.bindPasswordSecretRef: the Secret has no such key"),
    ("Garbage", "Unknown", "NotChecked", "said 'Garbage'"),
    ("Invented ldap_uri x", "Unknown", "NotChecked", "said"),
    ("", "Unknown", "NotChecked", "has not looked yet"),
])
def test_identity_ready_says_what_the_controller_sidecar_found_and_names_the_field(line, state, reason, fragment):
    found = identity.condition(cluster()["spec"], line)
    assert found[:2] == (state, reason) and fragment in found[2], found


def test_identity_ready_without_a_look_in_maintenance_and_without_a_directory():
    assert identity.condition(cluster()["spec"], None, "the sssd sidecar of demo-controller-0 is not running") == (
        "Unknown", "NotChecked", "the sssd sidecar of demo-controller-0 is not running")
    assert identity.condition(cluster(maintenance=True)["spec"], "Ready - x")[:2] == ("False", "Maintenance")
    assert identity.condition(make_cluster()["spec"], "Ready - x") is None



def test_the_example_is_the_one_the_end_to_end_test_applies():
    obj, nodesets = load_example("ldap-cluster-local.yaml")
    checked = specs.validate_cluster(copy.deepcopy(obj))
    assert identity.enabled(checked["spec"]) and checked["spec"]["accounting"]["enabled"]
    assert checked["spec"]["restApi"]["enabled"]
    assert [ref[1] for ref in identity.secret_refs(checked["spec"])] == ["ldap-bind", "ldap-ca"]
    assert render.render_cluster(obj, nodesets)

