"""The installer's policy over a directory (spec.identity): which directories a cluster may use, whether plain LDAP
may be, the lowest id a directory may give. Each refusal names the field, before anything is planned, let alone
written; a malformed policy is refused naming its key."""

import pytest
from resources import LDAP, make_cluster, make_nodeset
from resources import ldap_cluster as cluster

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge

RANGE = "spec.identity.ldap.idRange"


def errors_of(obj, policy=None):
    """{field: message} of what validation and the policy refuse, as the converge finds it (nothing planned)."""
    with pytest.raises(SpecErrors) as err:
        converge.plan(obj, [make_nodeset()], {"statefulsets": {}, "pods": {}, "slurm": None}, 1_700_000_000,
                      policy=policies.normalize(policy or {}))
    return dict((e.path, e.message) for e in err.value.errors)


def judged(obj, policy=None):
    """The policy's refusals of a valid cluster: {field: message}."""
    found = policies.check(specs.validate_cluster(obj), [], policies.normalize(policy or {}))
    return dict((e.path, e.message) for e in found)


# --- the policy's directories -------------------------------------------------------------------------------------
@pytest.mark.parametrize("allowed, uris, refused", [
    ([], ["ldaps://anything.example.net"], []),
    (["ldaps://ldap.example.org"], ["ldaps://ldap.example.org"], []),
    (["ldaps://ldap.example.org"], ["ldaps://LDAP.example.org:636/"], []),
    (["ldaps://ldap.example.org"], ["ldaps://ldap.example.org:1636"], [0]),  # not the scheme's own port
    (["ldaps://ldap.example.org:1636"], ["ldaps://ldap.example.org:1636"], []),
    (["ldaps://ldap.example.org"], ["ldaps://ldap.example.org.evil.net"], [0]),
    (["ldaps://ldap.example.org"], ["ldaps://a.example.org", "ldaps://ldap.example.org"], [0]),
    (["ldaps://*.example.org"], ["ldaps://a.example.org", "ldaps://b.c.example.org"], []),
    (["ldaps://*.example.org"], ["ldaps://example.org"], [0]),
    (["ldaps://*.example.org"], ["ldaps://evilexample.org"], [0]),
    (["ldaps://10.0.0.5"], ["ldaps://10.0.0.50"], [0]),
    (["ldaps://[2001:db8::5]"], ["ldaps://[2001:DB8::5]:636"], []),
])
def test_directories_the_policy_allows(allowed, uris, refused):
    found = judged(cluster({"uris": uris}), {"allowed_directory_uris": allowed})
    assert sorted(found) == ["spec.identity.ldap.uris[%d]" % i for i in refused], found
    for index in refused:
        message = found["spec.identity.ldap.uris[%d]" % index]
        assert message.startswith("directory %s is not allowed by the installer's policy" % uris[index]), message
        assert "(allowed_directory_uris)" in message


def test_a_directory_outside_the_policy_is_refused_before_anything_is_planned():
    found = errors_of(cluster(), {"allowed_directory_uris": ["ldaps://ldap.corp.example.com"]})
    assert list(found) == ["spec.identity.ldap.uris[0]"], found


def test_another_scheme_of_an_allowed_host_is_another_directory():
    starttls = {"uris": ["ldap://ldap.example.org"], "tls": {"startTLS": True}}
    assert "spec.identity.ldap.uris[0]" in judged(cluster(starttls),
                                                   {"allowed_directory_uris": ["ldaps://ldap.example.org"]})
    assert judged(cluster(starttls), {"allowed_directory_uris": ["ldap://ldap.example.org"]}) == {}


def anonymous(uris, **ldap):
    return make_cluster({"identity": {"ldap": dict({"uris": uris, "baseDN": LDAP["baseDN"]}, **ldap)}})


def test_plain_ldap_is_refused_unless_the_policy_allows_it():
    found = judged(anonymous(["ldaps://a.example.org", "ldap://b.example.org"]))
    assert list(found) == ["spec.identity.ldap.uris[1]"], found
    assert "is plain LDAP (no tls.startTLS): nothing authenticates its answers" in found[
        "spec.identity.ldap.uris[1]"]
    assert "(allow_plain_ldap: false)" in found["spec.identity.ldap.uris[1]"]
    assert judged(anonymous(["ldap://b.example.org"]), {"allow_plain_ldap": True}) == {}
    # StartTLS is TLS: not plain.
    assert judged(anonymous(["ldap://b.example.org"], tls={"startTLS": True})) == {}


def test_the_lowest_directory_id_is_the_policys():
    assert judged(cluster()) == {}  # the default range starts at the default lowest id
    found = judged(cluster({"idRange": {"min": 1000, "max": 60000}}), {"min_directory_id": 10000})
    assert list(found) == [RANGE + ".min"], found
    assert found[RANGE + ".min"].startswith("1000 is below the lowest id the installer's policy")
    assert "10000 (min_directory_id)" in found[RANGE + ".min"]
    assert judged(cluster({"idRange": {"min": 10000, "max": 60000}}), {"min_directory_id": 10000}) == {}


def test_a_cluster_without_a_directory_is_not_judged_by_the_directory_policy():
    assert judged(make_cluster(), {"allowed_directory_uris": ["ldaps://x.example.org"],
                                   "min_directory_id": 100000}) == {}


@pytest.mark.parametrize("key, value", [
    ("allowed_directory_uris", "ldaps://ldap.example.org"),
    ("allowed_directory_uris", ["ldap.example.org"]),
    ("allowed_directory_uris", ["ldaps://ldap.example.org/dc=example,dc=org"]),
    ("allowed_directory_uris", ["ldaps://*"]),
    ("allowed_directory_uris", ["ldaps://a.*.org"]),
    ("allowed_directory_uris", ["ldaps://a.example.org:0"]),
    ("allowed_directory_uris", ["ldaps://a.example.org:70000"]),
    ("allowed_directory_uris", [1]),
    ("allow_plain_ldap", "yes"),
    ("min_directory_id", 999),
    ("min_directory_id", 0),
    ("min_directory_id", names.SLURM_UID),
    ("min_directory_id", 65534),
    ("min_directory_id", 2147483648),
    ("min_directory_id", "1000"),
    ("min_directory_id", True),
])
def test_malformed_directory_policies_are_refused_naming_the_key(key, value):
    with pytest.raises(ValueError, match="^" + key):
        policies.normalize({key: value})


def test_the_defaults():
    policy = policies.normalize({})
    assert (policy["allowed_directory_uris"], policy["allow_plain_ldap"], policy["min_directory_id"]) == (
        [], False, 1000)
    assert policies.normalize({"min_directory_id": None})["min_directory_id"] == 1000
