"""What needs two machines (issue 35), on the README's kind cluster (conftest.py's ``kind_cluster``: one control plane,
two kind workers, the CPU example converged by site.yml, the jail one ReadWriteMany volume on a host directory every
node mounts). Every other end-to-end test runs on one kubelet; these run on two.

Each test prints its figure on a line starting ``kind-multinode:``. Changes reach the cluster as a user makes them:
kubectl on Kubernetes objects, ``docker stop``/``start`` of a kind node, or site.yml run again with a changed copy of
the example.
"""

import json
import os
import re
import threading
import time

import pytest
import yaml
from kindreadme import ROOT
from polling import wait_until

NS = "slurm"
LOGIN = ["kubectl", "exec", "-n", NS, "demo-login-0", "-c", "sshd", "--", "chroot", "/mnt/jail"]


CTLD = ["kubectl", "exec", "-n", NS, "demo-controller-0", "-c", "slurmctld", "--"]
EXAMPLE = os.path.join(ROOT, "examples", "cpu-cluster-kind.yaml")
WORK = os.path.join(ROOT, ".cache", "kind", "multinode")


def figure(text):
    print("\nkind-multinode: " + text)


def jail_sh(cluster, script, timeout=120, check=True):
    """``script`` run by sh in the jail of the login pod (as root, in /root)."""
    return cluster.run(LOGIN + ["sh", "-ec", "cd /root\n" + script], timeout=timeout, check=check)


def poll(predicate, timeout):
    """Whether ``predicate()`` turns true within ``timeout`` seconds (short intervals, no fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return bool(predicate())


def ctld(cluster, *args, check=True):
    """A Slurm command in the controller pod (it answers while a worker's node, and the login pod with it, is away)."""
    return cluster.run(CTLD + list(args), timeout=30, check=check).stdout


def slurm_node(cluster, name):
    """``scontrol show node`` as a dict (State, Reason, ...), or {} when Slurm has no such node."""
    res = cluster.run(CTLD + ["scontrol", "show", "-o", "node", name], timeout=30, check=False)
    if res.returncode:
        return {}
    out = res.stdout.strip()
    fields = dict(m.groups() for m in re.finditer(r"(\w+)=(.*?)(?= \w+=|$)", out))
    return fields


def slurm_job(cluster, job):
    out = ctld(cluster, "scontrol", "show", "-o", "job", str(job))
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", out))


def sinfo_nodes(cluster):
    return sorted(set(ctld(cluster, "sinfo", "-h", "-N", "-o", "%N").split()))


def site(cluster, edit, wait=True):
    """site.yml run again, as a user does, with the example changed by ``edit(docs)``; its wall time. ``wait``: the
    clusters.yml entry's (until the cluster is Ready; without it a run still goes on while work is under way). Once
    the ``operator`` fixture handed the cluster to the operator, site.yml only applies the resources
    (soperator_converge=operator) and the operator converges them."""
    with open(EXAMPLE) as f:
        docs = list(yaml.safe_load_all(f))
    edit(docs)
    os.makedirs(WORK, exist_ok=True)
    manifest = os.path.join(WORK, "cluster.yaml")
    with open(manifest, "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
    extra = {"soperator_clusters": [{"manifest_file": manifest, "wait": wait and not operated(cluster)}]}
    if operated(cluster):
        extra.update(soperator_converge="operator", soperator_operator_install=False)
    with open(os.path.join(WORK, "clusters.yml"), "w") as f:
        yaml.safe_dump(extra, f)
    started = time.monotonic()
    cluster.run(["ansible-playbook", "soperator.slurm.site", "-e", "@" + os.path.join(WORK, "clusters.yml")],
                timeout=600)
    return time.monotonic() - started


def operated(cluster):
    """Whether the operator converges the cluster (the ``operator`` fixture ran)."""
    return getattr(cluster, "operator", False)


def driver(cluster):
    return "the operator" if operated(cluster) else "site.yml"


OPERATOR_IMAGE = "soperator/operator:0.1.0"
OPERATOR_ARCHIVE = os.path.join(os.environ.get("SOPERATOR_CACHE") or os.path.expanduser("~/.cache/soperator"),
                                "images", "operator-0.1.0.tar")


@pytest.fixture(scope="module")
def operator(kind_cluster):
    """From here on the operator in-cluster converges the README's cluster: its image (hack/build-operator-image.sh,
    cached) loaded into the kind nodes, installed with operator_read_nodes (its Node watch), its two replicas spread
    over the two nodes (the role's default affinity: a lost node leaves the standby), and the cluster handed to it
    by site.yml's soperator_converge=operator."""
    c = kind_cluster
    started = time.monotonic()
    c.run(["hack/build-operator-image.sh"], timeout=1500)
    c.run(["kind", "load", "image-archive", "--name", c.name, OPERATOR_ARCHIVE], timeout=600)
    with open(EXAMPLE) as f:
        docs = list(yaml.safe_load_all(f))
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(WORK, "operator.yml"), "w") as f:
        yaml.safe_dump({"soperator_converge": "operator", "operator_image": OPERATOR_IMAGE, "operator_read_nodes": True,
                        "soperator_clusters": [{"resources": docs}]}, f)
    c.run(["ansible-playbook", "soperator.slurm.site", "-e", "@" + os.path.join(WORK, "operator.yml")], timeout=600)
    c.run(["kubectl", "rollout", "status", "-n", "soperator-system", "deployment/soperator-operator",
           "--timeout=300s"], timeout=330)
    c.operator = True
    wait_until(lambda: settled(c), 300, "the cluster settled under the operator",
               explain=lambda: str(cluster_ready(c)))
    spread = sorted(p["spec"].get("nodeName") for p in json.loads(c.run(
        ["kubectl", "get", "pods", "-n", "soperator-system", "-o", "json"]).stdout)["items"])
    figure("the operator in-cluster (image built or cached, loaded, installed with operator_read_nodes; replicas on "
           "%s), the cluster handed to it by site.yml and settled: %.1f s" % (spread, time.monotonic() - started))
    return c


def pod_ready(cluster, name):
    res = cluster.run(["kubectl", "get", "pod", "-n", NS, name, "-o",
                       "jsonpath={.status.conditions[?(@.type=='Ready')].status}"], check=False)
    return res.stdout.strip() == "True"


def kind_node_ready(cluster, node):
    res = cluster.run(["kubectl", "get", "node", node, "-o",
                       "jsonpath={.status.conditions[?(@.type=='Ready')].status}"], check=False)
    return res.stdout.strip()


def pods(cluster, selector_prefix="demo-cpu-"):
    items = json.loads(cluster.run(["kubectl", "get", "pods", "-n", NS, "-o", "json"]).stdout)["items"]
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(selector_prefix)}


