"""What keeps a converge from writing what it must not: refused NodeSets, names another owner takes, the
installer's policy, a failed populate Job, the pods that hold the cluster's keys."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import components, converge, model, status

NOW = 1_700_000_000
EMPTY = {"statefulsets": {}, "pods": {}, "slurm": None}


def cluster(**spec):
    return make_cluster(spec, uid="c-uid")


def nodeset(name="cpu", **spec):
    return make_nodeset(name, spec, uid="n-" + name)


def worker_rendered(plan, name):
    return any(m["kind"] == "StatefulSet" and m["metadata"]["name"] == name for m in plan.objects.manifests)


def test_a_nodeset_the_api_server_refused_is_left_out_and_its_objects_kept():
    refused = {"gpu": [SpecError("nodesets[gpu].spec.resources", "refused by the API server on StatefulSet demo-gpu")]}
    p = converge.plan(cluster(), [nodeset("cpu"), nodeset("gpu")], EMPTY, NOW, refused=refused)
    assert "refused by the API server" in p.definition.invalid["gpu"]
    assert worker_rendered(p, "demo-cpu") and not worker_rendered(p, "demo-gpu")
    assert ("StatefulSet", "demo-gpu") in p.objects.keep
    assert [ns["metadata"]["name"] for ns in p.definition.valid_nodesets] == ["cpu"]


def owners(*entries):
    return [{"cluster": c, "nodeset": n, "created": t} for c, n, t in entries]


def test_a_nodeset_whose_objects_another_cluster_already_names_is_degraded_alone():
    obs = dict(EMPTY, owners=owners(("demo-x", None, "2026-01-01T00:00:00Z"), ("demo", None, "2026-01-02T00:00:00Z"),
                                    ("demo", "cpu", "2026-01-02T00:00:00Z"), ("demo", "x-controller", None)))
    p = converge.plan(cluster(), [nodeset("cpu"), nodeset("x-controller")], obs, NOW)
    assert "SlurmCluster demo-x" in p.definition.invalid["x-controller"]
    assert worker_rendered(p, "demo-cpu") and not worker_rendered(p, "demo-x-controller")
    # The older cluster is not held back by the newer NodeSet.
    other = converge.plan(make_cluster(name="demo-x", uid="x"), [], obs, NOW)
    assert other.definition.invalid == {}


def test_a_cluster_whose_objects_an_older_owner_names_is_refused_whole():
    # Cluster demo-cpu's controller demo-cpu-controller vs NodeSet cpu-controller of the older cluster demo.
    obs = dict(EMPTY, owners=owners(("demo", None, "2026-01-01T00:00:00Z"),
                                    ("demo", "cpu-controller", "2026-01-01T00:00:00Z"), ("demo-cpu", None, None)))
    with pytest.raises(SpecErrors) as info:
        converge.plan(make_cluster(name="demo-cpu", uid="y"), [], obs, NOW)
    assert info.value.errors[0].path == "metadata.name"
    assert "NodeSet cpu-controller (of SlurmCluster demo)" in info.value.errors[0].message


def test_the_installers_policy_refuses_a_cluster_or_only_the_nodeset_that_asks_for_more():
    policy = policies.normalize({"allowed_registries": ["docker.io/soperator"]})
    p = converge.plan(cluster(), [nodeset("cpu"), nodeset("own", image="evil.example.com/w:1")], EMPTY, NOW,
                      policy=policy)
    assert "nodesets[own].spec.image" in p.definition.invalid["own"] and worker_rendered(p, "demo-cpu")
    with pytest.raises(SpecErrors) as info:
        converge.plan(cluster(jail={"storageClassName": "s", "size": "1Gi", "subMounts": [
            {"name": "d", "mountPath": "/data", "hostPath": "/data"}]}), [], EMPTY, NOW, policy=policy)
    assert info.value.errors[0].path == "spec.jail.subMounts[0].hostPath"


def populate_pod(name, phase, message=None, job=None, created="2026-01-01T00:00:00Z"):
    state = {"terminated": {"exitCode": 4, "message": message}} if message else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": {
        model.JOB_NAME_LABEL: job or names.populate_job_name("demo", ""),
        names.LABEL_COMPONENT: names.COMPONENT_POPULATE}},
        "status": {"phase": phase, "containerStatuses": [{"name": "populate", "state": state}]}}


def test_a_failed_populate_job_degrades_the_cluster_with_its_words():
    said = ("populate-jail: error: /mnt/jail is not empty and was not populated by soperator\n"
            "populate-jail: set spec.jail.populate.repopulateToken to copy the jail image over it")
    pods = {"p1": populate_pod("p1", "Failed", said, created="2026-01-01T00:00:00Z"),
            "p2": populate_pod("p2", "Failed", said, created="2026-01-01T00:01:00Z")}
    p = converge.plan(cluster(), [nodeset()], dict(EMPTY, pods=pods), NOW)
    assert len(p.report.degraded) == 1
    assert "repopulateToken" in p.report.degraded[0] and "demo-populate-jail-initial" in p.report.degraded[0]
    assert not p.report.ready and p.report.degraded[0] in p.report.message
    conds = dict((c["type"], c) for c in status.cluster_status({}, cluster(), p, "now")["conditions"])
    assert conds["Degraded"]["status"] == "True" and conds["Degraded"]["reason"] == status.REASON_FAILED
    # A retry that succeeded, or another Job (a new repopulate token), is not a failure of the current one.
    pods["p3"] = populate_pod("p3", "Succeeded")
    assert converge.plan(cluster(), [nodeset()], dict(EMPTY, pods=pods), NOW).report.degraded == []
    old = {"p1": populate_pod("p1", "Failed", said)}
    assert converge.plan(cluster(jail={"storageClassName": "s", "size": "1Gi", "populate": {
        "repopulateToken": "again"}}), [nodeset()], dict(EMPTY, pods=old), NOW).report.degraded == []


def pod_mounting(name, component, *secrets):
    return {"metadata": {"name": name, "labels": {names.LABEL_COMPONENT: component}},
            "spec": {"volumes": [{"name": "s%d" % i, "secret": {"secretName": s}} for i, s in enumerate(secrets)]}}


def test_the_secrets_pods_hold_are_the_ones_they_mount():
    login = pod_mounting("demo-login-0", names.COMPONENT_LOGIN, "demo-munge-key", "demo-ssh-host-keys")
    p = converge.plan(cluster(), [nodeset()], dict(EMPTY, pods={"demo-login-0": login}), NOW)
    assert p.objects.secrets_held == ["demo-munge-key", "demo-ssh-host-keys"]
    # Projected volumes and the environment count too.
    rest = {"metadata": {"name": "demo-rest-0"}, "spec": {
        "volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": "demo-jwt-key"}}]}}],
        "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k"}}}],
                        "envFrom": [{"secretRef": {"name": "b"}}]}]}}
    assert components.mounted_secrets(rest) == ["demo-jwt-key", "a", "b"]
    populate = {"p": populate_pod("p", "Running")}
    assert converge.plan(cluster(), [nodeset()], dict(EMPTY, pods=populate), NOW).objects.secrets_held == []
    assert converge.plan(cluster(), [nodeset()], EMPTY, NOW).objects.secrets_held == []


def test_a_key_no_running_pod_holds_is_generated_even_while_the_cluster_runs():
    """Accounting switched on under running pods: its new database password and JWT key Secrets are absent, and no pod
    holds them yet, so they are generated (only a key some pod holds is protected)."""
    login = pod_mounting("demo-login-0", names.COMPONENT_LOGIN, "demo-munge-key", "demo-ssh-host-keys")
    p = converge.plan(cluster(accounting={"enabled": True}, restApi={"enabled": True}), [nodeset()],
                      dict(EMPTY, pods={"demo-login-0": login}), NOW)
    generated = [m["metadata"]["name"] for m in p.objects.manifests if m["kind"] == "Secret"]
    assert "demo-accounting-db-password" in generated and "demo-jwt-key" in generated
    assert not (set(generated) - {"demo-munge-key", "demo-ssh-host-keys"}) & set(p.objects.secrets_held)
