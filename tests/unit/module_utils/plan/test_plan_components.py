"""components.py alone: what the pods hold and what failed, readiness, the optional components' conditions."""

from planning import context, line, pod, slurm, sts, workers

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import components, model


def test_the_secrets_a_pod_mounts_are_held():
    mounts = {"spec": {"volumes": [{"secret": {"secretName": "demo-munge-key"}}],
                       "containers": [{"env": [{"valueFrom": {"secretKeyRef": {"name": "demo-jwt-key"}}}]}]}}
    p = model.Draft()
    components.plan_guards(p, context(observed={"pods": {"demo-controller-0": mounts}}))
    assert p.secrets_held == ["demo-jwt-key", "demo-munge-key"] and not p.degraded


def test_a_failed_populate_job_degrades_the_cluster_with_its_words():
    job = names.populate_job_name("demo", None)
    failed = {"metadata": {"labels": {model.JOB_NAME_LABEL: job}}, "status": {"phase": "Failed", "containerStatuses": [
        {"name": "populate", "state": {"terminated": {"message": "JailNotEmpty: the jail holds files\n"}}}]}}
    p = model.Draft()
    components.plan_guards(p, context(observed={"pods": {job + "-x": failed}}))
    assert p.degraded == ["populate Job %s failed: JailNotEmpty: the jail holds files (spec.jail.populate)" % job]
    p = model.Draft()
    components.plan_guards(p, context({"maintenance": True}, observed={"pods": {job + "-x": failed}}))
    assert not p.degraded


def ready_plan(ctx, count=2):
    p = model.Draft()
    p.manifests = [{"kind": "StatefulSet", "metadata": {"name": "demo-cpu"}, "spec": {"replicas": count}}]
    p.nodesets["cpu"] = {"replicas": count, "leaving": False, "serving": count}
    components.plan_readiness(p, ctx, maintenance_ready=False)
    return p


def test_ready_when_every_pod_is_ready_and_every_slurm_node_serves():
    statefulsets, pods = workers(2)
    p = ready_plan(context(observed={"statefulsets": statefulsets, "pods": pods,
                                     "slurm": slurm(line("demo-cpu-0"), line("demo-cpu-1"))}))
    assert p.ready and p.phase == model.PHASE_READY and p.message == "every pod ready and every Slurm node up"


def test_not_ready_says_why():
    statefulsets = {"demo-cpu": sts("demo-cpu", 2, ready=1)}
    p = ready_plan(context(observed={"statefulsets": statefulsets, "pods": {}, "slurm_error": "timed out"}))
    assert not p.ready and p.phase == model.PHASE_PROGRESSING
    assert p.message == "demo-cpu: 1/2 pods ready; slurmctld does not answer: timed out"


def test_maintenance_ready_is_its_own_phase():
    p = model.Draft()
    components.plan_readiness(p, context({"maintenance": True}), maintenance_ready=True)
    assert p.ready and p.phase == model.PHASE_MAINTENANCE


def test_maintenance_is_reached_only_once_every_pod_stopped():
    # A StatefulSet told zero still counts its terminating pods in status.replicas: a login pod in its grace period
    # still mounts the jail, which a restore in place must not write yet.
    stopping = {"demo-login": sts("demo-login", 1), "demo-cpu": sts("demo-cpu", 0)}
    p = model.Draft()
    components.plan_readiness(p, context({"maintenance": True}, observed={"statefulsets": stopping}),
                              maintenance_ready=True)
    assert not p.ready and p.phase == model.PHASE_PROGRESSING and p.requeue_after == model.REQUEUE_PROGRESSING
    assert p.message == "maintenance: waiting for the pods of demo-login (1) to stop"
    stopping["demo-login"] = sts("demo-login", 0)
    p = model.Draft()
    components.plan_readiness(p, context({"maintenance": True}, observed={"statefulsets": stopping}),
                              maintenance_ready=True)
    assert p.ready and p.phase == model.PHASE_MAINTENANCE and p.message == "maintenance: every StatefulSet scaled to 0"


def test_a_component_condition_takes_the_reason_its_entrypoint_gave():
    crashed = {"metadata": {"name": "demo-rest-0"}, "status": {"containerStatuses": [{
        "name": "slurmrestd", "ready": False, "lastState": {"terminated": {
            "exitCode": 1, "message": "JwtKeyMissing: mount the key\n"}}}]}}
    ctx = context({"restApi": {"enabled": True}}, observed={
        "statefulsets": {"demo-rest": sts("demo-rest", 1, ready=0)}, "pods": {"demo-rest-0": crashed}})
    p = model.Draft()
    p.manifests = [{"kind": "StatefulSet", "metadata": {"name": "demo-rest"}, "spec": {"replicas": 1}}]
    components.plan_components(p, ctx)
    assert p.components == {"RestApiReady": ("False", "JwtKeyMissing", "demo-rest: 0/1 pods ready; slurmrestd: "
                                                                       "JwtKeyMissing: mount the key")}
    ctx.statefulsets["demo-rest"] = sts("demo-rest", 1)
    components.plan_components(p, ctx)
    assert p.components["RestApiReady"] == ("True", "Ready", "every pod ready")


def test_pod_problem_reads_a_waiting_reason():
    waiting = {"status": {"containerStatuses": [{"name": "x", "state": {"waiting": {"reason": "ErrImagePull"}}}]}}
    assert components.pod_problem(waiting) == "x: ErrImagePull"
    assert components.pod_problem(pod("ok")) is None
