"""The converge planner: what one reconcile applies, drains, resumes and forgets, from observed state.

Slurm's node table is given as `scontrol show node -o` lines and parsed by the real parser.
"""

import time

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, model
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

NOW = 1_700_000_000


def line(name, state="IDLE", reason=None, when=NOW - 60, cpus_alloc=0):
    text = "NodeName=%s Arch=x86_64 CoresPerSocket=1 CPUAlloc=%d CPUTot=2 State=%s+DYNAMIC_NORM" % (
        name, cpus_alloc, state)
    if reason:
        text += " Reason=%s [root@%d]" % (reason, when)
    return text


def slurm(*lines):
    return scontrol.parse_show_node("\n".join(lines))


REV = "demo-cpu-6d4b9c"


_HASHES = {}


def rendered_hash(name):
    """The template hash the default example renders for StatefulSet ``name`` (what a live one carries)."""
    if not _HASHES:
        p = converge.plan(cluster(), [nodeset(2)], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
        for m in p.objects.manifests:
            if m["kind"] == "StatefulSet":
                _HASHES[m["metadata"]["name"]] = m["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_HASH]
    return _HASHES.get(name)


def sts(name, replicas, ready=None, revision=REV, generation=1, observed=1, template_hash=None,
        slurm_user=names.SLURM_USER):
    ready = replicas if ready is None else ready
    template_md = {"annotations": {names.ANNOTATION_SLURM_USER: slurm_user}} if slurm_user else {}
    return {"metadata": {"name": name, "generation": generation,
                         "annotations": {names.ANNOTATION_TEMPLATE_HASH: template_hash or rendered_hash(name)}},
            "spec": {"replicas": replicas, "template": {"metadata": template_md}},
            "status": {"replicas": replicas, "readyReplicas": ready, "updateRevision": revision,
                       "observedGeneration": observed}}


def pod(name, revision=REV, ready=True, uid=None, deleting=False):
    md = {"name": name, "uid": uid or "uid-" + name, "labels": {model.REVISION_LABEL: revision}}
    if deleting:
        md["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    return {"metadata": md, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def steady(workers=2, nodeset="cpu", extra_pods=()):
    sets = {"demo-controller": sts("demo-controller", 1), "demo-login": sts("demo-login", 1),
            "demo-%s" % nodeset: sts("demo-%s" % nodeset, workers)}
    pods = {"demo-controller-0": {}, "demo-login-0": pod("demo-login-0")}
    pods.update(("demo-%s-%d" % (nodeset, i), pod("demo-%s-%d" % (nodeset, i))) for i in range(workers))
    pods.update((p, pod(p)) for p in extra_pods)
    return {"statefulsets": sets, "pods": pods}


def cluster(**spec):
    return make_cluster(spec, uid="c-uid")


def nodeset(replicas=2, name="cpu", **spec):
    spec = dict(spec, replicas=replicas)
    return make_nodeset(name, spec, uid="n-uid-" + name)


def rendered_replicas(plan, name):
    return next(m["spec"]["replicas"] for m in plan.objects.manifests
                if m["kind"] == "StatefulSet" and m["metadata"]["name"] == name)


def test_a_new_cluster_renders_everything_and_is_not_ready_yet():
    p = converge.plan(cluster(), [nodeset(2)], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    kinds = sorted(set(m["kind"] for m in p.objects.manifests))
    assert kinds == ["ConfigMap", "Job", "PersistentVolumeClaim", "PodDisruptionBudget", "Secret", "Service",
                     "StatefulSet"]
    assert rendered_replicas(p, "demo-cpu") == 2
    assert not p.report.ready and p.report.phase == model.PHASE_PROGRESSING
    # Readiness alone asks for no timed requeue: worker pods turn Ready (their probe) when their nodes are up.
    assert p.report.requeue_after is None
    assert not p.slurm.drain and not p.slurm.resume and not p.slurm.delete_nodes
    assert "slurmctld does not answer" in p.report.message


def test_a_settled_cluster_is_ready_and_asks_for_nothing():
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "ALLOCATED", cpus_alloc=2)))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.report.ready
    assert p.report.phase == model.PHASE_READY
    assert p.report.requeue_after is None
    assert not p.report.pending
    assert not p.slurm.any
    facts = p.report.nodesets["cpu"]
    assert (facts["idle"], facts["allocated"], facts["serving"]) == (1, 1, 2)


def test_a_worker_whose_slurmd_did_not_register_keeps_the_cluster_not_ready():
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0")))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert not p.report.ready and "NodeSet cpu: 1/2 Slurm nodes up" in p.report.message
    assert p.report.requeue_after is None


def test_a_not_responding_node_is_not_up():
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+NOT_RESPONDING")))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert not p.report.ready and p.report.nodesets["cpu"]["down"] == 1


def test_scale_in_drains_the_victims_first_and_keeps_their_pods():
    obs = dict(steady(3), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2")))
    p = converge.plan(cluster(), [nodeset(1)], obs, NOW)
    assert p.slurm.drain == {names.REASON_SCALE_IN: ["demo-cpu-2", "demo-cpu-1"]}
    assert rendered_replicas(p, "demo-cpu") == 3
    assert p.report.requeue_after == model.REQUEUE_DRAINING and not p.report.ready


def test_scale_in_removes_only_from_the_top_what_is_drained_and_idle():
    obs = dict(steady(3), slurm=slurm(
        line("demo-cpu-0"),
        line("demo-cpu-1", "IDLE+DRAIN", names.REASON_SCALE_IN),
        line("demo-cpu-2", "MIXED+DRAIN", names.REASON_SCALE_IN, cpus_alloc=1)))
    p = converge.plan(cluster(), [nodeset(1)], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 3  # ordinal 2 still runs a job: nothing can go yet
    assert not p.slurm.drain
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-cpu-1", "MIXED+DRAIN", names.REASON_SCALE_IN, cpus_alloc=1),
                         line("demo-cpu-2", "IDLE+DRAIN", names.REASON_SCALE_IN))
    p = converge.plan(cluster(), [nodeset(1)], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 2
    assert "demo-cpu-1" in " ".join(p.report.pending)


def test_scale_in_gives_a_job_up_only_after_drain_timeout():
    busy = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_SCALE_IN, when=NOW - 601, cpus_alloc=1)
    obs = dict(steady(2), slurm=slurm(line("demo-cpu-0"), busy))
    p = converge.plan(cluster(), [nodeset(1, drainTimeout="10m")], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 1
    # Said: the node that goes with its jobs, the setting that let it, since when it was drained.
    assert [(g["nodeset"], g["node"], g["why"], g["setting"], g["value"], g["since"], g["pod_uid"])
            for g in p.pods.give_up] == [("cpu", "demo-cpu-1", "scale-in", "spec.drainTimeout", "10m", NOW - 601, None)]
    # Set DOWN in the pass its pod goes, with our reason: its jobs end as on a node failure (findings D.2).
    assert p.slurm.down == {names.REASON_SCALE_IN: ["demo-cpu-1"]} and p.slurm.any
    p = p.with_jobs({"demo-cpu-1": ["41", "42"]})
    kind, reason, message = model.give_up_event(p.pods.give_up[0])
    assert (kind, reason) == ("Warning", "DrainTimeoutExpired")
    assert message == ("Pod demo-cpu-1 removed by the scale-in: its Slurm node was drained at 2023-11-14T22:03:19Z, "
                       "longer ago than spec.drainTimeout: 10m, spec.onDrainTimeout: Proceed; job(s) 41, 42 still "
                       "running on it are killed")
    p = converge.plan(cluster(), [nodeset(1, drainTimeout="11m")], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 2 and p.pods.give_up == [] and p.slurm.down == {}
    p = converge.plan(cluster(), [nodeset(1, drainTimeout="10m", onDrainTimeout="Wait")], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 2 and p.pods.give_up == [] and p.slurm.down == {}
    # A rolling update's setting is not the scale-in's: proceedAfter changes nothing here.
    p = converge.plan(cluster(), [nodeset(1, drainTimeout="11m", updateStrategy={"proceedAfter": "1s"})], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 2 and p.pods.give_up == []


def test_scale_in_without_slurm_keeps_every_pod_and_still_applies_the_rest():
    p = converge.plan(cluster(), [nodeset(1)], dict(steady(3), slurm=None), NOW)
    assert rendered_replicas(p, "demo-cpu") == 3
    assert any("waits for slurmctld" in why for why in p.report.pending)
    assert p.report.requeue_after == model.REQUEUE_DRAINING or p.report.requeue_after == model.REQUEUE_SLURM_UNREACHABLE
    assert any(m["kind"] == "ConfigMap" for m in p.objects.manifests)


def test_why_slurmctld_was_silent_is_said_beside_what_waits_on_it_and_only_then():
    silent = dict(steady(3), slurm=None, slurm_error="slurm_load_node error: Unable to contact slurm controller")
    p = converge.plan(cluster(), [nodeset(1)], silent, NOW)
    assert p.report.pending[-1] == "slurm: slurm_load_node error: Unable to contact slurm controller"
    settled = converge.plan(cluster(), [nodeset(3)], dict(silent, statefulsets=dict(
        steady(3)["statefulsets"], **{"demo-cpu": sts("demo-cpu", 3)})), NOW)
    assert not any(why.startswith("slurm: ") for why in settled.report.pending)


def test_scale_out_needs_no_slurm_and_resumes_a_cancelled_scale_in():
    p = converge.plan(cluster(), [nodeset(4)], dict(steady(2), slurm=None), NOW)
    assert rendered_replicas(p, "demo-cpu") == 4 and not p.slurm.any
    obs = dict(steady(2), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", names.REASON_SCALE_IN)))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.slurm.resume == ["demo-cpu-1"]


def test_an_admin_drain_is_never_resumed_nor_overwritten():
    admin = line("demo-cpu-1", "IDLE+DRAIN", "bad dimm")
    p = converge.plan(cluster(), [nodeset(2)], dict(steady(2), slurm=slurm(line("demo-cpu-0"), admin)), NOW)
    assert not p.slurm.resume and not p.slurm.drain
    p = converge.plan(cluster(maintenance=True), [nodeset(2)],
                      dict(steady(2), slurm=slurm(line("demo-cpu-0"), admin)), NOW)
    assert p.slurm.drain == {names.REASON_MAINTENANCE: ["demo-cpu-0"]}


def test_records_of_pods_gone_for_good_are_deleted_unless_busy():
    obs = steady(2)
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2"),
                         line("demo-cpu-3", "ALLOCATED", cpus_alloc=2), line("demo-gone-0"), line("other-x-0"))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    # demo-cpu-3 still runs a job (a later pass deletes it); other-x-0 is no pod of this cluster's sets.
    assert p.slurm.delete_nodes == ["demo-cpu-2", "demo-gone-0"]


def test_a_node_whose_pod_exists_is_never_forgotten():
    obs = steady(2, extra_pods=("demo-cpu-2",))
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-cpu-1"),
                         line("demo-cpu-2", "IDLE+DRAIN", names.REASON_SCALE_IN))
    assert converge.plan(cluster(), [nodeset(2)], obs, NOW).slurm.delete_nodes == []


def test_maintenance_drains_first_then_scales_everything_to_zero():
    nodes = [line("demo-cpu-0"), line("demo-cpu-1", "MIXED", cpus_alloc=1)]
    p = converge.plan(cluster(maintenance=True), [nodeset(2)], dict(steady(2), slurm=slurm(*nodes)), NOW)
    assert p.slurm.drain == {names.REASON_MAINTENANCE: ["demo-cpu-0", "demo-cpu-1"]}
    assert all(m["spec"]["replicas"] > 0 for m in p.objects.manifests if m["kind"] == "StatefulSet")
    assert not p.report.ready and p.report.requeue_after == model.REQUEUE_DRAINING
    drained = [line("demo-cpu-0", "IDLE+DRAIN", names.REASON_MAINTENANCE),
               line("demo-cpu-1", "IDLE+DRAIN", names.REASON_MAINTENANCE)]
    p = converge.plan(cluster(maintenance=True), [nodeset(2)], dict(steady(2), slurm=slurm(*drained)), NOW)
    assert all(m["spec"]["replicas"] == 0 for m in p.objects.manifests if m["kind"] == "StatefulSet")
    # Told zero is not there yet: the phase (which a restore in place waits for) comes once the pods are gone.
    assert p.report.phase == model.PHASE_PROGRESSING
    assert not p.report.ready
    assert p.report.requeue_after == model.REQUEUE_PROGRESSING
    assert p.report.message == ("maintenance: waiting for the pods of demo-controller (1), demo-cpu (2), "
                                "demo-login (1) to stop")
    gone = dict((n, sts(n, 0)) for n in steady(2)["statefulsets"])
    p = converge.plan(cluster(maintenance=True), [nodeset(2)], {"statefulsets": gone, "pods": {}, "slurm": None}, NOW)
    assert p.report.phase == model.PHASE_MAINTENANCE and p.report.ready and not p.slurm.delete_nodes


def test_maintenance_with_the_controller_already_down_needs_no_slurm():
    obs = steady(2)
    obs["statefulsets"]["demo-controller"] = sts("demo-controller", 0)
    p = converge.plan(cluster(maintenance=True), [nodeset(2)], dict(obs, slurm=None), NOW)
    assert all(m["spec"]["replicas"] == 0 for m in p.objects.manifests if m["kind"] == "StatefulSet")


def _slurm_user(plan):
    conf = next(m for m in plan.objects.manifests if m["kind"] == "ConfigMap"
                and m["metadata"]["name"] == names.slurm_config_name("demo"))["data"]["slurm.conf"]
    controller = next(m for m in plan.objects.manifests if m["kind"] == "StatefulSet"
                      and m["metadata"]["name"] == names.controller_name("demo"))
    annotated = controller["spec"]["template"]["metadata"]["annotations"][names.ANNOTATION_SLURM_USER]
    in_conf = [ln.split("=", 1)[1] for ln in conf.splitlines() if ln.startswith("SlurmUser=")]
    assert in_conf == [annotated], (in_conf, annotated)
    return annotated


def test_a_cluster_of_an_older_release_keeps_its_slurmuser_while_workers_run():
    """slurmd accepts RPCs from root and its own configuration's SlurmUser only: slurmctld of a release before the
    annotation (root) stays root while a worker runs, and says why; new clusters run it as slurm."""
    assert _slurm_user(converge.plan(cluster(), [nodeset(2)], {"statefulsets": {}, "pods": {}}, NOW)) == "slurm"
    obs = steady(2)
    obs["statefulsets"]["demo-controller"] = sts("demo-controller", 1, slurm_user=None)
    idle = slurm(line("demo-cpu-0"), line("demo-cpu-1"))
    p = converge.plan(cluster(), [nodeset(2)], dict(obs, slurm=idle), NOW)
    assert _slurm_user(p) == "root" and "spec.maintenance" in p.report.slurm_user_kept
    # Scaling out, health, anything else still converges meanwhile.
    p = converge.plan(cluster(), [nodeset(3)], dict(obs, slurm=idle), NOW)
    assert _slurm_user(p) == "root" and rendered_replicas(p, "demo-cpu") == 3
    # Maintenance: drained and at zero, the pass that scales everything down switches it.
    drained = slurm(line("demo-cpu-0", "IDLE+DRAIN", names.REASON_MAINTENANCE),
                    line("demo-cpu-1", "IDLE+DRAIN", names.REASON_MAINTENANCE))
    busy = slurm(line("demo-cpu-0", "MIXED", cpus_alloc=1), line("demo-cpu-1"))
    assert _slurm_user(converge.plan(cluster(maintenance=True), [nodeset(2)], dict(obs, slurm=busy), NOW)) == "root"
    p = converge.plan(cluster(maintenance=True), [nodeset(2)], dict(obs, slurm=drained), NOW)
    assert _slurm_user(p) == "slurm" and p.report.slurm_user_kept is None
    # No worker at all (every NodeSet at zero): nothing to strand.
    obs["statefulsets"]["demo-cpu"] = sts("demo-cpu", 0)
    assert _slurm_user(converge.plan(cluster(), [nodeset(0)], dict(obs, slurm=idle), NOW)) == "slurm"
    # An annotation edited to anything but the two users a release rendered is not believed (it would go into
    # slurm.conf): read as the current one.
    obs = steady(2)
    obs["statefulsets"]["demo-controller"] = sts("demo-controller", 1, slurm_user="root\nProlog=/tmp/x")
    p = converge.plan(cluster(), [nodeset(2)], dict(obs, slurm=idle), NOW)
    assert _slurm_user(p) == "slurm" and p.report.slurm_user_kept is None
    # Once switched, it stays (the annotation says slurm).
    assert _slurm_user(converge.plan(cluster(), [nodeset(2)], dict(steady(2), slurm=idle), NOW)) == "slurm"


def test_leaving_maintenance_resumes_only_our_maintenance_drains():
    nodes = [line("demo-cpu-0", "IDLE+DRAIN", names.REASON_MAINTENANCE), line("demo-cpu-1", "IDLE+DRAIN", "admin")]
    p = converge.plan(cluster(), [nodeset(2)], dict(steady(2), slurm=slurm(*nodes)), NOW)
    assert p.slurm.resume == ["demo-cpu-0"]


def test_one_invalid_nodeset_is_left_alone_and_the_others_converge():
    bad = nodeset(2, name="gpu", partitions=["nope"])
    obs = steady(2)
    obs["statefulsets"]["demo-gpu"] = sts("demo-gpu", 2)
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-gpu-0"), line("demo-gpu-1"))
    p = converge.plan(cluster(), [nodeset(2), bad], obs, NOW)
    assert "gpu" in p.definition.invalid and "spec.partitions[0]" in p.definition.invalid["gpu"]
    assert not any(m["metadata"]["name"] == "demo-gpu" for m in p.objects.manifests)
    assert ("StatefulSet", "demo-gpu") in p.objects.keep
    assert p.slurm.delete_nodes == []  # its nodes keep their records
    assert not p.report.ready


def test_an_invalid_cluster_raises_with_the_field():
    with pytest.raises(SpecErrors) as err:
        converge.plan(cluster(slurm={"slurmConf": {"SlurmctldHost": "x"}}), [nodeset(1)], {}, NOW)
    assert "spec.slurm.slurmConf" in str(err.value)


def test_block_topology_with_a_fixed_nodeset_refuses_the_cluster_before_anything_is_rendered():
    # The cluster's CEL cannot see its NodeSets: the planner refuses it, naming the field, and renders nothing.
    topology = {"plugin": "block", "levels": ["nvidia.com/gpu.clique"]}
    elastic = make_nodeset("gpu", {"elastic": {"maxNodes": 2}}, uid="n-uid-gpu")
    with pytest.raises(SpecErrors) as err:
        converge.plan(cluster(topology=topology), [elastic, nodeset(1)], steady(1), NOW)
    assert [e.path for e in err.value.errors] == ["spec.topology.plugin"]
    assert "cpu (replicas)" in str(err.value)
    p = converge.plan(cluster(topology=topology), [elastic], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    conf = next(m for m in p.objects.manifests if m["kind"] == "ConfigMap" and "topology.conf" in m.get("data", {}))
    assert "BlockName=unknown Nodes=demo-gpu-[0-1]\nBlockSizes=2\n" in conf["data"]["topology.conf"]


def test_a_nodeset_being_deleted_drains_then_goes():
    leaving = nodeset(2, name="old")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    obs = steady(1)
    obs["statefulsets"]["demo-old"] = sts("demo-old", 2)
    obs["pods"].update({"demo-old-0": {}, "demo-old-1": {}})
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-old-0"), line("demo-old-1", "MIXED", cpus_alloc=1))
    p = converge.plan(cluster(), [nodeset(1), leaving], obs, NOW)
    assert p.slurm.drain == {names.REASON_SCALE_IN: ["demo-old-1", "demo-old-0"]}
    assert not any(m["metadata"]["name"] == "demo-old" for m in p.objects.manifests)
    assert ("StatefulSet", "demo-old") in p.objects.keep and p.pods.scale == {} and not p.objects.release
    # both drained and idle: scale to zero
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-old-0", "IDLE+DRAIN", names.REASON_SCALE_IN),
                         line("demo-old-1", "IDLE+DRAIN", names.REASON_SCALE_IN))
    p = converge.plan(cluster(), [nodeset(1), leaving], obs, NOW)
    assert p.pods.scale == {"demo-old": 0} and not p.objects.release
    # pods gone: forget the nodes, then release
    obs["statefulsets"]["demo-old"] = sts("demo-old", 0)
    del obs["pods"]["demo-old-0"], obs["pods"]["demo-old-1"]
    p = converge.plan(cluster(), [nodeset(1), leaving], obs, NOW)
    assert p.slurm.delete_nodes == ["demo-old-0", "demo-old-1"] and not p.objects.release
    obs["slurm"] = slurm(line("demo-cpu-0"))
    p = converge.plan(cluster(), [nodeset(1), leaving], obs, NOW)
    assert p.objects.release == ["old"] and p.report.ready


def test_split_errors_sorts_problems_by_owner():
    from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError

    cluster_errs, per = converge.split_errors([SpecError("spec.x", "a"), SpecError("nodesets[gpu].spec.y", "b")])
    assert [e.path for e in cluster_errs] == ["spec.x"] and list(per) == ["gpu"]


def test_a_removal_is_under_way_until_pods_and_node_records_are_gone():
    # The StatefulSet already shrank to 1; pod demo-cpu-1 is still terminating, its node still known.
    obs = steady(1, extra_pods=("demo-cpu-1",))
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", names.REASON_SCALE_IN))
    p = converge.plan(cluster(), [nodeset(1)], obs, NOW)
    assert not p.report.ready and p.report.underway == ["pods going: demo-cpu-1"] and p.slurm.delete_nodes == []
    assert p.report.requeue_after == model.REQUEUE_PROGRESSING
    # without Slurm's view (the operator's cache check) the terminating pod is still seen
    without_slurm = converge.plan(cluster(), [nodeset(1)], dict(obs, slurm=None), NOW)
    assert without_slurm.report.underway == ["pods going: demo-cpu-1"]
    # the pod is gone: its record is deleted, and one more look confirms
    obs = dict(steady(1), slurm=obs["slurm"])
    p = converge.plan(cluster(), [nodeset(1)], obs, NOW)
    assert p.slurm.delete_nodes == ["demo-cpu-1"]
    assert not p.report.ready
    assert p.report.requeue_after == model.REQUEUE_PROGRESSING
    p = converge.plan(cluster(), [nodeset(1)], dict(steady(1), slurm=slurm(line("demo-cpu-0"))), NOW)
    assert p.report.ready and p.report.requeue_after is None


# --- rolling update (worker StatefulSets are OnDelete) ------------------------------------------------------------
NEW = "demo-cpu-new"


def rolled(workers=2, revisions=None, ready=None, **sts_kw):
    """Observed state after a template change: the StatefulSet's update revision is NEW, pods as given."""
    obs = steady(workers)
    obs["statefulsets"]["demo-cpu"] = sts("demo-cpu", workers, revision=NEW, **sts_kw)
    for i in range(workers):
        rev = (revisions or {}).get(i, REV)
        obs["pods"]["demo-cpu-%d" % i] = pod("demo-cpu-%d" % i, rev, ready=(ready or {}).get(i, True))
    return obs


def test_workers_are_ondelete_so_a_template_change_replaces_no_pod_by_itself():
    p = converge.plan(cluster(), [nodeset(2)], steady(), NOW)
    worker = next(m for m in p.objects.manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-cpu")
    assert worker["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_an_outdated_idle_node_is_drained_first_one_at_a_time_highest_ordinal_first():
    obs = dict(rolled(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.slurm.drain == {names.REASON_UPDATE: ["demo-cpu-1"]}
    assert p.pods.delete_pods == [] and not p.report.ready
    assert any("rolling update, 0/2 nodes updated" in w for w in p.report.pending)
    assert p.report.nodesets["cpu"]["outdatedReplicas"] == 2 and p.report.nodesets["cpu"]["updatedReplicas"] == 0


def test_a_drained_idle_outdated_node_has_its_pod_replaced_and_no_second_node_is_touched():
    obs = dict(rolled(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", names.REASON_UPDATE)))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == [("demo-cpu-1", "uid-demo-cpu-1")]
    assert p.slurm.drain == {}


def test_a_node_with_a_job_is_never_replaced_by_default_however_long_it_runs():
    """A collection upgrade rolls every worker: by default the roll waits for each node's jobs, with no limit.
    What it waits for, and since when, is in the NodeSet's facts (its status)."""
    busy = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_UPDATE, when=NOW - 60, cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(2)], dict(rolled(), slurm=slurm(line("demo-cpu-0"), busy)), NOW)
    assert p.pods.delete_pods == [] and p.slurm.drain == {} and p.pods.give_up == []
    assert any("waiting for demo-cpu-1 to drain" in w for w in p.report.pending)
    assert p.report.nodesets["cpu"]["waitingFor"] == [{"node": "demo-cpu-1", "since": NOW - 60, "proceedAt": None,
                                                "jobs": None}]
    assert p.report.nodesets["cpu"]["note"] is None and p.nodes_with_jobs() == ["demo-cpu-1"]
    # A week later, with the NodeSet's scale-in timeout (30m, onDrainTimeout Proceed: the defaults) long past.
    late = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_UPDATE, when=NOW - 7 * 86400, cpus_alloc=1)
    for ns, timeout in ((nodeset(2), "30m"), (nodeset(2, drainTimeout="1m", onDrainTimeout="Proceed"), "1m")):
        p = converge.plan(cluster(), [ns], dict(rolled(), slurm=slurm(line("demo-cpu-0"), late)), NOW)
        assert p.pods.delete_pods == [] and p.pods.give_up == [] and p.report.requeue_after == model.REQUEUE_DRAINING
        # Not silently: a NodeSet that may count on the old behaviour is told why the roll still waits.
        note = p.report.nodesets["cpu"]["note"]
        assert note.startswith("waiting past spec.drainTimeout (%s), which no longer ends a rolling update"
                               % timeout) and "spec.updateStrategy.proceedAfter" in note
        assert any(note in w for w in p.report.pending)
    p = converge.plan(cluster(), [nodeset(2, onDrainTimeout="Wait")],
                      dict(rolled(), slurm=slurm(line("demo-cpu-0"), late)), NOW)
    assert p.pods.delete_pods == [] and p.report.nodesets["cpu"]["note"] is None


def test_with_proceed_after_a_node_is_replaced_with_its_jobs_only_once_that_long_drained():
    strategy = {"maxUnavailable": 1, "proceedAfter": "2h"}
    busy = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_UPDATE, when=NOW - 7199, cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(2, updateStrategy=strategy)],
                      dict(rolled(), slurm=slurm(line("demo-cpu-0"), busy)), NOW)
    assert p.pods.delete_pods == [] and p.pods.give_up == []
    assert p.report.nodesets["cpu"]["waitingFor"] == [{"node": "demo-cpu-1", "since": NOW - 7199, "proceedAt": NOW + 1,
                                                "jobs": None}]
    assert p.report.requeue_after == 1  # looked at again when it is due, not a requeue period later
    assert any("replaced with its jobs at 2023-11-14T22:13:21Z (spec.updateStrategy.proceedAfter)" in w
               for w in p.report.pending)
    due = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_UPDATE, when=NOW - 7200, cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(2, updateStrategy=strategy)],
                      dict(rolled(), slurm=slurm(line("demo-cpu-0"), due)), NOW)
    assert p.pods.delete_pods == [("demo-cpu-1", "uid-demo-cpu-1")] and p.report.nodesets["cpu"]["waitingFor"] == []
    assert [(g["node"], g["why"], g["setting"], g["value"], g["since"], g["pod_uid"], g["nodeset_uid"])
            for g in p.pods.give_up] == [("demo-cpu-1", "rolling update", "spec.updateStrategy.proceedAfter", "2h",
                                     NOW - 7200, "uid-demo-cpu-1", "n-uid-cpu")]
    assert p.nodes_with_jobs() == ["demo-cpu-1"]
    p = p.with_jobs({"demo-cpu-1": ["7"]})
    assert model.give_up_event(p.pods.give_up[0])[2] == (
        "Pod demo-cpu-1 replaced by the rolling update: its Slurm node was drained at 2023-11-14T20:13:20Z, longer "
        "ago than spec.updateStrategy.proceedAfter: 2h; job(s) 7 still running on it are killed")
    # Jobs not known (slurmctld did not name them), or gone meanwhile: said so.
    assert model.give_up_event(dict(p.pods.give_up[0], jobs=None))[2].endswith("its jobs still running are killed")
    assert model.give_up_event(dict(p.pods.give_up[0], jobs=[]))[2].endswith("no job was left on it")
    many = model.give_up_event(dict(p.pods.give_up[0], jobs=[str(n) for n in range(400)]))[2]
    assert many.endswith("job(s) 0, 1, 2, %s, 49 and 350 more still running on it are killed"
                         % ", ".join(str(n) for n in range(3, 49))) and len(many) < 1024
    # An admin's drain is never given up on, whatever the setting.
    admin = line("demo-cpu-1", "MIXED+DRAIN", "admin: disk check", when=NOW - 86400, cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(2, updateStrategy=strategy)],
                      dict(rolled(), slurm=slurm(line("demo-cpu-0"), admin)), NOW)
    assert p.pods.delete_pods == [] and p.pods.give_up == []


def test_a_node_drained_by_this_pass_with_jobs_is_waited_for_from_now():
    running = line("demo-cpu-1", "MIXED", cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(2, updateStrategy={"maxUnavailable": 1, "proceedAfter": "90s"})],
                      dict(rolled(), slurm=slurm(line("demo-cpu-0"), running)), NOW)
    assert p.slurm.drain == {names.REASON_UPDATE: ["demo-cpu-1"]}
    assert p.report.nodesets["cpu"]["waitingFor"] == [{"node": "demo-cpu-1", "since": NOW, "proceedAt": NOW + 90,
                                                "jobs": None}]
    p = p.with_jobs({"demo-cpu-1": ["3", "4_1"], "demo-cpu-0": []})
    assert p.report.nodesets["cpu"]["waitingFor"][0]["jobs"] == ["3", "4_1"]
    # An idle node drained now has nothing to wait for.
    p = converge.plan(cluster(), [nodeset(2)], dict(rolled(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1"))),
                      NOW)
    assert p.slurm.drain == {names.REASON_UPDATE: ["demo-cpu-1"]} and p.report.nodesets["cpu"]["waitingFor"] == []


def test_maintenance_and_removal_give_up_jobs_only_past_drain_timeout_and_say_so():
    busy = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_MAINTENANCE, when=NOW - 601, cpus_alloc=1)
    obs = dict(steady(2), slurm=slurm(line("demo-cpu-0", "IDLE+DRAIN", names.REASON_MAINTENANCE), busy))
    p = converge.plan(cluster(maintenance=True), [nodeset(2, drainTimeout="10m")], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 0 and rendered_replicas(p, "demo-controller") == 0
    assert [(g["node"], g["why"]) for g in p.pods.give_up] == [("demo-cpu-1", "maintenance")]
    p = converge.plan(cluster(maintenance=True), [nodeset(2, drainTimeout="11m")], obs, NOW)
    assert rendered_replicas(p, "demo-cpu") == 2 and p.pods.give_up == []
    leaving = nodeset(2, drainTimeout="10m")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    busy = line("demo-cpu-1", "MIXED+DRAIN", names.REASON_SCALE_IN, when=NOW - 601, cpus_alloc=1)
    obs = dict(steady(2), slurm=slurm(line("demo-cpu-0"), busy))
    p = converge.plan(cluster(), [leaving], obs, NOW)
    assert [(g["node"], g["why"]) for g in p.pods.give_up] == [("demo-cpu-1", "removal")]


def test_a_replaced_node_is_resumed_once_its_new_pod_is_ready_and_the_next_one_drains():
    obs = dict(rolled(revisions={1: NEW}), slurm=slurm(line("demo-cpu-0"),
                                                       line("demo-cpu-1", "IDLE+DRAIN", names.REASON_UPDATE)))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.slurm.resume == ["demo-cpu-1"]
    assert p.slurm.drain == {names.REASON_UPDATE: ["demo-cpu-0"]}
    # Not ready yet (slurmd not registered or not answering): still drained, and it holds the only slot.
    obs = dict(rolled(revisions={1: NEW}, ready={1: False}),
               slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", names.REASON_UPDATE)))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.slurm.resume == [] and p.slurm.drain == {}


def test_max_unavailable_drains_that_many_at_once():
    obs = dict(rolled(3), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2")))
    p = converge.plan(cluster(), [nodeset(3, updateStrategy={"maxUnavailable": 2})], obs, NOW)
    assert p.slurm.drain == {names.REASON_UPDATE: ["demo-cpu-2", "demo-cpu-1"]}


def test_an_admin_drain_is_never_overwritten_and_its_node_waits_for_its_jobs():
    admin = line("demo-cpu-1", "MIXED+DRAIN", "admin: disk check", cpus_alloc=1)
    p = converge.plan(cluster(), [nodeset(2)], dict(rolled(), slurm=slurm(line("demo-cpu-0"), admin)), NOW)
    assert p.slurm.drain == {} and p.pods.delete_pods == [] and p.slurm.resume == []
    assert any("demo-cpu-1 drained by an admin, with jobs" in w for w in p.report.pending)
    # Idle under the admin's drain: replaced (the drain and its reason stay on the Slurm node).
    admin = line("demo-cpu-1", "IDLE+DRAIN", "admin: disk check")
    p = converge.plan(cluster(), [nodeset(2)], dict(rolled(), slurm=slurm(line("demo-cpu-0"), admin)), NOW)
    assert p.pods.delete_pods == [("demo-cpu-1", "uid-demo-cpu-1")] and p.slurm.resume == []


def test_a_pod_whose_node_slurm_does_not_know_is_replaced_at_once():
    p = converge.plan(cluster(), [nodeset(2)], dict(rolled(), slurm=slurm(line("demo-cpu-0"))), NOW)
    assert p.pods.delete_pods == [("demo-cpu-1", "uid-demo-cpu-1")] and p.slurm.drain == {}


def test_without_slurm_nothing_is_replaced_and_a_stale_statefulset_status_is_waited_for():
    p = converge.plan(cluster(), [nodeset(2)], dict(rolled(), slurm=None), NOW)
    assert p.pods.delete_pods == [] and p.slurm.drain == {}
    assert any("2 outdated nodes wait for slurmctld" in w for w in p.report.underway)
    obs = dict(rolled(generation=2, observed=1), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == [] and p.slurm.drain == {}
    assert any("waiting for the StatefulSet's new revision" in w for w in p.report.pending)


def test_a_pod_already_being_deleted_counts_against_max_unavailable():
    obs = rolled()
    obs["pods"]["demo-cpu-1"] = pod("demo-cpu-1", deleting=True)
    p = converge.plan(cluster(), [nodeset(2)], dict(obs, slurm=slurm(line("demo-cpu-0"),
                                                                    line("demo-cpu-1", "IDLE+DRAIN",
                                                                         names.REASON_UPDATE))), NOW)
    assert p.slurm.drain == {} and p.pods.delete_pods == []


def test_an_up_to_date_set_is_reported_as_such():
    from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert p.report.ready
    out = st.nodeset_status({}, nodeset(2), p, p.report.nodesets["cpu"], None, "2026-11-24T00:00:00Z")
    cond = next(c for c in out["conditions"] if c["type"] == "UpToDate")
    assert cond["status"] == "True" and out["updatedReplicas"] == 2 and out["outdatedReplicas"] == 0
    obs = dict(rolled(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    out = st.nodeset_status({}, nodeset(2), p, p.report.nodesets["cpu"], None, "2026-11-24T00:00:00Z")
    cond = next(c for c in out["conditions"] if c["type"] == "UpToDate")
    assert cond["status"] == "False" and cond["reason"] == "RollingUpdate" and out["outdatedReplicas"] == 2


def test_a_pass_that_applies_a_new_template_says_a_rolling_update_follows():
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    obs["statefulsets"]["demo-cpu"] = sts("demo-cpu", 2, template_hash="0123456789abcdef")
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    assert not p.report.ready and p.slurm.drain == {} and p.pods.delete_pods == []
    assert any("NodeSet cpu: new pod template; its rolling update follows" in w for w in p.report.pending)
    # Settings outside the pod template (drainTimeout, updateStrategy) roll nothing.
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    p = converge.plan(cluster(), [nodeset(2, drainTimeout="1h", updateStrategy={"maxUnavailable": 2})], obs, NOW)
    assert p.report.ready


# --- login pods: OnDelete, replaced once nobody is logged in or after the grace period ---------------------------
def login_rolled(replicas=1, revisions=None, since=NOW - 60, ready=None):
    """Observed state after a login template change: the login StatefulSet's update revision is NEW."""
    obs = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")))
    login = sts("demo-login", replicas, revision=NEW)
    login["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_SINCE] = time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
    obs["statefulsets"]["demo-login"] = login
    for i in range(replicas):
        obs["pods"]["demo-login-%d" % i] = pod("demo-login-%d" % i, (revisions or {}).get(i, REV),
                                               ready=(ready or {}).get(i, True))
    return obs


def login_cluster(replicas=1, grace="10m"):
    return cluster(login={"replicas": replicas, "updateGracePeriod": grace})


def test_login_pods_are_ondelete_and_carry_when_their_template_changed():
    p = converge.plan(cluster(), [nodeset(2)], steady(), NOW)
    login = next(m for m in p.objects.manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-login")
    assert login["spec"]["updateStrategy"] == {"type": "OnDelete"}
    # No live StatefulSet, or another template: the change starts now; the same template: the live stamp stays.
    assert login["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_SINCE] == "2023-11-14T22:13:20Z"
    obs = login_rolled(since=NOW - 3600)
    p = converge.plan(cluster(), [nodeset(2)], obs, NOW)
    login = next(m for m in p.objects.manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-login")
    assert login["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_SINCE] == "2023-11-14T21:13:20Z"


def test_an_outdated_login_pod_without_sessions_is_replaced_at_once():
    obs = dict(login_rolled(), login_sessions={"demo-login-0": 0})
    p = converge.plan(login_cluster(), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == [("demo-login-0", "uid-demo-login-0")]
    assert not p.report.ready


@pytest.mark.parametrize("sessions", [2, None])
def test_an_outdated_login_pod_with_sessions_waits_for_them_or_the_grace_period(sessions):
    obs = dict(login_rolled(since=NOW - 60), login_sessions={"demo-login-0": sessions})
    p = converge.plan(login_cluster(grace="10m"), [nodeset(2)], obs, NOW)
    # Users' sessions hold nothing back: the cluster serves (Ready, nothing pending for site.yml to wait for);
    # the replacement is deferred and looked at again.
    assert p.pods.delete_pods == [] and p.report.ready and p.report.pending == []
    shown = "2 open session(s)" if sessions else "sessions not known yet"
    waiting = "login: demo-login-0 has %s; replaced when they end or at 2023-11-14T22:22:20Z" % shown
    assert p.report.deferred == [waiting]
    assert waiting in p.report.message
    assert p.report.requeue_after == model.REQUEUE_DRAINING
    assert p.report.login_outdated == 1
    # The grace period is over: the pod goes, sessions or not.
    obs = dict(login_rolled(since=NOW - 600), login_sessions={"demo-login-0": sessions})
    p = converge.plan(login_cluster(grace="10m"), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == [("demo-login-0", "uid-demo-login-0")]


def test_login_pods_are_replaced_one_at_a_time_highest_ordinal_first():
    obs = dict(login_rolled(replicas=2), login_sessions={"demo-login-0": 0, "demo-login-1": 0})
    p = converge.plan(login_cluster(replicas=2), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == [("demo-login-1", "uid-demo-login-1")]
    # Its replacement is not ready yet: the next one waits.
    obs = dict(login_rolled(replicas=2, revisions={1: NEW}, ready={1: False}),
               login_sessions={"demo-login-0": 0})
    p = converge.plan(login_cluster(replicas=2), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == []
    assert any("waiting for a replaced pod to be ready" in w for w in p.report.pending)


def test_a_login_template_change_waits_for_the_statefulsets_new_revision_and_leaves_workers_alone():
    obs = dict(login_rolled(), login_sessions={"demo-login-0": 0})
    obs["statefulsets"]["demo-login"]["metadata"]["annotations"][names.ANNOTATION_TEMPLATE_HASH] = "0" * 16
    p = converge.plan(login_cluster(), [nodeset(2)], obs, NOW)
    assert p.pods.delete_pods == [] and p.slurm.drain == {}
    assert any("login: new pod template; its rolling update follows" in w for w in p.report.pending)
    # Up to date: nothing to do for the login pods.
    p = converge.plan(cluster(), [nodeset(2)], dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1"))),
                      NOW)
    assert p.pods.delete_pods == [] and not any(w.startswith("login") for w in p.report.pending)
    assert p.report.login_outdated == 0 and p.report.deferred == []


# --- projection: Slurm node state onto the worker pods, Kubernetes node state onto Slurm ---------------------------
def placed(obs, hosts):
    for name, host in hosts.items():
        obs["pods"][name]["spec"] = {"nodeName": host}
    return obs


def test_each_worker_pod_gets_its_slurm_node_state_as_a_condition():
    obs = dict(steady(3), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", "bad DIMM"),
                                      line("demo-cpu-2", "MIXED", cpus_alloc=1)))
    p = converge.plan(cluster(), [nodeset(3)], obs, NOW)
    conds = p.report.pod_conditions
    assert set(conds) == {"demo-cpu-0", "demo-cpu-1", "demo-cpu-2"}  # workers only: not the login pod
    assert conds["demo-cpu-0"] == {"type": "SlurmNodeReady", "status": "True", "reason": "Idle",
                                   "message": "Slurm node IDLE+DYNAMIC_NORM"}
    assert conds["demo-cpu-1"] == {"type": "SlurmNodeReady", "status": "False", "reason": "Drained",
                                   "message": "Slurm node IDLE+DRAIN+DYNAMIC_NORM: bad DIMM"}
    assert conds["demo-cpu-2"]["reason"] == "Mixed" and conds["demo-cpu-2"]["status"] == "True"
    facts = p.report.nodesets["cpu"]
    assert (facts["idle"], facts["mixed"], facts["drained"], facts["allocated"], facts["down"]) == (1, 1, 1, 0, 0)


def test_a_pod_whose_node_did_not_register_says_so_and_without_slurm_nothing_is_projected():
    obs = dict(steady(2), slurm=slurm(line("demo-cpu-0")))
    conditions = converge.plan(cluster(), [nodeset(2)], obs, NOW).report.pod_conditions
    assert conditions["demo-cpu-1"]["reason"] == "NotRegistered"
    assert converge.plan(cluster(), [nodeset(2)], dict(steady(2), slurm=None), NOW).report.pod_conditions == {}


CORDON = {"healthChecks": {"kubernetesNodes": {"drainCordoned": True, "drainOnConditions": ["GpuProblem"]}}}


def test_a_cordoned_kubernetes_node_drains_the_slurm_nodes_of_its_pods_and_uncordoning_resumes_them():
    obs = placed(dict(steady(3), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1"), line("demo-cpu-2"))),
                 {"demo-cpu-0": "k1", "demo-cpu-1": "k1", "demo-cpu-2": "k2"})
    obs["k8s_nodes"] = {"k1": {"unschedulable": True, "conditions": {}},
                        "k2": {"unschedulable": False, "conditions": {"GpuProblem": "False"}}}
    p = converge.plan(cluster(**CORDON), [nodeset(3)], obs, NOW)
    assert p.slurm.drain == {names.REASON_NODE_CORDONED: ["demo-cpu-0", "demo-cpu-1"]} and not p.slurm.resume
    # Kubernetes is told Slurm as the pass leaves it: drained, in the condition and in the counts.
    assert p.report.pod_conditions["demo-cpu-0"]["reason"] == "Drained"
    assert p.report.pod_conditions["demo-cpu-2"]["reason"] == "Idle"
    assert (p.report.nodesets["cpu"]["drained"], p.report.nodesets["cpu"]["idle"]) == (2, 1)
    # Drained: nothing more to do while k1 stays cordoned; uncordoned: resumed.
    obs["slurm"] = slurm(line("demo-cpu-0", "IDLE+DRAIN", "soperator: node cordoned"),
                         line("demo-cpu-1", "IDLE+DRAIN", "soperator: node cordoned"), line("demo-cpu-2"))
    assert not converge.plan(cluster(**CORDON), [nodeset(3)], obs, NOW).slurm.any
    obs["k8s_nodes"]["k1"]["unschedulable"] = False
    p = converge.plan(cluster(**CORDON), [nodeset(3)], obs, NOW)
    assert p.slurm.resume == ["demo-cpu-0", "demo-cpu-1"] and not p.slurm.drain
    assert p.report.pod_conditions["demo-cpu-0"]["status"] == "True" and p.report.nodesets["cpu"]["idle"] == 3


def test_a_listed_node_condition_drains_and_an_admin_drain_is_never_touched():
    obs = placed(dict(steady(2), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", "bad DIMM"))),
                 {"demo-cpu-0": "k1", "demo-cpu-1": "k1"})
    obs["k8s_nodes"] = {"k1": {"unschedulable": False, "conditions": {"GpuProblem": "True"}}}
    p = converge.plan(cluster(**CORDON), [nodeset(2)], obs, NOW)
    assert p.slurm.drain == {"soperator: node condition GpuProblem": ["demo-cpu-0"]}
    obs["k8s_nodes"]["k1"]["conditions"]["GpuProblem"] = "False"
    obs["slurm"] = slurm(line("demo-cpu-0", "IDLE+DRAIN", "soperator: health: gpu: 7 of 8 GPUs visible"),
                         line("demo-cpu-1", "IDLE+DRAIN", "bad DIMM"))
    p = converge.plan(cluster(**CORDON), [nodeset(2)], obs, NOW)
    assert not p.slurm.any  # the health program's drain and the admin's are theirs


def test_kubernetes_nodes_are_left_alone_unless_asked_and_an_unreadable_node_list_is_said():
    obs = placed(dict(steady(1), slurm=slurm(line("demo-cpu-0"))), {"demo-cpu-0": "k1"})
    obs["k8s_nodes"] = {"k1": {"unschedulable": True, "conditions": {}}}
    assert not converge.plan(cluster(), [nodeset(1)], obs, NOW).slurm.any
    obs["k8s_nodes"], obs["k8s_nodes_error"] = None, "cannot read Kubernetes nodes: nodes is forbidden"
    p = converge.plan(cluster(**CORDON), [nodeset(1)], obs, NOW)
    assert not p.slurm.any and p.report.ready
    assert "spec.healthChecks.kubernetesNodes: cannot read Kubernetes nodes: nodes is forbidden" in p.report.message


def test_a_scale_in_drain_wins_over_a_cordon():
    obs = placed(dict(steady(2), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1"))),
                 {"demo-cpu-0": "k1", "demo-cpu-1": "k1"})
    obs["k8s_nodes"] = {"k1": {"unschedulable": True, "conditions": {}}}
    p = converge.plan(cluster(**CORDON), [nodeset(1)], obs, NOW)
    assert p.slurm.drain == {names.REASON_SCALE_IN: ["demo-cpu-1"], names.REASON_NODE_CORDONED: ["demo-cpu-0"]}


EVICT = {"healthChecks": {"kubernetesNodes": {"evictUnhealthyAfter": "30m"}}}


def test_a_worker_unhealthy_past_the_deadline_and_idle_is_moved_to_another_node():
    sick = "soperator: health: gpu: 7 of 8 GPUs visible"
    obs = placed(dict(steady(3), slurm=slurm(line("demo-cpu-0", "IDLE+DRAIN", sick, when=NOW - 3600),
                                             line("demo-cpu-1", "IDLE+DRAIN", sick, when=NOW - 600),
                                             line("demo-cpu-2", "MIXED+DRAIN", sick, when=NOW - 3600, cpus_alloc=1))),
                 {"demo-cpu-0": "k1", "demo-cpu-1": "k2", "demo-cpu-2": "k3"})
    p = converge.plan(cluster(**EVICT), [nodeset(3)], obs, NOW)
    # only the idle one drained long enough; never one with a job; one per NodeSet a pass
    assert p.pods.evict == [("demo-cpu-0", "uid-demo-cpu-0", "k1", sick)]
    assert p.report.requeue_after == model.REQUEUE_PROGRESSING
    assert converge.plan(cluster(), [nodeset(3)], obs, NOW).pods.evict == []  # off by default


def test_an_admin_or_update_drain_never_moves_a_pod():
    obs = placed(dict(steady(2), slurm=slurm(line("demo-cpu-0", "IDLE+DRAIN", "bad DIMM", when=NOW - 36000),
                                             line("demo-cpu-1", "IDLE+DRAIN", "soperator: update", when=NOW - 36000))),
                 {"demo-cpu-0": "k1", "demo-cpu-1": "k1"})
    assert converge.plan(cluster(**EVICT), [nodeset(2)], obs, NOW).pods.evict == []


def test_switching_the_health_program_off_resumes_the_drains_it_left():
    health = "soperator: health: "
    obs = dict(steady(3), slurm=slurm(line("demo-cpu-0", "IDLE+DRAIN", health + "disk: /tmp full"),
                                      line("demo-cpu-1", "IDLE+DRAIN", health + "nccl: busbw 4.00 GB/s < 100"),
                                      line("demo-cpu-2", "IDLE+DRAIN", "bad DIMM")))
    checks_off = converge.plan(cluster(healthChecks={"enabled": False}), [nodeset(3)], obs, NOW)
    assert checks_off.slurm.resume == ["demo-cpu-0"]
    assert converge.plan(cluster(), [nodeset(3)], obs, NOW).slurm.resume == []  # on: the program resumes its own


def test_a_pass_validates_its_definition_once_and_the_renderers_trust_it(monkeypatch):
    """One validation per definition per pass (the trace: every call of the validator counted), whatever the modes:
    the renderers of the objects, of the elastic pods and of the every-node workers are given what the plan
    validated."""
    from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
    from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

    calls = []
    real = specs.validate_cluster_with_nodesets

    def counted(*args, **kwargs):
        calls.append(kwargs.get("policy"))
        return real(*args, **kwargs)

    monkeypatch.setattr(specs, "validate_cluster_with_nodesets", counted)
    monkeypatch.setattr(render, "validate_cluster_with_nodesets", counted)
    sets = [nodeset(2), nodeset(0, name="gpu", elastic={"maxNodes": 2}),
            nodeset(0, name="edge", placement={"everyNode": True})]
    observed = dict(steady(), slurm=slurm(line("demo-cpu-0"), line("demo-cpu-1")),
                    k8s_nodes={"k1": {"labels": {}, "unschedulable": False, "conditions": {"Ready": "True"}}})
    p = converge.plan(cluster(), sets, observed, NOW)
    assert len(calls) == 1, calls
    assert sorted(ns["metadata"]["name"] for ns in p.definition.valid_nodesets) == ["cpu", "edge", "gpu"]
    assert any(m["kind"] == "StatefulSet" and m["metadata"]["name"] == "demo-cpu" for m in p.objects.manifests)
