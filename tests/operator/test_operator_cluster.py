"""The operator's runtime on the host against the real local kube-apiserver and kwok nodes, with the real roles.

kwok pods run nothing: no slurmctld ever answers, so a cluster here converges (its objects applied, the run
Successful, status written) but is never Ready, and its status says why. Scale-in needs Slurm to drain first, so
it is exercised against real Slurm (tests/slurm, tests/e2e); here a shrink must wait. The runtime in its image,
in-cluster on the real node, is tests/e2e/test_operator.py.
"""

import os
import signal
import time

import pytest
from operator_harness import ROOT, Cluster, OperatorProcess, holds_for, wait_for, write_watches

pytestmark = pytest.mark.cluster

CHILD_STATEFULSETS = ["demo-controller", "demo-cpu", "demo-login"]


@pytest.fixture(scope="module")
def crds(apply_crds):
    apply_crds("soperator-tests")


@pytest.fixture
def operators(tmp_path, kubeconfig, collections_path, namespace, crds, k8s):
    started = []
    watches = write_watches(str(tmp_path / "watches.yaml"), reconcile_period="5s")

    def start(identity, **kwargs):
        op = OperatorProcess(tmp_path, kubeconfig, collections_path, namespace, identity,
                             kwargs.pop("watches", watches), **kwargs)
        started.append(op)
        return op

    yield start
    for op in started:
        op.cleanup()
        if os.environ.get("SOPERATOR_SHOW_OPERATOR_LOGS") == "1":
            print("==== %s ====\n%s" % (op.identity, op.logs()))
    release_finalizers(k8s, namespace)


def release_finalizers(k8s, namespace):
    """No operator is left to run the teardown: drop our finalizers so the namespace can go."""
    Cluster(k8s, namespace).release_finalizers()


@pytest.fixture
def cluster(k8s, namespace):
    return Cluster(k8s, namespace)


def converged(c, kind="SlurmCluster", name="demo", generation=None):
    """The generation was applied: status written by the converge for it (Ready or not)."""
    obj = c.get(kind, name) or {}
    status = obj.get("status") or {}
    if generation is not None and status.get("observedGeneration") != generation:
        return False
    if kind == "SlurmCluster":
        ok = (c.condition(kind, name, "Successful") or {}).get("status") == "True"
        return ok and status.get("phase") in ("Progressing", "Ready") and obj
    return "replicas" in status and obj


def not_ready_for_lack_of_slurm(c, kind="SlurmCluster", name="demo"):
    cond = c.condition(kind, name, "Ready") or {}
    return cond.get("status") == "False" and cond.get("reason") == "Progressing"


