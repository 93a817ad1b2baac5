"""The runtime's Node watch (operator/soperator_operator/nodes.py): which Node changes reach which clusters."""

from soperator_operator import cache
from soperator_operator import nodes as N
from soperator_operator import workqueue as Q


def node(name, unschedulable=False, **conditions):
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable} if unschedulable else {},
            "status": {"conditions": [{"type": t, "status": s, "lastHeartbeatTime": "now"}
                                      for t, s in conditions.items()]}}


def pod(name, host, cluster="demo", component="worker", namespace="slurm"):
    return {"metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/component": component, "slurm.soperator.dev/cluster": cluster}},
            "spec": {"nodeName": host}}


def test_only_a_cordon_or_a_condition_status_changes_the_signature():
    assert N.signature(node("k1")) == N.signature(node("k1"))
    assert N.signature(node("k1")) != N.signature(node("k1", unschedulable=True))
    assert N.signature(node("k1", Ready="True")) != N.signature(node("k1", Ready="True", KernelDeadlock="True"))
    heartbeat = node("k1", Ready="True")
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "later"
    assert N.signature(heartbeat) == N.signature(node("k1", Ready="True"))  # heartbeats run nothing


def test_clusters_on_a_node_are_those_with_a_worker_pod_there():
    pods = [pod("demo-cpu-0", "k1"), pod("demo-login-0", "k1", component="login", cluster="other"),
            pod("ml-gpu-0", "k1", cluster="ml", namespace="ml"), pod("demo-cpu-1", "k2")]
    assert N.clusters_on("k1", pods) == [("ml", "ml"), ("slurm", "demo")]
    assert N.clusters_on("k3", pods) == []


class FakeController:
    def __init__(self, pods):
        self.owned = {"Pod": type("I", (), {"store": cache.Store()})()}
        for p in pods:
            self.owned["Pod"].store.put(p)
        self.queue = Q.WorkQueue()
        self._stopping = None


def test_a_cordon_forces_a_run_of_the_clusters_on_that_node():
    ctl = FakeController([pod("demo-cpu-0", "k1"), pod("ml-gpu-0", "k2", cluster="ml")])
    watch = N.NodeWatch.__new__(N.NodeWatch)
    watch.controller = ctl
    watch._on_node(cache.MODIFIED, node("k1"), node("k1", unschedulable=True))
    watch._on_node(cache.MODIFIED, node("k2", Ready="True"), node("k2", Ready="True"))  # nothing of interest
    watch._on_node(cache.ADDED, None, node("k3", unschedulable=True))
    item = ctl.queue.get(timeout=1.0)
    assert item == (("SlurmCluster", "slurm", "demo"), {Q.REQUEUE})
    assert ctl.queue.get(timeout=0.1) is None


# --- slurmstatus.py: NodeSet counts and pod conditions between role runs -------------------------------------------
def test_status_changes_writes_only_what_differs():
    from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol
    from soperator_operator import slurmstatus as S

    slurm = scontrol.parse_show_node(
        "NodeName=demo-cpu-0 CPUAlloc=2 CPUTot=2 State=ALLOCATED+DYNAMIC_NORM\n"
        "NodeName=demo-cpu-1 CPUAlloc=0 CPUTot=2 State=IDLE+DYNAMIC_NORM\n")
    sts = {"demo-cpu": {"metadata": {"name": "demo-cpu", "labels": {"app.kubernetes.io/component": "worker"}},
                        "spec": {"replicas": 2}},
           "demo-login": {"metadata": {"name": "demo-login", "labels": {"app.kubernetes.io/component": "login"}},
                          "spec": {"replicas": 1}}}
    nodeset = {"metadata": {"name": "cpu"}, "spec": {"clusterRef": {"name": "demo"}},
               "status": {"idle": 2, "allocated": 0, "mixed": 0, "drained": 0, "down": 0}}
    pods = {"demo-cpu-0": {"metadata": {"name": "demo-cpu-0"}, "status": {"conditions": []}},
            "demo-cpu-1": {"metadata": {"name": "demo-cpu-1"}, "status": {"conditions": [
                {"type": "SlurmNodeReady", "status": "True", "reason": "Idle",
                 "message": "Slurm node IDLE+DYNAMIC_NORM"}]}},
            "demo-login-0": {"metadata": {"name": "demo-login-0"}, "status": {}}}
    counts, conditions = S.status_changes([nodeset], sts, pods, slurm)
    assert counts == [("cpu", {"idle": 1, "allocated": 1, "mixed": 0, "drained": 0, "down": 0})]
    assert conditions == [("demo-cpu-0", {"type": "SlurmNodeReady", "status": "True", "reason": "Allocated",
                                          "message": "Slurm node ALLOCATED+DYNAMIC_NORM"})]
    nodeset["status"].update(idle=1, allocated=1)
    pods["demo-cpu-0"]["status"]["conditions"] = [dict(conditions[0][1], lastTransitionTime="t")]
    assert S.status_changes([nodeset], sts, pods, slurm) == ([], [])