def node_of_pod(cluster, name):
    return pods(cluster, name).get(name, {}).get("spec", {}).get("nodeName")


def node_of(cluster):
    """Slurm node (= worker pod) -> its Kubernetes node."""
    return {name: p["spec"].get("nodeName") for name, p in pods(cluster).items()}


def test_steps_and_a_batch_job_run_on_two_kubernetes_nodes_sharing_the_jail(kind_cluster):
    placed = node_of(kind_cluster)
    assert sorted(placed) == ["demo-cpu-0", "demo-cpu-1"], placed
    assert sorted(placed.values()) == ["%s-worker" % kind_cluster.name, "%s-worker2" % kind_cluster.name], placed

    # A step on each node; the one on demo-cpu-0 writes a file into the jail, the one on demo-cpu-1 (another
    # Kubernetes node) waits for it and reads it. Timed inside the login pod (kubectl exec not counted).
    token = "token-%d" % time.time_ns()
    out = jail_sh(kind_cluster, """
rm -f cross-node
t0=$(date +%%s%%N)
timeout 120 srun -N2 --ntasks-per-node=1 --immediate=60 sh -c '
  if [ "$SLURMD_NODENAME" = demo-cpu-0 ]; then echo %s > cross-node.tmp; mv cross-node.tmp cross-node;
    echo "wrote on $(hostname)"
  else n=0; while [ ! -s cross-node ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done
    echo "read on $(hostname): $(cat cross-node)"; fi'
t1=$(date +%%s%%N)
echo "wall $(( (t1 - t0) / 1000000 ))"
""" % token).stdout
    lines = out.splitlines()
    assert "wrote on demo-cpu-0" in lines, out
    assert "read on demo-cpu-1: %s" % token in lines, out
    wall_ms = int(re.search(r"^wall (\d+)$", out, re.M).group(1))
    figure("srun -N2 across kind nodes %s and %s (a file written on one, read on the other through the jail): "
           "%.2f s wall in the login pod" % (placed["demo-cpu-0"], placed["demo-cpu-1"], wall_ms / 1000))

    # A batch job of two nodes, one task each: its steps run on both workers, hence on both Kubernetes nodes.
    out = jail_sh(kind_cluster, """
printf '#!/bin/sh\\nsrun hostname\\n' > two-nodes.sh
t0=$(date +%s%N)
job=$(timeout 150 sbatch --parsable --wait -N2 --ntasks-per-node=1 -o two-nodes.out two-nodes.sh)
t1=$(date +%s%N)
echo "job $job wall $(( (t1 - t0) / 1000000 ))"
scontrol show job "$job" | tr ' ' '\\n' | grep -E '^(JobState|NodeList|BatchHost)='
cat two-nodes.out
""").stdout
    assert "JobState=COMPLETED" in out, out
    assert "NodeList=demo-cpu-[0-1]" in out, out
    assert sorted(line for line in out.splitlines() if re.fullmatch(r"demo-cpu-[01]", line)) == \
        ["demo-cpu-0", "demo-cpu-1"], out
    m = re.search(r"^job (\d+) wall (\d+)$", out, re.M)
    figure("sbatch --wait -N2 --ntasks-per-node=1 (job %s): steps on demo-cpu-0 (%s) and demo-cpu-1 (%s), %.2f s "
           "wall" % (m.group(1), placed["demo-cpu-0"], placed["demo-cpu-1"], int(m.group(2)) / 1000))
    # Still where they were: nothing moved during the jobs.
    assert node_of(kind_cluster) == placed


