"""Unit tests of the operator runtime's pure parts: no cluster, no ansible."""

import os
from datetime import datetime, timezone

import pytest
import yaml

from soperator_operator import classify as C
from soperator_operator import conditions as K
from soperator_operator import lease as L
from soperator_operator import triggers as T
from soperator_operator import workqueue as Q
from soperator_operator.extravars import extra_vars, object_var_name, snake_case, snake_case_keys
from soperator_operator.metrics import OperatorMetrics
from soperator_operator.runner import changed_from_events, failure_from_events
from soperator_operator.watches import load_watches, parse_duration, parse_watches

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
    ev = extra_vars(obj, "slurm.soperator.dev", "SlurmCluster", {"cluster_object": "{{ x }}"})
    assert ev["jail"] == {"storage_class_name": "x"}
    assert ev["ansible_operator_meta"] == {"name": "demo", "namespace": "slurm"}
    assert ev["_slurm_soperator_dev_slurmcluster"] is obj
    assert ev["_slurm_soperator_dev_slurmcluster_spec"] == obj["spec"]
    assert ev["cluster_object"] == "{{ x }}"
    assert object_var_name("cache.example-app.com", "Memcached") == "_cache_example_app_com_memcached"


def test_watch_vars_win_over_spec_keys():
    obj = {"metadata": {"name": "a", "namespace": "b"}, "spec": {"clusterObject": 1}}
    assert extra_vars(obj, "g.io", "K", {"cluster_object": 2})["cluster_object"] == 2


# --- watches.yaml ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,seconds", [("10m", 600), ("1h30m", 5400), ("45s", 45), ("250ms", 0.25),
                                          ("30", 30), (15, 15), ("1.5h", 5400)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "10x", "m", "-5s", "5s3"])