def test_an_elastic_node_slurm_powered_up_or_down_without_its_pod_due_forces_a_run():
    from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol
    from soperator_operator import slurmstatus as S

    slurm = scontrol.parse_show_node(
        "NodeName=demo-gpu-0 CPUAlloc=1 CPUTot=2 State=MIXED+CLOUD+POWERING_UP\n"
        "NodeName=demo-gpu-1 CPUAlloc=0 CPUTot=2 State=IDLE+CLOUD+POWERED_DOWN\n"
        "NodeName=demo-gpu-2 CPUAlloc=0 CPUTot=2 State=IDLE+CLOUD\n")
    gpu = {"metadata": {"name": "gpu"}, "spec": {"clusterRef": {"name": "demo"}, "elastic": {"maxNodes": 3}}}
    cpu = {"metadata": {"name": "cpu"}, "spec": {"clusterRef": {"name": "demo"}, "replicas": 1}}
    pods = {"demo-gpu-1": {"metadata": {"name": "demo-gpu-1"}}, "demo-gpu-2": {"metadata": {"name": "demo-gpu-2"}}}
    # Node 0 powers up without a pod, node 1 is powered down with one; node 2 matches; fixed sets are not looked at.
    assert S.elastic_mismatch("demo", [gpu, cpu], pods, slurm) == ["demo-gpu-0", "demo-gpu-1"]
    pods = {"demo-gpu-0": {"metadata": {"name": "demo-gpu-0"}}, "demo-gpu-2": {"metadata": {"name": "demo-gpu-2"}}}
    assert S.elastic_mismatch("demo", [gpu, cpu], pods, slurm) == []
    assert S.elastic_counts("demo", [gpu, cpu], slurm) == {
        "gpu": {"up": 1, "poweringUp": 1, "poweredDown": 1, "failed": 0}}


def test_a_label_change_changes_the_signature():
    labelled = node("k1", Ready="True")
    labelled["metadata"]["labels"] = {"feature.node.kubernetes.io/ib": "true"}
    assert N.signature(labelled) != N.signature(node("k1", Ready="True"))


# --- every-node NodeSets: a Node that starts or stops matching runs the cluster --------------------------------------
def labelled(name, taints=(), **labels):
    return {"metadata": {"name": name, "labels": dict(labels)}, "spec": {"taints": list(taints)}, "status": {}}


def every_node_set(name="cpu", cluster="demo", namespace="slurm", **selector):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterRef": {"name": cluster}, "placement": {"everyNode": True, "nodeSelector": selector}}}


