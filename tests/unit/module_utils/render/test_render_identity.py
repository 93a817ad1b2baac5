"""Users from a directory (spec.identity) rendered: the sssd.conf every sidecar runs with (no password in it), the
sidecar in every pod that resolves users (and only there), its Secrets mounted in it alone, sshd's directory keys."""

import json

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as render_identity
from ansible_collections.soperator.slurm.plugins.module_utils.render import sssd_conf
from ansible_collections.soperator.slurm.plugins.module_utils.render.sshd_conf import render_sshd_config

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


def objects_of(obj, nodesets=None):
    return render.render_cluster(obj, nodesets if nodesets is not None else [make_nodeset()])


def pods(objects):
    """{StatefulSet, Job or CronJob name: pod spec}."""
    found = dict((o["metadata"]["name"], o["spec"]["template"]["spec"]) for o in objects
                 if o["kind"] in ("StatefulSet", "Job"))
    found.update((o["metadata"]["name"], o["spec"]["jobTemplate"]["spec"]["template"]["spec"]) for o in objects
                 if o["kind"] == "CronJob")
    return found



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


