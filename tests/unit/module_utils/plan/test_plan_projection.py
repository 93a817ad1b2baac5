"""projection.py's planner alone: Slurm onto the worker pods as this plan leaves it; Kubernetes nodes onto Slurm."""

from planning import NOW, context, line, slurm, workers

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model, modes, projection

CORDONED = {"healthChecks": {"kubernetesNodes": {"drainCordoned": True}}}


def observed(nodes, k8s_nodes=None, count=2):
    statefulsets, pods = workers(count)
    for i, pod_name in enumerate(sorted(pods)):
        pods[pod_name]["spec"] = {"nodeName": "node-%d" % i}
    result = {"statefulsets": statefulsets, "pods": pods, "slurm": slurm(*nodes)}
    if k8s_nodes is not None:
        result["k8s_nodes"] = k8s_nodes
    return result


def test_pods_are_told_slurm_as_this_plan_leaves_it():
    ctx = context(observed=observed([line("demo-cpu-0"), line("demo-cpu-1")]))
    p = model.Draft()
    p.nodesets["cpu"] = {"statefulset": "demo-cpu", "replicas": 2}
    p.drain_node("demo-cpu-1", names.REASON_SCALE_IN)
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.pod_conditions["demo-cpu-0"]["status"] == "True"
    assert (p.pod_conditions["demo-cpu-1"]["status"], p.pod_conditions["demo-cpu-1"]["reason"]) == ("False",
                                                                                                   "Drained")
    assert p.nodesets["cpu"]["idle"] == 1 and p.nodesets["cpu"]["drained"] == 1


def test_a_cordoned_kubernetes_node_drains_its_workers_and_an_uncordon_resumes_them():
    k8s_nodes = {"node-0": {"unschedulable": True, "conditions": {}}, "node-1": {"unschedulable": False,
                                                                                  "conditions": {}}}
    ctx = context(CORDONED, observed=observed([line("demo-cpu-0"), line("demo-cpu-1", "IDLE+DRAIN",
                                                                         names.REASON_NODE_CORDONED)], k8s_nodes))
    p = model.Draft()
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.drain == {names.REASON_NODE_CORDONED: ["demo-cpu-0"]} and p.resume == ["demo-cpu-1"]


def test_a_drain_this_plan_decided_wins():
    k8s_nodes = {"node-0": {"unschedulable": True, "conditions": {}}}
    ctx = context(CORDONED, observed=observed([line("demo-cpu-0")], k8s_nodes, count=1))
    p = model.Draft()
    p.drain_node("demo-cpu-0", names.REASON_UPDATE)
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.drain == {names.REASON_UPDATE: ["demo-cpu-0"]}


def test_unread_kubernetes_nodes_defer_and_without_slurm_nothing_is_projected():
    ctx = context(CORDONED, observed=dict(observed([line("demo-cpu-0")]), k8s_nodes_error="forbidden"))
    p = model.Draft()
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.deferred == ["spec.healthChecks.kubernetesNodes: forbidden"]
    ctx = context(CORDONED, observed=dict(observed([]), slurm=None))
    p = model.Draft()
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert not p.pod_conditions and not p.deferred


def test_an_unhealthy_idle_worker_is_moved_once_its_health_drain_is_old_enough():
    drained = line("demo-cpu-0", "IDLE+DRAIN", names.HEALTH_REASON_PREFIX + " gpu: lost", when=NOW - 700)
    ctx = context({"healthChecks": {"kubernetesNodes": {"evictUnhealthyAfter": "10m"}}},
                  observed=observed([drained], count=1))
    p = model.Draft()
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    assert p.evict == [("demo-cpu-0", "uid-demo-cpu-0", "node-0", names.HEALTH_REASON_PREFIX + " gpu: lost")]