def test_every_node_clusters_are_those_whose_matching_of_the_node_changed():
    sets = [every_node_set(pool="hpc"), every_node_set("gpu", cluster="ml", namespace="ml", pool="gpu"),
            {"metadata": {"name": "fixed", "namespace": "slurm"},
             "spec": {"clusterRef": {"name": "other"}, "placement": {"nodeSelector": {"pool": "hpc"}}}}]
    assert N.every_node_clusters(labelled("k1"), labelled("k1", pool="hpc"), sets, {}) == [("slurm", "demo")]
    assert N.every_node_clusters(labelled("k1", pool="hpc"), labelled("k1"), sets, {}) == [("slurm", "demo")]
    assert N.every_node_clusters(labelled("k1", pool="hpc"), labelled("k1", pool="gpu"), sets, {}) == [
        ("ml", "ml"), ("slurm", "demo")]
    assert N.every_node_clusters(labelled("k1", pool="hpc"), labelled("k1", pool="hpc", other="x"), sets, {}) == []
    assert N.every_node_clusters(None, labelled("k1", pool="hpc"), sets, {}) == [("slurm", "demo")]  # added
    assert N.every_node_clusters(labelled("k1", pool="hpc"), None, sets, {}) == [("slurm", "demo")]  # deleted
    taint = [{"key": "gpu", "effect": "NoSchedule"}]
    assert N.every_node_clusters(labelled("k1", pool="hpc"), labelled("k1", taint, pool="hpc"), sets, {}) == [
        ("slurm", "demo")]
    cordoned = labelled("k1", [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], pool="hpc")
    assert N.every_node_clusters(labelled("k1", pool="hpc"), cordoned, sets, {}) == []  # a cordon keeps the worker


def test_the_cluster_placement_counts_for_every_node_matching():
    cluster = {"metadata": {"name": "demo", "namespace": "slurm"},
               "spec": {"placement": {"nodeSelector": {"zone": "a"}}}}
    sets = [every_node_set(pool="hpc")]
    assert N.every_node_clusters(labelled("k1"), labelled("k1", pool="hpc"), sets,
                                 {("slurm", "demo"): cluster}) == []
    assert N.every_node_clusters(labelled("k1", pool="hpc"), labelled("k1", pool="hpc", zone="a"), sets,
                                 {("slurm", "demo"): cluster}) == [("slurm", "demo")]


class EveryNodeController(FakeController):
    def __init__(self, pods, nodesets):
        super().__init__(pods)
        self.informers = {"NodeSet": type("I", (), {"store": cache.Store()})(),
                          "SlurmCluster": type("I", (), {"store": cache.Store()})()}
        for ns in nodesets:
            self.informers["NodeSet"].store.put(ns)


def test_labelling_a_node_for_an_every_node_set_forces_a_run_of_its_cluster_without_a_pod_there():
    ctl = EveryNodeController([], [every_node_set(pool="hpc")])
    watch = N.NodeWatch.__new__(N.NodeWatch)
    watch.controller = ctl
    watch._on_node(cache.MODIFIED, labelled("k1"), labelled("k1", pool="hpc"))
    key = ("SlurmCluster", "slurm", "demo")
    assert ctl.queue.get(timeout=1.0) == (key, {Q.REQUEUE})
    ctl.queue.done(key)
    watch._on_node(cache.MODIFIED, labelled("k2", pool="hpc"), labelled("k2", pool="hpc"))  # no change
    watch._on_node(cache.ADDED, None, labelled("k3"))  # matches nothing
    assert ctl.queue.get(timeout=0.1) is None
    watch._on_node(cache.DELETED, labelled("k1", pool="hpc"), None)
    assert ctl.queue.get(timeout=1.0) == (("SlurmCluster", "slurm", "demo"), {Q.REQUEUE})


def test_status_changes_count_and_condition_the_workers_of_an_every_node_set():
    from ansible_collections.soperator.slurm.plugins.module_utils import names
    from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol
    from soperator_operator import slurmstatus as S

    worker = names.every_node_worker("demo", "all", "k1.example.com")
    slurm = scontrol.parse_show_node("NodeName=%s CPUAlloc=2 CPUTot=2 State=ALLOCATED+DYNAMIC_NORM\n" % worker)
    nodeset = {"metadata": {"name": "all"}, "spec": {"clusterRef": {"name": "demo"}, "placement": {"everyNode": True}},
               "status": {"idle": 1, "allocated": 0, "mixed": 0, "drained": 0, "down": 0}}
    pods = {worker: {"metadata": {"name": worker, "labels": names.labels("demo", names.COMPONENT_WORKER, "all")},
                     "status": {"conditions": []}}}
    counts, conditions = S.status_changes([nodeset], {}, pods, slurm)
    assert counts == [("all", {"idle": 0, "allocated": 1, "mixed": 0, "drained": 0, "down": 0})]
    assert [(n, c["reason"]) for n, c in conditions] == [(worker, "Allocated")]
