#!/usr/bin/env python3
"""Benchmark of the local cluster: warm `up` time, control-plane memory, kwok pods Running at 100 and 1000.

Uses a private instance (its own state dir), so a developer's running cluster is not disturbed. Prints figures;
asserts nothing about time.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "hack", "localcluster.py")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    state_dir = tempfile.mkdtemp(prefix="lc-bench-")
    env = dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=state_dir)
    env.pop("SOPERATOR_KUBECONFIG", None)
    t0 = time.monotonic()
    subprocess.run([sys.executable, TOOL, "up", "--nodes", "12", "--gpu-nodes", "2"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    up_s = time.monotonic() - t0
    with open(os.path.join(state_dir, "state.json")) as f:
        state = json.load(f)
    kubectl = [os.path.join(os.path.expanduser(os.environ.get("SOPERATOR_CACHE", "~/.cache/soperator")),
                            "kubernetes-" + state["version"], "bin", "kubectl"),
               "--kubeconfig", os.path.join(state_dir, "kubeconfig")]
    try:
        print("localcluster: warm up (12 kwok nodes) %.1f s, API ready after %.1f s" % (
            up_s, state["timings"]["api_ready_s"]))
        mem = {n: rss_mib(p["pid"]) for n, p in state["processes"].items()}
        print("localcluster: idle RSS %s; total %.0f MiB" % (
            ", ".join("%s %.0f MiB" % kv for kv in mem.items()), sum(mem.values())))
        for n in (100, 1000):
            subprocess.run(kubectl + ["create", "deployment", "bench%d" % n, "--image=example.invalid/none",
                                      "--replicas=%d" % n], check=True, stdout=subprocess.DEVNULL)
            t = time.monotonic()
            while True:
                out = subprocess.run(kubectl + ["get", "pods", "-l", "app=bench%d" % n,
                                                "--field-selector=status.phase=Running", "-o", "name"],
                                     capture_output=True, text=True, check=True).stdout
                running = len(out.split())
                if running >= n:
                    break
                if time.monotonic() - t > 900:
                    print("localcluster: %d pods: only %d Running after 900 s" % (n, running))
                    break
                time.sleep(0.5)
            print("localcluster: %d pods Running in %.1f s" % (n, time.monotonic() - t))
            subprocess.run(kubectl + ["delete", "deployment", "bench%d" % n, "--wait=false"], check=True,
                           stdout=subprocess.DEVNULL)
        t = time.monotonic()
        subprocess.run([sys.executable, TOOL, "nodes", "1000", "--gpu-nodes", "100"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        print("localcluster: kwok pool resized to 1000 nodes (100 with GPUs), all Ready, in %.1f s" % (
            time.monotonic() - t))
        mem = {n: rss_mib(p["pid"]) for n, p in state["processes"].items()}
        print("localcluster: RSS after 1100 pods and 1000 nodes: total %.0f MiB (kube-apiserver %.0f, etcd %.0f)" % (
            sum(mem.values()), mem["kube-apiserver"], mem["etcd"]))
    finally:
        subprocess.run([sys.executable, TOOL, "down"], env=env, check=False, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