LEAF, SPINE = "network.example.com/leaf", "network.example.com/spine"
TOPOLOGY = {"plugin": "tree", "levels": [LEAF, SPINE]}


def with_topology(docs):
    docs[0]["spec"]["slurm"].update(slurmdTimeout=20)
    docs[0]["spec"]["topology"] = TOPOLOGY


def label(cluster, node, **labels):
    cluster.run(["kubectl", "label", "node", node, "--overwrite"] +
                ["%s=%s" % (k, v) if v is not None else k + "-" for k, v in labels.items()])


def slurm_topology(cluster, field="Nodes"):
    """{switch: its ``field`` (Nodes: the nodes under it; Switches: its child switches)} as slurmctld has them."""
    out = ctld(cluster, "scontrol", "show", "topology")
    found = {}
    for line in out.splitlines():
        fields = dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))
        if "SwitchName" in fields:
            found[fields["SwitchName"]] = fields.get(field)
    return found


def converge_until(cluster, edit, done, what, runs=6):
    """site.yml run again until ``done()`` (a change that reaches Slurm in a later pass: the kubelet's ConfigMap
    refresh, the quiet time); the number of runs and the wall time. Under the operator: one site.yml run (it applies
    the resources), then the operator's work until ``done()`` (as long as ``runs`` site.yml runs could take)."""
    started = time.monotonic()
    if operated(cluster):
        site(cluster, edit)
        if poll(done, 60 * runs):
            return 1, time.monotonic() - started
        pytest.fail("%s: not %d s after the resources were applied, under the operator" % (what, 60 * runs))
    for n in range(1, runs + 1):
        site(cluster, edit)
        if poll(done, 20):
            return n, time.monotonic() - started
    pytest.fail("%s: not after %d runs of site.yml" % (what, runs))


def test_a_tree_topology_from_node_labels_puts_a_switches_job_on_one_leaf(kind_cluster):
    """Two leaves (one kind worker each) under one spine: a two-node job asking one leaf (--switches=1) waits; once
    both workers' nodes are labelled into one leaf (site.yml run again, as a user does under site.yml), it runs there.

    Timers: the converge writes topology.conf and reconfigures slurmctld once the controller pod sees the file (the
    kubelet's ConfigMap refresh, up to about a minute) and it went unwritten for 10 s (node_labels.TOPOLOGY_QUIET);
    a job's --switches wait is at most max_switch_wait (300 s): it is submitted with 5 minutes of it."""
    c = kind_cluster
    placed = node_of(c)
    (w0, n0), (w1, n1) = sorted(placed.items())
    label(c, n0, **{LEAF: "leaf1", SPINE: "spine1"})
    label(c, n1, **{LEAF: "leaf2", SPINE: "spine1"})
    try:
        runs, took = converge_until(
            c, with_topology, lambda: slurm_topology(c).get("leaf1") == w0 and slurm_topology(c).get("leaf2") == w1,
            "slurmctld's topology: leaf1 %s, leaf2 %s" % (w0, w1))
        figure("tree topology from node labels (leaf1: %s on %s, leaf2: %s on %s, spine1): in slurmctld after %d "
               "site.yml run(s), %.1f s" % (w0, n0, w1, n1, runs, took))
        assert slurm_topology(c, "Switches").get("spine1") == "leaf1,leaf2", slurm_topology(c, "Switches")
        job = int(jail_sh(c, "sbatch --parsable --switches=1@5:00 -N2 --wrap 'srun hostname' -o /root/leaf.out"
                          ).stdout.split()[-1])
        # Not on two leaves: it waits for one leaf with two free nodes.
        wait_until(lambda: slurm_job(c, job).get("Reason") not in (None, "None"), 30, "job %d's pending reason" % job)
        pending = slurm_job(c, job)
        assert pending["JobState"] == "PENDING", pending
        started = time.monotonic()
        label(c, n1, **{LEAF: "leaf1"})
        runs, took = converge_until(c, with_topology, lambda: slurm_topology(c).get("leaf1") == "demo-cpu-[0-1]",
                                    "slurmctld's topology: leaf1 demo-cpu-[0-1]")
        wait_until(lambda: slurm_job(c, job).get("JobState") == "COMPLETED", 60, "job %d completed" % job,
                   explain=lambda: str(slurm_job(c, job)))
        done = slurm_job(c, job)
        assert done["NodeList"] == "demo-cpu-[0-1]", done
        figure("sbatch --switches=1 -N2: PENDING (Reason=%s) over two leaves; both nodes relabelled into leaf1: in "
               "slurmctld after %d site.yml run(s), the job COMPLETED on %s %.1f s after the relabel" % (
                   pending["Reason"], runs, done["NodeList"], time.monotonic() - started))
    finally:
        for n in (n0, n1):
            label(c, n, **{LEAF: None, SPINE: None})


