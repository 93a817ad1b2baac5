"""Experiments on real Slurm 24.11 behind docs/slurm-24.11-findings.md (not a test: a script that prints what it sees).

    sudo .venv/bin/python tests/slurm/experiments_24_11.py SCENARIO...   (scenarios: see SCENARIOS; "all" runs each)

Each scenario starts its own CloudCluster (cloud_cluster.py), drives it as the findings say, and prints a timeline of
``sinfo``/``squeue`` changes and the power program calls. Take ``flock /tmp/soperator-heavy.lock`` around it.
"""

from __future__ import annotations

import sys
import threading
import time

from cloud_cluster import DEFAULT_POWER, CloudCluster, CloudConfig, CloudSet, Operator, Partition
from slurm_cluster import running, wait_for

T0 = time.monotonic()


def say(*args) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s]", *args, flush=True)


def sh(c: CloudCluster, cmd: str, user: str | None = None) -> str:
    """Run a shell command in the cluster; print it and its output."""
    res = c.run(["sh", "-c", cmd], user=user, timeout=60)
    say(f"$ {cmd}  (rc={res.returncode})")
    for line in res.output.strip().splitlines():
        print("    " + line, flush=True)
    return res.stdout


class Timeline:
    """Print every change of node states and job states, sampled every 0.3 s."""

    def __init__(self, c: CloudCluster):
        self.c, self._stop, self.last = c, False, None

    def __enter__(self):
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._t.join()

    def _loop(self):
        while not self._stop:
            res = self.c.run(["sh", "-c", "sinfo -h -N -o '%N=%t' | tr '\\n' ' '; echo '|';"
                                          "squeue -h -o '%i:%T:%r:%N' | tr '\\n' ' '"], timeout=10)
            now = " ".join(res.stdout.split())
            if res.returncode == 0 and now != self.last:
                say("state:", now)
                self.last = now
            time.sleep(0.3)


def calls(c: CloudCluster) -> None:
    for call in c.calls():
        say(f"power program: {call.action} {call.hostlist} uid={call.uid} resume_file={call.resume_file}")


# ---- scenarios -----------------------------------------------------------------------------------------------
def cycle() -> None:
    """sbatch -N2 from zero: resume exactly 2, job runs, idle → suspend; submit → running, in seconds."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 3)])
    cfg.power["SuspendTime"] = 15
    with running(CloudCluster(cfg)) as c, Operator(c) as op, Timeline(c):
        sh(c, "sinfo; scontrol show node demo-gpu-0 | grep -E 'State|NodeAddr'")
        t = time.monotonic()
        job = c.sbatch("-N2", script="#!/bin/sh\nhostname\nsleep 3\n")
        wait_for(lambda: c.job(job)["JobState"] == "RUNNING", 90, "job running", interval=0.2)
        say(f"submit -> RUNNING: {time.monotonic() - t:.1f}s")
        sh(c, "scontrol show node demo-gpu-0 | grep -E 'State|NodeAddr|BootTime'")
        wait_for(lambda: all(c.state(n) == "idle~" for n in ("demo-gpu-0", "demo-gpu-1")), 90, "powered down")
        calls(c)
        for entry in op.log:
            say("operator:", entry)
        print(c.log("slurmctld.log")[-3000:])


def fail() -> None:
    """A node that never comes up: ResumeTimeout → DOWN, job requeued; power down force → idle~; job runs later."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 2)])
    cfg.power.update(ResumeTimeout=15, SuspendTimeout=5)
    with running(CloudCluster(cfg)) as c, Operator(c, fail={"demo-gpu-1"}) as op, Timeline(c):
        job = c.sbatch("-N2", script="#!/bin/sh\nsleep 2\n")
        wait_for(lambda: c.node("demo-gpu-1").get("State", "").startswith("DOWN"), 60, "gpu-1 down")
        sh(c, f"scontrol show node demo-gpu-1 | grep -E 'State|Reason'; scontrol show job {job} | "
              "grep -E 'JobState|Restarts|Eligible'")
        op.fail.clear()  # the cause is fixed (the pod can be scheduled now)
        sh(c, "scontrol power down force demo-gpu-1")
        wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 240, "the requeued job to complete", interval=1)
        sh(c, f"scontrol show job {job} | grep -E 'JobState|Restarts|NodeList'")
        calls(c)
        for entry in op.log:
            say("operator:", entry)


