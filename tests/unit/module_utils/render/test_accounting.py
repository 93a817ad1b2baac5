"""Accounting, the REST API and the exporter in the pure core: the API's rules, what is rendered for each database
type, where the password and the JWT key go (and where they never go), the components' conditions."""

import base64
import json

import pytest
from resources import load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import apply as _k8s_apply
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import generate
from ansible_collections.soperator.slurm.plugins.module_utils.plan import components, decided, model, status
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster

EXTERNAL = {"type": "External", "host": "db.example.org", "passwordSecretRef": {"name": "slurm-db", "key": "pw"}}


def errors_of(spec):
    with pytest.raises(SpecErrors) as err:
        validate_cluster(make_cluster(spec))
    return [(e.path, e.message) for e in err.value.errors]


def render(spec=None, served=()):
    objects = render_cluster(make_cluster(spec), [make_nodeset()], served=served)
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def container(objects, sts, name):
    pod = objects[("StatefulSet", sts)]["spec"]["template"]["spec"]
    return next(c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name)


# --- the API ------------------------------------------------------------------------------------------------------
def test_everything_is_off_by_default_and_renders_nothing_new():
    objects = render()
    assert not [k for k in objects if k[1].startswith("demo-accounting") or k[1] in ("demo-rest", "demo-exporter",
                                                                                     "demo-jwt-key")]
    conf = objects[("ConfigMap", "demo-slurm-config")]["data"]["slurm.conf"]
    assert "Accounting" not in conf and "AuthAlt" not in conf


@pytest.mark.parametrize("database,message", [
    ({"type": "External"}, "type External requires host and passwordSecretRef"),
    ({"type": "External", "host": "db"}, "type External requires host and passwordSecretRef"),
    ({"host": "db"}, "host, passwordSecretRef and tls apply to type External only"),
    ({"type": "MariaDBOperator", "tls": {"caSecretRef": {"name": "ca", "key": "ca.crt"}}},
     "host, passwordSecretRef and tls apply to type External only"),
])
def test_database_rules_name_the_field(database, message):
    assert errors_of({"accounting": {"enabled": True, "database": database}}) == [("spec.accounting.database",
                                                                                   message)]


@pytest.mark.parametrize("field,value", [("name", "slurm;drop"), ("user", "a b"), ("host", "db\nStoragePass=x")])
def test_database_names_are_identifiers(field, value):
    database = dict(EXTERNAL, **{field: value})
    assert [p for p, _m in errors_of({"accounting": {"enabled": True, "database": database}})] == [
        "spec.accounting.database.%s" % field]


def test_slurmdbd_config_keys_are_an_allowlist():
    found = errors_of({"accounting": {"enabled": True, "slurmdbd": {"config": {
        "PurgeJobAfter": "12months", "StoragePass": "x", "DebugLevel": "loud", "Bogus": "1"}}}})
    assert sorted(found) == [
        ("spec.accounting.slurmdbd.config.Bogus", "unknown slurmdbd.conf key 'Bogus'"),
        ("spec.accounting.slurmdbd.config.DebugLevel", "slurmdbd.conf value 'loud' for DebugLevel: must be one of "
                                                       "quiet, fatal, error, info, verbose, debug, debug2, debug3, "
                                                       "debug4, debug5"),
        ("spec.accounting.slurmdbd.config.StoragePass", "slurmdbd.conf key StoragePass is set by the operator (the "
                                                        "password comes from a Secret: "
                                                        "spec.accounting.database.passwordSecretRef)"),
    ]


@pytest.mark.parametrize("key,hint", [("AccountingStorageType", "set spec.accounting.enabled"),
                                      ("AuthAltTypes", "JSON Web Tokens are wired by the operator: set "
                                                       "spec.restApi.enabled")])
def test_raw_slurm_conf_keys_the_accounting_owns_are_refused(key, hint):
    assert errors_of({"slurm": {"slurmConf": {key: "x"}}}) == [
        ("spec.slurm.slurmConf.%s" % key, "slurm.conf key %s is set by the operator (%s)" % (key, hint))]


