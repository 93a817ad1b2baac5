"""model.worker_pods_needed: when a pass without Slurm's view may leave the worker pods unread, and that the plan is
then the same as with them."""

import copy

from test_converge import NOW, cluster, nodeset, pod, rendered_hash, sts

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, model


def worker_sts(name="demo-cpu", replicas=2, **status):
    obj = sts(name, replicas)
    obj["metadata"]["labels"] = {names.LABEL_COMPONENT: names.COMPONENT_WORKER}
    obj["status"]["updatedReplicas"] = replicas
    obj["status"].update(status)
    return obj


def settled_cluster(workers=3):
    sets = {"demo-controller": sts("demo-controller", 1), "demo-login": sts("demo-login", 1),
            "demo-cpu": worker_sts(replicas=workers)}
    sets["demo-cpu"]["metadata"]["annotations"] = {names.ANNOTATION_TEMPLATE_HASH: rendered_hash("demo-cpu")}
    pods = {"demo-controller-0": pod("demo-controller-0"), "demo-login-0": pod("demo-login-0")}
    workers_pods = dict(("demo-cpu-%d" % i, pod("demo-cpu-%d" % i)) for i in range(workers))
    return sets, pods, workers_pods


def test_settled_workers_of_staying_nodesets_need_not_be_read():
    sets, dummy, dummy = settled_cluster()
    assert model.worker_pods_needed("demo", [nodeset(3)], sets) is False


def test_workers_are_read_whenever_a_statefulset_is_not_settled():
    for change in ({"readyReplicas": 2}, {"updatedReplicas": 1}, {"replicas": 4}, {"observedGeneration": 0}):
        sets, dummy, dummy = settled_cluster()
        sets["demo-cpu"]["status"].update(change)
        assert model.worker_pods_needed("demo", [nodeset(3)], sets) is True, change


def test_workers_are_read_for_a_nodeset_leaving_or_a_worker_statefulset_without_its_nodeset():
    sets, dummy, dummy = settled_cluster()
    leaving = nodeset(3)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    assert model.worker_pods_needed("demo", [leaving], sets) is True
    sets["demo-gpu"] = worker_sts("demo-gpu", 1)
    assert model.worker_pods_needed("demo", [nodeset(3)], sets) is True


def test_without_slurm_a_settled_cluster_plans_the_same_without_its_worker_pods():
    sets, pods, workers = settled_cluster()
    with_workers = converge.plan(cluster(), [nodeset(3)], {"statefulsets": copy.deepcopy(sets),
                                                           "pods": dict(pods, **workers), "slurm": None}, NOW)
    without = converge.plan(cluster(), [nodeset(3)], {"statefulsets": sets, "pods": pods, "slurm": None,
                                                      "worker_pods_read": False}, NOW)
    for concern, field in (("objects", "manifests"), ("objects", "keep"), ("pods", "scale"), ("slurm", "drain"),
                           ("slurm", "resume"), ("pods", "delete_pods"), ("slurm", "delete_nodes"),
                           ("report", "pending"), ("report", "deferred"), ("report", "ready"), ("report", "phase"),
                           ("report", "message"), ("report", "requeue_after"), ("report", "nodesets"),
                           ("objects", "secrets_held")):
        assert getattr(getattr(with_workers, concern), field) == getattr(getattr(without, concern), field), field
