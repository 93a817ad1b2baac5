"""Users from a directory (spec.identity) in the pure core: what is refused and where, the sssd.conf every sidecar
runs with (no password in it), the sidecar in every pod that resolves users (and only there), sshd's directory keys,
the Secrets a directory takes, and the SlurmCluster's IdentityReady condition from what the sidecar found."""

import copy
import json

import pytest
from resources import load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import (
    converge,
    identity,
    names,
    render,
    render_identity,
    sssd_conf,
    status,
)
from ansible_collections.soperator.slurm.plugins.module_utils import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.sshd_conf import render_sshd_config

NOW = 1_700_000_000
LDAP = {"uris": ["ldaps://ldap.example.org"], "baseDN": "dc=example,dc=org",
        "bindDN": "cn=sssd,ou=services,dc=example,dc=org",
        "bindPasswordSecretRef": {"name": "ldap-bind", "key": "password"},
        "tls": {"caSecretRef": {"name": "ldap-ca", "key": "ca.crt"}}}
MARK = {names.LABEL_IDENTITY_SECRET: "demo"}


def cluster(ldap=None, **spec):
    return make_cluster(dict({"identity": {"ldap": dict(LDAP, **(ldap or {}))}}, **spec))


def errors_of(obj):
    with pytest.raises(SpecErrors) as err:
        specs.validate_cluster(obj)
    return dict((e.path, e.message) for e in err.value.errors)


def objects_of(obj, nodesets=None):
    return render.render_cluster(obj, nodesets if nodesets is not None else [make_nodeset()])


def pods(objects):
    """{StatefulSet, Job or CronJob name: pod spec}."""
    found = dict((o["metadata"]["name"], o["spec"]["template"]["spec"]) for o in objects
                 if o["kind"] in ("StatefulSet", "Job"))
    found.update((o["metadata"]["name"], o["spec"]["jobTemplate"]["spec"]["template"]["spec"]) for o in objects
                 if o["kind"] == "CronJob")
    return found


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


def test_no_directory_changes_nothing():
    plain = objects_of(make_cluster())
    assert not any(o["metadata"]["name"] == names.sssd_config_name("demo") for o in plain)
    for pod in pods(plain).values():
        assert all(c["name"] != "sssd" for c in pod.get("initContainers", []) + pod["containers"])
    assert "UsePAM no" in render_sshd_config(specs.validate_cluster(make_cluster()))
    assert "AuthorizedKeysCommand" not in render_sshd_config(specs.validate_cluster(make_cluster()))


# --- sssd.conf ------------------------------------------------------------------------------------------------
def test_sssd_conf_is_read_only_keys_only_and_ends_with_its_domain():
    text = sssd_conf.render_sssd_conf(specs.validate_cluster(cluster({"userBaseDN": "ou=people,dc=example,dc=org"})))
    lines = text.splitlines()
    sections = [line for line in lines if line.startswith("[")]
    assert sections == ["[sssd]", "[nss]", "[domain/directory]"], sections  # the password is appended to the last
    settings = dict(line.split(" = ", 1) for line in lines if " = " in line)
    assert settings["services"] == "nss"
    assert settings["auth_provider"] == "none" and settings["cache_credentials"] == "false"
    assert settings["enumerate"] == "false" and settings["override_homedir"] == "/home/%u"
    assert settings["ldap_uri"] == "ldaps://ldap.example.org"
    assert settings["ldap_user_search_base"] == "ou=people,dc=example,dc=org"
    assert "ldap_group_search_base" not in settings  # baseDN then
    assert settings["ldap_tls_reqcert"] == "demand"
    assert settings["ldap_tls_cacert"] == "%s/%s" % (names.IDENTITY_CA_MOUNT, names.IDENTITY_CA_FILE)
    assert (settings["min_id"], settings["max_id"]) == ("1000", "60000")
    assert settings["ldap_default_bind_dn"] == LDAP["bindDN"]
    assert "ldap_default_authtok" not in settings
    login = sssd_conf.render_sssd_conf(specs.validate_cluster(cluster()), ssh=True)
    assert "services = nss, ssh" in login and "[ssh]" in login


