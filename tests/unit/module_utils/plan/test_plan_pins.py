"""pins.py alone: a pinned worker's gated pod goes back to its node, or anywhere once the pin is released."""

from planning import context, workers

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model, pins

PINNED = {"placement": {"onePerNode": True, "pinned": True, "nodeSelector": {"pool": "gpu"}}}
GATE = [{"name": names.PIN_GATE}]


def observed(hosts, gated=(), k8s_nodes=None):
    statefulsets, pods = workers(len(hosts))
    for pod_name, host in zip(sorted(pods), hosts):
        pods[pod_name]["spec"] = {"nodeName": host} if host else {}
        if pod_name in gated:
            pods[pod_name]["spec"]["schedulingGates"] = list(GATE)
    return {"statefulsets": statefulsets, "pods": pods, "k8s_nodes": k8s_nodes}


def plan(obs, recorded=None, spec=PINNED):
    ctx = context(nodesets=(("cpu", spec),), observed=obs)
    ctx.valid[0]["status"] = {"pins": recorded or {}}
    p = model.Draft()
    pins.plan_pins(p, ctx)
    return p


def test_a_running_worker_is_pinned_where_it_runs():
    p = plan(observed(["k1", "k2"]))
    assert p.nodesets["cpu"]["pins"] == {"demo-cpu-0": "k1", "demo-cpu-1": "k2"} and p.ungate == {}


def test_a_recreated_worker_goes_back_to_its_node():
    obs = observed(["k1", None], gated=["demo-cpu-1"], k8s_nodes={"k2": {"labels": {"pool": "gpu"}}})
    p = plan(obs, {"demo-cpu-0": "k1", "demo-cpu-1": "k2"})
    uid, node, patches = p.ungate["demo-cpu-1"]
    assert (uid, node) == ("uid-demo-cpu-1", "k2")
    assert patches == [
        {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["k2"]}]}]}}}}},
        {"spec": {"schedulingGates": []}}]
    assert p.nodesets["cpu"]["pins"] == {"demo-cpu-0": "k1", "demo-cpu-1": "k2"}


def test_the_pin_is_added_to_every_required_term_of_the_pod():
    pod = {"spec": {"schedulingGates": GATE + [{"name": "other"}], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"matchExpressions": []}]}}}}}
    first, second = pins.pin_patches(pod, "k2")
    terms = first["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert all(t["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["k2"]}] for t in terms)
    assert terms[0]["matchExpressions"] == [{"key": "a", "operator": "Exists"}]
    assert second == {"spec": {"schedulingGates": [{"name": "other"}]}}
    assert len(pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]) == 1  # the observed pod is not changed


def test_a_gone_node_releases_the_pin():
    obs = observed([None], gated=["demo-cpu-0"], k8s_nodes={})
    p = plan(obs, {"demo-cpu-0": "k2"})
    assert p.ungate["demo-cpu-0"][1:] == (None, [{"spec": {"schedulingGates": []}}])
    assert p.nodesets["cpu"]["pins"] == {}


def test_a_node_that_no_longer_matches_releases_the_pin():
    obs = observed([None], gated=["demo-cpu-0"], k8s_nodes={"k2": {"labels": {"pool": "cpu"}}})
    assert plan(obs, {"demo-cpu-0": "k2"}).ungate["demo-cpu-0"][1] is None


def test_nodes_not_read_place_the_worker_anywhere_and_say_so():
    obs = observed([None], gated=["demo-cpu-0"], k8s_nodes=None)
    p = plan(obs, {"demo-cpu-0": "k2"})
    assert p.ungate["demo-cpu-0"][1] is None and any("k2" in d for d in p.deferred)


def test_a_worker_between_pods_keeps_its_pin():
    obs = observed(["k1"])
    p = plan(obs, {"demo-cpu-0": "k1", "demo-cpu-1": "k2"})
    assert p.nodesets["cpu"]["pins"] == {"demo-cpu-0": "k1", "demo-cpu-1": "k2"}


def test_unpinned_nodesets_are_left_alone():
    p = plan(observed([None], gated=["demo-cpu-0"]), spec={})
    assert p.ungate == {} and "pins" not in p.nodesets.get("cpu", {})


def test_matches_reads_the_required_node_affinity():
    placement = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]},
                                                    {"key": "mem", "operator": "Gt", "values": ["100"]}]},
                              {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["k9"]}]}]}}}}
    assert pins.matches("k1", {"gpu": "h100", "mem": "200"}, placement)
    assert not pins.matches("k1", {"gpu": "h100", "mem": "50"}, placement)
    assert pins.matches("k9", {}, placement)
    assert not pins.matches("k1", {"gpu": "a100"}, placement)
