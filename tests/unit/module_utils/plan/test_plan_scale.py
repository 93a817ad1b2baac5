"""scale.py alone: replicas per NodeSet, scale-in drains, NodeSets being deleted, Slurm records of pods gone."""

import pytest
from planning import NOW, context, line, slurm, workers
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, model, scale
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects

SCALE_IN = names.REASON_SCALE_IN


def test_a_shrink_drains_its_victims_and_keeps_the_busy_top_ordinal():
    statefulsets, pods = workers(3)
    ctx = context(nodesets=[("cpu", {"replicas": 1})], observed={
        "statefulsets": statefulsets, "pods": pods,
        "slurm": slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2", "ALLOCATED", cpus_alloc=2))})
    p = model.Draft()
    decided = scale.plan_replicas(p, ctx, maintenance_ready=False)
    assert p.drain == {SCALE_IN: ["demo-cpu-2", "demo-cpu-1"]}
    assert decided.render == {"cpu": 3}  # the StatefulSet removes demo-cpu-2 first, and it runs a job
    assert decided.kept == {"demo-cpu": 3}
    assert p.requeue_after == model.REQUEUE_DRAINING and "waits for demo-cpu-2, demo-cpu-1 to drain" in p.pending[0]


def test_drained_idle_victims_go_and_the_renderer_gets_the_smaller_count():
    statefulsets, pods = workers(3)
    ctx = context(nodesets=[("cpu", {"replicas": 1})], observed={
        "statefulsets": statefulsets, "pods": pods,
        "slurm": slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", SCALE_IN),
                       line("demo-cpu-2", "IDLE+DRAIN", SCALE_IN))})
    p = model.Draft()
    decided = scale.plan_replicas(p, ctx, maintenance_ready=False)
    assert decided.render == {"cpu": 1} and not p.drain and not p.pending
    assert p.nodesets["cpu"]["replicas"] == 1 and p.nodesets["cpu"]["desired"] == 1


def test_without_slurm_a_shrink_waits_and_a_growth_does_not():
    statefulsets, pods = workers(3)
    p = model.Draft()
    decided = scale.plan_replicas(p, context(nodesets=[("cpu", {"replicas": 1})],
                                             observed={"statefulsets": statefulsets, "pods": pods}), False)
    assert decided.render == {"cpu": 3} and p.requeue_after == model.REQUEUE_SLURM_UNREACHABLE
    p = model.Draft()
    decided = scale.plan_replicas(p, context(nodesets=[("cpu", {"replicas": 5})],
                                             observed={"statefulsets": statefulsets, "pods": pods}), False)
    assert decided.render == {"cpu": 5} and not p.pending


def test_a_cancelled_scale_in_is_resumed_and_an_admins_drain_is_not():
    statefulsets, pods = workers(2)
    ctx = context(nodesets=[("cpu", {"replicas": 2})], observed={
        "statefulsets": statefulsets, "pods": pods,
        "slurm": slurm(line("demo-cpu-0", "IDLE+DRAIN", "bad dimm"), line("demo-cpu-1", "IDLE+DRAIN", SCALE_IN))})
    p = model.Draft()
    scale.plan_replicas(p, ctx, False)
    assert p.resume == ["demo-cpu-1"]


def test_a_nodeset_being_deleted_shrinks_to_zero_keeps_its_objects_then_is_released():
    statefulsets, pods = workers(1)
    ctx = context(nodesets=[("cpu", {"replicas": 1})], leaving=("cpu",), observed={
        "statefulsets": statefulsets, "pods": pods, "slurm": slurm(line("demo-cpu-0", "IDLE+DRAIN", SCALE_IN))})
    p = model.Draft()
    decided = scale.plan_replicas(p, ctx, False)
    assert p.scale == {"demo-cpu": 0} and ("StatefulSet", "demo-cpu") in p.keep
    assert decided.render == {} and p.nodesets["cpu"]["leaving"] and p.release == []
    gone = context(nodesets=[("cpu", {"replicas": 1})], leaving=("cpu",), observed={
        "statefulsets": {"demo-cpu": dict(statefulsets["demo-cpu"], spec={"replicas": 0})}, "pods": {},
        "slurm": slurm()})
    p = model.Draft()
    scale.plan_replicas(p, gone, False)
    assert p.release == ["cpu"] and not p.pending


def test_records_of_pods_gone_for_good_are_forgotten_unless_a_job_still_counts():
    statefulsets, pods = workers(1)
    ctx = context(observed={"statefulsets": statefulsets, "pods": pods, "slurm": slurm(
        line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2", "ALLOCATED", cpus_alloc=1), line("other-x-0"),
        line("demo-controller-0"))})
    p = model.Draft()
    p.resume = ["demo-cpu-1"]
    scale.plan_node_records(p, ctx, {"demo-cpu": 1})
    assert p.delete_nodes == ["demo-cpu-1"] and p.resume == []  # forgotten, not resumed
    assert any("demo-cpu-2: its pod is gone but Slurm still counts a job" in w for w in p.pending)


def test_pods_past_what_stays_are_waited_for():
    statefulsets, pods = workers(3)
    p = model.Draft()
    scale.plan_node_records(p, context(observed={"statefulsets": statefulsets, "pods": pods}), {"demo-cpu": 1})
    assert p.pending == ["pods going: demo-cpu-1, demo-cpu-2"] and p.requeue_after == model.REQUEUE_PROGRESSING


def test_beyond_reads_ordinals_like_a_statefulset():
    assert scale.beyond("demo-cpu-3", {"demo-cpu": 3}) and not scale.beyond("demo-cpu-2", {"demo-cpu": 3})
    assert not scale.beyond("demo-cpu-03", {"demo-cpu": 0})  # not a name a StatefulSet gives
    assert scale.beyond("demo-gone-0", {}, "demo") and not scale.beyond("demo-controller-0", {}, "demo")
    assert not scale.beyond("demo-gone-0", {})


def test_an_invalid_nodesets_objects_are_kept():
    ctx = context()
    ctx.invalid = {"gpu": ["bad"]}
    p = model.Draft()
    scale.plan_replicas(p, ctx, False)
    assert set(p.keep) == {("StatefulSet", "demo-gpu"), ("Service", "demo-gpu"), ("PodDisruptionBudget", "demo-gpu")}


# --- the operator's scale-out shortcut (scale_out_now, scale_outs) ------------------------------------------------

APPLIED_BY = {"manager": "soperator.slurm", "operation": "Apply", "apiVersion": "apps/v1",
              "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:replicas": {}, "f:template": {}}}}


