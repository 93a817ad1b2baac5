"""Unit tests of the operator runtime's pure parts: no cluster, no ansible."""

import os
from datetime import datetime, timezone

import pytest
import yaml

from ansible_collections.soperator.slurm.plugins.module_utils import names
from soperator_operator import cache
from soperator_operator import classify as C
from soperator_operator import conditions as K
from soperator_operator import lease as L
from soperator_operator import triggers as T
from soperator_operator import workqueue as Q
from soperator_operator.extravars import (
    UNSAFE_KEY,
    extra_vars,
    mark_unsafe,
    object_var_name,
    snake_case,
    snake_case_keys,
)
from soperator_operator.metrics import OperatorMetrics
from soperator_operator.runner import RunResult, summarize
from soperator_operator.watches import load_watches, parse_watches

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- snake_case mapping (operator-sdk's documented behaviour) -------------------------------------------------
@pytest.mark.parametrize("name,expected", [
    ("fooBar", "foo_bar"),
    ("serviceAccount", "service_account"),   # the example in operator-sdk's user guide
    ("HTTPServer", "http_server"),
    ("maxNodeCount", "max_node_count"),
    ("nodeSets", "node_sets"),
    ("cpuID", "cpu_id"),
    ("already_snake", "already_snake"),
    ("size", "size"),
    ("v1Alpha1", "v1_alpha1"),
    ("slurmConf", "slurm_conf"),
])
def test_snake_case(name, expected):
    assert snake_case(name) == expected


def test_snake_case_is_recursive_through_maps_and_lists():
    spec = {"clusterRef": {"name": "demo"}, "partitions": [{"nodeSets": ["cpu"], "maxTime": "1:00"}],
            "slurm": {"slurmConf": {"MaxArraySize": "10"}}, "replicas": 2}
    assert snake_case_keys(spec) == {
        "cluster_ref": {"name": "demo"}, "partitions": [{"node_sets": ["cpu"], "max_time": "1:00"}],
        # the known upstream complaint: user map keys are mangled too, hence the raw object below
        "slurm": {"slurm_conf": {"max_array_size": "10"}}, "replicas": 2}


def test_extra_vars_follow_the_operator_sdk_contract():
    obj = {"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
           "metadata": {"name": "demo", "namespace": "slurm"}, "spec": {"jail": {"storageClassName": "x"}}}
    ev = extra_vars(obj, "slurm.soperator.dev", "SlurmCluster", {"cluster_ref": {"name": "{{ x }}"}})
    assert ev["jail"] == {"storage_class_name": {UNSAFE_KEY: "x"}}
    assert ev["ansible_operator_meta"] == {"name": {UNSAFE_KEY: "demo"}, "namespace": {UNSAFE_KEY: "slurm"}}
    assert ev["_slurm_soperator_dev_slurmcluster"] == mark_unsafe(obj)
    assert ev["_slurm_soperator_dev_slurmcluster_spec"] == mark_unsafe(obj["spec"])
    assert ev["cluster_ref"] == {"name": "{{ x }}"}  # the installer's own watch vars stay templates
    assert object_var_name("cache.example-app.com", "Memcached") == "_cache_example_app_com_memcached"


def test_everything_from_the_object_is_marked_unsafe():
    payload = "{{ lookup('pipe', 'id') }}"
    obj = {"metadata": {"name": "a", "namespace": "b", "annotations": {"x": payload}, "labels": {"l": "v"}},
           "spec": {"list": [payload, {"deep": payload}], "n": 3, "flag": True, "none": None}}
    ev = extra_vars(obj, "g.io", "K")

    def strings(value):
        if isinstance(value, dict) and set(value) == {UNSAFE_KEY}:
            return []
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return [value] if isinstance(value, str) else []

    assert strings(ev) == []  # no plain (templatable) string anywhere
    assert ev["list"][1]["deep"] == {UNSAFE_KEY: payload} and ev["n"] == 3 and ev["flag"] is True


def test_watch_vars_win_over_spec_keys():
    obj = {"metadata": {"name": "a", "namespace": "b"}, "spec": {"clusterRef": 1}}
    assert extra_vars(obj, "g.io", "K", {"cluster_ref": 2})["cluster_ref"] == 2


# --- the installer's policy, as the runtime's drift check reads it --------------------------------------------
def test_the_runtime_reads_the_policy_the_runs_get():
    """The same variable watches.yaml hands every run as cluster_policy, normalized as the module does; a
    malformed one stops the runtime with the variable named (every run would fail on it)."""
    from ansible_collections.soperator.slurm.plugins.module_utils.api import policy
    from soperator_operator.__main__ import installer_policy
    assert installer_policy({}) == policy.normalize({})
    env = {names.POLICY_ENV: '{"allowed_registries": ["registry.example.com/"]}'}
    assert installer_policy(env)["allowed_registries"] == ["registry.example.com"]
    for bad in ("{", "[]", '{"allowed_registries": "x"}', '{"unknown": 1}'):
        with pytest.raises(ValueError):
            installer_policy({names.POLICY_ENV: bad})


# --- watches.yaml ------------------------------------------------------------------------------------------------
def test_repository_watches_file():
    watches = load_watches(os.path.join(ROOT, "operator", "watches.yaml"))
    by_kind = {w.kind: w for w in watches}
    cluster, nodeset = by_kind["SlurmCluster"], by_kind["NodeSet"]
    assert cluster.role == "soperator.slurm.cluster"
    # The role gets the cluster by name only, and makes one pass (the operator requeues).
    # The installer's policy comes from the operator's environment (operator_policy), never from the resource.
    policy = "{{ lookup('ansible.builtin.env', '%s', default='{}') | from_json }}" % names.POLICY_ENV
    assert cluster.vars == {"cluster_ref": {"name": "{{ ansible_operator_meta.name }}",
                                            "namespace": "{{ ansible_operator_meta.namespace }}"},
                            "cluster_wait_timeout": 0, "cluster_nodeset_finalizer": True, "cluster_policy": policy}
    assert nodeset.vars["cluster_policy"] == policy
    assert cluster.drift_check and cluster.full_run_period == 6 * 3600
    assert cluster.finalizer.name == "slurm.soperator.dev/finalizer"
    assert cluster.finalizer.role == "soperator.slurm.teardown"
    assert cluster.finalizer.vars["teardown_delete_resources"] is False
    assert cluster.reconcile_period == 600
    assert nodeset.reconcile_owner.kind == "SlurmCluster"
    assert nodeset.reconcile_owner.owner_name({"spec": {"clusterRef": {"name": "demo"}}}) == "demo"
    assert nodeset.reconcile_owner.owner_name({"spec": {}}) is None
    assert "cluster_ref" in nodeset.vars
    # the plural our runtime derives must be the CRD's
    for w in watches:
        path = os.path.join(ROOT, "roles", "crds", "files", "%s.%s.yaml" % (w.plural, w.group))
        with open(path, encoding="utf-8") as handle:
            crd = yaml.safe_load(handle)
        assert crd["spec"]["names"]["plural"] == w.plural
        assert crd["spec"]["names"]["kind"] == w.kind
        assert w.version in [v["name"] for v in crd["spec"]["versions"]]


@pytest.mark.parametrize("entry,message", [
    ({"version": "v1", "kind": "K", "role": "r"}, "group"),
    ({"group": "g", "version": "v1", "kind": "K"}, "exactly one of role or playbook"),
    ({"group": "g", "version": "v1", "kind": "K", "role": "r", "finalizer": {"role": "x"}}, "finalizer.name"),
    ({"group": "g", "version": "v1", "kind": "K", "role": "r",
      "x-soperator-reconcile-owner": {"kind": "Other", "nameField": "spec.x"}}, "not watched"),
])
def test_parse_watches_errors(entry, message):
    with pytest.raises(ValueError, match=message):
        parse_watches([entry])


def test_parse_watches_defaults_and_unknown_keys():
    (w,) = parse_watches([{"group": "g", "version": "v1", "kind": "K", "playbook": "/p.yml", "blacklist": [],
                           "manageStatus": "false", "selector": {}}])
    assert w.manage_status is False and w.finalizer is None and w.reconcile_period == 600 and w.vars == {}


def test_the_cluster_watch_runs_the_roles_converge_entry_point():
    """Our runtime runs the cluster role's converge entry point (the SlurmCluster by name: no definition to check or
    read); main ends with the same tasks, which upstream runs."""
    from soperator_operator.runner import playbook_for_role

    (cluster,) = [w for w in load_watches(os.path.join(ROOT, "operator", "watches.yaml")) if w.kind == "SlurmCluster"]
    assert cluster.tasks_from == "converge" and cluster.finalizer.role == "soperator.slurm.teardown"
    play = playbook_for_role(cluster.role, cluster.tasks_from)[0]
    assert play["tasks"][0]["ansible.builtin.import_role"] == {"name": "soperator.slurm.cluster",
                                                               "tasks_from": "converge", "rolespec_validate": False}
    assert playbook_for_role("r")[0]["tasks"][0]["ansible.builtin.import_role"] == {"name": "r",
                                                                                    "rolespec_validate": False}
    role = os.path.join(ROOT, "roles", "cluster")
    with open(os.path.join(role, "tasks", "main.yml"), encoding="utf-8") as handle:
        main = yaml.safe_load(handle)
    with open(os.path.join(role, "tasks", "converge.yml"), encoding="utf-8") as handle:
        converge = yaml.safe_load(handle)
    with open(os.path.join(role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    assert main[-1] == {"name": "Converge", "ansible.builtin.import_tasks": "converge.yml"}
    assert [list(t)[1] for t in converge] == ["soperator.slurm.slurm_cluster"]
    assert specs["converge"]["options"]["cluster_ref"]["required"] is True
    assert set(specs["converge"]["options"]) == set(specs["main"]["options"]) - {"cluster_manifest_file",
                                                                                 "cluster_resources"}


# --- work queue --------------------------------------------------------------------------------------------------
def test_queue_coalesces_adds_while_waiting():
    q = Q.QueueState()
    for _ in range(5):
        q.add("a", now=0)
    q.add("a", now=0, reason=Q.RESYNC)
    assert q.pop_ready(0) == ("a", frozenset({Q.EVENT, Q.RESYNC}))
    assert q.pop_ready(0) is None


def test_queue_one_run_at_a_time_and_rerun_once_after():
    q = Q.QueueState()
    q.add("a", 0)
    assert q.pop_ready(0)[0] == "a"
    for _gen in range(3):          # three generations arrive during the run
        q.add("a", 1)
    assert q.pop_ready(1) is None  # never twice at once
    q.done("a", 2, requeue_after=600)
    assert q.pop_ready(2) == ("a", frozenset({Q.EVENT, Q.RESYNC}))  # one rerun, newest state read then
    q.done("a", 3)
    assert q.pop_ready(3) is None


def test_queue_earliest_due_wins_and_delays_are_respected():
    q = Q.QueueState()
    q.add("a", 0, delay=600, reason=Q.RESYNC)
    assert q.pop_ready(10) is None and q.next_due() == 600
    q.add("a", 10, delay=5, reason=Q.RETRY)
    assert q.next_due() == 15
    q.add("a", 11)
    assert q.pop_ready(11) == ("a", frozenset({Q.RESYNC, Q.RETRY, Q.EVENT}))


def test_queue_parallel_keys_in_due_order_and_forget():
    q = Q.QueueState()
    q.add("b", 0, delay=2)
    q.add("a", 0, delay=1)
    q.add("c", 0, delay=3)
    q.forget("c")
    assert q.depth(5) == 2
    assert q.pop_ready(5)[0] == "a" and q.pop_ready(5)[0] == "b" and q.pop_ready(5) is None
    assert q.running_count() == 2


def test_workqueue_threads_get_and_shutdown():
    now = [0.0]
    q = Q.WorkQueue(clock=lambda: now[0])
    q.add("x")
    assert q.get(timeout=0) == ("x", frozenset({Q.EVENT}))
    assert q.get(timeout=0) is None
    q.done("x", requeue_after=10)
    assert q.get(timeout=0) is None
    now[0] = 10
    assert q.get(timeout=0)[0] == "x"
    q.shutdown()
    assert q.get() is None


# --- classifier ----------------------------------------------------------------------------------------------
def test_backoff_doubles_and_caps():
    assert [C.backoff(n, 1, 30) for n in range(0, 8)] == [0, 1, 2, 4, 8, 16, 30, 30]
    assert C.backoff(1000, 1, 300) == 300


# --- leases ----------------------------------------------------------------------------------------------------
def rec(holder, duration=15, renew="t1", transitions=0):
    return L.LeaseRecord(holder=holder, duration=duration, renew_time=renew, acquire_time="t0",
                         transitions=transitions)


def test_lease_decisions():
    assert L.decide(None, "me", now=100, observed_at=None).action == L.CREATE
    assert L.decide(rec("me"), "me", 100, 0).action == L.RENEW
    assert L.decide(rec(None), "me", 100, 100).action == L.ACQUIRE       # released on shutdown
    assert L.decide(rec("other"), "me", 100, 100) == L.Decision(L.WAIT, 15)
    assert L.decide(rec("other"), "me", 110, 100) == L.Decision(L.WAIT, 5)
    assert L.decide(rec("other"), "me", 115, 100).action == L.ACQUIRE    # not renewed for the whole duration
    # first observation: a fresh replica waits a full duration whatever the record's timestamps say (skew)
    assert L.decide(rec("other"), "me", 1000, None).action == L.WAIT


def test_lease_specs():
    when = datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    spec = L.next_spec(rec("other", transitions=3), "me", L.ACQUIRE, when, 15)
    assert spec == {"holderIdentity": "me", "leaseDurationSeconds": 15, "acquireTime": "2025-01-02T03:04:05.123456Z",
                    "renewTime": "2025-01-02T03:04:05.123456Z", "leaseTransitions": 4}
    renewed = L.next_spec(rec("me", transitions=4), "me", L.RENEW, when, 15)
    assert renewed["acquireTime"] == "t0" and renewed["leaseTransitions"] == 4
    assert L.next_spec(None, "me", L.CREATE, when, 15)["leaseTransitions"] == 0
    released = L.released_spec(rec("me", transitions=4), when)
    assert released["holderIdentity"] is None and released["leaseDurationSeconds"] == 1
    assert L.LeaseRecord.from_spec({"holderIdentity": "x", "leaseDurationSeconds": 15}).duration == 15.0


def test_still_leader():
    assert L.still_leader(100, 109, 10) and not L.still_leader(100, 110, 10) and not L.still_leader(None, 0, 10)


def test_the_renew_deadline_counts_from_the_renewal_sent_not_from_its_answer():
    """A write answered 2.5 s late: the leader stops 3 s after it sent the renewTime a standby counts from, not 3 s
    after the answer (past the 4 s Lease)."""
    from soperator_operator.leader import LeaderElector

    clock = [100.0]

    class SlowApi:
        def get_lease(self, namespace, name):
            return {"metadata": {"resourceVersion": "1"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 4}}

        def replace_lease(self, namespace, name, resource_version, spec):
            clock[0] += 2.5

    elector = LeaderElector(SlowApi(), "ns", "lease", "me", lease_duration=4, renew_deadline=3, retry_period=0.5,
                            clock=lambda: clock[0])
    elector._round()
    assert elector.is_leader and clock[0] == 102.5
    assert L.still_leader(elector._last_renewed, 102.9, 3) and not L.still_leader(elector._last_renewed, 103.0, 3)


class _LeaseApi:
    """A Lease in memory with the API server's optimistic concurrency: a write at a stale resourceVersion conflicts."""

    def __init__(self):
        self.lease, self.rv, self.calls = None, 0, []

    def _stored(self):
        return {"metadata": {"resourceVersion": str(self.rv)}, "spec": dict(self.lease)}

    def get_lease(self, namespace, name):
        self.calls.append("get")
        return self._stored() if self.lease is not None else None

    def create_lease(self, namespace, name, spec):
        self.calls.append("create")
        self.lease, self.rv = dict(spec), self.rv + 1
        return self._stored()

    def replace_lease(self, namespace, name, resource_version, spec):
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access

        self.calls.append("replace")
        if resource_version != str(self.rv):
            raise access.Conflict("the object has been modified", status=409)
        self.lease, self.rv = dict(spec), self.rv + 1
        return self._stored()


def test_the_leader_renews_in_one_request_and_reads_again_when_the_lease_moved_on():
    from soperator_operator.leader import LeaderElector

    api, clock = _LeaseApi(), [100.0]
    elector = LeaderElector(api, "ns", "lease", "me", lease_duration=15, renew_deadline=10, retry_period=2,
                            clock=lambda: clock[0])
    elector._round()
    assert elector.is_leader and api.calls == ["get", "create"]
    for _ in range(3):
        clock[0] += 2
        elector._round()
    assert api.calls[2:] == ["replace"] * 3 and api.lease["holderIdentity"] == "me"
    assert elector._last_renewed == clock[0] and api.lease["acquireTime"] != api.lease["renewTime"]
    # Another replica wrote the Lease (it took it over): the renewal conflicts, the round reads, and steps down.
    lost = []
    elector._lose = lost.append
    api.lease, api.rv = dict(api.lease, holderIdentity="other"), api.rv + 1
    del api.calls[:]
    clock[0] += 2
    elector._round()
    assert api.calls == ["replace", "get"] and lost and api.lease["holderIdentity"] == "other"


def test_a_leader_whose_renewal_hangs_is_stopped_by_the_watchdog():
    """The renewal never answers: the watchdog (not the loop, which is stuck in the call) stops the leader."""
    import threading

    from soperator_operator.leader import LeaderElector

    hang, stopped = threading.Event(), threading.Event()

    class HangingApi(_LeaseApi):
        def replace_lease(self, namespace, name, resource_version, spec):
            hang.wait(30)
            raise AssertionError("not reached")

    elector = LeaderElector(HangingApi(), "ns", "lease", "me", lease_duration=1.5, renew_deadline=1.0,
                            retry_period=0.2, on_stopped=stopped.set)
    elector.start()
    try:
        assert stopped.wait(20), "the leader kept leading past its renew deadline"
        assert not elector.is_leader and elector._thread.is_alive()  # the loop is still stuck in the call
    finally:
        hang.set()
        elector._stop.set()


# --- conditions ------------------------------------------------------------------------------------------------
def types(status):
    return {c["type"]: c for c in status["conditions"]}


def test_success_conditions_leave_ready_to_the_reconciler():
    old = {"conditions": [{"type": "Custom", "status": "True"}, {"type": "Ready", "status": "False"},
                          {"type": "Failure", "status": "True", "message": "x"}]}
    new = K.finished_status(old, 3, K.Outcome(ok=True), "T")
    c = types(new)
    assert set(c) == {"Custom", "Ready", "Running", "Successful"}   # Failure cleared, Custom kept
    assert c["Ready"] == {"type": "Ready", "status": "False"}           # the converge module's, untouched
    assert c["Running"]["reason"] == "Successful" and c["Running"]["message"] == "Awaiting next reconciliation"
    assert "observedGeneration" not in new and "phase" not in new


def test_failure_conditions_name_the_field_and_degrade():
    msg = "spec.slurm.maxNodeCount: total NodeSet replicas (3) exceed maxNodeCount (2)"
    new = K.finished_status({}, 4, K.Outcome(ok=False, message=msg, permanent=True, reason="InvalidSpec"), "T")
    c = types(new)
    assert c["Failure"]["status"] == "True" and c["Failure"]["message"] == msg
    assert c["Degraded"]["status"] == "True" and c["Degraded"]["reason"] == "InvalidSpec"
    assert c["Successful"]["status"] == "False"
    transient = types(K.finished_status({}, 2, K.Outcome(ok=False, message="(503)"), "T"))
    assert transient["Degraded"]["reason"] == "ReconcileError"


def test_transition_time_moves_only_on_status_change():
    a = K.finished_status({}, 1, K.Outcome(ok=True), "T1")
    b = K.finished_status(a, 2, K.Outcome(ok=True), "T2")
    assert types(b)["Successful"]["lastTransitionTime"] == "T1" and types(b)["Successful"]["observedGeneration"] == 2
    c = K.finished_status(b, 2, K.Outcome(ok=False, message="m", permanent=True), "T3")
    assert types(c)["Successful"]["lastTransitionTime"] == "T3"
    assert K.same_status(b, K.finished_status(b, 2, K.Outcome(ok=True), "T9"))
    assert not K.same_status(b, c)


def test_running_status():
    s = K.running_status({}, 1, "T")
    assert types(s)["Running"]["status"] == "True"


# --- triggers ----------------------------------------------------------------------------------------------------
def obj(gen, deleting=False):
    meta = {"generation": gen, "resourceVersion": "9"}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": meta}


def test_status_only_changes_do_not_trigger():
    prev = T.seen_of(obj(3))
    assert not T.should_run(prev, T.seen_of(obj(3)), T.MODIFIED)       # status/rv/labels only
    assert T.should_run(prev, T.seen_of(obj(4)), T.MODIFIED)           # spec change
    assert T.should_run(prev, T.seen_of(obj(3, deleting=True)), T.MODIFIED)
    assert T.should_run(None, T.seen_of(obj(1)), T.ADDED)              # create / operator start
    assert T.should_run(prev, None, T.DELETED)


def test_owner_moves_enqueue_both_owners():
    a, b = T.seen_of(obj(1), "a"), T.seen_of(obj(2), "b")
    assert T.should_run(a, T.seen_of(obj(1), "b"), T.MODIFIED)
    assert T.owners_to_enqueue(a, b) == ["a", "b"]
    assert T.owners_to_enqueue(None, a) == ["a"] and T.owners_to_enqueue(a, None) == ["a"]


# --- runner events and metrics ------------------------------------------------------------------------------
def test_run_summary_from_the_callback_events():
    events = [
        {"event": "failed", "task": "t1", "ignored": True, "res": {"msg": "first"}},
        {"event": "ok", "task": "Converge", "res": {"requeue_after": 15, "ready": False}},
        {"event": "ok", "task": "Converge again", "res": {"requeue_after": 5, "ready": True}},
        {"event": "failed", "task": "Converge", "res": {"msg": "spec.x: bad", "field": "spec.x",
                                                        "reason": "InvalidSpec", "retryable": False}},
        {"event": "stats", "stats": {"changed": 2, "failures": 1}},
    ]
    r = summarize(events, RunResult(ok=False, status="failed"))
    assert (r.message, r.field, r.reason, r.retryable, r.task) == ("spec.x: bad", "spec.x", "InvalidSpec", False,
                                                                   "Converge")
    assert r.changed == 2 and r.requeue_after == 5 and r.ready is True
    quiet = summarize([{"event": "stats", "stats": {"changed": 0}}], RunResult(ok=True, status="successful"))
    assert quiet.requeue_after is None and quiet.ready is None and quiet.message == ""


def test_store_replace_reports_changes_and_removals():
    store = cache.Store()
    a1 = {"metadata": {"namespace": "n", "name": "a", "resourceVersion": "1"}}
    b1 = {"metadata": {"namespace": "n", "name": "b", "resourceVersion": "1"}}
    other = {"metadata": {"namespace": "m", "name": "c", "resourceVersion": "1"}}
    assert store.replace("n", [a1, b1]) == ([(None, a1), (None, b1)], [])
    store.put(other)
    a2 = dict(a1, metadata=dict(a1["metadata"], resourceVersion="2"))
    changed, removed = store.replace("n", [a2])
    assert changed == [(a1, a2)] and removed == [b1]
    assert store.get("m", "c") is other and len(store) == 2   # another namespace's list left it alone
    assert cache.Resource("apps", "v1", "statefulsets", "StatefulSet").path("x") == \
        "/apis/apps/v1/namespaces/x/statefulsets"
    assert cache.Resource("", "v1", "pods", "Pod").path() == "/api/v1/pods"


def test_metrics_exposition():
    m = OperatorMetrics()
    m.runs.inc(kind="SlurmCluster", result="success")
    m.duration.observe(3.0, kind="SlurmCluster")
    m.leader.set(1)
    text = m.registry.exposition()
    assert 'soperator_operator_runs_total{kind="SlurmCluster",result="success"} 1' in text
    assert 'soperator_operator_run_duration_seconds_bucket{kind="SlurmCluster",le="2"} 0' in text
    assert 'soperator_operator_run_duration_seconds_bucket{kind="SlurmCluster",le="5"} 1' in text
    assert 'soperator_operator_run_duration_seconds_count{kind="SlurmCluster"} 1' in text
    assert "soperator_operator_leader 1" in text
    assert "# TYPE soperator_operator_run_duration_seconds histogram" in text


def test_jail_backup_gauges_follow_the_clusters_status():
    m = OperatorMetrics()
    ok = {"metadata": {"namespace": "hpc", "name": "demo"}, "status": {
        "backup": {"lastSuccessTime": "2026-01-01T00:00:10Z", "sizeBytes": 209715200, "addedBytes": 1000,
                   "durationSeconds": 12},
        "conditions": [{"type": "BackupReady", "status": "True", "reason": "Succeeded"}]}}
    failing = {"metadata": {"namespace": "hpc", "name": "b"}, "status": {
        "backup": {"watchedSince": "2026-01-01T00:00:00Z"},
        "conditions": [{"type": "BackupReady", "status": "False", "reason": "Overdue"}]}}
    plain = {"metadata": {"namespace": "hpc", "name": "c"}, "status": {"phase": "Ready"}}
    m.set_backups([ok, failing, plain])
    text = m.registry.exposition()
    assert 'soperator_jail_backup_last_success_timestamp_seconds{namespace="hpc",cluster="demo"} 1767225610' in text
    assert 'soperator_jail_backup_size_bytes{namespace="hpc",cluster="demo"} 209715200' in text
    assert 'soperator_jail_backup_duration_seconds{namespace="hpc",cluster="demo"} 12' in text
    assert 'soperator_jail_backup_ready{namespace="hpc",cluster="demo",reason="Succeeded"} 1' in text
    assert 'soperator_jail_backup_ready{namespace="hpc",cluster="b",reason="Overdue"} 0' in text
    assert 'cluster="c"' not in text
    # A cluster whose backups are switched off (or that is gone) leaves no series behind.
    m.set_backups([plain])
    assert 'cluster="demo"' not in m.registry.exposition()
