#!/usr/bin/env python3
"""Elastic NodeSets on real Slurm 24.11: submit -> running for a 2-node job from zero, and the planner's CPU per
power-up. The same cluster as test_elastic_power.py (the rendered power saving, the controller image's program and
PrologSlurmctld, plan/elastic.decide; the harness starts and stops slurmd for the pods). Prints figures only;
nothing is asserted.

    sudo python3 tests/slurm/bench_elastic.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The collection importable as ansible_collections.soperator.slurm (hack/collection-link.sh makes the link).
subprocess.run([str(ROOT / "hack/collection-link.sh")], check=True, stdout=subprocess.DEVNULL)
sys.path[:0] = [str(HERE), str(HERE.parent), str(ROOT / ".cache/collections")]

from cloud_cluster import CloudCluster  # noqa: E402
from elastic_cluster import ElasticCluster, ElasticHands, elastic_config, powered_down, prepare_started  # noqa: E402
from slurm_cluster import running, wait_for  # noqa: E402


def job_state(c: CloudCluster, job: str) -> str:
    return c.job(job)["JobState"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    power = {"suspendTime": 5, "suspendTimeout": 3, "resumeTimeout": 30}
    latencies, cpu, ups = [], 0.0, 0
    with running(ElasticCluster(elastic_config(power))) as c:
        prepare_started(c)
        for _ in range(args.runs):
            wait_for(lambda: powered_down(c) and not c.running_nodes(), 90, "every node powered down", interval=0.5)
            with ElasticHands(c, poll=0.2) as hands:
                start = time.time()
                job = c.sbatch("-N2", script="#!/bin/sh\nsleep 1\n")
                wait_for(lambda j=job: job_state(c, j) in ("RUNNING", "COMPLETED"), 90, "running", interval=0.1)
                latencies.append(time.time() - start)
                wait_for(lambda j=job: job_state(c, j) == "COMPLETED", 90, "completed", interval=0.5)
                wait_for(lambda: powered_down(c) and not c.running_nodes(), 90, "powered down", interval=0.5)
            cpu += hands.decide_cpu
            ups += len([a for _t, a, _n in hands.log if a == "create"])
    print("elastic: submit -> running, 2-node job from zero (real Slurm 24.11, PrologSlurmctld waiting): "
          "median %.1f s, min %.1f s, max %.1f s over %d runs"
          % (statistics.median(latencies), min(latencies), max(latencies), len(latencies)))
    print("elastic: planner CPU per power-up (plan/elastic.decide every 0.2 s over whole cycles): %.4f CPU-s "
          "(%d power-ups)" % (cpu / max(ups, 1), ups))


if __name__ == "__main__":
    main()
