"""What needs two machines (issue 35), on the README's kind cluster (conftest.py's ``kind_cluster``: one control plane,
two kind workers, the CPU example converged by site.yml, the jail one ReadWriteMany volume on a host directory every
node mounts). Every other end-to-end test runs on one kubelet; these run on two.

Each test prints its figure on a line starting ``kind-multinode:``. Changes reach the cluster as a user makes them:
kubectl on Kubernetes objects, ``docker stop``/``start`` of a kind node, or site.yml run again with a changed copy of
the example.
"""

import json
import re
import time

NS = "slurm"
LOGIN = ["kubectl", "exec", "-n", NS, "demo-login-0", "-c", "sshd", "--", "chroot", "/mnt/jail"]


def figure(text):
    print("\nkind-multinode: " + text)


def jail_sh(cluster, script, timeout=120, check=True):
    """``script`` run by sh in the jail of the login pod (as root, in /root)."""
    return cluster.run(LOGIN + ["sh", "-ec", "cd /root\n" + script], timeout=timeout, check=check)


def pods(cluster, selector_prefix="demo-cpu-"):
    items = json.loads(cluster.run(["kubectl", "get", "pods", "-n", NS, "-o", "json"]).stdout)["items"]
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(selector_prefix)}


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