def test_lifecycle_create_scale_repair_delete(operators, cluster, tmp_path):
    # A long period: drift must be repaired through the watches, at once, not by the periodic check.
    op = operators("op-a", watches=write_watches(str(tmp_path / "long.yaml"), reconcile_period="10m"))
    for doc in cluster.example():
        cluster.create(doc)

    # create -> every child exists, status written for generation 1, finalizers on, Events recorded
    wait_for(lambda: converged(cluster, generation=1), 120, what="SlurmCluster converged")
    assert not_ready_for_lack_of_slurm(cluster)
    assert "slurmctld does not answer" in cluster.condition("SlurmCluster", "demo", "Ready")["message"]
    assert cluster.condition("SlurmCluster", "demo", "Degraded")["status"] == "False"
    assert cluster.condition("SlurmCluster", "demo", "Failure") is None
    obj = cluster.get("SlurmCluster", "demo")
    assert "slurm.soperator.dev/finalizer" in obj["metadata"]["finalizers"]
    assert cluster.names("statefulsets") == CHILD_STATEFULSETS
    assert "demo-slurm-config" in cluster.names("configmaps")
    assert cluster.names("secrets") == ["demo-munge-key", "demo-ssh-host-keys"]
    assert "demo-jail" in cluster.names("pvcs")
    # status.replicas counts the pods that exist (the scale subresource's status): they come up after the apply
    wait_for(lambda: converged(cluster, "NodeSet", "cpu", generation=1)
             and cluster.get("NodeSet", "cpu")["status"]["replicas"] == 2, 60, what="NodeSet status: 2 pods")
    ns_obj = cluster.get("NodeSet", "cpu")
    assert "slurm.soperator.dev/finalizer" in ns_obj["metadata"]["finalizers"]  # deleting it drains first
    ns_status = ns_obj["status"]
    assert ns_status["replicas"] == 2
    assert "slurm.soperator.dev/nodeset=cpu" in ns_status["selector"].split(",")
    reasons = {r for _, r, _ in cluster.events()}
    assert {"Reconciling", "Reconciled"} <= reasons

    # scale out through the scale subresource (what an HPA does): no Slurm needed
    cluster.scale("cpu", 3)
    wait_for(lambda: cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).spec.replicas == 3, 30,
             what="StatefulSet scaled to 3")
    wait_for(lambda: converged(cluster, "NodeSet", "cpu", generation=2)
             and cluster.get("NodeSet", "cpu")["status"]["replicas"] == 3, 60, what="NodeSet status 3 replicas")
    assert cluster.get("NodeSet", "cpu")["status"]["selector"] == ns_status["selector"]

    # a scale-in cannot drain without slurmctld: every pod stays, and the status says why
    cluster.scale("cpu", 1)
    wait_for(lambda: "waits for slurmctld" in (cluster.condition("SlurmCluster", "demo", "Ready") or {}).get(
        "message", ""), 60, what="the scale-in waiting for Slurm")
    assert cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).spec.replicas == 3
    cluster.scale("cpu", 3)

    # drift, seen through the watches within seconds (the period is 10 minutes): deleted and edited children
    t0 = time.monotonic()
    cluster.core.delete_namespaced_config_map("demo-slurm-config", cluster.ns)
    cluster.core.delete_namespaced_service("demo-controller", cluster.ns)
    wait_for(lambda: "demo-slurm-config" in cluster.names("configmaps")
             and "demo-controller" in cluster.names("services"), 30, what="deleted children recreated")
    cluster.apps.patch_namespaced_stateful_set("demo-login", cluster.ns, {"spec": {"template": {"spec": {
        "containers": [{"name": "sshd", "image": "example.invalid/tampered:1"}]}}}})
    wait_for(lambda: cluster.apps.read_namespaced_stateful_set("demo-login", cluster.ns).spec.template.spec
             .containers[0].image != "example.invalid/tampered:1", 30, what="edited child repaired")
    repaired = time.monotonic() - t0
    wait_for(lambda: "DriftRepaired" in {r for _, r, _ in cluster.events()}, 30, what="DriftRepaired event")
    print("drift (2 deletions, 1 edit) repaired in %.1f s" % repaired)

    # metrics and probes
    assert op.get("/healthz")[0] == 200 and op.get("/readyz")[0] == 200
    assert op.metric("soperator_operator_runs_total", kind="SlurmCluster", result="success") >= 3
    assert op.metric("soperator_operator_leader") == 1
    assert op.metric("soperator_operator_run_duration_seconds_count", kind="SlurmCluster") >= 3

    # delete -> teardown role ran, data kept, objects released (the NodeSet's finalizer too)
    cluster.delete("SlurmCluster", "demo")
    wait_for(lambda: cluster.get("SlurmCluster", "demo") is None, 120, what="SlurmCluster released")
    assert cluster.names("statefulsets") == []
    assert cluster.names("configmaps") == []
    assert cluster.names("services") == []
    assert cluster.names("secrets") == ["demo-munge-key", "demo-ssh-host-keys"]
    assert "demo-jail" in cluster.names("pvcs")
    assert "finalized and released" in op.logs()
    assert not (cluster.get("NodeSet", "cpu") or {}).get("metadata", {}).get("finalizers")

    # graceful stop: exit 0, lease released
    assert op.terminate() == 0
    assert cluster.lease_holder() in (None, "")


def statefulset_settled(c, name):
    sts = c.apps.read_namespaced_stateful_set(name, c.ns)
    return (sts.status.observed_generation or 0) >= sts.metadata.generation and sts.status.current_revision == \
        sts.status.update_revision and (sts.status.replicas or 0) == sts.spec.replicas