def test_sssd_conf_of_an_anonymous_starttls_and_an_ad_directory():
    text = sssd_conf.render_sssd_conf(specs.validate_cluster(make_cluster({"identity": {"ldap": {
        "uris": ["ldap://a.example.org", "ldap://b.example.org:3389"], "baseDN": "dc=example,dc=org",
        "tls": {"startTLS": True}, "schema": "ad"}}})))
    assert "ldap_uri = ldap://a.example.org, ldap://b.example.org:3389" in text
    assert "ldap_id_use_start_tls = true" in text and "ldap_tls_cacert" not in text
    assert "ldap_schema = ad" in text and "ldap_id_mapping = false" in text
    assert "ldap_default_bind_dn" not in text


def test_sssd_conf_refuses_what_would_break_a_line_even_past_the_schema():
    obj = specs.validate_cluster(cluster())
    obj["spec"]["identity"]["ldap"]["baseDN"] = "dc=example,dc=org\nldap_uri = ldap://evil.example.org"
    with pytest.raises(specs.SpecError) as err:
        sssd_conf.render_sssd_conf(obj)
    assert err.value.path == "spec.identity.ldap.baseDN"


# --- the pods -------------------------------------------------------------------------------------------------
def test_every_pod_that_resolves_users_gets_the_sidecar_and_nothing_else_does():
    obj = cluster(accounting={"enabled": True}, restApi={"enabled": True}, exporter={"enabled": True},
                  healthChecks={"nccl": {"schedule": "0 3 * * 0"}})
    gpu = make_nodeset("gpu", {"gpu": {"count": 1}, "healthChecks": {"ncclMinBusBandwidthGBps": 100}})
    found = pods(objects_of(obj, [make_nodeset(), gpu]))
    with_sidecar = sorted(name for name, pod in found.items()
                          if any(c["name"] == "sssd" for c in pod.get("initContainers", [])))
    assert with_sidecar == ["demo-accounting", "demo-controller", "demo-cpu", "demo-gpu", "demo-login", "demo-rest"]
    daemons = {"demo-accounting": "slurmdbd", "demo-controller": "slurmctld", "demo-cpu": "slurmd",
               "demo-gpu": "slurmd", "demo-login": "sshd", "demo-rest": "slurmrestd"}
    for name, daemon in daemons.items():
        pod = found[name]
        container = next(c for c in pod["containers"] if c["name"] == daemon)
        assert {"name": "sssd-pipes", "mountPath": names.SSS_PIPES_DIR, "readOnly": True} in container["volumeMounts"]
        assert {"name": "SOPERATOR_IDENTITY", "value": "sssd"} in container["env"]
        # The sidecar comes last: the daemon starts once sssd answers (its startup probe), after munge.
        assert pod["initContainers"][-1]["name"] == "sssd"


def test_the_sidecar_has_no_capability_and_alone_reads_the_secrets():
    found = pods(objects_of(cluster(accounting={"enabled": True}, restApi={"enabled": True})))
    for name, pod in found.items():
        sidecars = [c for c in pod.get("initContainers", []) if c["name"] == "sssd"]
        if not sidecars:
            continue
        sidecar = sidecars[0]
        assert sidecar["restartPolicy"] == "Always"
        assert sidecar["securityContext"] == {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": False,
                                              "seccompProfile": {"type": "RuntimeDefault"},
                                              "readOnlyRootFilesystem": True}
        secret_volumes = set(v["name"] for v in pod["volumes"] if "secret" in v and v["name"].startswith("identity"))
        assert secret_volumes == {"identity-bind-password", "identity-ca"}, name
        for v in pod["volumes"]:
            if v["name"] in secret_volumes:
                assert v["secret"]["optional"] is True  # a missing key is reported, not a pod that never starts
        for container in pod["containers"] + pod.get("initContainers", []):
            mounted = set(m["name"] for m in container.get("volumeMounts", []))
            assert bool(mounted & secret_volumes) == (container["name"] == "sssd"), (name, container["name"])
            # No password in any environment (kubectl describe shows it).
            assert "secretKeyRef" not in json.dumps(container.get("env", []))
        check = dict((e["name"], e["value"]) for e in sidecar["env"])
        assert check["SOPERATOR_IDENTITY_CHECK"] == ("always" if name == "demo-controller" else "until-ready")
        items = next(v for v in pod["volumes"] if v["name"] == "sssd-config")["configMap"]["items"]
        assert items == [{"key": render_identity.LOGIN_CONFIG_KEY if name == "demo-login"
                          else render_identity.CONFIG_KEY, "path": "sssd.conf"}]
        # sssd's cache (which holds the configuration, password included) and its configuration: memory only.
        memory = set(v["name"] for v in pod["volumes"] if (v.get("emptyDir") or {}).get("medium") == "Memory")
        assert {"sssd-etc", "sssd-db", "sssd-run"} <= memory


