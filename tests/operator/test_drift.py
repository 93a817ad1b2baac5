"""The runtime's "is a run needed?" check against caches, with the collection's own renderer. Pure."""

import copy

import pytest
from resources import load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, model, projection
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from soperator_operator import drift

NOW = 1_700_000_000


def converged_state(replicas=2, ready=True):
    """A SlurmCluster and NodeSet as the API stores them once converged, and the caches of their objects."""
    cluster = make_cluster(uid="c-uid")
    cluster["metadata"].update(generation=3)
    nodeset = make_nodeset("cpu", {"replicas": replicas}, uid="n-uid")
    nodeset["metadata"].update(generation=7)
    plan = converge.plan(cluster, [nodeset], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    live = {}
    for desired in plan.objects.manifests:
        if desired["kind"] not in drift.CACHED_KINDS:  # Secrets and the jail claim: never listed, not cached
            continue
        obj = objects.with_applied_hash(desired)
        obj["metadata"].update(resourceVersion="11", uid="u-" + desired["metadata"]["name"])  # server fields
        if desired["kind"] == "StatefulSet":
            obj["spec"]["revisionHistoryLimit"] = 10                   # a defaulted field we never set
            obj["metadata"]["generation"] = 1
            revision = desired["metadata"]["name"] + "-r1"
            obj["status"] = {"replicas": obj["spec"]["replicas"], "readyReplicas": obj["spec"]["replicas"],
                             "observedGeneration": 1, "updateRevision": revision}
            for ordinal in range(obj["spec"]["replicas"]):
                name = "%s-%d" % (desired["metadata"]["name"], ordinal)
                live[("Pod", name)] = {"metadata": {"name": name, "labels": {model.REVISION_LABEL: revision}},
                                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        live[(desired["kind"], desired["metadata"]["name"])] = obj
    cluster["status"] = {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True" if ready else
                                                                  "False"}]}
    nodeset["status"] = {"observedGeneration": 7}
    return cluster, [nodeset], live


def check(cluster, nodesets, live, memo=None, lookup=None):
    if memo is None:  # the runtime's last run started from what the caches show now
        memo = drift.Memo(digest=drift.observed_digest(live))
    return drift.needs_run(cluster, nodesets, live, memo, NOW, lookup=lookup)


def test_a_converged_ready_cluster_needs_no_run():
    assert check(*converged_state()) is None


def test_a_new_generation_runs_unless_this_runtime_just_converged_it():
    cluster, nodesets, live = converged_state()
    cluster["metadata"]["generation"] = 4
    assert check(cluster, nodesets, live) == "generation 4 of the SlurmCluster"
    # The run wrote status, but the cache has not caught up yet: no second run for the same generation.
    memo = drift.Memo(generations=drift.generations(cluster, nodesets), ready=True,
                      digest=drift.observed_digest(live))
    assert check(cluster, nodesets, live, memo) is None


def test_a_nodeset_generation_and_a_nodeset_being_deleted_run():
    cluster, nodesets, live = converged_state()
    nodesets[0]["metadata"]["generation"] = 8
    assert check(cluster, nodesets, live) == "generation 8 of NodeSet cpu"
    cluster, nodesets, live = converged_state()
    nodesets[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert check(cluster, nodesets, live) == "NodeSet cpu is being deleted"


def test_a_cluster_that_never_becomes_ready_is_not_rerun_for_the_same_inputs():
    """No Slurm answers (kwok, an image that never pulls): the same pods and StatefulSets give the same plan and
    status, so neither an event nor a restarted operator (the digest read back from the status) runs it again."""
    cluster, nodesets, live = converged_state(ready=False)
    assert check(cluster, nodesets, live) is None
    restarted = drift.Memo()
    assert drift.needs_run(cluster, nodesets, live, restarted, NOW) == "pods or StatefulSets changed since the last run"
    cluster["status"][names.STATUS_RECONCILED_DIGEST] = drift.observed_digest(live)
    assert drift.needs_run(cluster, nodesets, live, restarted, NOW) is None


@pytest.mark.parametrize("change", [
    lambda pod: pod["status"]["conditions"][0].update(status="False"),       # readiness, the event Slurm sends
    lambda pod: pod["status"].update(phase="Failed"),
    lambda pod: pod["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
    lambda pod: pod["metadata"].update(uid="replaced"),
])
def test_a_pod_that_changed_since_the_last_run_runs_the_role(change):
    cluster, nodesets, live = converged_state(ready=False)
    memo = drift.Memo(digest=drift.observed_digest(live))
    change(live[("Pod", "demo-cpu-0")])
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) == "pods or StatefulSets changed since the last run"


def test_statefulset_status_and_a_new_pod_change_the_digest():
    cluster, nodesets, live = converged_state()
    memo = drift.Memo(digest=drift.observed_digest(live))
    live[("StatefulSet", "demo-cpu")]["status"]["readyReplicas"] = 1
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) == "pods or StatefulSets changed since the last run"
    cluster, nodesets, live = converged_state()
    memo = drift.Memo(digest=drift.observed_digest(live))
    del live[("Pod", "demo-cpu-1")]
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) == "pods or StatefulSets changed since the last run"


