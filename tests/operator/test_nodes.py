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