def crash() -> None:
    """The pod of a powered-up node dies while a job runs on it (no suspend asked)."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 2)])
    cfg.power.update(SuspendTime=20)
    cfg.slurmd_timeout = 10
    with running(CloudCluster(cfg)) as c, Operator(c) as op, Timeline(c):
        job = c.sbatch("-N1", script="#!/bin/sh\nsleep 300\n")
        wait_for(lambda: c.job(job)["JobState"] == "RUNNING", 90, "job running", interval=0.5)
        node = c.job(job)["NodeList"]
        c.stop_node(node)
        say(f"killed the slurmd of {node}")
        time.sleep(70)
        sh(c, f"scontrol show node {node} | grep -E 'State|Reason'; scontrol show job {job} | "
              "grep -E 'JobState|Reason|Restarts'")
        calls(c)
        for entry in op.log:
            say("operator:", entry)


def shrink() -> None:
    """A reconfigure removes the node a job runs on (maximum lowered while busy)."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 3)])
    with running(CloudCluster(cfg)) as c, Operator(c), Timeline(c):
        job = c.sbatch("-N1", "-w", "demo-gpu-2", script="#!/bin/sh\nsleep 300\n")
        wait_for(lambda: c.job(job)["JobState"] == "RUNNING", 90, "job running", interval=0.5)
        c.config.cloud_sets = [CloudSet("gpu", 2)]
        c.write_conf()
        sh(c, "scontrol reconfigure")
        time.sleep(3)
        sh(c, f"sinfo -N; scontrol show job {job} | grep -E 'JobState|Reason|NodeList'; pgrep -a slurmctld")
        print("\n".join(c.log("slurmctld.log").splitlines()[-15:]))


def port() -> None:
    """A key the docs say needs a restart (SlurmctldPort) changed by reconfigure."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 1)])
    with running(CloudCluster(cfg)) as c:
        old = c.ctld_port
        sh(c, "pgrep -a slurmctld; scontrol show config | grep -E '^SlurmctldPort'")
        from slurm_cluster import free_ports
        c.ctld_port = free_ports(1)[0]
        c.write_conf()
        c.run(["cp", "/etc/slurm/slurm.conf", "/tmp/new.conf"]).check()
        conf_old = c.config.render(old, c.slurmd_port)
        (c.root / "tmp/old.conf").write_text(conf_old)
        sh(c, "SLURM_CONF=/tmp/old.conf scontrol reconfigure")
        time.sleep(5)
        sh(c, "pgrep -a slurmctld; SLURM_CONF=/tmp/old.conf scontrol ping; SLURM_CONF=/tmp/new.conf scontrol ping; "
              "ss -ltnp | grep slurmctld")
        print("\n".join(c.log("slurmctld.log").splitlines()[-12:]))


def block() -> None:
    """topology/block over cloud nodes: --segment placement, scontrol show topology."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 4)], topology_plugin="topology/block",
                      topology="BlockName=b1 Nodes=demo-gpu-[0-1]\nBlockName=b2 Nodes=demo-gpu-[2-3]\nBlockSizes=2,4\n")
    with running(CloudCluster(cfg)) as c, Operator(c), Timeline(c):
        sh(c, "scontrol show topology")
        for args in (("-N2", "--segment=2"), ("-N4", "--segment=2"), ("-N2",), ("-N3", "--segment=2"), ("-N4",)):
            res = c.run(["sbatch", "--parsable", "-o", "/dev/null", *args, "--wrap", "sleep 1"], user="alice")
            say(f"sbatch {' '.join(args)}: rc={res.returncode} {res.output.strip()}")
            if res.returncode == 0:
                job = res.stdout.strip()
                wait_for(lambda j=job: c.job(j)["JobState"] in ("RUNNING", "COMPLETED", "COMPLETING"), 120,
                         f"job {job} to start", interval=0.5)
                say(f"  job {job} NodeList={c.job(job)['NodeList']}")
                wait_for(lambda j=job: c.job(j)["JobState"] == "COMPLETED", 60, "done", interval=0.5)


