"""Elastic NodeSets (plan/elastic.py): Slurm's power states mapped onto pods, holes included, and the whole plan
of a cluster with a fixed and an elastic NodeSet. Slurm's node table is `scontrol show node -o` lines as 24.11 prints
them for State=CLOUD records (docs/slurm-24.11-findings.md, A), read by the real parser."""

from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, elastic
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import hostlist, scontrol

NOW = 1_700_000_000
NAMES = ["demo-gpu-0", "demo-gpu-1", "demo-gpu-2"]
HASH = "tmpl-1"


def node(name, state="IDLE+CLOUD+POWERED_DOWN", cpus_alloc=0, reason=None):
    text = "NodeName=%s CPUAlloc=%d CPUTot=2 State=%s" % (name, cpus_alloc, state)
    if reason:
        text += " Reason=%s [slurm@%d]" % (reason, NOW - 5)
    return text


def table(**states):
    """Every node powered down unless named: ``table(**{"demo-gpu-1": "MIXED+CLOUD"})``."""
    return scontrol.parse_show_node("\n".join(node(n, states.get(n, "IDLE+CLOUD+POWERED_DOWN"),
                                                   cpus_alloc=1 if states.get(n, "").startswith(("MIXED", "ALLOC"))
                                                   else 0)
                                              for n in NAMES))


def pod(name, template_hash=HASH, ready=True, deleting=False, phase="Running"):
    md = {"name": name, "uid": "uid-" + name, "annotations": {names.ANNOTATION_TEMPLATE_HASH: template_hash}}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "status": {"phase": phase,
                                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_powered_down_nodes_have_no_pods_and_nothing_moves():
    d = elastic.decide(NAMES, table(), {}, HASH, 0)
    assert (d.create, d.delete, d.power_up, d.power_down, d.power_down_force, d.moving) == ([], [], [], [], [], False)
    assert d.counts() == {"up": 0, "poweringUp": 0, "poweredDown": 3, "failed": 0}


def test_the_nodes_slurm_powers_up_get_pods_of_exactly_their_names_with_a_hole():
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "MIXED+CLOUD+POWERING_UP",
                                       "demo-gpu-2": "MIXED+CLOUD+POWERING_UP"}), {}, HASH, 0)
    assert d.create == ["demo-gpu-0", "demo-gpu-2"]
    assert d.delete == [] and d.moving
    assert [e[1] for e in d.events] == [elastic.EVENT_POWERED_UP] * 2


def test_a_pod_missing_for_a_node_already_up_is_made_again():
    # The operator died between the resume and the pod's creation; the node is up in Slurm's eyes (or its pod
    # was removed by someone): the pod comes back under the same name.
    d = elastic.decide(NAMES, table(**{"demo-gpu-1": "IDLE+CLOUD"}), {}, HASH, 0)
    assert d.create == ["demo-gpu-1"]


def test_powering_down_and_powered_down_nodes_lose_their_pods():
    pods = {"demo-gpu-0": pod("demo-gpu-0"), "demo-gpu-1": pod("demo-gpu-1"), "demo-gpu-2": pod("demo-gpu-2")}
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "IDLE+CLOUD+POWERING_DOWN", "demo-gpu-2": "IDLE+CLOUD"}),
                       pods, HASH, 0)
    assert d.delete == [("demo-gpu-0", "uid-demo-gpu-0"), ("demo-gpu-1", "uid-demo-gpu-1")]
    assert d.create == [] and d.power_down == []
    assert d.counts() == {"up": 1, "poweringUp": 0, "poweredDown": 2, "failed": 0}


def test_a_failed_resume_loses_its_pod_first_and_is_then_handed_back():
    failed = {"demo-gpu-1": "DOWN+CLOUD+POWERED_DOWN"}
    d = elastic.decide(NAMES, table(**failed), {"demo-gpu-1": pod("demo-gpu-1", ready=False)}, HASH, 0)
    assert d.delete == [("demo-gpu-1", "uid-demo-gpu-1")] and d.power_down_force == []
    assert [e[:2] for e in d.events] == [("Warning", elastic.EVENT_RESUME_FAILED)]
    d = elastic.decide(NAMES, table(**failed), {}, HASH, 0)
    assert d.power_down_force == ["demo-gpu-1"] and d.counts()["failed"] == 1
    # Asked already (Slurm's power thread has not run yet): not again.
    d = elastic.decide(NAMES, table(**{"demo-gpu-1": "DOWN+CLOUD+POWERED_DOWN+POWER_DOWN"}), {}, HASH, 0)
    assert d.power_down_force == []


