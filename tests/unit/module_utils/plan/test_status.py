"""Status written from a converge plan: conditions, phase, NodeSet counts (pure)."""

from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.plan import decided, model
from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st

NOW = 1_700_000_000


def plan_for(ready=True, invalid=None, phase=None, facts=None, login_outdated=None, slurm_user_kept=None):
    p = model.Draft()
    p.login_outdated, p.slurm_user_kept = login_outdated, slurm_user_kept
    p.ready = ready
    p.phase = phase or (model.PHASE_READY if ready else model.PHASE_PROGRESSING)
    p.message = "all good" if ready else "waiting"
    p.invalid = invalid or {}
    p.nodesets = facts or {}
    return decided.freeze(p)


def conds(status):
    return {c["type"]: c for c in status["conditions"]}


def with_generation(obj, generation):
    obj["metadata"]["generation"] = generation
    return obj


def test_cluster_status_ready_and_then_progressing_moves_the_transition():
    cluster = with_generation(make_cluster(), 3)
    ready = st.cluster_status({"conditions": [{"type": "Custom", "status": "True"}]}, cluster, plan_for(), "T1")
    c = conds(ready)
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["observedGeneration"]) == ("True", "Reconciled", 3)
    assert c["Degraded"]["status"] == "False" and c["Custom"]["status"] == "True"
    assert ready["phase"] == "Ready" and ready["observedGeneration"] == 3
    later = st.cluster_status(ready, cluster, plan_for(ready=False), "T2")
    assert conds(later)["Ready"]["lastTransitionTime"] == "T2" and conds(later)["Ready"]["message"] == "waiting"
    again = st.cluster_status(ready, cluster, plan_for(), "T9")
    assert st.same_status(ready, again)  # only timestamps would change: no write


def test_maintenance_and_invalid_nodesets():
    cluster = with_generation(make_cluster(), 1)
    s = st.cluster_status({}, cluster, plan_for(phase=model.PHASE_MAINTENANCE), "T")
    assert conds(s)["Ready"]["reason"] == "Maintenance" and s["phase"] == "Maintenance"
    s = st.cluster_status({}, cluster, plan_for(invalid={"gpu": "spec.x: bad"}), "T")
    assert conds(s)["Degraded"]["status"] == "True" and "NodeSet gpu: spec.x: bad" in conds(s)["Degraded"]["message"]
    bad = st.invalid_cluster_status({}, cluster, "spec.y: wrong", "T")
    assert conds(bad)["Ready"]["reason"] == "InvalidSpec"
    assert bad["phase"] == "Invalid" and bad["observedGeneration"] == 1


def test_nodeset_status_counts_and_selector():
    nodeset = with_generation(make_nodeset("cpu"), 4)
    facts = {"statefulset": "demo-cpu", "replicas": 2, "desired": 2, "readyReplicas": 2, "currentReplicas": 2,
             "serving": 2, "idle": 1, "allocated": 1, "mixed": 0, "drained": 0, "down": 0, "leaving": False}
    s = st.nodeset_status({}, nodeset, plan_for(), facts, "a=b", "T")
    assert (s["replicas"], s["readyReplicas"], s["idle"], s["allocated"], s["selector"]) == (2, 2, 1, 1, "a=b")
    assert conds(s)["Ready"]["status"] == "True" and s["observedGeneration"] == 4
    shrinking = dict(facts, replicas=3, desired=1, currentReplicas=3, readyReplicas=3, serving=3)
    s = st.nodeset_status({}, nodeset, plan_for(ready=False), shrinking, "a=b", "T")
    assert conds(s)["Ready"]["status"] == "False" and "3 replicas kept until their nodes drain" in \
        conds(s)["Ready"]["message"]
    leaving = st.nodeset_status({}, nodeset, plan_for(), dict(facts, leaving=True), "a=b", "T")
    assert conds(leaving)["Ready"]["reason"] == "Removing"
    maint = st.nodeset_status({}, nodeset, plan_for(phase=model.PHASE_MAINTENANCE), facts, "a=b", "T")
    assert conds(maint)["Ready"]["reason"] == "Maintenance"
    invalid = st.nodeset_status({}, nodeset, plan_for(invalid={"cpu": "spec.replicas: bad"}), facts, "a=b", "T")
    assert conds(invalid)["Degraded"]["reason"] == "InvalidSpec" and "idle" not in invalid
    without_slurm = {k: v for k, v in facts.items() if k not in st.COUNT_KEYS}
    assert "idle" not in st.nodeset_status({}, nodeset, plan_for(), without_slurm, "", "T")


