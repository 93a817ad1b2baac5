"""rolls.py alone: a NodeSet's outdated workers replaced one drained node at a time."""

from planning import NOW, context, line, pod, slurm, sts

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import decided, model, rolls

UPDATE = names.REASON_UPDATE
NEW = "rev-2"


def rolling(nodes, revisions, strategy=None, ready=True):
    """A NodeSet of len(revisions) workers whose StatefulSet's update revision is NEW."""
    live = sts("demo-cpu", len(revisions), revision=NEW)
    pods = dict(("demo-cpu-%d" % i, pod("demo-cpu-%d" % i, rev, ready)) for i, rev in enumerate(revisions))
    ctx = context(nodesets=[("cpu", {"replicas": len(revisions), "updateStrategy": strategy or {}})],
                  observed={"statefulsets": {"demo-cpu": live}, "pods": pods, "slurm": slurm(*nodes)})
    p = model.Draft()
    p.nodesets["cpu"] = {}
    p.manifests = [{"kind": "StatefulSet", "metadata": {"name": "demo-cpu", "annotations": {
        names.ANNOTATION_TEMPLATE_HASH: "h"}}}]
    rolls.plan_rolls(p, ctx, [(ctx.valid[0], "demo-cpu", live, len(revisions))])
    return p


def test_one_outdated_node_at_a_time_is_drained_highest_ordinal_first():
    p = rolling([line("demo-cpu-0"), line("demo-cpu-1")], ["rev-1", "rev-1"])
    assert p.drain == {UPDATE: ["demo-cpu-1"]}
    assert p.nodesets["cpu"]["updatedReplicas"] == 0 and p.nodesets["cpu"]["outdatedReplicas"] == 2


def test_max_unavailable_drains_more_at_once():
    p = rolling([line("demo-cpu-0"), line("demo-cpu-1")], ["rev-1", "rev-1"], {"maxUnavailable": 2})
    assert p.drain == {UPDATE: ["demo-cpu-1", "demo-cpu-0"]}


def test_a_drained_idle_outdated_pod_is_replaced_with_its_uid():
    p = rolling([line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN", UPDATE)], ["rev-1", "rev-1"])
    assert p.delete_pods == [("demo-cpu-1", "uid-demo-cpu-1")] and not p.drain


def test_jobs_are_waited_for_without_a_time_limit_by_default():
    p = rolling([line("demo-cpu-0", "MIXED+DRAIN", UPDATE, when=NOW - 86400, cpus_alloc=1)], ["rev-1"])
    assert p.delete_pods == [] and not p.give_up
    [waiting] = p.nodesets["cpu"]["waitingFor"]
    assert waiting == {"node": "demo-cpu-0", "since": NOW - 86400, "proceedAt": None, "jobs": None}
    # A NodeSet that counted on drainTimeout (onDrainTimeout: Proceed, 30m by default) is told why it still waits.
    assert "no longer ends a rolling update" in p.nodesets["cpu"]["note"]


def test_proceed_after_replaces_a_busy_node_once_its_drain_is_older_and_says_so():
    p = rolling([line("demo-cpu-0", "MIXED+DRAIN", UPDATE, when=NOW - 3600, cpus_alloc=1)], ["rev-1"],
                {"proceedAfter": "10m"})
    assert p.delete_pods == [("demo-cpu-0", "uid-demo-cpu-0")]
    # Set DOWN before its pod goes: Slurm 24.11 would keep the job RUNNING on the new pod's node otherwise.
    assert p.down == {UPDATE: ["demo-cpu-0"]} and decided.freeze(p).slurm.any
    assert [(g["node"], g["setting"], g["pod_uid"]) for g in p.give_up] == [
        ("demo-cpu-0", "spec.updateStrategy.proceedAfter", "uid-demo-cpu-0")]


def test_a_replaced_node_is_resumed_once_its_new_pod_serves():
    p = rolling([line("demo-cpu-0", "IDLE+DRAIN", UPDATE)], [NEW])
    assert p.resume == ["demo-cpu-0"] and p.nodesets["cpu"]["outdatedReplicas"] == 0


def test_a_node_set_down_with_its_jobs_is_resumed_once_its_new_slurmd_answers():
    # ReturnToService 0 or 1 keeps a node DOWN after its new slurmd registered: ours to resume.
    p = rolling([line("demo-cpu-0", "DOWN+DRAIN", UPDATE)], [NEW])
    assert p.resume == ["demo-cpu-0"] and not p.down
    # Not before it registered (the old one is not responding): the new pod must answer first.
    p = rolling([line("demo-cpu-0", "DOWN+DRAIN+NOT_RESPONDING", UPDATE)], [NEW])
    assert p.resume == []
    # Someone else's DOWN is never resumed.
    p = rolling([line("demo-cpu-0", "DOWN", "bad fan")], [NEW])
    assert p.resume == []


def test_an_admins_drain_with_jobs_is_theirs_to_finish():
    p = rolling([line("demo-cpu-0", "MIXED+DRAIN", "bad fan", cpus_alloc=1)], ["rev-1"])
    assert not p.delete_pods and not p.drain and "demo-cpu-0 drained by an admin, with jobs" in p.pending[0]


def test_a_template_this_pass_changes_waits_for_its_revision():
    ctx = context(observed={"statefulsets": {}, "pods": {}, "slurm": slurm()})
    p = model.Draft()
    p.manifests = [{"kind": "StatefulSet", "metadata": {"name": "demo-cpu", "annotations": {
        names.ANNOTATION_TEMPLATE_HASH: "new"}}}]
    rolls.plan_rolls(p, ctx, [(ctx.valid[0], "demo-cpu", sts("demo-cpu", 1, template_hash="old"), 1)])
    assert p.pending == ["NodeSet cpu: new pod template; its rolling update follows"] and not p.drain


def test_without_slurm_outdated_nodes_wait():
    live = sts("demo-cpu", 1, revision=NEW)
    ctx = context(observed={"statefulsets": {"demo-cpu": live}, "pods": {"demo-cpu-0": pod("demo-cpu-0", "rev-1")}})
    p = model.Draft()
    p.nodesets["cpu"] = {}
    assert rolls.roll(p, ctx.valid[0], "demo-cpu", live, 1, ctx.pods, None, NOW) == (0, 1)
    assert p.requeue_after == model.REQUEUE_SLURM_UNREACHABLE and not p.drain