def applied(cluster_spec=None, workers=2):
    """A cluster converged with ``workers`` workers: the SlurmCluster, its NodeSet and the live copies of what the
    converge applied (applied-hash, the applying field manager, resourceVersion, StatefulSets settled)."""
    cluster = make_cluster(cluster_spec or {}, uid="c-uid")
    nodeset = make_nodeset("cpu", {"replicas": workers}, uid="n-uid")
    live = {}
    for desired in converge.plan(cluster, [nodeset], {"statefulsets": {}, "pods": {}, "slurm": None},
                                 NOW).objects.manifests:
        obj = objects.with_applied_hash(desired)
        obj["metadata"].update(resourceVersion="41", uid="u-" + desired["metadata"]["name"],
                               managedFields=[dict(APPLIED_BY, apiVersion=desired["apiVersion"])])
        if desired["kind"] == "StatefulSet":
            count = obj["spec"]["replicas"]
            obj["metadata"]["generation"] = 2
            obj["status"] = {"replicas": count, "readyReplicas": count, "observedGeneration": 2,
                             "currentRevision": "r1", "updateRevision": "r1"}
        live[(desired["kind"], desired["metadata"]["name"])] = obj
    return cluster, nodeset, live


def replan(cluster, nodeset, live):
    statefulsets = dict((n, o) for (k, n), o in live.items() if k == "StatefulSet")
    return converge.plan(cluster, [nodeset], {"statefulsets": statefulsets, "pods": {}, "slurm": None}, NOW)