def test_a_resume_during_a_suspend_waits_for_the_old_pod_to_go():
    # Slurm powers the node up again while its previous pod is still terminating: no second pod under the same
    # name now (the create would conflict); the next pass makes it.
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "MIXED+CLOUD+POWERING_UP"}),
                       {"demo-gpu-0": pod("demo-gpu-0", deleting=True)}, HASH, 0)
    assert d.create == [] and d.delete == [] and d.moving


def test_a_pod_left_from_an_earlier_power_up_is_replaced_at_the_resume():
    # The operator missed the power-down: the pod made at 09:00 still runs the slurmd that registered at 09:00:05.
    # Slurm powers the node up again and waits for a fresh slurmd (findings A.6): the old pod goes (a new one is made
    # on the next pass), with an Event; the cheap check between runs sees it too.
    made = "2026-11-26T09:00:00Z"
    registered = durations.epoch_of(made) + 5
    slurm = scontrol.parse_show_node(
        "NodeName=demo-gpu-0 CPUAlloc=1 CPUTot=2 State=MIXED+CLOUD+POWERING_UP SlurmdStartTime=%d\n"
        "NodeName=demo-gpu-1 CPUAlloc=0 CPUTot=2 State=IDLE+CLOUD+POWERED_DOWN SlurmdStartTime=None\n"
        "NodeName=demo-gpu-2 CPUAlloc=0 CPUTot=2 State=IDLE+CLOUD+POWERED_DOWN" % registered)
    old = pod("demo-gpu-0")
    old["metadata"]["creationTimestamp"] = made
    d = elastic.decide(NAMES, slurm, {"demo-gpu-0": old}, HASH, 0)
    assert (d.create, d.delete, d.moving) == ([], [("demo-gpu-0", "uid-demo-gpu-0")], True)
    assert [e[1] for e in d.events] == [elastic.EVENT_STALE_POD]
    assert elastic.mismatched(NAMES, slurm, {"demo-gpu-0": old}) == ["demo-gpu-0"]
    # Gone: the next pass makes the new pod.
    assert elastic.decide(NAMES, slurm, {}, HASH, 0).create == ["demo-gpu-0"]


def test_a_pod_made_for_this_power_up_is_kept_while_its_node_powers_up():
    # Slurm's SlurmdStartTime is an earlier pod's (or none yet): the pod made for this resume stays.
    made = "2026-11-26T09:10:00Z"
    for started in ("%d" % (durations.epoch_of(made) - 60), "None"):
        slurm = scontrol.parse_show_node(
            "NodeName=demo-gpu-0 CPUAlloc=1 CPUTot=2 State=MIXED+CLOUD+POWERING_UP SlurmdStartTime=%s" % started)
        fresh = pod("demo-gpu-0", ready=False)
        fresh["metadata"]["creationTimestamp"] = made
        d = elastic.decide(NAMES, slurm, {"demo-gpu-0": fresh}, HASH, 0)
        assert (d.create, d.delete, d.events, d.moving) == ([], [], [], True), started
        assert elastic.mismatched(NAMES, slurm, {"demo-gpu-0": fresh}) == []
    # An up node's pod is never judged by it (its slurmd registered for this power-up).
    slurm = scontrol.parse_show_node("NodeName=demo-gpu-0 CPUAlloc=0 CPUTot=2 State=IDLE+CLOUD SlurmdStartTime=%d"
                                     % (durations.epoch_of(made) + 5))
    fresh = pod("demo-gpu-0")
    fresh["metadata"]["creationTimestamp"] = made
    assert elastic.decide(NAMES, slurm, {"demo-gpu-0": fresh}, HASH, 0).delete == []


def test_a_finished_pod_of_an_up_node_is_replaced():
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "IDLE+CLOUD"}),
                       {"demo-gpu-0": pod("demo-gpu-0", phase="Failed", ready=False)}, HASH, 0)
    assert d.delete == [("demo-gpu-0", "uid-demo-gpu-0")]


def test_an_older_template_powers_idle_nodes_down_and_waits_for_busy_ones():
    pods = {"demo-gpu-0": pod("demo-gpu-0", "old"), "demo-gpu-1": pod("demo-gpu-1", "old")}
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "IDLE+CLOUD", "demo-gpu-1": "MIXED+CLOUD"}), pods, HASH, 0)
    assert d.power_down == ["demo-gpu-0"]
    assert d.delete == []  # never a pod under a job: the busy node keeps its pod until its jobs end


def test_min_nodes_powers_up_the_lowest_powered_down_names():
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "IDLE+CLOUD"}), {"demo-gpu-0": pod("demo-gpu-0")}, HASH, 2)
    assert d.power_up == ["demo-gpu-1"]
    d = elastic.decide(NAMES, table(**{"demo-gpu-0": "IDLE+CLOUD", "demo-gpu-1": "IDLE+CLOUD+POWERING_UP"}),
                       {"demo-gpu-0": pod("demo-gpu-0")}, HASH, 2)
    assert d.power_up == []