def test_create_only_objects_are_looked_up_by_name_when_asked():
    cluster, nodesets, live = converged_state()
    asked = []

    def lookup(kind, name):
        asked.append((kind, name))
        return name != "demo-munge-key"

    assert check(cluster, nodesets, live, lookup=lookup) == "Secret demo-munge-key is missing"
    assert ("Secret", "demo-munge-key") in asked
    asked.clear()
    assert check(cluster, nodesets, live, lookup=lambda kind, name: asked.append((kind, name)) or True) is None
    assert sorted(asked) == [("PersistentVolumeClaim", "demo-jail"), ("Secret", "demo-munge-key"),
                             ("Secret", "demo-ssh-host-keys")]


def test_a_statefulset_scaled_by_hand_is_scaled_back_after_draining():
    cluster, nodesets, live = converged_state()
    live[("StatefulSet", "demo-cpu")]["spec"]["replicas"] = 5   # kubectl scale statefulset, behind our back
    assert check(cluster, nodesets, live) == "under way: NodeSet cpu: 5 -> 2 waits for slurmctld to answer " \
                                             "(to drain first)"


@pytest.mark.parametrize("edit", [
    lambda live: live[("ConfigMap", "demo-slurm-config")]["data"].update({"slurm.conf": "x"}),
    lambda live: live[("Service", "demo-login")]["metadata"]["annotations"].clear(),    # applied-hash gone
    lambda live: live[("StatefulSet", "demo-controller")]["spec"]["template"]["spec"]["containers"][0].update(
        image="evil:latest"),
])
def test_an_edited_object_runs(edit):
    cluster, nodesets, live = converged_state()
    edit(live)
    assert check(cluster, nodesets, live).endswith("differs")


def test_a_deleted_object_runs_and_a_stray_one_is_pruned():
    cluster, nodesets, live = converged_state()
    del live[("ConfigMap", "demo-slurm-config")]
    assert check(cluster, nodesets, live) == "ConfigMap demo-slurm-config is missing"
    cluster, nodesets, live = converged_state()
    stray = copy.deepcopy(live[("Service", "demo-cpu")])
    stray["metadata"]["name"] = "demo-old"
    live[("Service", "demo-old")] = stray
    assert check(cluster, nodesets, live) == "Service demo-old is no longer rendered"


def test_a_scale_in_in_progress_runs():
    cluster, nodesets, live = converged_state(replicas=3)
    nodesets[0]["spec"]["replicas"] = 1  # stored spec changed, generation observed by a run that kept 3 pods
    why = check(cluster, nodesets, live)
    assert why.startswith("under way: NodeSet cpu: 3 -> 1 waits for slurmctld")


def test_an_invalid_generation_judged_once_runs_no_more():
    cluster, nodesets, live = converged_state()
    cluster["metadata"]["generation"] = 9
    cluster["spec"]["slurm"] = {"maxNodeCount": 1}
    memo = drift.Memo(generations=drift.generations(cluster, nodesets), ready=False, invalid_generation=9)
    assert check(cluster, nodesets, live, memo) is None
    assert check(cluster, nodesets, live) == "generation 9 of the SlurmCluster"
    nodesets[0]["metadata"]["generation"] = 8  # a NodeSet edit may be the fix: look again
    assert check(cluster, nodesets, live, memo) == "generation 8 of NodeSet cpu"


def test_a_worker_pod_on_an_older_template_runs_the_role():
    """The rolling update needs Slurm (drain first): an outdated pod in the cache is work under way."""
    cluster, nodesets, live = converged_state()
    live[("Pod", "demo-cpu-1")]["metadata"]["labels"][model.REVISION_LABEL] = "demo-cpu-r0"
    assert check(cluster, nodesets, live) == (
        "under way: NodeSet cpu: 1 outdated nodes wait for slurmctld to answer (to drain first)")