def test_a_growth_alone_is_applied_at_once_as_the_manager_that_applied_it():
    cluster, nodeset, live = applied()
    nodeset["spec"]["replicas"] = 5
    found = scale.scale_outs(replan(cluster, nodeset, live), live)
    assert [(g.manifest["metadata"]["name"], g.was, g.replicas, g.manager, g.resource_version) for g in found] == \
        [("demo-cpu", 2, 5, "soperator.slurm", "41")]
    # What is applied is the converge's own manifest: with it live, the converge skips the StatefulSet.
    grown = objects.with_applied_hash(found[0].manifest)
    assert objects.plan_object(found[0].manifest, dict(grown, status={})) == objects.SKIP
    assert found[0].manifest["spec"]["replicas"] == 5


def test_a_converged_cluster_has_nothing_to_scale_out():
    cluster, nodeset, live = applied()
    assert scale.scale_outs(replan(cluster, nodeset, live), live) == []


def test_a_shrink_never_takes_the_shortcut():
    cluster, nodeset, live = applied(workers=3)
    nodeset["spec"]["replicas"] = 1
    assert scale.scale_outs(replan(cluster, nodeset, live), live) == []  # without Slurm: a wait for its drains
    desired = dict(live[("StatefulSet", "demo-cpu")], spec=dict(live[("StatefulSet", "demo-cpu")]["spec"],
                                                                 replicas=1))
    assert scale.scale_out_now(desired, live[("StatefulSet", "demo-cpu")]) is None


@pytest.mark.parametrize("other", ["template", "config", "maintenance"])
def test_a_growth_with_any_other_change_is_left_to_the_run(other):
    cluster, nodeset, live = applied()
    nodeset["spec"]["replicas"] = 5
    if other == "template":      # the worker's pod template changes too: a rolling update, the run's
        nodeset["spec"]["resources"] = {"requests": {"cpu": "3"}, "limits": {"memory": "2Gi"}}
    elif other == "config":      # slurm.conf changes: the running controller judges it first
        cluster["spec"]["slurm"] = {"slurmConf": {"MessageTimeout": "30"}}
    else:                        # maintenance renders zero replicas
        cluster["spec"]["maintenance"] = True
    assert scale.scale_outs(replan(cluster, nodeset, live), live) == []


@pytest.mark.parametrize("status", [
    {"currentRevision": "r0"},                         # a rolling update under way
    {"observedGeneration": 1},                         # its controller has not seen the spec yet
    {"replicas": 3},                                   # a pod above the replicas is going
])
def test_a_statefulset_not_settled_is_left_to_the_run(status):
    cluster, nodeset, live = applied()
    live[("StatefulSet", "demo-cpu")]["status"].update(status)
    nodeset["spec"]["replicas"] = 5
    assert scale.scale_outs(replan(cluster, nodeset, live), live) == []


def test_pods_not_ready_yet_do_not_hold_a_growth_back():
    cluster, nodeset, live = applied()
    live[("StatefulSet", "demo-cpu")]["status"]["readyReplicas"] = 0
    nodeset["spec"]["replicas"] = 3
    assert [g.replicas for g in scale.scale_outs(replan(cluster, nodeset, live), live)] == [3]


@pytest.mark.parametrize("fields", ["none", "hand", "two"])
def test_replicas_not_applied_by_exactly_one_manager_are_left_to_the_run(fields):
    cluster, nodeset, live = applied()
    sts = live[("StatefulSet", "demo-cpu")]
    hand = {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    other = dict(APPLIED_BY, manager="someone-else")
    sts["metadata"]["managedFields"] = {"none": [], "hand": [hand], "two": [APPLIED_BY, other]}[fields]
    nodeset["spec"]["replicas"] = 5
    assert scale.scale_outs(replan(cluster, nodeset, live), live) == []


def test_only_worker_statefulsets_grow_ahead():
    cluster, nodeset, live = applied()
    login = live[("StatefulSet", "demo-login")]
    desired = dict(objects.without_applied_hash(login), spec=dict(login["spec"], replicas=2))
    assert scale.scale_out_now(desired, login) is None


def test_a_statefulset_edited_by_hand_is_left_to_the_run():
    """The live copy differs from what was applied (beyond replicas): the run repairs it, nothing is applied ahead."""
    cluster, nodeset, live = applied()
    container = live[("StatefulSet", "demo-cpu")]["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "edited/by-hand:1"
    nodeset["spec"]["replicas"] = 5
    assert scale.scale_outs(replan(cluster, nodeset, live), live) == []
