"""scale.py alone: replicas per NodeSet, scale-in drains, NodeSets being deleted, Slurm records of pods gone."""

from planning import context, line, slurm, workers

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model, scale

SCALE_IN = names.REASON_SCALE_IN


def test_a_shrink_drains_its_victims_and_keeps_the_busy_top_ordinal():
    statefulsets, pods = workers(3)
    ctx = context(nodesets=[("cpu", {"replicas": 1})], observed={
        "statefulsets": statefulsets, "pods": pods,
        "slurm": slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2", "ALLOCATED", cpus_alloc=2))})
    p = model.Plan()
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
    p = model.Plan()
    decided = scale.plan_replicas(p, ctx, maintenance_ready=False)
    assert decided.render == {"cpu": 1} and not p.drain and not p.pending
    assert p.nodesets["cpu"]["replicas"] == 1 and p.nodesets["cpu"]["desired"] == 1


def test_without_slurm_a_shrink_waits_and_a_growth_does_not():
    statefulsets, pods = workers(3)
    p = model.Plan()
    decided = scale.plan_replicas(p, context(nodesets=[("cpu", {"replicas": 1})],
                                             observed={"statefulsets": statefulsets, "pods": pods}), False)
    assert decided.render == {"cpu": 3} and p.requeue_after == model.REQUEUE_SLURM_UNREACHABLE
    p = model.Plan()
    decided = scale.plan_replicas(p, context(nodesets=[("cpu", {"replicas": 5})],
                                             observed={"statefulsets": statefulsets, "pods": pods}), False)
    assert decided.render == {"cpu": 5} and not p.pending


def test_a_cancelled_scale_in_is_resumed_and_an_admins_drain_is_not():
    statefulsets, pods = workers(2)
    ctx = context(nodesets=[("cpu", {"replicas": 2})], observed={
        "statefulsets": statefulsets, "pods": pods,
        "slurm": slurm(line("demo-cpu-0", "IDLE+DRAIN", "bad dimm"), line("demo-cpu-1", "IDLE+DRAIN", SCALE_IN))})
    p = model.Plan()
    scale.plan_replicas(p, ctx, False)
    assert p.resume == ["demo-cpu-1"]


def test_a_nodeset_being_deleted_shrinks_to_zero_keeps_its_objects_then_is_released():
    statefulsets, pods = workers(1)
    ctx = context(nodesets=[("cpu", {"replicas": 1})], leaving=("cpu",), observed={
        "statefulsets": statefulsets, "pods": pods, "slurm": slurm(line("demo-cpu-0", "IDLE+DRAIN", SCALE_IN))})
    p = model.Plan()
    decided = scale.plan_replicas(p, ctx, False)
    assert p.scale == {"demo-cpu": 0} and ("StatefulSet", "demo-cpu") in p.keep
    assert decided.render == {} and p.nodesets["cpu"]["leaving"] and p.release == []
    gone = context(nodesets=[("cpu", {"replicas": 1})], leaving=("cpu",), observed={
        "statefulsets": {"demo-cpu": dict(statefulsets["demo-cpu"], spec={"replicas": 0})}, "pods": {},
        "slurm": slurm()})
    p = model.Plan()
    scale.plan_replicas(p, gone, False)
    assert p.release == ["cpu"] and not p.pending


def test_records_of_pods_gone_for_good_are_forgotten_unless_a_job_still_counts():
    statefulsets, pods = workers(1)
    ctx = context(observed={"statefulsets": statefulsets, "pods": pods, "slurm": slurm(
        line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2", "ALLOCATED", cpus_alloc=1), line("other-x-0"),
        line("demo-controller-0"))})
    p = model.Plan()
    p.resume = ["demo-cpu-1"]
    scale.plan_node_records(p, ctx, {"demo-cpu": 1})
    assert p.delete_nodes == ["demo-cpu-1"] and p.resume == []  # forgotten, not resumed
    assert any("demo-cpu-2: its pod is gone but Slurm still counts a job" in w for w in p.pending)


def test_pods_past_what_stays_are_waited_for():
    statefulsets, pods = workers(3)
    p = model.Plan()
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
    p = model.Plan()
    scale.plan_replicas(p, ctx, False)
    assert set(p.keep) == {("StatefulSet", "demo-gpu"), ("Service", "demo-gpu"), ("PodDisruptionBudget", "demo-gpu")}