def cluster():
    return make_cluster({"partitions": [{"name": "main", "default": True}],
                         "slurm": {"powerSaving": {"suspendTime": 20, "suspendTimeout": 5, "resumeTimeout": 60}}},
                        uid="c-uid")


def nodesets():
    return [make_nodeset("cpu", {"replicas": 1}, uid="n-cpu"),
            make_nodeset("gpu", {"elastic": {"maxNodes": 3}, "resources": {"limits": {"cpu": 2, "memory": "4Gi"}}},
                         uid="n-gpu")]


def test_a_cluster_with_a_fixed_and_an_elastic_nodeset():
    observed = {"statefulsets": {}, "pods": {}, "slurm": table(**{"demo-gpu-1": "MIXED+CLOUD+POWERING_UP"})}
    p = converge.plan(cluster(), nodesets(), observed, NOW)
    kinds = [(m["kind"], m["metadata"]["name"]) for m in p.objects.manifests]
    # The fixed set keeps its StatefulSet; the elastic one has none: its pods are made one by one.
    assert ("StatefulSet", "demo-cpu") in kinds and ("StatefulSet", "demo-gpu") not in kinds
    [made] = p.pods.create_pods
    assert made["kind"] == "Pod" and made["metadata"]["name"] == "demo-gpu-1"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "n-gpu"
    args = made["spec"]["containers"][0]["args"]
    assert "-b" in args and "-Z" not in args and "--conf" not in args
    conf = next(m for m in p.objects.manifests
                if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "demo-slurm-config")
    text = conf["data"]["slurm.conf"]
    assert "NodeName=demo-gpu-[0-2] CPUs=2 RealMemory=3840 Feature=gpu State=CLOUD" in text
    assert "SuspendTime=20\nSuspendTimeout=5\nResumeTimeout=60\nSuspendExcStates=DYNAMIC_NORM" in text
    assert "ResumeProgram=/usr/local/sbin/soperator-resume" in text
    assert "PrologSlurmctld=/usr/local/sbin/soperator-wait-nodes" in text
    assert "PartitionName=main Nodes=cpu,gpu" in text
    # Slurm's records of the elastic names are never forgotten as pods gone for good.
    assert p.slurm.delete_nodes == []
    facts = p.report.nodesets["gpu"]
    assert (facts["poweringUp"], facts["poweredDown"], facts["poweredUp"]) == (1, 2, 0)
    assert p.report.deferred and not p.report.pending


