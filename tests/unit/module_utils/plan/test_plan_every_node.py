"""Every-node NodeSets (plan/every_node.py): one worker per matching Kubernetes node, named for it, bound to it; a
node that stops matching loses its worker only after a drain; a cordoned node keeps it (drained by the projection).
Slurm's node table is `scontrol show node -o` lines read by the real parser."""

import re

import pytest
from planning import NOW, context
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.api.durations import iso
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import (
    converge,
    decided,
    every_node,
    model,
    modes,
    projection,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

EVERY = {"placement": {"everyNode": True, "nodeSelector": {"pool": "hpc"}}}


def k8s(*names_, unschedulable=(), labels=None, taints=None):
    """Kubernetes nodes as the converge reads them (observe.node_facts): every one labelled pool=hpc unless
    ``labels`` says otherwise."""
    return dict((n, {"labels": dict((labels or {}).get(n, {"pool": "hpc"})), "unschedulable": n in unschedulable,
                     "taints": list((taints or {}).get(n, ())), "conditions": {}}) for n in names_)


def worker(node, set_name="cpu"):
    return names.every_node_worker("demo", set_name, node)


def pod(node, template_hash=None, ready=True, deleting=False, phase="Running", set_name="cpu"):
    md = {"name": worker(node, set_name), "uid": "uid-" + node,
          "labels": names.labels("demo", names.COMPONENT_WORKER, set_name),
          "annotations": {names.ANNOTATION_TEMPLATE_HASH: template_hash or HASH}}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def slurm_line(node, state="IDLE", reason=None, cpus_alloc=0, set_name="cpu", when=NOW - 60):
    text = "NodeName=%s CPUAlloc=%d CPUTot=2 State=%s+DYNAMIC_NORM AvailableFeatures=%s ActiveFeatures=%s" % (
        worker(node, set_name), cpus_alloc, state, set_name, set_name)
    if reason:
        text += " Reason=%s [root@%d]" % (reason, when)
    return text


def table(*lines):
    return scontrol.parse_show_node("\n".join(lines))


HASH = render.every_node_pods(make_cluster(), [make_nodeset("cpu", EVERY)])[0]["cpu"]


def plan(k8s_nodes, pods=(), slurm=None, spec=EVERY, cluster_spec=None, leaving=(), observed=None, status=None,
         now=NOW):
    obs = dict({"pods": dict((p["metadata"]["name"], p) for p in pods), "slurm": slurm, "k8s_nodes": k8s_nodes},
               **(observed or {}))
    ctx = context(cluster_spec=cluster_spec, nodesets=(("cpu", spec),), leaving=leaving, observed=obs, now=now)
    if status is not None:
        (ctx.of(values.EVERY_NODE) + ctx.of(values.EVERY_NODE, leaving=True))[0]["status"] = status
    p = model.Draft()
    hashes, render_pod = render.every_node_pods(ctx.cluster, ctx.of(values.EVERY_NODE))
    every_node.plan_every_node(p, ctx, hashes, render_pod)
    return p, ctx


# --- the name ---------------------------------------------------------------------------------------------------
def test_the_worker_name_is_a_stable_dns_label_derived_from_the_node():
    name = names.every_node_worker("demo", "cpu", "kwok-node-0")
    assert name == names.every_node_worker("demo", "cpu", "kwok-node-0")  # stable: a pure function
    assert name.startswith("demo-cpu-kwok-node-0-") and len(name) == len("demo-cpu-kwok-node-0-") + 5
    assert names.ordinal(name, names.statefulset_of(name)) is None  # never taken for a StatefulSet's pod


@pytest.mark.parametrize("node", ["n1.example.com", "Node_A", "x" * 253, "a..b", "-lead", "ip-10-0-0-1.ec2.internal",
                                  "1234"])
def test_any_node_name_gives_a_valid_name_at_most_63_characters(node):
    name = names.every_node_worker("c" * 24, "s" * 24, node)
    assert len(name) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and "--" not in name, name
    assert not name[-1].isdigit()


def test_nodes_that_sanitise_alike_and_sets_that_join_alike_get_different_names():
    assert worker("a.b") != worker("a-b")
    assert names.every_node_worker("demo", "a", "b-x") != names.every_node_worker("demo", "a-b", "x")
    long_a, long_b = "n" * 80 + "a", "n" * 80 + "b"  # cut to the same characters
    assert names.every_node_worker("demo", "cpu", long_a) != names.every_node_worker("demo", "cpu", long_b)


# --- the API ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra,field", [({"onePerNode": True}, "spec.placement.everyNode"),
                                         ({"onePerNode": True, "pinned": True}, "spec.placement.everyNode")])