def tree() -> None:
    """topology/tree over cloud nodes: --switches=1 picks one leaf, resumes only its nodes; a relabel by reconfigure."""
    topo = ("SwitchName=leaf1 Nodes=demo-gpu-[0,2]\nSwitchName=leaf2 Nodes=demo-gpu-[1,3]\n"
            "SwitchName=spine Switches=leaf[1-2]\n")
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 4)], topology_plugin="topology/tree", topology=topo)
    with running(CloudCluster(cfg)) as c, Operator(c), Timeline(c):
        sh(c, "scontrol show topology")
        job = c.sbatch("-N2", "--switches=1", script="#!/bin/sh\nsleep 1\n")
        wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 120, "job done", interval=0.5)
        say(f"--switches=1 job NodeList={c.job(job)['NodeList']}")
        calls(c)
        c.config.topology = "SwitchName=leaf1 Nodes=demo-gpu-[0-1]\nSwitchName=leaf2 Nodes=demo-gpu-[2-3]\n" \
                            "SwitchName=spine Switches=leaf[1-2]\n"
        c.write_conf()
        sh(c, "pgrep -a slurmctld; scontrol reconfigure; sleep 2; pgrep -a slurmctld; scontrol show topology; "
              "scontrol show topology demo-gpu-1")


def mixed() -> None:
    """Static dynamic nodes (slurmd -Z) and cloud nodes in one partition; SuspendExcStates=DYNAMIC_NORM."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 2)], dynamic_sets=["cpu"],
                      extra="SuspendExcStates=DYNAMIC_NORM\n",
                      partitions=[Partition("main", "gpu,cpu", "Default=YES MaxTime=INFINITE State=UP")])
    cfg.power.update(SuspendTime=10)
    with running(CloudCluster(cfg)) as c, Operator(c), Timeline(c):
        for i in range(2):
            c.start_node(f"demo-cpu-{i}", dynamic_conf="CPUs=2 RealMemory=500 Feature=cpu")
        job = c.sbatch("-N4", script="#!/bin/sh\nsleep 2\n")
        wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 120, "job done", interval=0.5)
        say(f"-N4 over both sets: NodeList={c.job(job)['NodeList']}")
        time.sleep(40)
        sh(c, "sinfo -N; scontrol show node demo-cpu-0 | grep State")
        calls(c)


WAIT_NODES = """\
#!/bin/sh
# PrologSlurmctld: return once every node of the job has registered (not powered down, powering up or not responding;
# at most 120 s). A batch job whose allocation needed a power-up is then launched at the end of its prolog
# (prolog_running_decr) instead of by the 30 s periodic check (job_time_limit).
i=0
while [ $i -lt 600 ]; do
  scontrol show node -o "$SLURM_JOB_NODELIST" | grep -q -E 'POWERED_DOWN|POWERING_UP|NOT_RESPONDING' || exit 0
  sleep 0.2
  i=$((i + 1))