# --- rendering ----------------------------------------------------------------------------------------------------
def test_in_cluster_database_objects_and_where_the_password_goes():
    objects = render({"accounting": {"enabled": True}})
    secret = objects[("Secret", "demo-accounting-db-password")]
    assert secret["metadata"]["annotations"] == {names.ANNOTATION_CREATE_ONLY: "true",
                                                 names.ANNOTATION_GENERATE: "db-password"}
    assert "ownerReferences" not in secret["metadata"]  # outlives the cluster (deletionPolicy.database)
    db = objects[("StatefulSet", "demo-accounting-db")]
    assert db["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert db["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == names.MYSQL_UID
    assert {e["name"]: e["value"] for e in container(objects, "demo-accounting-db", "mariadb")["env"]} == {
        "SOPERATOR_DB_NAME": "slurm_acct_db", "SOPERATOR_DB_USER": "slurm"}
    dbd = container(objects, "demo-accounting", "slurmdbd")
    assert dbd["terminationMessagePolicy"] == "FallbackToLogsOnError"
    volumes = {v["name"]: v for v in objects[("StatefulSet", "demo-accounting")]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["db-password"]["secret"] == {"secretName": "demo-accounting-db-password", "defaultMode": 0o440,
                                                "items": [{"key": "password", "path": "password"}]}
    # slurmdbd runs as SlurmUser (slurmctld's), with no capability; the Secrets are its group's (fsGroup).
    assert dbd["securityContext"]["runAsUser"] == dbd["securityContext"]["runAsGroup"] == names.SLURM_UID
    assert dbd["securityContext"]["runAsNonRoot"] is True and "add" not in dbd["securityContext"]["capabilities"]
    assert objects[("StatefulSet", "demo-accounting")]["spec"]["template"]["spec"]["securityContext"][
        "fsGroup"] == names.SLURM_UID
    assert volumes["slurmdbd-run"]["emptyDir"]["medium"] == "Memory"
    # Never in a ConfigMap, an environment variable or an argument: only the Secret volume carries it.
    for obj in objects.values():
        text = json.dumps(obj)
        assert "StoragePass=" not in text.replace("# StoragePass is appended", "")
        assert "secretKeyRef" not in text
    conf = objects[("ConfigMap", "demo-slurmdbd-config")]["data"]["slurmdbd.conf"]
    assert "StorageHost=demo-accounting-db.hpc.svc\n" in conf and "DbdHost=demo-accounting-0\n" in conf
    assert "SlurmUser=slurm\n" in conf
    slurm_conf = objects[("ConfigMap", "demo-slurm-config")]["data"]["slurm.conf"]
    assert "AccountingStorageType=accounting_storage/slurmdbd\n" in slurm_conf
    assert "AccountingStorageHost=demo-accounting-0.demo-accounting.hpc.svc\n" in slurm_conf
    assert "PriorityWeightFairshare=10000\n" in slurm_conf


def test_external_database_with_tls_uses_the_users_secrets_and_generates_nothing():
    database = dict(EXTERNAL, port=3307, tls={"caSecretRef": {"name": "db-ca", "key": "ca.pem"}})
    objects = render({"accounting": {"enabled": True, "database": database}})
    assert ("Secret", "demo-accounting-db-password") not in objects
    assert ("StatefulSet", "demo-accounting-db") not in objects and ("Service", "demo-accounting-db") not in objects
    volumes = {v["name"]: v for v in objects[("StatefulSet", "demo-accounting")]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["db-password"]["secret"]["secretName"] == "slurm-db"
    assert volumes["db-password"]["secret"]["items"] == [{"key": "pw", "path": "password"}]
    assert volumes["db-ca"]["secret"]["items"] == [{"key": "ca.pem", "path": "ca.pem"}]
    conf = objects[("ConfigMap", "demo-slurmdbd-config")]["data"]["slurmdbd.conf"]
    assert "StorageHost=db.example.org\nStoragePort=3307\n" in conf
    assert "StorageParameters=SSL_CA=/etc/soperator/db-ca/ca.pem\n" in conf


def test_mariadb_operator_database_is_a_create_only_mariadb():
    objects = render({"accounting": {"enabled": True, "database": {"type": "MariaDBOperator",
                                                                   "storage": {"size": "5Gi"}}}})
    mariadb = objects[("MariaDB", "demo-accounting-db")]
    assert mariadb["apiVersion"] == "k8s.mariadb.com/v1alpha1"
    assert mariadb["metadata"]["annotations"] == {names.ANNOTATION_CREATE_ONLY: "true"}
    assert "ownerReferences" not in mariadb["metadata"]
    assert mariadb["spec"]["passwordSecretKeyRef"] == {"name": "demo-accounting-db-password", "key": "password"}
    assert mariadb["spec"]["rootPasswordSecretKeyRef"]["key"] == "root-password"
    assert mariadb["spec"]["storage"] == {"size": "5Gi"} and mariadb["spec"]["database"] == "slurm_acct_db"
    assert ("StatefulSet", "demo-accounting-db") not in objects


def test_the_jwt_key_reaches_slurmctld_and_slurmdbd_only():
    objects = render({"accounting": {"enabled": True}, "restApi": {"enabled": True}})
    assert objects[("Secret", "demo-jwt-key")]["metadata"]["annotations"][names.ANNOTATION_GENERATE] == "jwt-key"
    holders = sorted(k[1] for k, o in objects.items() if k[0] == "StatefulSet" and any(
        v.get("secret", {}).get("secretName") == "demo-jwt-key" for v in o["spec"]["template"]["spec"]["volumes"]))
    assert holders == ["demo-accounting", "demo-controller"]
    # slurmctld reads SlurmUser's copy (the entrypoint makes it from the Secret), slurmdbd the Secret's file (its
    # group's through fsGroup, mode 0440).
    for conf, key in ((objects[("ConfigMap", "demo-slurm-config")]["data"]["slurm.conf"], names.SLURMCTLD_JWT_KEY_PATH),
                      (objects[("ConfigMap", "demo-slurmdbd-config")]["data"]["slurmdbd.conf"], names.JWT_KEY_PATH)):
        assert "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n" % key in conf
    modes = dict((k[1], v["secret"]["defaultMode"]) for k, o in objects.items() if k[0] == "StatefulSet"
                 for v in o["spec"]["template"]["spec"]["volumes"] if v.get("secret", {}).get("secretName") ==
                 "demo-jwt-key")
    assert modes == {"demo-accounting": 0o440, "demo-controller": 0o400}
    rest = container(objects, "demo-rest", "slurmrestd")
    assert rest["args"][:5] == ["/usr/sbin/slurmrestd", "-a", "rest_auth/jwt", "-s",
                                "openapi/slurmctld,openapi/slurmdbd"]
    assert {"name": "SLURM_JWT", "value": "daemon"} in rest["env"]
    pod = objects[("StatefulSet", "demo-rest")]["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["slurm-config"]  # no munge key, no JWT key
    assert rest["securityContext"]["runAsUser"] == names.SLURMRESTD_UID


def test_rest_api_without_accounting_serves_slurmctld_only():
    objects = render({"restApi": {"enabled": True, "service": {"type": "LoadBalancer"}}})
    assert container(objects, "demo-rest", "slurmrestd")["args"][4] == "openapi/slurmctld"
    assert objects[("Service", "demo-rest")]["spec"]["type"] == "LoadBalancer"
    assert ("StatefulSet", "demo-accounting") not in objects


def test_only_a_key_that_needs_a_restart_restarts_the_slurm_clients():
    """slurmrestd and the exporter read slurm.conf at start for where slurmctld is and how to authenticate; the rest
    (a limit, a partition) they ask slurmctld for: their mounted copy follows without a restart."""
    base = {"exporter": {"enabled": True}, "restApi": {"enabled": True}}
    one = render(base)
    in_place = render(dict(base, slurm={"killWait": 45}))
    restart = render(dict(base, slurm={"slurmConf": {"CommunicationParameters": "block_null_hash"}}))
    for sts in ("demo-exporter", "demo-rest"):
        hashes = [o[("StatefulSet", sts)]["spec"]["template"]["metadata"]["annotations"][names.ANNOTATION_CONFIG_HASH]
                  for o in (one, in_place, restart)]
        assert hashes[0] == hashes[1] != hashes[2], sts


def test_exporter_and_its_service_monitor_only_where_served():
    spec = {"exporter": {"enabled": True, "serviceMonitor": {"labels": {"release": "prom",
                                                                        names.LABEL_CLUSTER: "other"}}}}
    assert ("ServiceMonitor", "demo-exporter") not in render(spec)
    objects = render(spec, served=("ServiceMonitor",))
    monitor = objects[("ServiceMonitor", "demo-exporter")]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["metadata"]["labels"][names.LABEL_CLUSTER] == "demo"  # ours are never overridden
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert "--no-collector.fairshare" in container(objects, "demo-exporter", "exporter")["args"]
    spec["exporter"]["serviceMonitor"] = {"enabled": False}
    assert ("ServiceMonitor", "demo-exporter") not in render(dict(spec, accounting={"enabled": True}),
                                                            served=("ServiceMonitor",))
    with_accounting = render({"exporter": {"enabled": True}, "accounting": {"enabled": True}})
    assert "--no-collector.fairshare" not in container(with_accounting, "demo-exporter", "exporter")["args"]


def test_the_accounting_example_renders_the_whole_stack():
    cluster, nodesets = load_example("accounting-cluster-local.yaml")
    kinds = [(o["kind"], o["metadata"]["name"]) for o in render_cluster(cluster, nodesets)]
    assert kinds.index(("StatefulSet", "acct-accounting")) < kinds.index(("StatefulSet", "acct-controller"))
    for ident in (("StatefulSet", "acct-accounting-db"), ("StatefulSet", "acct-rest"), ("StatefulSet", "acct-exporter"),
                  ("Secret", "acct-jwt-key"), ("Secret", "acct-accounting-db-password")):
        assert ident in kinds


# --- generated secrets ----------------------------------------------------------------------------------------------
def test_generated_password_and_jwt_key():
    hidden = []
    run = _k8s_apply._Run(None, "test", False, False, False, hidden.append)
    assert run is not None
    passwords = generate.db_passwords()
    for key in ("password", "root-password"):
        text = base64.b64decode(passwords[key]).decode()
        assert len(text) == 32 and text.isalnum()
    assert passwords["password"] != passwords["root-password"]
    assert len(base64.b64decode(generate.jwt_key()["jwt_hs256.key"])) == 64


# --- conditions -------------------------------------------------------------------------------------------------------
def _pod(name, message=None, ready=False, waiting="CrashLoopBackOff"):
    status_ = {"name": "slurmdbd", "ready": ready, "state": {"waiting": {"reason": waiting}} if not ready else {}}
    if message:
        status_["lastState"] = {"terminated": {"exitCode": 1, "message": message}}
    return {"metadata": {"name": name}, "status": {"containerStatuses": [status_]}}


def _components(spec, statefulsets, pods):
    cluster = validate_cluster(make_cluster(spec))
    plan = model.Draft()
    plan.manifests = render_cluster(cluster, [make_nodeset()])
    ctx = model.Context(cluster, [], [], {}, {"statefulsets": statefulsets, "pods": pods}, 0)
    components.plan_components(plan, ctx)
    return plan.components


def _sts(name, ready):
    return {"metadata": {"name": name}, "spec": {"replicas": 1}, "status": {"readyReplicas": ready}}


def test_conditions_of_the_components():
    spec = {"accounting": {"enabled": True}, "exporter": {"enabled": True}}
    ready = {n: _sts(n, 1) for n in ("demo-accounting", "demo-accounting-db", "demo-exporter")}
    assert _components(spec, ready, {}) == {"AccountingReady": ("True", "Ready", "every pod ready"),
                                            "ExporterReady": ("True", "Ready", "every pod ready")}
    failing = dict(ready, **{"demo-accounting": _sts("demo-accounting", 0)})
    message = "DatabaseAccessDenied: the database at db:3306 refused user slurm ...\n"
    found = _components(spec, failing, {"demo-accounting-0": _pod("demo-accounting-0", message)})
    assert found["AccountingReady"] == ("False", "DatabaseAccessDenied", "demo-accounting: 0/1 pods ready; slurmdbd: "
                                        "DatabaseAccessDenied: the database at db:3306 refused user slurm ...")
    # Slurm's own last words (FallbackToLogsOnError) carry no reason of ours: Progressing, with the words.
    found = _components(spec, failing, {"demo-accounting-0": _pod("demo-accounting-0", "slurmdbd: fatal: boom")})
    assert found["AccountingReady"][:2] == ("False", "Progressing") and "fatal: boom" in found["AccountingReady"][2]
    # No pod yet: just not ready.
    assert _components(spec, failing, {})["AccountingReady"] == ("False", "Progressing",
                                                                 "demo-accounting: 0/1 pods ready")
    assert _components(dict(spec, maintenance=True), ready, {})["AccountingReady"][1] == "Maintenance"


def test_pod_problem_reads_waiting_reasons_too():
    pod = _pod("x", waiting="ImagePullBackOff")
    assert components.pod_problem(pod) == "slurmdbd: ImagePullBackOff"
    assert components.pod_problem(_pod("x", ready=True)) is None
    assert components.pod_problem({"metadata": {"name": "x"}}) is None


def test_component_conditions_come_and_go_with_the_component():
    def plan(components):
        p = model.Draft()
        p.ready, p.phase, p.message, p.components = True, "Ready", "fine", components
        return decided.freeze(p)

    obj = {"metadata": {"generation": 3}}
    new = status.cluster_status({}, obj, plan({"AccountingReady": ("False", "DatabaseAccessDenied", "why")}),
                                "2026-01-01T00:00:00Z")
    cond = status.get_condition(new["conditions"], "AccountingReady")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "DatabaseAccessDenied", "why")
    assert status.get_condition(status.cluster_status(new, obj, plan({}), "x")["conditions"], "AccountingReady") is None