def test_a_fixed_only_cluster_renders_no_power_saving():
    p = converge.plan(cluster(), nodesets()[:1], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    conf = next(m for m in p.objects.manifests
                if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "demo-slurm-config")
    assert "Resume" not in conf["data"]["slurm.conf"] and "State=CLOUD" not in conf["data"]["slurm.conf"]
    assert p.pods.create_pods == [] and not p.report.deferred


def test_without_slurm_the_elastic_pods_stay_as_they_are():
    live = {"demo-gpu-0": pod("demo-gpu-0")}
    p = converge.plan(cluster(), nodesets(), {"statefulsets": {}, "pods": live, "slurm": None}, NOW)
    assert p.pods.create_pods == [] and p.pods.delete_pods == [] and not p.report.underway
    p = converge.plan(cluster(), nodesets(), {"statefulsets": {}, "pods": live, "slurm": None,
                                              "slurm_error": "timed out"}, NOW)
    assert p.pods.delete_pods == [] and p.report.pending


def test_min_nodes_is_kept_by_slurm_and_powered_up_by_the_operator():
    sets = nodesets()
    sets[1]["spec"]["elastic"]["minNodes"] = 1
    p = converge.plan(cluster(), sets, {"statefulsets": {}, "pods": {}, "slurm": table()}, NOW)
    conf = next(m for m in p.objects.manifests
                if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "demo-slurm-config")
    assert "SuspendExcNodes=demo-gpu-[0-2]:1" in conf["data"]["slurm.conf"]
    assert p.slurm.power_up == ["demo-gpu-0"]


def test_a_lowered_maximum_keeps_the_names_still_up_until_slurm_powers_them_down():
    sets = nodesets()
    sets[1]["spec"]["elastic"]["maxNodes"] = 1
    live = {"demo-gpu-2": pod("demo-gpu-2")}
    p = converge.plan(cluster(), sets, {"statefulsets": {}, "pods": live,
                                        "slurm": table(**{"demo-gpu-2": "MIXED+CLOUD"})}, NOW)
    conf = next(m for m in p.objects.manifests
                if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "demo-slurm-config")
    # Busy: its name stays in slurm.conf (a reconfigure without it would kill the job), no pod goes, and it is
    # powered down "asap": Slurm drains it, the job runs to its end, then Slurm powers it down.
    assert "NodeName=demo-gpu-[0-2] " in conf["data"]["slurm.conf"]
    assert p.pods.delete_pods == [] and p.slurm.power_down == ["demo-gpu-2"]
    # Already asked: not again; once Slurm powered it down and its pod went, the names go.
    p = converge.plan(cluster(), sets, {"statefulsets": {}, "pods": live,
                                        "slurm": table(**{"demo-gpu-2": "MIXED+CLOUD+DRAIN+POWER_DOWN"})}, NOW)
    assert p.slurm.power_down == [] and p.pods.delete_pods == []
    p = converge.plan(cluster(), sets, {"statefulsets": {}, "pods": {}, "slurm": table()}, NOW)
    conf = next(m for m in p.objects.manifests
                if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "demo-slurm-config")
    assert "NodeName=demo-gpu-0 " in conf["data"]["slurm.conf"] and p.slurm.power_down == []


def test_the_status_of_an_elastic_nodeset_counts_its_power_states():
    from ansible_collections.soperator.slurm.plugins.module_utils.plan import status

    live = {"demo-gpu-0": pod("demo-gpu-0")}
    observed = {"statefulsets": {}, "pods": live,
                "slurm": table(**{"demo-gpu-0": "MIXED+CLOUD", "demo-gpu-1": "MIXED+CLOUD+POWERING_UP",
                                  "demo-gpu-2": "DOWN+CLOUD+POWERED_DOWN"})}
    p = converge.plan(cluster(), nodesets(), observed, NOW)
    got = status.nodeset_status(None, nodesets()[1], p, p.report.nodesets["gpu"], None, "2026-01-01T00:00:00Z")
    assert (got["poweredUp"], got["poweringUp"], got["poweredDown"], got["failed"]) == (1, 1, 0, 1)
    assert (got["replicas"], got["mixed"], got["idle"]) == (1, 1, 0)  # a powered-down node is not idle
    assert p.pods.create_pods[0]["metadata"]["name"] == "demo-gpu-1" and p.slurm.power_down_force == ["demo-gpu-2"]


def test_maintenance_powers_elastic_nodes_down_and_drains_the_powered_down_ones():
    maint = make_cluster({"partitions": [{"name": "main", "default": True}], "maintenance": True}, uid="c-uid")
    controller = {"demo-controller": {"metadata": {"name": "demo-controller"}, "spec": {"replicas": 1},
                                      "status": {}}}
    live = {"demo-gpu-0": pod("demo-gpu-0")}
    slurm_table = table(**{"demo-gpu-0": "IDLE+CLOUD", "demo-gpu-1": "MIXED+CLOUD+POWERING_UP"})
    p = converge.plan(maint, nodesets()[1:], {"statefulsets": controller, "pods": live, "slurm": slurm_table}, NOW)
    assert p.slurm.power_down == ["demo-gpu-0"] and p.pods.create_pods == []
    assert p.slurm.drain == {"soperator: maintenance": ["demo-gpu-2"]}
    assert any("maintenance waits for" in w for w in p.report.pending)
    # Maintenance over: our drain of the powered-down node is resumed.
    drained = scontrol.parse_show_node(node("demo-gpu-2", "IDLE+CLOUD+DRAIN+POWERED_DOWN",
                                            reason="soperator: maintenance"))
    p = converge.plan(cluster(), nodesets()[1:], {"statefulsets": controller, "pods": {}, "slurm": drained}, NOW)
    assert p.slurm.resume == ["demo-gpu-2"]


def test_topology_lists_the_elastic_names_beside_the_fixed_workers():
    # spec.topology with an elastic NodeSet: topology.conf names every node Slurm may power up (its maxNodes), as it
    # names every fixed worker, so a job placed by --switches can be planned onto powered-down nodes.
    obj = cluster()
    obj["spec"]["topology"] = {"levels": ["net/leaf"]}
    p = converge.plan(obj, nodesets(), {"statefulsets": {}, "pods": {}, "slurm": table(), "k8s_nodes": {}}, NOW)
    conf = next(m for m in p.objects.manifests
                if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "demo-slurm-config")
    text = conf["data"]["topology.conf"]
    listed = ",".join(line.split("Nodes=", 1)[1] for line in text.splitlines() if "Nodes=" in line)
    assert set(hostlist.expand(listed)) >= {"demo-cpu-0"} | set(NAMES), text