def test_parse_duration_refuses_garbage(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_repository_watches_file():
    watches = load_watches(os.path.join(ROOT, "operator", "watches.yaml"))
    by_kind = {w.kind: w for w in watches}
    cluster, nodeset = by_kind["SlurmCluster"], by_kind["NodeSet"]
    assert cluster.role == "soperator.slurm.cluster"
    assert cluster.vars == {"cluster_object": "{{ _slurm_soperator_dev_slurmcluster }}"}
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
    for gen in range(3):          # three generations arrive during the run
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
@pytest.mark.parametrize("message,field,expected", [
    ("spec.slurm.maxNodeCount: total NodeSet replicas (2) exceed maxNodeCount (1)", None, C.PERMANENT),
    ("spec.partitions[1].name: must be unique", None, C.PERMANENT),
    ("anything", "spec.slurm.slurmConf.Foo", C.PERMANENT),
    ("the definition must hold exactly one SlurmCluster (found 0)", None, C.PERMANENT),
    ("Failed to patch object: (422) Reason: Unprocessable Entity", None, C.PERMANENT),
    ("spec.slurm.maxNodeCount: total replicas (600) exceed maxNodeCount (500)", None, C.PERMANENT),
    ("HTTPSConnectionPool(host='127.0.0.1', port=6443): Max retries exceeded with url: /api "
     "(Caused by NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused'))",
     None, C.TRANSIENT),
    ("Failed to apply object: (503) Reason: Service Unavailable", None, C.TRANSIENT),
    ("(500) Reason: Internal Server Error", None, C.TRANSIENT),
    ("Operation cannot be fulfilled on slurmclusters: the object has been modified; please apply your changes",
     None, C.TRANSIENT),
    ("(409) Reason: Conflict", None, C.TRANSIENT),
    ("Read timed out. (read timeout=20)", None, C.TRANSIENT),
    ("something nobody anticipated", None, C.TRANSIENT),
    ("", None, C.TRANSIENT),
])
def test_classify(message, field, expected):
    assert C.classify(message, field) == expected


def test_backoff_doubles_and_caps():
    assert [C.backoff(n, 1, 30) for n in range(0, 8)] == [0, 1, 2, 4, 8, 16, 30, 30]
    assert C.backoff(1000, 1, 300) == 300


@pytest.mark.parametrize("code,expected", [(0, True), (409, True), (429, True), (500, True), (503, True),
                                           (400, False), (403, False), (404, False), (422, False)])
def test_transient_api_status(code, expected):
    assert C.is_transient_api_status(code) is expected


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


# --- conditions ------------------------------------------------------------------------------------------------
def types(status):
    return {c["type"]: c for c in status["conditions"]}


def test_success_conditions():
    old = {"conditions": [{"type": "Custom", "status": "True"},
                          {"type": "Failure", "status": "True", "message": "x"}]}
    new = K.finished_status(old, 3, K.Outcome(ok=True), "T")
    c = types(new)
    assert set(c) == {"Custom", "Running", "Successful", "Ready", "Degraded"}   # Failure cleared, Custom kept
    assert c["Ready"]["status"] == "True" and c["Ready"]["observedGeneration"] == 3
    assert c["Running"]["reason"] == "Successful" and c["Running"]["message"] == "Awaiting next reconciliation"
    assert c["Degraded"]["status"] == "False"
    assert new["observedGeneration"] == 3 and new["phase"] == "Ready"


def test_permanent_failure_conditions_name_the_field():
    msg = "spec.slurm.maxNodeCount: total NodeSet replicas (3) exceed maxNodeCount (2)"
    new = K.finished_status({}, 4, K.Outcome(ok=False, message=msg, permanent=True), "T")
    c = types(new)
    assert c["Failure"]["status"] == "True" and c["Failure"]["message"] == msg
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "InvalidSpec"
    assert c["Degraded"]["status"] == "True" and c["Degraded"]["message"] == msg
    assert c["Successful"]["status"] == "False"
    assert new["observedGeneration"] == 4 and new["phase"] == "Failed"


def test_transient_failure_does_not_claim_the_generation():
    new = K.finished_status({"observedGeneration": 1}, 2, K.Outcome(ok=False, message="(503)"), "T")
    assert new["observedGeneration"] == 1 and types(new)["Ready"]["reason"] == "ReconcileError"


def test_transition_time_moves_only_on_status_change():
    a = K.finished_status({}, 1, K.Outcome(ok=True), "T1")
    b = K.finished_status(a, 2, K.Outcome(ok=True), "T2")
    assert types(b)["Ready"]["lastTransitionTime"] == "T1" and types(b)["Ready"]["observedGeneration"] == 2
    c = K.finished_status(b, 2, K.Outcome(ok=False, message="m", permanent=True), "T3")
    assert types(c)["Ready"]["lastTransitionTime"] == "T3"
    assert K.same_status(b, K.finished_status(b, 2, K.Outcome(ok=True), "T9"))
    assert not K.same_status(b, c)


def test_running_status():
    s = K.running_status({}, 1, "T")
    assert types(s)["Running"]["status"] == "True" and s["phase"] == "Provisioning"
    assert K.running_status({"phase": "Ready"}, 2, "T")["phase"] == "Ready"


def test_nodeset_status_from_statefulset():
    sts = {"spec": {"selector": {"matchLabels": {"slurm.soperator.dev/nodeset": "cpu",
                                                 "app.kubernetes.io/instance": "demo"}}},
           "status": {"replicas": 3, "readyReplicas": 2}}
    s = K.nodeset_status({}, 5, K.Outcome(ok=True), sts, "T")
    assert s["replicas"] == 3 and s["readyReplicas"] == 2 and s["observedGeneration"] == 5
    assert s["selector"] == "app.kubernetes.io/instance=demo,slurm.soperator.dev/nodeset=cpu"
    assert "replicas" not in K.nodeset_status({}, 5, K.Outcome(ok=True), None, "T")


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
def test_failure_message_is_the_last_failed_task():
    events = [
        {"event": "runner_on_failed", "counter": 3, "event_data": {"task": "t1", "res": {"msg": "first"},
                                                                   "ignore_errors": True}},
        {"event": "runner_on_ok", "counter": 4, "event_data": {}},
        {"event": "runner_on_failed", "counter": 9, "event_data": {
            "task": "Render", "res": {"msg": "spec.x: bad", "field": "spec.x"}}},
        {"event": "runner_on_failed", "counter": 7, "event_data": {"task": "t2", "res": {"msg": "older"}}},
        {"event": "playbook_on_stats", "counter": 10, "event_data": {"changed": {"localhost": 2},
                                                                     "failures": {"localhost": 1}}},
    ]
    assert failure_from_events(events) == ("spec.x: bad", "spec.x", "Render")
    assert changed_from_events(events)[0] == 2
    assert failure_from_events([{"event": "runner_on_ok"}]) is None
    looped = [{"event": "runner_on_failed", "counter": 1, "event_data": {"res": {"results": [
        {"failed": False}, {"failed": True, "msg": "item broke"}]}}}]
    assert failure_from_events(looped)[0] == "item broke"


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