def test_a_login_pod_waiting_for_its_sessions_is_work_under_way():
    """Issue 12's deferral (Ready stays True, the pod is replaced once nobody is logged in): from the caches it is
    work under way, so the check runs the role, whatever digest the last run recorded."""
    cluster, nodesets, live = converged_state()
    live[("Pod", "demo-login-0")]["metadata"]["labels"][model.REVISION_LABEL] = "demo-login-r0"
    memo = drift.Memo(digest=drift.observed_digest(live))
    why = drift.needs_run(cluster, nodesets, live, memo, NOW)
    assert why.startswith("under way: login: demo-login-0 has sessions not known yet; replaced when they end")


def test_status_is_no_input():
    """What the runtime (conditions, reconciledDigest), the converge (phase, counts) and the Slurm status loop
    (a NodeSet's counts, each worker pod's SlurmNodeReady condition) write changes neither the digest nor the
    decision: no run of ours feeds the next one."""
    cluster, nodesets, live = converged_state()
    memo = drift.Memo(digest=drift.observed_digest(live))
    before = drift.observed_digest(live)
    cluster["status"].update(phase="Ready", message="every pod ready", **{names.STATUS_RECONCILED_DIGEST: "other"})
    cluster["status"]["conditions"].append({"type": "Successful", "status": "True", "reason": "Successful"})
    cluster["metadata"]["resourceVersion"] = "99"
    nodesets[0]["status"].update(replicas=2, readyReplicas=2, nodesIdle=1, nodesAllocated=1, nodesDrained=0)
    nodesets[0]["metadata"]["resourceVersion"] = "98"
    for (kind, name), obj in live.items():
        if kind == "Pod" and name.startswith("demo-cpu-"):
            condition = projection.pod_condition(None)  # what a node slurmctld does not list gets
            obj["status"]["conditions"].append(dict(condition, lastTransitionTime="2026-01-01T00:00:00Z"))
    assert drift.observed_digest(live) == before
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None


def test_the_check_judges_with_the_installers_policy_and_the_digest_holds_it():
    """The gpu example's scratch is a host path: refused unless the installer allows its prefix, as the role's
    runs judge it. The policy is part of the inputs: an operator restarted with another one looks again."""
    cluster, nodesets = load_example("gpu-cluster.yaml")
    for obj in [cluster] + nodesets:  # every generation already judged: only the policy decides
        obj["metadata"]["generation"] = 1
        obj["status"] = {"observedGeneration": 1}
    allowed = policy.normalize({"allowed_host_path_prefixes": ["/mnt/local-nvme"]})
    live = {}
    assert drift.needs_run(cluster, nodesets, live, drift.Memo(), NOW, policy=policy.normalize({})) == "invalid spec"
    assert drift.needs_run(cluster, nodesets, live, drift.Memo(), NOW, policy=allowed) != "invalid spec"
    assert drift.observed_digest(live, allowed) != drift.observed_digest(live, policy.normalize({}))
    assert drift.observed_digest(live, allowed) == drift.observed_digest(live, policy.normalize(
        {"allowed_host_path_prefixes": ["/mnt/local-nvme"]}))


def grown_ahead(cluster, nodesets, live):
    return [(g.manifest["metadata"]["name"], g.was, g.replicas, g.manager)
            for g in drift.scale_outs(cluster, nodesets, live, NOW)]


