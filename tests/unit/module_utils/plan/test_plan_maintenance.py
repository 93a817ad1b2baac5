"""maintenance.py alone: maintenance drains and when the cluster may go to zero; health drains left over; which
SlurmUser slurmctld gets."""

from planning import NOW, context, line, slurm, sts, workers

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import maintenance, model

MAINT = names.REASON_MAINTENANCE


def observed(nodes, count=2, **extra):
    statefulsets, pods = workers(count)
    statefulsets["demo-controller"] = sts("demo-controller", 1)
    return dict({"statefulsets": statefulsets, "pods": pods, "slurm": slurm(*nodes) if nodes is not None else None},
                **extra)


def test_maintenance_drains_every_worker_and_waits_for_their_jobs():
    ctx = context({"maintenance": True}, observed=observed([line("demo-cpu-0", "ALLOCATED", cpus_alloc=1),
                                                            line("demo-cpu-1")]))
    p = model.Draft()
    assert not maintenance.plan_maintenance(p, ctx)
    assert p.drain == {MAINT: ["demo-cpu-0", "demo-cpu-1"]}
    assert p.requeue_after == model.REQUEUE_DRAINING and "maintenance waits for demo-cpu-0" in p.pending[0]


def test_maintenance_is_ready_once_every_worker_is_drained_and_idle():
    ctx = context({"maintenance": True}, observed=observed([line("demo-cpu-0", "IDLE+DRAIN", MAINT),
                                                            line("demo-cpu-1", "IDLE+DRAIN", MAINT)]))
    p = model.Draft()
    assert maintenance.plan_maintenance(p, ctx) and not p.drain and not p.pending


def test_maintenance_without_a_running_controller_needs_no_slurm():
    statefulsets, pods = workers(2)
    ctx = context({"maintenance": True}, observed={"statefulsets": statefulsets, "pods": pods, "slurm": None})
    assert maintenance.plan_maintenance(model.Draft(), ctx)
    p = model.Draft()
    assert not maintenance.plan_maintenance(p, context({"maintenance": True}, observed=observed(None)))
    assert p.requeue_after == model.REQUEUE_SLURM_UNREACHABLE


def test_a_drain_older_than_a_proceeding_drain_timeout_gives_the_jobs_up():
    ctx = context({"maintenance": True}, nodesets=[("cpu", {"drainTimeout": "10m"})],
                  observed=observed([line("demo-cpu-0", "MIXED+DRAIN", MAINT, when=NOW - 3600, cpus_alloc=1),
                                     line("demo-cpu-1", "IDLE+DRAIN", MAINT)]))
    p = model.Draft()
    assert maintenance.plan_maintenance(p, ctx)
    assert [(g["node"], g["why"], g["setting"]) for g in p.give_up] == [
        ("demo-cpu-0", "maintenance", "spec.drainTimeout")]
    # Not set DOWN: slurmctld stops in the same pass, after the apply that would have to precede it.
    assert p.down == {}


def test_the_end_of_maintenance_resumes_its_drains_only():
    ctx = context(observed=observed([line("demo-cpu-0", "IDLE+DRAIN", MAINT), line("demo-cpu-1", "IDLE+DRAIN",
                                                                                  "disk check")]))
    p = model.Draft()
    assert not maintenance.plan_maintenance(p, ctx)
    assert p.resume == ["demo-cpu-0"]


def test_health_drains_are_resumed_once_the_program_no_longer_runs_but_nccl_drains_stay():
    nodes = [line("demo-cpu-0", "IDLE+DRAIN", names.HEALTH_REASON_PREFIX + " gpu: lost"),
             line("demo-cpu-1", "IDLE+DRAIN", names.NCCL_REASON_PREFIX + " busbw low")]
    p = model.Draft()
    maintenance.plan_maintenance(p, context({"healthChecks": {"enabled": False}}, observed=observed(nodes)))
    assert p.resume == ["demo-cpu-0"]
    p = model.Draft()
    maintenance.plan_maintenance(p, context(observed=observed(nodes)))
    assert p.resume == []  # the program runs: its drains are its own to resume


def test_slurmctld_keeps_an_older_slurm_user_while_workers_run():
    old = observed([line("demo-cpu-0")])
    old["statefulsets"]["demo-controller"] = sts("demo-controller", 1)  # no slurm-user annotation: a release of root
    p = model.Draft()
    assert maintenance.plan_slurm_user(p, context(observed=old), maintenance_ready=False) == "root"
    assert "spec.maintenance: true" in p.slurm_user_kept
    p = model.Draft()
    assert maintenance.plan_slurm_user(p, context(observed=old), maintenance_ready=True) == names.SLURM_USER
    assert p.slurm_user_kept is None
    none_running = dict(old, statefulsets={"demo-controller": old["statefulsets"]["demo-controller"]})
    assert maintenance.plan_slurm_user(model.Draft(), context(observed=none_running), False) == names.SLURM_USER


def test_only_the_two_users_a_release_rendered_are_believed():
    def controller(user):
        return {"spec": {"template": {"metadata": {"annotations": {names.ANNOTATION_SLURM_USER: user}}}}}
    assert maintenance.running_slurm_user(controller("root")) == "root"
    assert maintenance.running_slurm_user(controller("mallory")) == names.SLURM_USER
    assert maintenance.running_slurm_user({"spec": {"template": {}}}) == "root"
    assert maintenance.running_slurm_user(None) is None
