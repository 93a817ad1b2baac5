#!/usr/bin/env python3
"""Per-task overhead of spank_chroot: srun with and without the plugin, median of N runs.

Brings up the same real cluster as the tests (needs root), then times, inside the cluster's
namespaces so no harness overhead is counted:
  * `srun -w n1 true` as a new job each time (allocation + step), and
  * `srun -w n1 true` as steps of one salloc allocation (the step launch alone).
Prints figures only; nothing is asserted.

    sudo python3 tests/slurm/bench_spank.py [--runs 50]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurm_cluster import JAIL, PLUGIN_PATH, USER, Cluster  # noqa: E402

# One shell loop inside the cluster; prints one duration in microseconds per run.
LOOP = r"""
i=0
while [ $i -lt {runs} ]; do
  s=$(date +%s%N); srun -w n1 true >/dev/null || exit 1; e=$(date +%s%N)
  echo $(( (e - s) / 1000 ))
  i=$((i + 1))
done
"""


def timings(cluster: Cluster, runs: int, in_allocation: bool) -> list[float]:
    loop = LOOP.format(runs=runs)
    if in_allocation:
        argv = ["salloc", "-w", "n1", "-N1", "sh", "-c", loop]
    else:
        argv = ["sh", "-c", loop]
    res = cluster.run(argv, user=USER, timeout=30 + runs * 10, env={"SHELL": "/bin/sh"}).check()
    return [int(x) / 1000.0 for x in res.stdout.split()]


def plugin_times_us(cluster: Cluster) -> list[int]:
    """The plugin's own time per task, from its debug line in slurmd's log."""
    times = []
    for line in cluster.log("slurmd-n1.log").splitlines():
        m = re.search(r"spank_chroot: \S+ step entered \S+ in (\d+) us", line)
        if m:
            times.append(int(m.group(1)))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    rounds = max(1, args.runs // 10)
    cluster = Cluster()
    try:
        cluster.prepare()
        cluster.start()
        timings(cluster, 3, False)  # warm up
        what = {False: "srun as a new job", True: "srun step in an allocation"}
        print(f"median of {rounds * 10} runs each, milliseconds (wall time seen by srun), "
              "with and without the plugin interleaved in rounds of 10")
        for in_alloc in (False, True):
            samples = {True: [], False: []}
            for _ in range(rounds):  # interleaved: load drifts on a shared machine
                for plugin in (True, False):
                    cluster.plugstack(f"required {PLUGIN_PATH} jail={JAIL}\n" if plugin else None)
                    samples[plugin] += timings(cluster, 10, in_alloc)
            m = {k: statistics.median(v) for k, v in samples.items()}
            print(f"  {what[in_alloc]:28s} with plugin {m[True]:7.1f}   without {m[False]:7.1f}"
                  f"   difference {m[True] - m[False]:+6.1f}")
        inside = plugin_times_us(cluster)
        if inside:
            print(f"  plugin's own time in the task (unshare, mounts, pivot_root): median "
                  f"{statistics.median(inside) / 1000:.2f} ms over {len(inside)} tasks")
    finally:
        cluster.stop()
        cluster.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