def applied_by_the_converge(live):
    """The caches as the API server shows a converge's applies: its field manager owns what it applied, and every
    StatefulSet's controller is done (current revision = update revision)."""
    for (kind, _), obj in live.items():
        obj["metadata"]["managedFields"] = [{"manager": "soperator.slurm", "operation": "Apply",
                                             "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
        if kind == "StatefulSet":
            obj["status"]["currentRevision"] = obj["status"]["updateRevision"]
    return live


def test_a_nodeset_that_only_grows_has_its_statefulset_applied_ahead_of_the_run():
    cluster, nodesets, live = converged_state()
    applied_by_the_converge(live)
    nodesets[0]["spec"]["replicas"] = 4
    nodesets[0]["metadata"]["generation"] = 8
    assert grown_ahead(cluster, nodesets, live) == [("demo-cpu", 2, 4, "soperator.slurm")]
    assert check(cluster, nodesets, live) == "generation 8 of NodeSet cpu"  # and the role still runs


def test_no_scale_out_ahead_for_a_shrink_a_leaving_nodeset_or_a_deleting_cluster():
    cluster, nodesets, live = converged_state(replicas=3)
    applied_by_the_converge(live)
    nodesets[0]["spec"]["replicas"] = 1
    assert grown_ahead(cluster, nodesets, live) == []
    nodesets[0]["spec"]["replicas"] = 5
    nodesets[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert grown_ahead(cluster, nodesets, live) == []
    del nodesets[0]["metadata"]["deletionTimestamp"]
    cluster["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert grown_ahead(cluster, nodesets, live) == []


def test_a_cluster_whose_nodesets_do_not_grow_costs_no_plan(monkeypatch):
    cluster, nodesets, live = converged_state()
    applied_by_the_converge(live)

    def no_plan(*args, **kwargs):
        raise AssertionError("planned")

    monkeypatch.setattr(converge, "plan", no_plan)
    assert grown_ahead(cluster, nodesets, live) == []


def served(cluster, nodesets, live):
    """The objects as an API server serves them: every one with a uid and a resourceVersion."""
    for n, obj in enumerate([cluster, *nodesets, *live.values()]):
        obj["metadata"].setdefault("uid", "uid-%d" % n)
        obj["metadata"]["resourceVersion"] = str(100 + n)
    return cluster, nodesets, live


def counting_plans(monkeypatch):
    calls = []
    real = converge.plan

    def plan(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(converge, "plan", plan)
    return calls


def test_a_check_whose_inputs_have_the_same_versions_is_not_rendered_again(monkeypatch):
    cluster, nodesets, live = served(*converged_state())
    memo = drift.Memo(digest=drift.observed_digest(live))
    plans = counting_plans(monkeypatch)
    for _ in range(3):
        assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None
    assert len(plans) == 1
    # The create-only objects (not cached) are still looked up by every check that is given a lookup.
    asked = []
    assert drift.needs_run(cluster, nodesets, live, memo, NOW, lookup=lambda kind, name: asked.append(
        (kind, name)) or name != "demo-munge-key") == "Secret demo-munge-key is missing"
    assert len(plans) == 1 and ("Secret", "demo-munge-key") in asked


@pytest.mark.parametrize("change", [
    # an edit behind our back (any write gives the object a new resourceVersion)
    lambda c, n, live: live[("StatefulSet", "demo-controller")]["spec"]["template"]["spec"]["containers"][0].update(
        image="evil:latest"),
    lambda c, n, live: live[("ConfigMap", "demo-slurm-config")]["data"].update({"slurm.conf": "x"}),
    # a deletion, a stray object
    lambda c, n, live: live.pop(("Service", "demo-login")),
    lambda c, n, live: live.update({("Service", "demo-old"): dict(copy.deepcopy(live[("Service", "demo-cpu")]),
                                                                  metadata=dict(live[("Service", "demo-cpu")][
                                                                      "metadata"], name="demo-old", uid="o"))}),
    # a pod's event, a StatefulSet's status
    lambda c, n, live: live[("Pod", "demo-cpu-1")]["status"].update(conditions=[{"type": "Ready",
                                                                                   "status": "False"}]),
    lambda c, n, live: live[("StatefulSet", "demo-cpu")]["spec"].update(replicas=5),
])
def test_a_changed_live_object_is_judged_again(monkeypatch, change):
    cluster, nodesets, live = served(*converged_state())
    memo = drift.Memo(digest=drift.observed_digest(live))
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None
    plans = counting_plans(monkeypatch)
    change(cluster, nodesets, live)
    for obj in live.values():  # the API server gives every written object a new resourceVersion
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1000)
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is not None
    assert len(plans) == 1


def test_the_same_objects_with_a_new_version_of_one_are_rendered_again(monkeypatch):
    """A write that changes nothing the check reads (a label of a pod's) still renders again: only versions are
    compared, never contents."""
    cluster, nodesets, live = served(*converged_state())
    memo = drift.Memo(digest=drift.observed_digest(live))
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None
    plans = counting_plans(monkeypatch)
    cluster["metadata"]["resourceVersion"] = "999"   # e.g. the runtime's own status write
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None
    memo.digest = "another run's"                     # a run recorded other inputs
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) == "pods or StatefulSets changed since the last run"
    assert len(plans) == 2


def test_objects_without_a_resource_version_are_never_reused(monkeypatch):
    cluster, nodesets, live = converged_state()  # its pods have none
    memo = drift.Memo(digest=drift.observed_digest(live))
    plans = counting_plans(monkeypatch)
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None
    assert drift.needs_run(cluster, nodesets, live, memo, NOW) is None
    assert len(plans) == 2 and memo.in_sync is None