def test_every_node_with_one_per_node_or_pinned_is_refused_naming_the_field(extra, field):
    spec = {"placement": dict(EVERY["placement"], **extra)}
    with pytest.raises(SpecErrors) as refused:
        specs.validate_nodeset(make_nodeset("cpu", spec))
    assert any(e.path == field and "onePerNode and pinned do not apply" in e.message for e in refused.value.errors)


def test_every_node_with_elastic_is_refused_naming_the_field():
    spec = dict(EVERY, elastic={"maxNodes": 2})
    with pytest.raises(SpecErrors) as refused:
        specs.validate_nodeset(make_nodeset("cpu", spec))
    assert any(e.path == "spec.placement.everyNode" and "exclude each other" in e.message
               for e in refused.value.errors)


def test_a_nodeset_cannot_switch_every_node_on_or_off():
    old = specs.validate_nodeset(make_nodeset("cpu", {"replicas": 2}))
    with pytest.raises(SpecErrors) as refused:
        specs.validate_nodeset(make_nodeset("cpu", EVERY), old=old)
    assert any(e.path == "spec.placement.everyNode" and "cannot switch" in e.message for e in refused.value.errors)


# --- the render -------------------------------------------------------------------------------------------------
def test_an_every_node_set_has_no_statefulset_and_its_pod_is_the_statefulset_pod_bound_to_its_node():
    cluster, sets = make_cluster(), [make_nodeset("cpu", EVERY, uid="u1"), make_nodeset("fix", {"replicas": 1})]
    rendered = render.render_cluster(cluster, sets)
    workers = [m["metadata"]["name"] for m in rendered if m["kind"] == "StatefulSet"
               and m["metadata"]["name"] in ("demo-cpu", "demo-fix")]
    assert workers == ["demo-fix"]
    hashes, render_pod = render.every_node_pods(cluster, sets)
    made = render_pod(specs.validate_nodeset(sets[0]), "n1.example.com")
    assert made["metadata"]["name"] == worker("n1.example.com") and made["spec"]["nodeName"] == "n1.example.com"
    assert made["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_HASH] == hashes["cpu"]
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u1"
    # One renderer: the pod is what a StatefulSet of this NodeSet would run (slurmd -Z named after the pod), with
    # the DaemonSet's tolerations: a cordoned (unschedulable) node keeps its worker.
    as_fixed = render.render_cluster(cluster, [make_nodeset("cpu", {"placement": {"nodeSelector": {"pool": "hpc"}}})])
    template = next(m for m in as_fixed if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-cpu")[
        "spec"]["template"]["spec"]
    assert made["spec"]["containers"] == template["containers"]
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in \
        made["spec"]["tolerations"]


# --- the planner ------------------------------------------------------------------------------------------------
def test_each_matching_node_gets_one_worker_of_its_name_and_no_other_node_does():
    nodes = dict(k8s("k1", "k2"), **k8s("k3", labels={"k3": {"pool": "other"}}))
    p, dummy = plan(nodes)
    assert sorted((m["metadata"]["name"], m["spec"]["nodeName"]) for m in p.create_pods) == sorted(
        [(worker("k1"), "k1"), (worker("k2"), "k2")])
    assert p.nodesets["cpu"]["workerNodes"] == {worker("k1"): "k1", worker("k2"): "k2"}
    assert p.nodesets["cpu"]["desired"] == 2 and p.drain == {} and p.delete_pods == []


def test_workers_in_place_make_nothing_and_a_second_pass_changes_nothing():
    p, dummy = plan(k8s("k1", "k2"), [pod("k1"), pod("k2")], table(slurm_line("k1"), slurm_line("k2")))
    assert (p.create_pods, p.delete_pods, p.drain, p.resume, p.delete_nodes) == ([], [], {}, [], [])
    assert p.nodesets["cpu"]["idle"] == 2 and p.nodesets["cpu"]["outdatedReplicas"] == 0 and not p.pending


def test_a_tainted_node_gets_a_worker_only_when_the_placement_tolerates_it():
    taint = {"k2": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
             "k3": [{"key": "soft", "effect": "PreferNoSchedule"}]}
    p, dummy = plan(k8s("k1", "k2", "k3", taints=taint))
    assert sorted(m["spec"]["nodeName"] for m in p.create_pods) == ["k1", "k3"]
    tolerant = {"placement": dict(EVERY["placement"], tolerations=[{"key": "gpu", "operator": "Exists"}])}
    p, dummy = plan(k8s("k1", "k2", taints=taint), spec=tolerant)
    assert sorted(m["spec"]["nodeName"] for m in p.create_pods) == ["k1", "k2"]


def test_a_cordoned_node_keeps_its_worker_and_a_deleted_worker_comes_back_there():
    p, dummy = plan(k8s("k1", unschedulable=("k1",)), [], table(slurm_line("k1")))
    assert [m["spec"]["nodeName"] for m in p.create_pods] == ["k1"]  # Slinky #259: never orphaned
    p, dummy = plan(k8s("k1", unschedulable=("k1",)), [pod("k1")], table(slurm_line("k1")))
    assert p.delete_pods == [] and p.drain == {}


def test_a_cordoned_node_drains_its_worker_with_drain_cordoned_and_uncordon_resumes_it():
    spec = {"healthChecks": {"kubernetesNodes": {"drainCordoned": True}}}
    obs = {"pods": {worker("k1"): pod("k1")}, "slurm": table(slurm_line("k1")),
           "k8s_nodes": k8s("k1", unschedulable=("k1",))}
    ctx = context(cluster_spec=spec, nodesets=(("cpu", EVERY),), observed=obs)
    p = model.Draft()
    hashes, render_pod = render.every_node_pods(ctx.cluster, ctx.of(values.EVERY_NODE))
    every_node.plan_every_node(p, ctx, hashes, render_pod)
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.drain == {names.REASON_NODE_CORDONED: [worker("k1")]} and p.delete_pods == []
    assert p.pod_conditions[worker("k1")]["reason"] == "Drained" and p.nodesets["cpu"]["drained"] == 1
    obs = dict(obs, slurm=table(slurm_line("k1", "IDLE+DRAIN", names.REASON_NODE_CORDONED)), k8s_nodes=k8s("k1"))
    ctx = context(cluster_spec=spec, nodesets=(("cpu", EVERY),), observed=obs)
    p = model.Draft()
    every_node.plan_every_node(p, ctx, hashes, render_pod)
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.resume == [worker("k1")] and p.drain == {}


def test_an_unlabelled_node_drains_its_worker_then_removes_its_pod_then_forgets_its_slurm_node():
    unlabelled = k8s("k1", "k2", labels={"k1": {"pool": "hpc"}, "k2": {}})
    p, dummy = plan(unlabelled, [pod("k1"), pod("k2")], table(slurm_line("k1"), slurm_line("k2", "MIXED",
                                                                                         cpus_alloc=1)))
    assert p.drain == {names.REASON_SCALE_IN: [worker("k2")]} and p.delete_pods == [] and p.pending
    # Drained, a job still runs: waited for (no job is killed).
    busy = table(slurm_line("k1"), slurm_line("k2", "MIXED+DRAIN", names.REASON_SCALE_IN, cpus_alloc=1))
    p, dummy = plan(unlabelled, [pod("k1"), pod("k2")], busy)
    assert p.drain == {} and p.delete_pods == [] and any(worker("k2") in w for w in p.pending)
    idle = table(slurm_line("k1"), slurm_line("k2", "IDLE+DRAIN", names.REASON_SCALE_IN))
    p, dummy = plan(unlabelled, [pod("k1"), pod("k2")], idle)
    assert p.delete_pods == [(worker("k2"), "uid-k2")] and p.delete_nodes == []
    assert any(worker("k2") in w for w in p.pending)  # not settled: its Slurm record is still to go
    # Its pod gone: its Slurm record is deleted (no ghost in sinfo), the other worker untouched.
    p, dummy = plan(unlabelled, [pod("k1")], idle)
    assert p.delete_nodes == [worker("k2")] and p.create_pods == [] and p.delete_pods == []


def test_a_node_that_matches_again_before_its_worker_went_is_resumed():
    drained = table(slurm_line("k1", "IDLE+DRAIN", names.REASON_SCALE_IN))
    p, dummy = plan(k8s("k1"), [pod("k1")], drained)
    assert p.resume == [worker("k1")] and p.delete_pods == []


def test_a_deleted_kubernetes_node_removes_its_worker_like_an_unlabelled_one():
    p, dummy = plan(k8s(), [pod("k1")], table(slurm_line("k1")))
    assert p.drain == {names.REASON_SCALE_IN: [worker("k1")]}
    # Its pod gone with the node (the pod garbage collector) while its job ran: forgotten once Slurm ends the job.
    p, dummy = plan(k8s(), [], table(slurm_line("k1", "MIXED+NOT_RESPONDING", cpus_alloc=1)))
    assert p.delete_nodes == [] and p.pending
    p, dummy = plan(k8s(), [], table(slurm_line("k1", "DOWN+NOT_RESPONDING")))
    assert p.delete_nodes == [worker("k1")]


def test_without_slurm_workers_are_made_but_none_is_removed():
    p, dummy = plan(k8s("k2"), [pod("k1")], None)
    assert [m["spec"]["nodeName"] for m in p.create_pods] == ["k2"]
    assert p.delete_pods == [] and p.drain == {} and any("slurmctld" in w for w in p.pending)


def test_nodes_not_readable_make_and_remove_nothing_and_the_status_says_why():
    p, ctx = plan(None, [pod("k1")], table(slurm_line("k1")),
                  observed={"k8s_nodes_error": "cannot read Kubernetes nodes: forbidden"})
    assert (p.create_pods, p.delete_pods, p.drain) == ([], [], {})
    assert "operator_read_nodes" in p.nodesets["cpu"]["problem"] and p.deferred
    status = st.nodeset_status({}, ctx.of(values.EVERY_NODE)[0], decided.freeze(p), p.nodesets["cpu"], None,
                              "2026-11-27T00:00:00Z")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "cannot read Kubernetes nodes: forbidden" in ready["message"], ready
    # The operator's cache check does not read Nodes: silent there.
    p, dummy = plan(None, [pod("k1")], None)
    assert p.create_pods == [] and not p.deferred and "problem" not in p.nodesets["cpu"]


def test_an_outdated_worker_rolls_by_drain_and_replace():
    p, dummy = plan(k8s("k1", "k2"), [pod("k1", "old"), pod("k2", "old")], table(slurm_line("k1"), slurm_line("k2")))
    assert p.drain == {names.REASON_UPDATE: [worker("k1")]} or p.drain == {names.REASON_UPDATE: [worker("k2")]}
    assert p.nodesets["cpu"]["outdatedReplicas"] == 2 and p.delete_pods == []
    first = p.drain[names.REASON_UPDATE][0]
    node_of = {worker("k1"): "k1", worker("k2"): "k2"}
    lines = [slurm_line(n, "IDLE+DRAIN", names.REASON_UPDATE) if worker(n) == first else slurm_line(n)
             for n in ("k1", "k2")]
    p, dummy = plan(k8s("k1", "k2"), [pod("k1", "old"), pod("k2", "old")], table(*lines))
    assert p.delete_pods == [(first, "uid-" + node_of[first])] and names.REASON_UPDATE not in p.drain


def test_a_failed_pod_is_replaced_and_its_reason_shown():
    failed = pod("k1", phase="Failed", ready=False)
    failed["status"]["message"] = "Pod was rejected: Node didn't have enough resource: cpu"
    p, dummy = plan(k8s("k1"), [failed], table(slurm_line("k1")))
    assert p.delete_pods == [(worker("k1"), "uid-k1")] and "enough resource" in p.nodesets["cpu"]["unschedulable"][0]


def test_the_retry_delay_doubles_from_ten_seconds_after_the_first_failure_up_to_five_minutes():
    assert [every_node.retry_delay(n) for n in range(1, 10)] == [0, 10, 20, 40, 80, 160, 300, 300, 300]
    assert every_node.retry_delay(10 ** 6) == every_node.RETRY_CAP


def refused(node, uid):
    failed = pod(node, phase="Failed", ready=False)
    failed["metadata"]["uid"] = uid
    failed["status"]["message"] = "Pod was rejected: Node didn't have enough resource: cpu"
    return failed


def backoff(failures, retry_at, uid):
    return {"podBackoff": {worker("k1"): {"failures": failures, "retryAt": iso(retry_at), "uid": uid}}}


def test_a_first_failure_is_replaced_at_once_and_counted():
    p, dummy = plan(k8s("k1"), [refused("k1", "u1")], table(slurm_line("k1")))
    assert p.delete_pods == [(worker("k1"), "u1")] and p.requeue_after == model.REQUEUE_DRAINING
    assert p.nodesets["cpu"]["podBackoff"] == {worker("k1"): {"failures": 1, "retryAt": iso(NOW), "uid": "u1"}}


def test_a_failure_in_a_row_keeps_the_failed_pod_until_its_retry_and_looks_again_then():
    p, dummy = plan(k8s("k1"), [refused("k1", "u2")], table(slurm_line("k1")), status=backoff(1, NOW - 30, "u1"))
    assert p.delete_pods == [] and p.create_pods == [] and p.requeue_after == 10
    assert p.nodesets["cpu"]["podBackoff"][worker("k1")] == {"failures": 2, "retryAt": iso(NOW + 10), "uid": "u2"}
    assert "made again in 10 s (2 failures in a row)" in p.nodesets["cpu"]["unschedulable"][0]


def test_a_failed_pod_seen_again_is_not_counted_again_and_goes_when_its_retry_is_due():
    status = backoff(3, NOW + 40, "u3")
    p, dummy = plan(k8s("k1"), [refused("k1", "u3")], table(slurm_line("k1")), status=status, now=NOW + 15)
    assert p.delete_pods == [] and p.requeue_after == 25
    assert p.nodesets["cpu"]["podBackoff"] == status["podBackoff"]
    p, dummy = plan(k8s("k1"), [refused("k1", "u3")], table(slurm_line("k1")), status=status, now=NOW + 40)
    assert p.delete_pods == [(worker("k1"), "u3")] and p.nodesets["cpu"]["podBackoff"] == status["podBackoff"]


def test_the_next_pod_is_made_at_once_and_the_count_kept_until_a_pod_is_ready():
    status = backoff(7, NOW - 1, "u7")
    p, dummy = plan(k8s("k1"), [], table(slurm_line("k1")), status=status)
    assert [m["metadata"]["name"] for m in p.create_pods] == [worker("k1")]
    assert p.nodesets["cpu"]["podBackoff"] == status["podBackoff"]
    p, dummy = plan(k8s("k1"), [pod("k1", ready=False, phase="Pending")], table(slurm_line("k1")), status=status)
    assert p.nodesets["cpu"]["podBackoff"] == status["podBackoff"]
    # The eighth failure waits the cap.
    p, dummy = plan(k8s("k1"), [refused("k1", "u8")], table(slurm_line("k1")), status=status)
    assert p.nodesets["cpu"]["podBackoff"][worker("k1")]["failures"] == 8 and p.requeue_after == every_node.RETRY_CAP


def test_a_ready_pod_resets_the_count_and_the_status_forgets_it():
    status = backoff(5, NOW - 1, "u5")
    p, ctx = plan(k8s("k1"), [pod("k1")], table(slurm_line("k1")), status=status)
    assert p.nodesets["cpu"]["podBackoff"] == {}
    written = st.nodeset_status(status, ctx.of(values.EVERY_NODE)[0], decided.freeze(p), p.nodesets["cpu"], None,
                                 iso(NOW))
    assert written["podBackoff"] == {worker("k1"): None}  # a merge patch removes it
    p, ctx = plan(k8s("k1"), [pod("k1")], table(slurm_line("k1")), status={})
    assert "podBackoff" not in st.nodeset_status({}, ctx.of(values.EVERY_NODE)[0], decided.freeze(p),
                                                 p.nodesets["cpu"], None, iso(NOW))
    # A failure after that is a first one again: replaced at once.
    p, dummy = plan(k8s("k1"), [refused("k1", "u6")], table(slurm_line("k1")), status={"podBackoff": {}})
    assert p.delete_pods == [(worker("k1"), "u6")]


def test_a_node_that_no_longer_wants_a_worker_forgets_its_count():
    p, dummy = plan(k8s("k1", labels={"k1": {}}), [], table(slurm_line("k1")), status=backoff(4, NOW + 60, "u4"))
    assert p.nodesets["cpu"]["podBackoff"] == {}


def test_max_node_count_caps_the_workers_and_says_so():
    p, dummy = plan(k8s("k1", "k2", "k3"), [pod("k3")], None, cluster_spec={"slurm": {"maxNodeCount": 2}})
    made = [m["spec"]["nodeName"] for m in p.create_pods]
    assert made == ["k1"]  # k3's running worker kept first, then nodes in name order
    assert "maxNodeCount" in p.nodesets["cpu"]["problem"]


def test_maintenance_drains_every_worker_removes_its_pod_once_idle_and_makes_none():
    spec = {"maintenance": True}
    p, ctx = plan(k8s("k1", "k2"), [pod("k1")], table(slurm_line("k1")), cluster_spec=spec)
    assert p.create_pods == []
    q = model.Draft()
    waiting = every_node.maintenance(q, ctx, ctx.of(values.EVERY_NODE)[0])
    assert waiting == [worker("k1")] and q.drain == {names.REASON_MAINTENANCE: [worker("k1")]}
    p, ctx = plan(k8s("k1"), [pod("k1")], table(slurm_line("k1", "IDLE+DRAIN", names.REASON_MAINTENANCE)),
                  cluster_spec=spec)
    q = model.Draft()
    every_node.maintenance(q, ctx, ctx.of(values.EVERY_NODE)[0])
    assert q.delete_pods == [(worker("k1"), "uid-k1")]


def test_a_deleted_every_node_set_drains_removes_and_is_released_once_nothing_is_left():
    p, dummy = plan(k8s("k1"), [pod("k1")], table(slurm_line("k1")), leaving=("cpu",))
    assert p.drain == {names.REASON_SCALE_IN: [worker("k1")]} and p.release == []
    p, dummy = plan(k8s("k1"), [], table(slurm_line("k1", "IDLE+DRAIN", names.REASON_SCALE_IN)), leaving=("cpu",))
    assert p.delete_nodes == [worker("k1")] and p.release == []
    p, dummy = plan(k8s("k1"), [], table(), leaving=("cpu",))
    assert p.release == ["cpu"]


def test_the_whole_plan_makes_the_workers_and_renders_no_statefulset_for_the_set():
    cluster = make_cluster(uid="c-uid")
    sets = [make_nodeset("cpu", EVERY, uid="n1")]
    observed = {"statefulsets": {}, "pods": {}, "slurm": None, "k8s_nodes": k8s("k1", "k2")}
    p = converge.plan(cluster, sets, observed, NOW)
    assert sorted(m["spec"]["nodeName"] for m in p.pods.create_pods) == ["k1", "k2"]
    assert not any(m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-cpu" for m in p.objects.manifests)
    assert p.report.nodesets["cpu"]["workerNodes"] == {worker("k1"): "k1", worker("k2"): "k2"}


def test_worker_pods_are_read_whenever_a_nodeset_is_every_node():
    assert model.worker_pods_needed("demo", [make_nodeset("cpu", EVERY)], {}) is True
    assert model.worker_pods_needed("demo", [make_nodeset("cpu", {})], {}) is False


def test_node_labels_give_every_node_workers_their_features_and_topology_place():
    from ansible_collections.soperator.slurm.plugins.module_utils.plan import node_labels
    spec = dict(EVERY, featureLabelPrefix="feature.example.com/")
    labels = {"k1": {"pool": "hpc", "feature.example.com/ib": "true", "net/leaf": "l1"}}
    obs = {"pods": {worker("k1"): pod("k1")}, "slurm": table(slurm_line("k1")), "k8s_nodes": k8s("k1", labels=labels)}
    ctx = context(cluster_spec={"topology": {"levels": ["net/leaf"]}}, nodesets=(("cpu", spec),), observed=obs)
    p = model.Draft()
    text = node_labels.plan_topology(p, ctx, {})
    assert worker("k1") in text and "SwitchName=l1" in text
    p.nodesets["cpu"] = {}
    node_labels.plan_features(p, ctx)
    assert p.set_features == {worker("k1"): ["cpu", "ib"]}
    assert p.nodesets["cpu"]["labelFeatures"] == {worker("k1"): ["ib"]}


def test_a_worker_whose_drain_outlived_drain_timeout_goes_with_its_jobs_and_an_event_says_so():
    spec = dict(EVERY, drainTimeout="10m")
    busy = table(slurm_line("k1", "MIXED+DRAIN", names.REASON_SCALE_IN, cpus_alloc=1, when=NOW - 3600))
    p, dummy = plan(k8s(), [pod("k1")], busy, spec=spec)
    assert p.delete_pods == [(worker("k1"), "uid-k1")]
    assert p.down == {names.REASON_SCALE_IN: [worker("k1")]}  # DOWN before its pod is deleted (findings D.2)
    event = model.give_up_event(dict(p.give_up[0], jobs=["42"]))
    assert event[1] == model.EVENT_DRAIN_TIMEOUT_EXPIRED and "no longer matches" in event[2] and "42" in event[2]
    p, dummy = plan(k8s(), [pod("k1")], busy, spec=dict(spec, onDrainTimeout="Wait"))
    assert p.delete_pods == [] and p.give_up == [] and p.down == {}