def replicas_appliers(c, name):
    """Field managers that own the StatefulSet's spec.replicas, with their operation."""
    sts = c.apps.read_namespaced_stateful_set(name, c.ns)
    return sorted((m.manager, m.operation) for m in sts.metadata.managed_fields or ()
                  if "f:replicas" in ((m.fields_v1 or {}).get("f:spec") or {}))


def operator_quiet(op, c, quiet=3.0):
    """Every pod of the cluster Ready and no run started, in flight or queued for ``quiet`` seconds: a pod turning
    Ready (kwok) starts a run, and a run in flight when the test changes the NodeSet may read the change itself,
    leaving nothing for the step under test to do."""
    wait_for(lambda: all((s.status.ready_replicas or 0) == s.spec.replicas for s in c.apps.list_namespaced_stateful_set(
        c.ns, label_selector="slurm.soperator.dev/cluster=demo").items), 60, what="every pod Ready")

    def idle():
        return op.metric("soperator_operator_runs_in_flight") == 0 and op.metric("soperator_operator_queue_depth") == 0
    wait_for(lambda: idle() and (lambda runs: holds_for(
        lambda: idle() and op.metric("soperator_operator_runs_total") == runs, quiet))(
            op.metric("soperator_operator_runs_total")), 90, what="operator quiet for %.0f s" % quiet)


def test_a_scale_out_is_applied_ahead_of_the_role_run_and_a_scale_in_is_not(operators, cluster, tmp_path):
    """A NodeSet that only grows gets its StatefulSet applied by the runtime before the role runs (as the role's
    field manager: no second owner of its replicas, and the run that follows writes nothing else to it); a shrink
    is the role's alone (it drains first, and without Slurm it waits)."""
    op = operators("op-fast", watches=write_watches(str(tmp_path / "long.yaml"), reconcile_period="10m"))
    for doc in cluster.example():
        cluster.create(doc)
    wait_for(lambda: converged(cluster, generation=1) and converged(cluster, "NodeSet", "cpu", generation=1), 120,
             what="converged")
    wait_for(lambda: statefulset_settled(cluster, "demo-cpu"), 60, what="worker StatefulSet settled")
    operator_quiet(op, cluster)
    assert replicas_appliers(cluster, "demo-cpu") == [("soperator.slurm", "Apply")]

    t0 = time.monotonic()
    cluster.scale("cpu", 4)
    wait_for(lambda: cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).spec.replicas == 4, 30,
             interval=0.01, what="StatefulSet scaled to 4")
    print("scale-out applied in %.3f s" % (time.monotonic() - t0))
    wait_for(lambda: op.metric("soperator_operator_scale_outs_total", result="applied") == 1, 10,
             what="the scale-out counted")  # counted once its apply returned, maybe after the poll above saw it
    assert "StatefulSet demo-cpu 2 -> 4 applied ahead of the run" in op.logs()
    generation = cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).metadata.generation
    # the role's run follows and reconciles the rest: the NodeSet's status for generation 2
    wait_for(lambda: converged(cluster, "NodeSet", "cpu", generation=2)
             and cluster.get("NodeSet", "cpu")["status"]["replicas"] == 4, 60, what="NodeSet status 4 replicas")
    sts = cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns)
    assert sts.metadata.generation == generation and sts.spec.replicas == 4  # no second, different write
    assert replicas_appliers(cluster, "demo-cpu") == [("soperator.slurm", "Apply")]

    # a scale-in waits for Slurm to drain (none answers here): nothing is applied ahead of the role
    wait_for(lambda: statefulset_settled(cluster, "demo-cpu"), 60, what="worker StatefulSet settled")
    cluster.scale("cpu", 1)
    wait_for(lambda: "waits for slurmctld" in (cluster.condition("SlurmCluster", "demo", "Ready") or {}).get(
        "message", ""), 60, what="the scale-in waiting for Slurm")
    assert cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).spec.replicas == 4
    assert op.metric("soperator_operator_scale_outs_total", result="applied") == 1
    assert op.metric("soperator_operator_scale_outs_total", result="refused") == 0