def with_pins(docs):
    docs[0]["spec"]["slurm"].update(slurmdTimeout=20)
    docs[0]["spec"]["healthChecks"] = {"kubernetesNodes": {"drainCordoned": True}}
    docs[1]["spec"]["placement"]["pinned"] = True


def nodeset(cluster, name="cpu"):
    return json.loads(cluster.run(["kubectl", "get", "nodesets.slurm.soperator.dev", "-n", NS, name, "-o",
                                   "json"]).stdout)


def test_pinned_workers_come_back_to_their_node_and_a_cordon_drains_only_its_workers(kind_cluster):
    """placement.pinned (with onePerNode) on two real nodes: status.pins records each worker's node; a deleted
    worker is made again gated and, at the next site.yml run (no operator here), back on its node. With
    healthChecks.kubernetesNodes.drainCordoned, a cordoned node's worker is drained (not evicted), the other stays
    idle, and uncordon resumes it. No Kubernetes or Slurm timer beyond the pod's start."""
    c = kind_cluster
    placed = node_of(c)
    took = site(c, with_pins)
    pins = wait_until(lambda: nodeset(c).get("status", {}).get("pins"), 60, "status.pins")
    assert pins == placed, (pins, placed)
    figure("placement.pinned through site.yml: %.1f s, status.pins %s" % (took, pins))

    worker = "demo-cpu-1"
    started = time.monotonic()
    c.run(["kubectl", "delete", "pod", "-n", NS, worker, "--wait=false"])
    wait_until(lambda: (pods(c).get(worker, {}).get("spec", {}).get("schedulingGates") or [None])[0] is not None
               and pods(c)[worker]["metadata"]["uid"] != "", 120, "%s made again, gated" % worker)
    gated = time.monotonic() - started
    took = site(c, with_pins)
    wait_until(lambda: pod_ready(c, worker), 120, "%s Ready" % worker)
    assert node_of(c)[worker] == placed[worker], node_of(c)
    wait_until(lambda: slurm_node(c, worker).get("State", "").startswith("IDLE"), 60, "%s idle" % worker,
               explain=lambda: str(slurm_node(c, worker)))
    figure("pinned %s deleted: made again gated after %.1f s; site.yml (%.1f s) let it go, back on %s, idle in "
           "Slurm %.1f s after the delete" % (worker, gated, took, placed[worker], time.monotonic() - started))

    cordoned, other = placed["demo-cpu-0"], "demo-cpu-1"
    c.run(["kubectl", "cordon", cordoned])
    try:
        started = time.monotonic()
        site(c, with_pins)
        wait_until(lambda: "DRAIN" in slurm_node(c, "demo-cpu-0").get("State", ""), 60, "demo-cpu-0 drained",
                   explain=lambda: str(slurm_node(c, "demo-cpu-0")))
        drained = slurm_node(c, "demo-cpu-0")
        assert slurm_node(c, other)["State"].startswith("IDLE"), slurm_node(c, other)
        assert node_of(c) == placed  # drained, not evicted
        figure("kubectl cordon %s + site.yml: demo-cpu-0 %s (Reason=%s) after %.1f s, %s idle" % (
            cordoned, drained["State"], drained.get("Reason"), time.monotonic() - started, other))
    finally:
        c.run(["kubectl", "uncordon", cordoned])
    started = time.monotonic()
    site(c, with_pins)
    wait_until(lambda: slurm_node(c, "demo-cpu-0").get("State", "").startswith("IDLE")
               and "DRAIN" not in slurm_node(c, "demo-cpu-0")["State"], 60, "demo-cpu-0 resumed",
               explain=lambda: str(slurm_node(c, "demo-cpu-0")))
    figure("kubectl uncordon + site.yml: demo-cpu-0 resumed after %.1f s" % (time.monotonic() - started))


EVERY = "slurm.example.com/every-node"