def test_the_config_map_holds_no_password_and_the_anonymous_directory_mounts_no_secret():
    objects = objects_of(cluster())
    config = next(o for o in objects if o["metadata"]["name"] == names.sssd_config_name("demo"))
    assert "authtok =" not in json.dumps(config["data"]).replace("authtok_type", "")
    anonymous = make_cluster({"identity": {"ldap": {"uris": ["ldap://ldap.example.org"],
                                                     "baseDN": "dc=example,dc=org"}}})
    for pod in pods(objects_of(anonymous)).values():
        assert not [v for v in pod["volumes"] if "secret" in v and v["name"].startswith("identity")]


def test_sshd_reads_directory_keys_through_sssd_and_opens_sessions_with_pam():
    text = render_sshd_config(specs.validate_cluster(cluster()))
    assert "UsePAM yes" in text and "UsePAM no" not in text
    assert "AuthorizedKeysCommand %s %%u %%U" % names.AUTHORIZED_KEYS_COMMAND in text
    assert "AuthorizedKeysCommandUser nobody" in text
    # The jail's key files still count (local users), and sessions are still jailed and keys only.
    for line in ("AuthorizedKeysFile /mnt/jail%h/.ssh/authorized_keys", "ChrootDirectory /mnt/jail",
                 "PasswordAuthentication no", "KbdInteractiveAuthentication no"):
        assert line in text
    for key in ("AuthorizedKeysCommand", "AuthorizedKeysCommandUser", "UsePAM"):
        assert "spec.login.sshdConfig.%s" % key in errors_of(cluster(login={"sshdConfig": {key: "x"}}))


# --- the Secrets it takes -------------------------------------------------------------------------------------
def test_the_secrets_must_be_marked_for_the_cluster_before_anything_is_rendered():
    obj = cluster()
    assert identity.secret_refs(obj["spec"]) == [("spec.identity.ldap.bindPasswordSecretRef.name", "ldap-bind"),
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
    assert converge.plan(obj, [make_nodeset()], observed, NOW).manifests


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


def test_the_converge_writes_identity_ready_and_removes_it_with_the_directory():
    observed = {"statefulsets": {}, "pods": {}, "slurm": None,
                "identity": "BindRefused ldap_default_bind_dn refused (ldap_bind: Invalid credentials (49))"}
    plan = converge.plan(cluster(), [make_nodeset()], observed, NOW)
    assert plan.components["IdentityReady"][:2] == ("False", "BindRefused")
    written = status.cluster_status({}, cluster(), plan, "2024-01-01T00:00:00Z")
    cond = status.get_condition(written["conditions"], "IdentityReady")
    assert cond["status"] == "False" and cond["reason"] == "BindRefused" and "bindPasswordSecretRef" in cond["message"]
    plan = converge.plan(make_cluster(), [make_nodeset()], dict(observed, identity=None), NOW)
    assert "IdentityReady" not in plan.components
    again = status.cluster_status(written, make_cluster(), plan, "2024-01-01T00:00:01Z")
    assert status.get_condition(again["conditions"], "IdentityReady") is None


def test_the_example_is_the_one_the_end_to_end_test_applies():
    obj, nodesets = load_example("ldap-cluster-local.yaml")
    checked = specs.validate_cluster(copy.deepcopy(obj))
    assert identity.enabled(checked["spec"]) and checked["spec"]["accounting"]["enabled"]
    assert checked["spec"]["restApi"]["enabled"]
    assert [ref[1] for ref in identity.secret_refs(checked["spec"])] == ["ldap-bind", "ldap-ca"]
    assert render.render_cluster(obj, nodesets)