def test_invalid_spec_is_a_permanent_failure_naming_the_field(operators, cluster):
    # Valid for the CRD schema (maxNodeCount >= 1), invalid for the renderer: 2 replicas > maxNodeCount 1.
    docs = cluster.example(cluster_spec={"slurm": {"maxNodeCount": 1}})
    for doc in docs:
        cluster.create(doc)
    op = operators("op-invalid")
    failure = wait_for(lambda: cluster.condition("SlurmCluster", "demo", "Failure"), 120, what="Failure condition")
    assert failure["status"] == "True"
    assert failure["message"].startswith("spec.slurm.maxNodeCount:"), failure["message"]
    ready_cond = cluster.condition("SlurmCluster", "demo", "Ready")
    assert ready_cond["status"] == "False" and ready_cond["reason"] == "InvalidSpec"
    degraded = cluster.condition("SlurmCluster", "demo", "Degraded")
    assert degraded["reason"] == "InvalidSpec" and "spec.slurm.maxNodeCount" in degraded["message"]
    assert cluster.get("SlurmCluster", "demo")["status"]["observedGeneration"] == 1
    # nothing in the cluster changed
    for what in ("statefulsets", "services", "configmaps", "secrets", "pvcs", "jobs"):
        assert cluster.names(what) == [], what
    # no retry storm: the 5 s checks see a judged generation and start no run
    runs_before = op.metric("soperator_operator_runs_total", kind="SlurmCluster")
    holds_for(lambda: True, 11)
    assert op.metric("soperator_operator_runs_total", kind="SlurmCluster") == runs_before
    assert op.metric("soperator_operator_drift_checks_total", kind="SlurmCluster", result="skip") >= 1
    warnings = [m for t, r, m in cluster.events() if r == "InvalidSpec"]
    assert len(warnings) == 1 and "spec.slurm.maxNodeCount" in warnings[0]  # not repeated
    # fixing the spec (new generation) reconciles at once
    cluster.patch("SlurmCluster", "demo", {"spec": {"slurm": {"maxNodeCount": 8}}})
    wait_for(lambda: converged(cluster, generation=2), 120, what="converged after the fix")
    assert cluster.condition("SlurmCluster", "demo", "Failure") is None
    assert cluster.names("statefulsets") == CHILD_STATEFULSETS


def test_kill9_mid_run_then_restart_converges_without_duplicates(operators, cluster):
    first = operators("op-first")
    wait_for(lambda: cluster.lease_holder() == "op-first", 30, what="op-first leading")
    for doc in cluster.example():
        cluster.create(doc)
    wait_for(lambda: "reconciling SlurmCluster" in first.logs(), 60, what="a run in flight")
    first.kill9()
    assert cluster.condition("SlurmCluster", "demo", "Successful") is None  # really killed mid-run
    second = operators("op-second")
    wait_for(lambda: converged(cluster, generation=1), 120, what="converged after restart")
    assert cluster.lease_holder() == "op-second"
    assert cluster.names("statefulsets") == CHILD_STATEFULSETS
    assert cluster.names("secrets") == ["demo-munge-key", "demo-ssh-host-keys"]
    assert len(cluster.names("jobs")) == 1
    assert len([p for p in cluster.names("pvcs") if p == "demo-jail"]) == 1
    assert second.logs().count("acquired lease") == 1


