#!/usr/bin/env python3
"""Benchmark of the collection: render time, site.yml wall time and API requests (fresh and no-op converge).

Render: clusters of 1, 100 and 1000 workers, as one NodeSet and as NodeSets of 10 workers each (the renderer's
cost follows NodeSets, not workers: a NodeSet is one StatefulSet whatever its replicas).
site.yml: on a private local cluster (its own audit log), a fresh converge and a no-op rerun of a cluster with
1 and with 10 NodeSets; requests are counted from the audit log (the admin user's requests only, i.e. ours).
Prints figures; asserts nothing about time.
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the checkout importable as the collection (a fresh clone has no link yet)
sys.path.insert(0, subprocess.run([os.path.join(ROOT, "hack", "collection-link.sh")], check=True, text=True,
                                  capture_output=True).stdout.strip())
sys.path.insert(0, os.path.join(ROOT, "hack"))

import yaml  # noqa: E402

from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "cpu-cluster.yaml")


def example():
    with open(EXAMPLE) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    cluster = next(d for d in docs if d["kind"] == "SlurmCluster")
    nodeset = next(d for d in docs if d["kind"] == "NodeSet")
    cluster["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    return cluster, nodeset


def nodesets(template, workers, per_set):
    sets = []
    for i in range(max(1, workers // per_set)):
        ns = copy.deepcopy(template)
        ns["metadata"]["name"] = "cpu%d" % i
        ns["metadata"]["uid"] = "00000000-0000-0000-0001-%012d" % i
        ns["spec"]["replicas"] = min(per_set, workers)
        sets.append(ns)
    return sets


def bench_render():
    cluster, template = example()
    cluster["spec"].setdefault("slurm", {})["maxNodeCount"] = 4096
    for workers in (1, 100, 1000):
        for per_set in (workers, 10):
            if per_set > workers:
                continue
            sets = nodesets(template, workers, per_set)
            runs, t0 = 0, time.perf_counter()
            while True:
                manifests = render_cluster(cluster, sets)
                runs += 1
                if time.perf_counter() - t0 > 1.0 and runs >= 3:
                    break
            per = (time.perf_counter() - t0) / runs
            print("render: %4d workers in %3d NodeSet(s): %8.2f ms, %4d objects" % (
                workers, len(sets), per * 1000, len(manifests)))


def audit_count(path, user="localcluster-admin"):
    counts = {}
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            if ev.get("user", {}).get("username") != user:
                continue
            key = ev["verb"]
            counts[key] = counts.get(key, 0) + 1
    return counts


def diff(after, before):
    out = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return {k: v for k, v in sorted(out.items()) if v}


def bench_site():
    state = tempfile.mkdtemp(prefix="lc-bench-collection-")
    env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=state)
    env.pop("SOPERATOR_KUBECONFIG", None)
    tool = os.path.join(ROOT, "hack", "localcluster.py")
    subprocess.run([sys.executable, tool, "up", "--nodes", "12", "--gpu-nodes", "0"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    audit = os.path.join(state, "logs", "audit.log")
    env.update(K8S_AUTH_KUBECONFIG=os.path.join(state, "kubeconfig"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + env["PATH"],
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False")
    try:
        for n_sets in (1, 10):
            cluster, template = example()
            cluster["metadata"]["name"] = "bench%d" % n_sets
            del cluster["metadata"]["uid"]
            sets = []
            for ns in nodesets(template, 2 * n_sets, 2):
                ns["spec"]["clusterRef"]["name"] = cluster["metadata"]["name"]
                del ns["metadata"]["uid"]
                sets.append(ns)
            varfile = os.path.join(state, "clusters-%d.json" % n_sets)
            with open(varfile, "w") as f:
                json.dump({"soperator_clusters": [{"resources": [cluster] + sets}]}, f)
            for label in ("fresh converge", "no-op rerun"):
                before = audit_count(audit)
                t0 = time.monotonic()
                subprocess.run(["ansible-playbook", os.path.join(ROOT, "playbooks", "site.yml"), "-e", "@" + varfile],
                               env=env, check=True, stdout=subprocess.DEVNULL)
                wall = time.monotonic() - t0
                time.sleep(1.0)  # the audit log is written asynchronously (batch backend): let it flush
                counts = diff(audit_count(audit), before)
                print("site.yml: %2d NodeSet(s), %-14s %5.1f s wall, %3d API requests %s" % (
                    n_sets, label, wall, sum(counts.values()), counts))
    finally:
        subprocess.run([sys.executable, tool, "down"], env=env, check=False, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    bench_render()
    bench_site()
