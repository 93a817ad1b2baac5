#!/usr/bin/env python3
"""Operator benchmark against the local Kubernetes (figures printed, nothing asserted about time).

  .venv/bin/python bench/bench_operator.py [--clusters 20] [--resyncs 5]

1. create a SlurmCluster + NodeSet -> status Successful (seconds);
2. NodeSet replicas change (scale subresource) -> StatefulSet spec.replicas updated (seconds);
3. CPU seconds per no-op resync: user+sys of the operator and every ansible process it waited for
   (/proc/<pid>/stat utime+stime+cutime+cstime), divided by the runs counted in its metrics;
4. operator resident memory (VmRSS, VmHWM) once N clusters are Ready.
Uses its own namespace and removes it at the end (after the operator released every finalizer).
"""

import argparse  # noqa: E402
import os
import sys
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "operator"), os.path.join(ROOT, "hack"), os.path.join(ROOT, "operator")]

import localcluster  # noqa: E402
from operator_harness import Cluster, OperatorProcess, wait_for, write_watches  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid, encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS  # utime stime cutime cstime


def memory_kib(pid):
    values = {}
    with open("/proc/%d/status" % pid, encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values


def successful(c, name, generation=1):
    cond = c.condition("SlurmCluster", name, "Successful")
    obj = c.get("SlurmCluster", name)
    return cond and cond["status"] == "True" and obj["status"].get("observedGeneration") == generation


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--resyncs", type=int, default=5)
    parser.add_argument("--resync-period", default="10s")
    args = parser.parse_args()

    from kubernetes import client, config
    state = localcluster.load_state()
    if not localcluster.running(state):
        sys.exit("start the local cluster first: python3 hack/localcluster.py up")
    kubeconfig = localcluster.state_path("kubeconfig")
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    namespace = "bench-operator-" + uuid.uuid4().hex[:6]
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    c = Cluster(api, namespace)
    tmp = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    collections = os.path.join(ROOT, ".cache", "collections")
    watches = write_watches(str(tmp / "watches.yaml"), reconcile_period=args.resync_period)
    op = OperatorProcess(tmp, kubeconfig, collections, namespace, "bench", watches,
                         extra_args=["--max-workers", "4"])
    figures = {}
    try:
        wait_for(lambda: c.lease_holder() == "bench", 30, what="leadership")
        # 1. create -> Successful
        start = time.monotonic()
        for doc in c.example():
            c.create(doc)
        wait_for(lambda: successful(c, "demo"), 300, 0.05, what="Successful")
        figures["create -> Successful (s)"] = time.monotonic() - start

        # 2. replicas change -> StatefulSet updated
        start = time.monotonic()
        c.scale("cpu", 3)
        wait_for(lambda: c.apps.read_namespaced_stateful_set("demo-cpu", namespace).spec.replicas == 3, 300, 0.05,
                 what="StatefulSet scaled")
        figures["replicas change -> StatefulSet updated (s)"] = time.monotonic() - start
        wait_for(lambda: successful(c, "demo", 1) or True, 5)

        # 3. CPU per no-op resync (only this cluster exists, nothing changes)
        runs = lambda: op.metric("soperator_operator_runs_total")  # noqa: E731
        wait_for(lambda: op.metric("soperator_operator_runs_in_flight") == 0 and runs() >= 2, 120,
                 what="idle")
        runs0, cpu0 = runs(), cpu_seconds(op.proc.pid)
        wait_for(lambda: runs() >= runs0 + args.resyncs, 60 + 30 * args.resyncs, what="resyncs")
        wait_for(lambda: op.metric("soperator_operator_runs_in_flight") == 0 or True, 1)
        runs1, cpu1 = runs(), cpu_seconds(op.proc.pid)
        figures["CPU seconds per no-op resync"] = (cpu1 - cpu0) / (runs1 - runs0)
        figures["wall seconds per no-op resync (mean run)"] = (
            op.metric("soperator_operator_run_duration_seconds_sum")
            / max(1, op.metric("soperator_operator_run_duration_seconds_count")))

        # 4. memory with N clusters
        start = time.monotonic()
        for i in range(1, args.clusters):
            for doc in c.example():
                doc["metadata"]["name"] = "demo%d" % i if doc["kind"] == "SlurmCluster" else "cpu%d" % i
                if doc["kind"] == "NodeSet":
                    doc["spec"]["clusterRef"]["name"] = "demo%d" % i
                c.create(doc)
        names = ["demo"] + ["demo%d" % i for i in range(1, args.clusters)]
        wait_for(lambda: all(successful(c, n) for n in names), 120 + 20 * args.clusters, 1,
                 what="%d clusters Successful" % args.clusters)
        figures["%d clusters Successful after creation (s)" % args.clusters] = time.monotonic() - start
        mem = memory_kib(op.proc.pid)
        figures["operator VmRSS with %d clusters (MiB)" % args.clusters] = mem["VmRSS"] / 1024
        figures["operator VmHWM with %d clusters (MiB)" % args.clusters] = mem["VmHWM"] / 1024

        # clean up while the operator still runs the finalizers
        for name in names:
            c.delete("SlurmCluster", name)
        wait_for(lambda: not c.custom.list_namespaced_custom_object(
            "slurm.soperator.dev", "v1alpha1", namespace, "slurmclusters")["items"], 120 + 15 * args.clusters, 1,
            what="clusters released")
    finally:
        op.terminate()
        op.cleanup()
        c.release_finalizers()
        client.CoreV1Api(api).delete_namespace(namespace)
    print("operator benchmark (%d cores, load %.1f)" % (os.cpu_count(), os.getloadavg()[0]))
    for key, value in figures.items():
        print("  %-52s %8.2f" % (key, value))


if __name__ == "__main__":
    main()