def test_two_operators_one_leader_and_takeover(operators, cluster):
    a = operators("op-one")
    b = operators("op-two")
    holder = wait_for(cluster.lease_holder, 30, what="a lease holder")
    leader, standby = (a, b) if holder == "op-one" else (b, a)
    for doc in cluster.example():
        cluster.create(doc)
    wait_for(lambda: converged(cluster, generation=1), 120, what="converged")
    assert "reconciling SlurmCluster" in leader.logs()
    assert "reconciling" not in standby.logs() and "leading:" not in standby.logs()
    assert standby.metric("soperator_operator_leader") == 0
    assert standby.get("/readyz")[0] == 200  # a standby is healthy and ready, it just does not reconcile

    # the leader stops (SIGTERM: releases the lease) -> the standby takes over at its next retry
    stopped = time.monotonic()
    assert leader.terminate() == 0
    wait_for(lambda: cluster.lease_holder() == standby.identity, 4, 0.1, what="takeover after release")
    wait_for(lambda: "leading:" in standby.logs(), 10, what="standby leading")
    takeover_release = time.monotonic() - stopped

    # the new leader reconciles: a scale is applied
    cluster.scale("cpu", 3)
    wait_for(lambda: cluster.apps.read_namespaced_stateful_set("demo-cpu", cluster.ns).spec.replicas == 3, 60,
             what="scale applied by the new leader")

    # a third replica joins; the leader is SIGKILLed -> the lease expires and the third takes over
    third = operators("op-three")
    wait_for(lambda: "health and metrics" in third.logs(), 30, what="third started")
    killed = time.monotonic()
    standby.kill9()
    wait_for(lambda: cluster.lease_holder() == "op-three", 4 + 2 + 2, 0.1, what="takeover after SIGKILL")
    takeover_kill = time.monotonic() - killed
    assert takeover_kill <= 4 + 0.5 * 2 + 1.5, takeover_kill  # lease duration + retry period (+ API slack)
    print("takeover after release %.1fs, after SIGKILL %.1fs" % (takeover_release, takeover_kill))


def test_sigterm_lets_the_run_in_flight_finish(operators, cluster):
    op = operators("op-graceful")
    wait_for(lambda: cluster.lease_holder() == "op-graceful", 30, what="leading")
    for doc in cluster.example():
        cluster.create(doc)
    wait_for(lambda: "reconciling SlurmCluster" in op.logs(), 60, what="a run in flight")
    op.proc.send_signal(signal.SIGTERM)
    assert op.proc.wait(90) == 0
    logs = op.logs()
    assert "reconciled in" in logs, logs[-3000:]   # the run finished before the process exited
    assert cluster.names("statefulsets") == CHILD_STATEFULSETS
    assert cluster.lease_holder() in (None, "")
    assert not [d for d in os.listdir(op.workdir) if os.listdir(os.path.join(op.workdir, d))]  # runs cleaned


def _run_playbook(kubeconfig, collections_path, *extra):
    import json
    import subprocess
    import sys
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, K8S_AUTH_KUBECONFIG=kubeconfig,
               KUBECONFIG=kubeconfig, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
           os.path.join(ROOT, "playbooks", "operator.yml"), "-e", "ansible_python_interpreter=" + sys.executable]
    for item in extra:
        cmd += ["-e", json.dumps(item)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout[proc.stdout.index("{"):])["stats"]["localhost"]


def _service_account_kubeconfig(kubectl, admin_kubeconfig, namespace, path):
    import yaml
    token = kubectl("create", "token", "soperator-operator", "-n", namespace, "--duration", "1h").stdout.strip()
    with open(admin_kubeconfig, encoding="utf-8") as handle:
        admin = yaml.safe_load(handle)
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [dict(cluster, name="c")],
              "users": [{"name": "sa", "user": {"token": token}}],
              "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}],
              "current-context": "sa"}
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(config, handle)
    return path