def test_what_a_rolling_update_waits_for_is_in_the_status_until_it_waits_no_more():
    nodeset = with_generation(make_nodeset("cpu"), 2)
    facts = {"statefulset": "demo-cpu", "replicas": 2, "desired": 2, "readyReplicas": 2, "currentReplicas": 2,
             "serving": 1, "leaving": False, "updatedReplicas": 0, "outdatedReplicas": 2, "note": None,
             "waitingFor": [{"node": "demo-cpu-1", "since": NOW - 60, "proceedAt": None, "jobs": ["12", "13"]},
                            {"node": "demo-cpu-0", "since": NOW, "proceedAt": NOW + 90, "jobs": None}]}
    s = st.nodeset_status({}, nodeset, plan_for(ready=False), facts, "a=b", "T")
    assert s["rollingUpdate"] == {
        "waitingFor": [{"node": "demo-cpu-1", "since": "2023-11-14T22:12:20Z", "jobs": ["12", "13"]},
                       {"node": "demo-cpu-0", "since": "2023-11-14T22:13:20Z", "proceedAt": "2023-11-14T22:14:50Z"}],
        "summary": "demo-cpu-1 (jobs 12,13) since 2023-11-14T22:12:20Z; demo-cpu-0 since 2023-11-14T22:13:20Z, "
                   "replaced at 2023-11-14T22:14:50Z"}
    up_to_date = conds(s)["UpToDate"]
    assert up_to_date["status"] == "False" and up_to_date["message"] == (
        "2 of 2 pods on an older template: each is replaced once its Slurm node is drained and idle; waiting for "
        + s["rollingUpdate"]["summary"])
    # The NodeSet's proceedAfter and the planner's note are in the condition too.
    proceeding = with_generation(make_nodeset("cpu", {"updateStrategy": {"proceedAfter": "90s"}}), 2)
    note = "waiting past spec.drainTimeout (30m), which no longer ends a rolling update: ..."
    message = conds(st.nodeset_status({}, proceeding, plan_for(ready=False), dict(facts, note=note), "a=b",
                                      "T"))["UpToDate"]["message"]
    assert "or 90s after its drain with its jobs (spec.updateStrategy.proceedAfter)" in message
    assert message.endswith("; " + note)
    # Not known this pass (slurmctld did not answer: no waitingFor): the last status stays.
    unknown = {k: v for k, v in facts.items() if k != "waitingFor"}
    assert st.nodeset_status(s, nodeset, plan_for(ready=False), unknown, "a=b", "T")["rollingUpdate"] == \
        s["rollingUpdate"]
    # Nothing to wait for any more: removed (null in the merge patch), and absent once the stored status has none.
    done = st.nodeset_status(s, nodeset, plan_for(), dict(facts, waitingFor=[]), "a=b", "T")
    assert "rollingUpdate" in done and done["rollingUpdate"] is None
    stored = {k: v for k, v in done.items() if k != "rollingUpdate"}
    again = st.nodeset_status(stored, nodeset, plan_for(), dict(facts, waitingFor=[]), "a=b", "T")
    assert "rollingUpdate" not in again and st.same_status(stored, again)


def test_label_selector_and_conditions_helpers():
    assert st.label_selector({"b": "2", "a": "1"}) == "a=1,b=2"
    conditions = st.set_condition([], "X", "True", "R", "m", 1, "T")
    assert st.get_condition(conditions, "X")["reason"] == "R" and st.get_condition(conditions, "Y") is None
    assert st.remove_condition(conditions, "X") == []


def test_login_pods_on_an_older_template_show_as_a_condition_only_once_known():
    cluster = with_generation(make_cluster(), 2)
    assert "LoginUpToDate" not in conds(st.cluster_status({}, cluster, plan_for(), "T"))  # no live StatefulSet yet
    c = conds(st.cluster_status({}, cluster, plan_for(login_outdated=1), "T"))["LoginUpToDate"]
    assert (c["status"], c["reason"]) == ("False", "RollingUpdate") and "1 login pod(s)" in c["message"]
    assert conds(st.cluster_status({}, cluster, plan_for(login_outdated=0), "T"))["LoginUpToDate"]["status"] == "True"


def test_a_kept_slurmuser_shows_as_a_condition_until_it_changes():
    cluster = with_generation(make_cluster(), 2)
    kept = "slurmctld keeps running as root"
    status = st.cluster_status({}, cluster, plan_for(slurm_user_kept=kept), "T")
    c = conds(status)["SlurmUserUpToDate"]
    assert (c["status"], c["reason"], c["message"]) == ("False", "WaitsForMaintenance", kept)
    assert "SlurmUserUpToDate" not in conds(st.cluster_status(status, cluster, plan_for(), "T"))