def with_every(docs):
    docs[0]["spec"]["slurm"].update(slurmdTimeout=20)
    docs[0]["spec"]["healthChecks"] = {"kubernetesNodes": {"drainCordoned": True}}
    docs.append({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "NodeSet",
                 "metadata": {"name": "every", "namespace": NS},
                 "spec": {"clusterRef": {"name": "demo"},
                          "placement": {"everyNode": True, "nodeSelector": {EVERY: "true"}},
                          "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                                        "limits": {"cpu": "1", "memory": "1Gi"}}}})


def every_workers(cluster):
    """{worker: its node} of the every-node NodeSet (status.workerNodes)."""
    return dict(nodeset(cluster, "every").get("status", {}).get("workerNodes") or {})


def test_every_node_workers_follow_the_node_label_and_an_unlabelled_one_waits_for_its_job(operator):
    """placement.everyNode on the two labelled kind workers: one worker each, named for its node, on that node. A
    cordon (drainCordoned) drains the Slurm nodes of every worker pod on that node, the StatefulSet's and the
    every-node one (evicting nothing), and an every-node worker deleted on the cordoned node is made again there
    (Slinky's #259); uncordon resumes them. The label taken off one node while a job runs on its worker: drained, the
    job runs to its end, then the pod and the Slurm record go (no ghost in sinfo). The operator in-cluster does each
    step (its Node watch sees the label, the cordon; its pod watch the delete); no timer but the job's own length
    (15 s)."""
    c = operator
    nodes = sorted(c.run(["kubectl", "get", "nodes", "-l", "!node-role.kubernetes.io/control-plane", "-o",
                          "jsonpath={.items[*].metadata.name}"]).stdout.split())
    assert len(nodes) == 2, nodes
    for n in nodes:
        label(c, n, **{EVERY: "true"})
    try:
        started = time.monotonic()
        runs, _ = converge_until(c, with_every, lambda: len(every_workers(c)) == 2
                                 and all(pod_ready(c, w) for w in every_workers(c)), "two every-node workers Ready")
        workers = every_workers(c)
        assert sorted(workers.values()) == nodes, workers
        for w, n in workers.items():
            assert node_of_pod(c, w) == n
        wait_until(lambda: all(slurm_node(c, w).get("State", "").startswith("IDLE") for w in workers), 60,
                   "every-node workers idle", explain=lambda: str([slurm_node(c, w) for w in workers]))
        figure("everyNode on two labelled kind nodes: %s, idle in Slurm %.1f s after labelling (%s, %d run(s) of "
               "site.yml)" % (workers, time.monotonic() - started, driver(c), runs))
        cordon_every(c, workers)

        gone, gone_node = sorted(workers.items())[1]
        job = int(jail_sh(c, "sbatch --parsable -N1 -w %s --wrap 'sleep 15' -o /dev/null" % gone).stdout.split()[-1])
        wait_until(lambda: slurm_job(c, job).get("JobState") == "RUNNING", 60, "job %d running" % job)
        started = time.monotonic()
        label(c, gone_node, **{EVERY: None})
        # What Slurm shows meanwhile (the drain, the job's end and the removal).
        seen, stop = [], threading.Event()

        def watch():
            while not stop.is_set():
                state = slurm_node(c, gone).get("State")
                seen.append((round(time.monotonic() - started, 1), state, slurm_job(c, job).get("JobState"),
                             gone in pods(c, "demo-every-")))
                stop.wait(0.5)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            runs, _ = converge_until(c, with_every, lambda: gone not in pods(c, "demo-every-")
                                     and not slurm_node(c, gone), "%s's pod and Slurm node gone" % gone)
        finally:
            stop.set()
            watcher.join()
        removed = time.monotonic() - started
        ended = slurm_job(c, job)
        assert ended["JobState"] == "COMPLETED", ended  # not killed: it ran to its end
        # Drained while its job ran, with the pod still there; the pod went only after the job ended.
        drained = [t for t, state, job_state, pod in seen if state and "DRAIN" in state and job_state == "RUNNING"
                   and pod]
        assert drained, seen
        assert not [t for t, state, job_state, pod in seen if not pod and job_state == "RUNNING"], seen
        assert gone not in sinfo_nodes(c)
        assert list(every_workers(c).values()) == [n for n in nodes if n != gone_node]
        figure("%s unlabelled under job %d: its worker %s DRAINING after %.1f s while the job ran, the job COMPLETED "
               "(EndTime %s), pod and Slurm record gone %.1f s after the unlabel (%s, %d run(s) of site.yml); sinfo "
               "%s" % (gone_node, job, gone, drained[0], ended.get("EndTime"), removed, driver(c), runs,
                       sinfo_nodes(c)))
    finally:
        for n in nodes:
            label(c, n, **{EVERY: None})


def cordon_every(c, workers):
    """A cordon drains the StatefulSet's worker and the every-node worker on that node; the every-node one, deleted
    there, is made again on its cordoned node (it tolerates the cordon: it belongs to that node); uncordon resumes."""
    host = sorted(workers.values())[0]
    every = next(w for w, n in workers.items() if n == host)
    fixed = next(w for w, n in node_of(c).items() if n == host)
    uid = pods(c, every)[every]["metadata"]["uid"]
    c.run(["kubectl", "cordon", host])
    try:
        started = time.monotonic()
        if not operated(c):
            site(c, with_every)

        def drained_by_cordon(name):
            node = slurm_node(c, name)
            return "DRAIN" in node.get("State", "") and node.get("Reason", "").startswith("soperator: node cordoned")

        wait_until(lambda: all(drained_by_cordon(n) for n in (fixed, every)), 90, "%s and %s drained" % (fixed, every),
                   explain=lambda: str([slurm_node(c, n) for n in (fixed, every)]))
        assert pods(c, every)[every]["metadata"]["uid"] == uid  # drained, not evicted
        drained = time.monotonic() - started
        c.run(["kubectl", "delete", "pod", "-n", NS, every, "--wait=true"])
        started = time.monotonic()
        runs, _ = converge_until(c, with_every, lambda: pod_ready(c, every), "%s made again on %s" % (every, host))
        again = pods(c, every)[every]
        assert again["metadata"]["uid"] != uid and again["spec"]["nodeName"] == host, again["spec"]
        figure("kubectl cordon %s: %s and %s drained by %s (%.1f s, pods kept); %s deleted there: made again on the "
               "cordoned node, Ready %.1f s later" % (host, fixed, every, driver(c), drained, every,
                                                      time.monotonic() - started))
    finally:
        c.run(["kubectl", "uncordon", host])
    if not operated(c):
        site(c, with_every)
    wait_until(lambda: not any("DRAIN" in slurm_node(c, n).get("State", "DRAIN") for n in (fixed, every)), 90,
               "%s and %s resumed" % (fixed, every), explain=lambda: str([slurm_node(c, n) for n in (fixed, every)]))


# Last: it leaves both workers on one node (the next test would start from there).
REPLACE_LOST_AFTER = 20


def with_replacement(docs):
    """slurmdTimeout 20 s, workers of a lost node made again elsewhere 20 s after its Node left Ready, and room for
    it: the workers spread over the nodes (a preferred anti-affinity) instead of onePerNode."""
    spec = docs[0]["spec"]
    spec["slurm"].update(slurmdTimeout=20)
    spec["healthChecks"] = {"kubernetesNodes": {"replaceLostAfter": "%ds" % REPLACE_LOST_AFTER}}
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {
        "slurm.soperator.dev/cluster": "demo", "slurm.soperator.dev/nodeset": "cpu"}}}
    docs[1]["spec"]["placement"] = {"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}}}


def test_a_kubernetes_node_lost_mid_job_has_its_worker_made_again_on_the_other_node(operator):
    """A kind node stopped under a running --requeue job, then started again.

    Timers: Slurm marks a silent node DOWN SlurmdTimeout after its last answer (set to 20 s here through the
    cluster's spec.slurm.slurmdTimeout, default 300 s; slurmctld pings every SlurmdTimeout/3); Kubernetes marks the
    Node not Ready (Unknown) after kube-controller-manager's node-monitor-grace-period (50 s); the converge deletes
    the pod spec.healthChecks.kubernetesNodes.replaceLostAfter (20 s) later, once Slurm also finds its slurmd silent,
    and the StatefulSet makes it again on the surviving node (Kubernetes alone would leave it Terminating until the
    node returns). The operator in-cluster does it: no one runs anything during the outage."""
    c = operator
    started = time.monotonic()
    site(c, with_replacement)
    wait_until(lambda: rolled(c), 300, "the workers spread, up to date, SlurmdTimeout 20",
               explain=lambda: "%s %s" % (cluster_ready(c), nodeset(c).get("status")))
    took = time.monotonic() - started
    placed = node_of(c)
    assert len(set(placed.values())) == 2, "the workers share a node: %s" % placed
    figure("spec.slurm.slurmdTimeout 20, replaceLostAfter %ds, the workers spread by a preferred anti-affinity (a "
           "rolling update from onePerNode) by %s: %.1f s" % (REPLACE_LOST_AFTER, driver(c), took))

    ctl_node = pods(c, "demo-controller-0")["demo-controller-0"]["spec"]["nodeName"]
    # The lost node is a worker's that does not hold slurmctld (losing the controller is another test).
    victim = sorted(w for w, n in placed.items() if n != ctl_node)[0]
    survivor = sorted(w for w in placed if w != victim)[0]
    kind_node, other_node = placed[victim], placed[survivor]
    old_uid = pods(c, victim)[victim]["metadata"]["uid"]
    munge = json.loads(c.run(["kubectl", "get", "secret", "-n", NS, "demo-munge-key", "-o", "json"]).stdout)
    jail = json.loads(c.run(["kubectl", "get", "pvc", "-n", NS, "demo-jail", "-o", "json"]).stdout)
    token = "jail-%d" % time.time_ns()
    out = jail_sh(c, """
echo %s > lost-node-marker
printf '#!/bin/sh\\necho "start $(hostname) restart ${SLURM_RESTART_COUNT:-0}"\\nexec sleep 600\\n' > lost.sh
rm -f lost.out
sbatch --parsable --requeue -N1 -w %s --open-mode=append -o /root/lost.out lost.sh
""" % (token, victim)).stdout
    job = int(out.split()[-1])
    wait_until(lambda: slurm_job(c, job).get("JobState") == "RUNNING", 60, "job %d running" % job)

    leader = ""
    if operated(c):
        holder = c.run(["kubectl", "get", "lease", "-n", "soperator-system", "soperator-operator", "-o",
                        "jsonpath={.spec.holderIdentity}"]).stdout.strip()
        leader = " (the operator's leader on %s)" % c.run(["kubectl", "get", "pod", "-n", "soperator-system", holder,
                                                           "-o", "jsonpath={.spec.nodeName}"]).stdout.strip()
    try:
        started = time.monotonic()
        c.run(["docker", "stop", "--time", "0", kind_node])
        seen = {}

        def watch():
            now = time.monotonic() - started
            node = slurm_node(c, victim)
            state = node.get("State", "")
            if "NOT_RESPONDING" in state or state.endswith("*"):
                seen.setdefault("not_responding", now)
            if "DOWN" in state:
                seen.setdefault("down", now)
                seen.setdefault("reason", node.get("Reason", ""))
            if kind_node_ready(c, kind_node) != "True":
                seen.setdefault("notready", now)
            return "down" in seen and "notready" in seen

        wait_until(watch, 120, "%s DOWN in Slurm and %s not Ready" % (victim, kind_node),
                   explain=lambda: "%s %s" % (seen, slurm_node(c, victim)))
        wait_until(lambda: slurm_job(c, job).get("JobState") in ("PENDING", "REQUEUED")
                   and int(slurm_job(c, job).get("Restarts", 0)) >= 1, 60, "job %d requeued" % job,
                   explain=lambda: str(slurm_job(c, job)))
        info = slurm_job(c, job)
        figure("kind node %s%s stopped under job %d on %s: Slurm NOT_RESPONDING after %s s, DOWN after %.1f s "
               "(Reason=%s), Kubernetes Node not Ready after %.1f s; job %s Restarts=%s Reason=%s" % (
                   kind_node, leader, job, victim, "%.1f" % seen["not_responding"] if "not_responding" in seen else "-",
                   seen["down"], seen["reason"], seen["notready"], info["JobState"], info["Restarts"],
                   info.get("Reason")))
        assert seen["reason"], "a DOWN node without a reason"

        # The operator deletes the pod once the bound has passed (site.yml, run during the outage with no wait for
        # Ready as the login pod may be on the lost node, keeps going while the bound runs, then deletes it); the
        # StatefulSet makes it on the surviving node.
        took = 0.0 if operated(c) else site(c, with_replacement, wait=False)
        wait_until(lambda: pods(c, victim).get(victim, {}).get("metadata", {}).get("uid") not in (None, old_uid),
                   120, "%s deleted and made again" % victim, explain=lambda: str(pods(c, victim)))
        deleted = time.monotonic() - started
        events = json.loads(c.run(["kubectl", "get", "events", "-n", NS, "--field-selector",
                                   "involvedObject.name=cpu,reason=LostWorkerReplaced", "-o", "json"]).stdout)
        assert any(victim in e["message"] and kind_node in e["message"] for e in events["items"]), events["items"]
        wait_until(lambda: node_of_pod(c, victim) == other_node and pod_ready(c, victim), 120,
                   "%s made again on %s" % (victim, other_node))

        def rejoined():
            state = slurm_node(c, victim).get("State", "")
            return state.startswith("IDLE") and "NOT_RESPONDING" not in state and "DOWN" not in state

        wait_until(rejoined, 120, "the replacement %s idle in Slurm" % victim,
                   explain=lambda: str(slurm_node(c, victim)))
        idle = time.monotonic() - started
        figure("%s deleted by %s%s %.1f s after the stop (%.1f s after the Node left Ready; replaceLostAfter %ds), "
               "made again on %s and idle in Slurm %.1f s after the stop" % (
                   victim, driver(c), "" if operated(c) else " (site.yml during the outage: %.1f s)" % took, deleted,
                   deleted - seen["notready"], REPLACE_LOST_AFTER, other_node, idle))
        # No ghost, nothing lost: Slurm lists the same two workers; munge key and jail untouched.
        assert sorted(pods(c)) == ["demo-cpu-0", "demo-cpu-1"]
        assert sinfo_nodes(c) == ["demo-cpu-0", "demo-cpu-1"]
        after = json.loads(c.run(["kubectl", "get", "secret", "-n", NS, "demo-munge-key", "-o", "json"]).stdout)
        assert (after["metadata"]["uid"], after["metadata"]["resourceVersion"], after["data"]) == \
            (munge["metadata"]["uid"], munge["metadata"]["resourceVersion"], munge["data"])
        pvc = json.loads(c.run(["kubectl", "get", "pvc", "-n", NS, "demo-jail", "-o", "json"]).stdout)
        assert (pvc["metadata"]["uid"], pvc["status"]["phase"]) == (jail["metadata"]["uid"], "Bound")
        assert c.run(["kubectl", "exec", "-n", NS, victim, "-c", "slurmd", "--", "cat",
                      "/mnt/jail/root/lost-node-marker"]).stdout.strip() == token
        # The requeued job (held by Slurm's requeue delay, BeginTime about 121 s after the requeue) runs on the
        # replacement once released.
        ctld(c, "scontrol", "update", "JobId=%d" % job, "StartTime=now")
        wait_until(lambda: slurm_job(c, job).get("JobState") == "RUNNING", 60, "job %d running again" % job,
                   explain=lambda: "%s\n%s" % (slurm_job(c, job), slurm_node(c, victim)))
        rerun = time.monotonic() - started
        wait_until(lambda: "restart 1" in c.run(["kubectl", "exec", "-n", NS, survivor, "-c", "slurmd", "--", "cat",
                                                 "/mnt/jail/root/lost.out"]).stdout, 30, "the job's second start")
        ctld(c, "scancel", str(job))
        figure("job %d running again on the replacement %.1f s after the stop (released with StartTime=now)"
               % (job, rerun))
    finally:
        restarted = time.monotonic()
        c.run(["docker", "start", kind_node])
    wait_until(lambda: kind_node_ready(c, kind_node) == "True", 180, "%s Ready again" % kind_node)
    ready = time.monotonic() - restarted
    # The returning kubelet finds its pod deleted and stops it: the replacement stays where it is, still serving.
    login_node = pods(c, "demo-login-0")["demo-login-0"]["spec"]["nodeName"]
    wait_until(lambda: pod_ready(c, "demo-login-0"), 120, "demo-login-0 Ready",
               explain=lambda: c.run(["kubectl", "describe", "pod", "-n", NS, "demo-login-0"]).stdout[-3000:])
    login_ready = time.monotonic() - restarted
    out = jail_sh(c, "timeout 60 srun -N2 --immediate=30 hostname").stdout
    assert sorted(out.split()) == ["demo-cpu-0", "demo-cpu-1"], out
    figure("docker start %s: Kubernetes Ready after %.1f s; login pod on %s (%s) Ready after %.1f s, srun -N2 "
           "through it" % (kind_node, ready, login_node, "the restarted node" if login_node == kind_node
                           else "the surviving node", login_ready))
    assert node_of(c)[victim] == other_node
    assert sinfo_nodes(c) == ["demo-cpu-0", "demo-cpu-1"]
    out = c.run(["kubectl", "exec", "-n", NS, survivor, "-c", "slurmd", "--", "cat", "/mnt/jail/root/lost.out"]).stdout
    assert "start %s restart 0" % victim in out and "start %s restart 1" % victim in out, out


def cluster_ready(c):
    """(the SlurmCluster's generation, its Ready condition)."""
    obj = json.loads(c.run(["kubectl", "get", "slurmcluster", "-n", NS, "demo", "-o", "json"]).stdout)
    ready = next((x for x in (obj.get("status") or {}).get("conditions") or () if x.get("type") == "Ready"), {})
    return obj["metadata"]["generation"], ready


def settled(c):
    """The cluster converged to its current spec (Ready at its generation) and the NodeSet cpu's workers on its
    current template."""
    generation, ready = cluster_ready(c)
    status = nodeset(c).get("status") or {}
    return (ready.get("status") == "True" and ready.get("observedGeneration") == generation
            and status.get("observedGeneration") == nodeset(c)["metadata"]["generation"]
            and status.get("updatedReplicas") == 2 and not status.get("outdatedReplicas"))


def rolled(c):
    """settled, the two workers Ready on two Kubernetes nodes, slurmctld on SlurmdTimeout 20."""
    placed = node_of(c)
    return (settled(c) and len(placed) == 2 and len(set(placed.values())) == 2 and all(pod_ready(c, w) for w in placed)
            and "SlurmdTimeout           = 20 sec" in ctld(c, "scontrol", "show", "config", check=False))