def test_operator_role_rbac_is_enough_for_the_whole_lifecycle(tmp_path, kubeconfig, collections_path, kubectl,
                                                               namespace, cluster, crds):
    """Install with roles/operator (namespaced mode, every placement option), then run the operator AS its
    ServiceAccount."""
    priority = "soperator-test-" + namespace
    kubectl("create", "priorityclass", priority, "--value=1000")
    placement = {
        "operator_node_selector": {"soperator.dev/localcluster": "kwok"},
        "operator_tolerations": [{"key": "dedicated", "operator": "Equal", "value": "slurm", "effect": "NoSchedule"}],
        "operator_affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {
                "matchLabels": {"app.kubernetes.io/name": "soperator-operator"}}}}]}},
        "operator_priority_class_name": priority,
        "operator_resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    }
    params = dict({"operator_namespace": namespace, "operator_watch_namespaces": [namespace],
                   "operator_create_namespace": False, "operator_image": "soperator/operator:test"}, **placement)
    try:
        stats = _run_playbook(kubeconfig, collections_path, params)
    finally:
        kubectl("delete", "priorityclass", priority, "--wait=false")
    assert stats["failures"] == 0
    again = _run_playbook(kubeconfig, collections_path, params)
    assert again["changed"] == 0, again  # idempotent
    deploy = cluster.apps.read_namespaced_deployment("soperator-operator", namespace)
    assert deploy.spec.replicas == 2
    container = deploy.spec.template.spec.containers[0]
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.capabilities.drop == ["ALL"]
    assert deploy.spec.template.spec.security_context.run_as_non_root is True
    pod_spec = cluster.api.sanitize_for_serialization(deploy.spec.template.spec)
    assert pod_spec["nodeSelector"] == placement["operator_node_selector"]
    assert pod_spec["tolerations"] == placement["operator_tolerations"]
    assert pod_spec["affinity"] == placement["operator_affinity"]
    assert pod_spec["priorityClassName"] == priority
    assert pod_spec["containers"][0]["resources"] == placement["operator_resources"]
    role = kubectl("get", "role", "soperator-operator", "-n", namespace, "-o", "json").stdout
    import json
    for rule in json.loads(role)["rules"]:
        if "secrets" in rule["resources"]:
            assert "delete" not in rule["verbs"] and "update" not in rule["verbs"]

    sa_config = _service_account_kubeconfig(kubectl, kubeconfig, namespace, str(tmp_path / "sa.kubeconfig"))
    watches = write_watches(str(tmp_path / "watches.yaml"), reconcile_period="5s")
    op = OperatorProcess(tmp_path, sa_config, collections_path, namespace, "op-sa", watches)
    try:
        for doc in cluster.example():
            cluster.create(doc)
        wait_for(lambda: converged(cluster, generation=1), 120, what="converged as the ServiceAccount")
        wait_for(lambda: converged(cluster, "NodeSet", "cpu", generation=1), 30, what="NodeSet status")
        cluster.core.delete_namespaced_config_map("demo-slurm-config", namespace)
        wait_for(lambda: "demo-slurm-config" in cluster.names("configmaps"), 60, what="repair as the SA")
        cluster.delete("SlurmCluster", "demo")
        wait_for(lambda: cluster.get("SlurmCluster", "demo") is None, 120, what="released as the SA")
        assert cluster.names("statefulsets") == []
        assert "Forbidden" not in op.logs() and "forbidden" not in op.logs(), op.logs()[-3000:]
        assert op.terminate() == 0
    finally:
        op.cleanup()
        cluster.release_finalizers()
    _run_playbook(kubeconfig, collections_path, dict(params, operator_state="absent"))
    assert kubectl("get", "deployment,role,rolebinding,serviceaccount", "-n", namespace, "-l",
                   "app.kubernetes.io/name=soperator-operator", "-o", "name").stdout.strip() == ""


def test_site_yml_hands_clusters_to_the_operator(operators, cluster, kubeconfig, collections_path, namespace, tmp_path):
    """soperator_converge=operator: site.yml applies the validated resources only; the operator converges them."""
    import json
    import subprocess

    docs = cluster.example()
    varfile = tmp_path / "site.json"
    varfile.write_text(json.dumps({"soperator_converge": "operator", "soperator_operator_install": False,
                                   "soperator_clusters": [{"resources": docs}]}))
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=kubeconfig, ANSIBLE_COLLECTIONS_PATH=collections_path,
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    res = subprocess.run(["ansible-playbook", os.path.join(ROOT, "playbooks", "site.yml"), "-e", "@%s" % varfile],
                         env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:]
    # The play itself created no workload, only the resources ...
    assert cluster.get("SlurmCluster", "demo") is not None and cluster.get("NodeSet", "cpu") is not None
    assert cluster.names("statefulsets") == [] and cluster.names("secrets") == []
    # ... which the operator converges.
    operators("op-site")
    wait_for(lambda: converged(cluster), 180, what="SlurmCluster converged by the operator")
    assert sorted(cluster.names("statefulsets")) == CHILD_STATEFULSETS
