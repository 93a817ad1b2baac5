"""lost.py: a worker on a lost Kubernetes node is deleted at once, for its StatefulSet to make it again elsewhere, only
when Kubernetes (its Node not Ready past replaceLostAfter) and Slurm (its slurmd NOT_RESPONDING) both say so."""

import pytest
from planning import NOW, context, line, pod, slurm, workers

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, every_node, lost, model, modes

REPLACE = {"healthChecks": {"kubernetesNodes": {"replaceLostAfter": "1m"}}}
LOST = "DOWN+NOT_RESPONDING"


def node(ready="True", since=NOW - 600):
    return {"unschedulable": False, "labels": {}, "taints": [], "conditions": {"Ready": ready},
            "ready_since": since}


def observed(states, k8s_nodes, deleting=()):
    """Two workers, demo-cpu-i on node-i, their Slurm lines ``states`` (state or (state, reason))."""
    statefulsets, pods = workers(len(states))
    for i, pod_name in enumerate(sorted(pods)):
        if pod_name in deleting:
            pods[pod_name] = pod(pod_name, deleting=True)
        pods[pod_name]["spec"] = {"nodeName": "node-%d" % i}
        pods[pod_name]["metadata"]["labels"][names.LABEL_NODESET] = "cpu"
    lines = [line(n, *((s,) if isinstance(s, str) else s)) for n, s in zip(sorted(pods), states)]
    return {"statefulsets": statefulsets, "pods": pods, "slurm": slurm(*lines), "k8s_nodes": k8s_nodes}


def planned(obs, spec=REPLACE, nodesets=(("cpu", {}),)):
    ctx = context(spec, nodesets=nodesets, observed=obs)
    p = model.Draft()
    lost.plan_lost(p, ctx, modes.replaceable_pods(ctx))
    return p


def test_a_worker_whose_node_is_lost_past_the_bound_and_whose_slurmd_is_silent_is_replaced():
    p = planned(observed(["IDLE", LOST], {"node-0": node(), "node-1": node("Unknown", NOW - 61)}))
    assert p.replace_lost == [model.LostPod("demo-cpu-1", "uid-demo-cpu-1", "node-1", "cpu", p.replace_lost[0].why)]
    assert "node-1 not Ready (Unknown) for 61 s" in p.replace_lost[0].why and "NOT_RESPONDING" in p.replace_lost[0].why
    assert p.requeue_after == model.REQUEUE_PROGRESSING and p.pending


def test_a_pod_left_terminating_by_kubernetes_eviction_is_replaced_too():
    # After the unreachable toleration the node lifecycle controller marks the pod deleted; it stays Terminating.
    p = planned(observed(["IDLE", LOST], {"node-0": node(), "node-1": node("Unknown", NOW - 400)},
                         deleting=["demo-cpu-1"]))
    assert [lp.pod for lp in p.replace_lost] == ["demo-cpu-1"]


def test_within_the_bound_the_converge_waits_and_looks_again_when_it_passes():
    p = planned(observed(["IDLE", LOST], {"node-0": node(), "node-1": node("Unknown", NOW - 20)}))
    assert p.replace_lost == []
    assert p.requeue_after == 40 and "made again elsewhere in 40 s" in p.pending[0]


@pytest.mark.parametrize("state", ["IDLE", "ALLOCATED", "DOWN"])
def test_a_node_whose_slurmd_still_answers_keeps_its_pod(state):
    # The interlock: a kubelet that died under a live slurmd; replacing it would run one Slurm name twice.
    p = planned(observed(["IDLE", (state, "admin")], {"node-0": node(), "node-1": node("False", NOW - 3600)}))
    assert p.replace_lost == []
    assert "still gets answers from its slurmd" in p.deferred[0]
    assert not p.underway and p.requeue_after == model.REQUEUE_SLURM_UNREACHABLE  # a run does not wait for it


def test_nothing_without_the_setting_on_ready_nodes_or_unknown_nodes_and_unread_nodes_defer():
    lost_nodes = {"node-0": node(), "node-1": node("Unknown", NOW - 600)}
    assert planned(observed(["IDLE", LOST], lost_nodes), spec={}).replace_lost == []
    p = planned(observed(["IDLE", LOST], {"node-0": node(), "node-1": node()}))
    assert (p.replace_lost, p.pending, p.deferred) == ([], [], [])
    # A node not read (gone: the pod garbage collector's) or with no Ready time: nothing to measure from.
    assert planned(observed(["IDLE", LOST], {"node-0": node()})).replace_lost == []
    assert planned(observed(["IDLE", LOST], {"node-0": node(), "node-1": node("Unknown", None)})).replace_lost == []
    p = planned(dict(observed(["IDLE", LOST], lost_nodes), k8s_nodes=None, k8s_nodes_error="forbidden"))
    assert p.replace_lost == [] and p.deferred == ["spec.healthChecks.kubernetesNodes.replaceLostAfter: forbidden"]


def test_pinned_workers_wait_for_their_node():
    obs = observed(["IDLE", LOST], {"node-0": node(), "node-1": node("Unknown", NOW - 600)})
    assert planned(obs, nodesets=(("cpu", {"placement": {"onePerNode": True, "pinned": True}}),)).replace_lost == []


def test_the_whole_planner_replaces_it_and_the_next_pass_with_its_replacement_does_nothing():
    obs = observed(["IDLE", LOST], {"node-0": node(), "node-1": node("Unknown", NOW - 600)})
    ctx = context(REPLACE, nodesets=(("cpu", {"replicas": 2}),), observed=obs)
    cluster, nodesets = ctx.cluster, ctx.valid
    p = converge.plan(cluster, nodesets, obs, now=NOW)
    assert [lp.pod for lp in p.pods.replace_lost] == ["demo-cpu-1"]
    # The StatefulSet made it again on node-0 and its slurmd registered: nothing left to do for it.
    obs["pods"]["demo-cpu-1"]["spec"]["nodeName"] = "node-0"
    obs["slurm"] = slurm(line("demo-cpu-0"), line("demo-cpu-1"))
    p = converge.plan(cluster, nodesets, obs, now=NOW)
    assert p.pods.replace_lost == [] and not [w for w in p.report.pending if "demo-cpu-1" in w]


def test_node_facts_carry_the_time_of_the_ready_transition():
    facts = every_node.node_facts({"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "MemoryPressure", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-11-29T07:00:00Z"}]}})
    assert facts["conditions"]["Ready"] == "Unknown" and facts["ready_since"] == 1795935600
    assert every_node.node_facts({"metadata": {"name": "n"}})["ready_since"] is None