done
exit 0
"""


def fastlaunch() -> None:
    """Submit → running from zero, three times, without and with a PrologSlurmctld that waits for the nodes."""
    for prolog in (False, True):
        cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 2)])
        cfg.power.update(SuspendTime=5, SuspendTimeout=3)
        if prolog:
            cfg.extra = "PrologSlurmctld=/usr/local/sbin/wait-nodes\n"
            cfg.programs = {"/usr/local/sbin/wait-nodes": WAIT_NODES}
        with running(CloudCluster(cfg)) as c, Operator(c):
            for _ in range(3):
                wait_for(lambda: all(c.state(n) == "idle~" for n in ("demo-gpu-0", "demo-gpu-1")), 90, "powered down")
                t = time.monotonic()
                job = c.sbatch("-N2", script="#!/bin/sh\nsleep 1\n")
                wait_for(lambda j=job: c.job(j)["JobState"] in ("RUNNING", "COMPLETED"), 90, "running", interval=0.1)
                say(f"PrologSlurmctld={'wait-nodes' if prolog else 'none'}: submit -> RUNNING "
                    f"{time.monotonic() - t:.1f}s")
                wait_for(lambda j=job: c.job(j)["JobState"] == "COMPLETED", 60, "done", interval=0.5)


class Sampler:
    """``squeue`` every 0.2 s in a thread: how many answered, how many failed, the slowest answer."""

    def __init__(self, c: CloudCluster):
        self.c, self._stop, self.samples = c, False, []

    def __enter__(self):
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._t.join()
        fails = [s for s in self.samples if s[1] != 0]
        first = f" first failure: {fails[0][2]!r}" if fails else ""
        say(f"squeue sampled every 0.2 s: samples={len(self.samples)} failures={len(fails)} "
            f"max_latency={max(s[0] for s in self.samples):.3f}s{first}")

    def _loop(self):
        # Through the good copy of slurm.conf: the harness's clients read the controller's file, pods read their own.
        while not self._stop:
            t = time.monotonic()
            res = self.c.run(["squeue", "-h"], env={"SLURM_CONF": "/tmp/good.conf"}, timeout=20)
            self.samples.append((time.monotonic() - t, res.returncode, res.output.strip()[:80]))
            time.sleep(max(0.0, 0.2 - (time.monotonic() - t)))


def reconfig() -> None:
    """Reconfigure with jobs running: controller PID, squeue availability, a partition change, a bad file (-D and
    daemon mode)."""
    # Power saving on: the never-registered cloud node is then not resolved at each reconfigure (scenario resolve).
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 1)], dynamic_sets=["cpu"], extra="SuspendExcStates=DYNAMIC_NORM\n")
    with running(CloudCluster(cfg)) as c:
        for i in range(2):
            c.start_node(f"demo-cpu-{i}", dynamic_conf="CPUs=2 RealMemory=500 Feature=cpu")
        for _ in range(4):
            c.sbatch("-N1", "-C", "cpu", script="#!/bin/sh\nsleep 600\n")
        wait_for(lambda: c.run(["squeue", "-h", "-t", "R"]).stdout.count("\n") == 4, 60, "4 jobs running")
        good = c.root / "tmp/good.conf"

        def conf_with(maxtime: str, bad: bool = False) -> None:
            c.config.partitions = [Partition("main", "gpu,cpu", f"Default=YES MaxTime={maxtime} State=UP")]
            c.write_conf()
            good.write_text((c.root / "etc/slurm/slurm.conf").read_text())
            if bad:
                with open(c.root / "etc/slurm/slurm.conf", "a") as f:
                    f.write("PartitionName=bad Nodes=nosuchset State=UP\n")

        conf_with("INFINITE")
        sh(c, "pgrep -a slurmctld; squeue -o '%i %T %l %N'")
        conf_with("60")
        with Sampler(c):
            sh(c, "scontrol reconfigure")
            time.sleep(3)
        sh(c, "pgrep -a slurmctld; scontrol show partition main | grep -o 'MaxTime=[^ ]*'; squeue -o '%i %T %l %N'")
        with Sampler(c):
            sh(c, "for i in 1 2 3 4 5; do scontrol reconfigure; sleep 1; done")
            time.sleep(2)
        sh(c, "pgrep -a slurmctld")
        conf_with("60", bad=True)
        with Sampler(c):
            sh(c, "SLURM_CONF=/tmp/good.conf scontrol reconfigure")
            time.sleep(8)
        wait_for(lambda: c.run(["pgrep", "-x", "slurmctld"]).returncode != 0, 30, "slurmctld -D to exit")
        sh(c, "pgrep -a slurmctld; pgrep -a slurmstepd | head -2")
        print("\n".join(c.log("slurmctld.log").splitlines()[-4:]))
        conf_with("60")
        sh(c, "/usr/sbin/slurmctld; sleep 3; pgrep -a slurmctld; squeue -o '%i %T %l %N'")  # daemon mode
        conf_with("60", bad=True)
        with Sampler(c):
            sh(c, "SLURM_CONF=/tmp/good.conf scontrol reconfigure")
            time.sleep(3)
        sh(c, "pgrep -a slurmctld")
        print("\n".join(c.log("slurmctld.log").splitlines()[-3:]))
        conf_with("60")
        with Sampler(c):
            sh(c, "scontrol reconfigure")
            time.sleep(3)
        sh(c, "pgrep -a slurmctld; cat /run/slurmctld.pid")


def resolve() -> None:
    """How long a reconfigure takes with node names that never registered (not resolvable), with and without power
    saving, and with the names excluded from suspend."""
    variants = (("power saving off", {}, ""),
                ("power saving on", dict(DEFAULT_POWER), ""),
                ("power saving on, SuspendExcNodes=gpu", dict(DEFAULT_POWER), "SuspendExcNodes=gpu\n"))
    for label, power, extra in variants:
        cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 3)], power=power, extra=extra)
        with running(CloudCluster(cfg)) as c:
            sh(c, "sinfo -h -N -o '%N %t' | tr '\\n' ' '")
            for _ in range(2):
                t = time.monotonic()
                c.reconfigure().check()
                wait_for(lambda: c.run(["scontrol", "ping"], timeout=60).returncode == 0, 120, "ping")
                # squeue right after: answered once the new process listens
                c.run(["squeue", "-h"], timeout=120).check()
                say(f"{label}: reconfigure + first squeue {time.monotonic() - t:.1f}s")
            n = c.log("slurmctld.log").count('Unable to resolve "demo-gpu-')
            say(f"{label}: 'Unable to resolve' lines in slurmctld.log: {n}")


def static() -> None:
    """A fixed-name set that is never powered down (SuspendExcNodes=<set>): its slurmd registers by itself (no -b, no
    resume), stays up, and a lost pod comes back by starting again."""
    cfg = CloudConfig(cloud_sets=[CloudSet("gpu", 2)], extra="SuspendExcNodes=gpu\n")
    cfg.power.update(SuspendTime=5)
    cfg.slurmd_timeout = 10
    with running(CloudCluster(cfg)) as c, Timeline(c):
        for name in ("demo-gpu-0", "demo-gpu-1"):
            c.start_node(name)
        time.sleep(15)
        sh(c, "scontrol show node demo-gpu-0 | grep -E 'State|NodeAddr'")
        job = c.sbatch("-N2", script="#!/bin/sh\nsleep 1\n")
        wait_for(lambda: c.job(job)["JobState"] == "COMPLETED", 60, "job done", interval=0.3)
        c.stop_node("demo-gpu-1")
        time.sleep(40)
        sh(c, "scontrol show node demo-gpu-1 | grep -E 'State|Reason'")
        c.start_node("demo-gpu-1")
        time.sleep(3)
        sh(c, "sinfo -N; scontrol show node demo-gpu-1 | grep -E 'State|Reason'")
        t = time.monotonic()
        c.reconfigure().check()
        c.run(["squeue"], timeout=60).check()
        say(f"reconfigure + squeue {time.monotonic() - t:.1f}s")
        calls(c)


SCENARIOS = {f.__name__: f for f in (cycle, fail, crash, shrink, port, block, tree, mixed, fastlaunch, reconfig,
                                     resolve, static)}

if __name__ == "__main__":
    names = sys.argv[1:] or ["all"]
    for name in (list(SCENARIOS) if names == ["all"] else names):
        print(f"\n===== {name}: {SCENARIOS[name].__doc__}", flush=True)
        SCENARIOS[name]()
