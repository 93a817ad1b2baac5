"""A real Slurm 24.11 cluster with POWER-SAVING (cloud) nodes on one host, for elastic NodeSets and topology.

The same rootfs, namespaces and reaper as ``slurm_cluster.Cluster``, and the trick of ``dynamic_cluster`` to run
several slurmd on one host (each on its own loopback address, here 127.1.<set>.<ordinal+1>, one shared port,
``CommunicationParameters=NoInAddrAny``, the ``srcaddr.so`` preload so its registration comes FROM that address), but:

* slurmctld runs as ``slurmctld -D`` (foreground, as the controller container runs it) as SlurmUser ``slurm``.
* slurm.conf lists every node of a power-saving NodeSet up front, ``NodeName=<cluster>-<set>-[0-N] ... State=CLOUD``,
  so ``sinfo`` shows them powered down (``idle~``) and the scheduler can plan jobs onto them. Static dynamic nodes
  (``slurmd -Z``, ``NodeSet=<set> Feature=<set>``) can be mixed in (``dynamic_sets``). ``power={}`` turns power saving
  off: the cloud nodes then are plain fixed names that come up when their slurmd starts.
* ``ResumeProgram``, ``SuspendProgram`` and ``ResumeFailProgram`` are one recording script (``POWER_PROGRAM``): each
  call leaves a record (its argument, uid, environment and the ``SLURM_RESUME_FILE`` JSON) under ``POWER_DIR``
  (``calls``). It starts nothing itself: the test plays the operator, by hand (``start_node``/``stop_node``) or with
  ``Operator``, a thread that serves the requests (``slurmd -b``: see docs/slurm-24.11-findings.md, A.3).
* Every slurmd is started configless (``--conf-server``), as a worker pod is, in its own UTS and mount namespace
  with its own ``/etc/hosts`` (only itself): slurmctld's ``/etc/hosts`` does NOT know the node names, as in
  Kubernetes, where a bare pod name does not resolve. So slurmctld can only reach a node at the address the node
  registered from. (An ``srun`` inside a job on a node needs that node's ``LD_PRELOAD``/``SRCADDR`` exported in the
  job script: one-host device only.)
* Optional ``topology.conf`` (``topology``) for topology/tree or topology/block.

Used by test_cloud_nodes.py and test_topology.py, and by experiments_24_11.py (docs/slurm-24.11-findings.md).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from dynamic_cluster import SRCADDR_C, SRCADDR_SO
from slurm_cluster import (
    HOSTNAME,
    REAPER_C,
    ROOTFS_SCRIPT,
    Cluster,
    CommandError,
    Result,
    base_conf,
    free_ports,
    wait_for,
)

CLUSTER = "demo"  # <cluster>-<set>-<ordinal> = the worker pod's name = the Slurm node name
SLURM_USER = "slurm"  # as rendered (names.SLURM_USER)
NODE_HW = "CPUs=2 RealMemory=500"
POWER_DIR = "/var/lib/power"  # the recording program's output, writable by SlurmUser
POWER_PROGRAM = "/usr/local/sbin/power-program"
# Power saving, short enough for tests. power_save_min_interval=0 and power_save_interval=1: the power-save thread
# looks every second instead of every 10 s.
DEFAULT_POWER = {
    "SuspendTime": 30,
    "SuspendTimeout": 10,
    "ResumeTimeout": 30,
    "ResumeRate": 0,
    "SuspendRate": 0,
}


def node_name(nodeset: str, ordinal: int) -> str:
    return f"{CLUSTER}-{nodeset}-{ordinal}"


@dataclass
class CloudSet:
    """A power-saving NodeSet: ``count`` fixed names ``<cluster>-<name>-[0-count-1]``."""
    name: str
    count: int
    features: tuple[str, ...] = ()
    hw: str = NODE_HW
    extra: str = ""  # more NodeName keys, e.g. "Gres=..."

    def names(self) -> list[str]:
        return [node_name(self.name, i) for i in range(self.count)]

    def line(self) -> str:
        features = ",".join((self.name, *[f for f in self.features if f != self.name]))
        hostlist = f"{CLUSTER}-{self.name}-[0-{self.count - 1}]" if self.count > 1 else node_name(self.name, 0)
        extra = f" {self.extra}" if self.extra else ""
        return f"NodeName={hostlist} {self.hw} Feature={features}{extra} State=CLOUD"


@dataclass
class Partition:
    name: str
    nodes: str  # a hostlist, NodeSet names or ALL
    extra: str = "Default=NO MaxTime=INFINITE State=UP"

    def line(self) -> str:
        return f"PartitionName={self.name} Nodes={self.nodes} {self.extra}"


@dataclass
class PowerCall:
    """One run of the recording power program."""
    action: str  # resume, suspend, resume-fail
    hostlist: str  # its argument, as Slurm passed it
    names: list[str]  # the hostlist expanded
    uid: int
    gid: int
    env: dict[str, str]
    resume_file: dict | None  # SLURM_RESUME_FILE's JSON (resume only)
    at: float  # time.time() inside the program


# One program for the three hooks (its name says which): the record is written to a temporary file and renamed, so
# a reader never sees half of it. It never starts anything itself: the test (the operator's stand-in) does.
POWER_SH = f"""\
#!/bin/sh
set -eu
action=$(basename "$0")
dir={POWER_DIR}
tmp=$(mktemp "$dir/.rec.XXXXXX")
{{
  printf 'action=%s\\nhostlist=%s\\nuid=%s\\ngid=%s\\nat=%s\\n' "$action" "$*" "$(id -u)" "$(id -g)" "$(date +%s.%N)"
  env | sort | sed 's/^/env:/'
  if [ -n "${{SLURM_RESUME_FILE:-}}" ] && [ -r "$SLURM_RESUME_FILE" ]; then
    printf 'resume_file:'; tr -d '\\n' < "$SLURM_RESUME_FILE"; printf '\\n'
  fi
}} > "$tmp"
mv "$tmp" "$dir/$(date +%s%N).$$.$action"
"""

INIT_SH = """\
#!/bin/sh
# Started by the reaper inside the rootfs: munge and slurmctld (as SlurmUser); nodes come later (start_node).
set -e
hostname {hostname}
mkdir -p /run/munge /var/log/slurm
chown munge:munge /run/munge /etc/munge /etc/munge/munge.key /var/lib/munge /var/log/munge
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged
install -d -m 0700 -o slurm -g slurm /var/spool/slurmctld
install -d -m 0755 -o slurm -g slurm {power_dir}
install -m 0640 -o slurm -g slurm /dev/null /var/log/slurm/slurmctld.log
{slurmctld}
"""


@dataclass
class CloudConfig:
    """What the test cluster's slurm.conf says beyond base_conf."""
    cloud_sets: list[CloudSet] = field(default_factory=lambda: [CloudSet("gpu", 3)])
    dynamic_sets: list[str] = field(default_factory=list)  # NodeSet=<name> Feature=<name>: slurmd -Z nodes
    partitions: list[Partition] | None = None  # default: one "main" partition over every set
    power: dict[str, object] = field(default_factory=lambda: dict(DEFAULT_POWER))
    ctld_params: tuple[str, ...] = ("enable_configless", "idle_on_node_suspend", "power_save_interval=1",
                                    "power_save_min_interval=0")
    topology_plugin: str | None = None  # e.g. topology/tree, topology/block
    topology: str | None = None  # topology.conf text
    extra: str = ""  # more slurm.conf lines (before the nodes)
    max_node_count: int = 16
    ctld_foreground: bool = True  # slurmctld -D, as the controller container runs it
    slurmd_timeout: int = 30
    programs: dict[str, str] = field(default_factory=dict)  # path in the rootfs -> text of an executable to install

    def set_names(self) -> list[str]:
        return [s.name for s in self.cloud_sets] + list(self.dynamic_sets)

    def partition_lines(self) -> list[str]:
        parts = self.partitions
        if parts is None:
            parts = [Partition("main", ",".join(self.set_names()), "Default=YES MaxTime=INFINITE State=UP")]
        return [p.line() for p in parts]

    def render(self, ctld_port: int, slurmd_port: int) -> str:
        text = base_conf("cloudtest", ctld_port, slurm_user=SLURM_USER)
        text += f"""\
SlurmdPort={slurmd_port}
CommunicationParameters=NoInAddrAny
MaxNodeCount={self.max_node_count}
TreeWidth=65533
SlurmdTimeout={self.slurmd_timeout}
SlurmctldParameters={",".join(self.ctld_params)}
"""
        if self.power:  # no power saving at all without: cloud nodes then come up when their slurmd starts
            text += "".join(f"{key}={POWER_PROGRAM.replace('power-program', action)}\n" for key, action in
                            (("ResumeProgram", "resume"), ("SuspendProgram", "suspend"),
                             ("ResumeFailProgram", "resume-fail")))
            text += "".join(f"{k}={v}\n" for k, v in self.power.items())
        if self.topology_plugin:
            text += f"TopologyPlugin={self.topology_plugin}\n"
        text += self.extra
        # Every set is a NodeSet over its feature: partitions name sets, as the rendered slurm.conf does.
        text += "".join(s.line() + "\n" for s in self.cloud_sets)
        text += "".join(f"NodeSet={name} Feature={name}\n" for name in self.set_names())
        text += "".join(line + "\n" for line in self.partition_lines())
        return text


class CloudCluster(Cluster):
    def __init__(self, config: CloudConfig | None = None, workdir: Path | None = None):
        super().__init__(workdir)
        self.config = config or CloudConfig()
        self.ctld_port = self.slurmd_port = 0
        self._addr: dict[str, str] = {}

    # ---- setup -----------------------------------------------------------------------
    def prepare(self) -> None:
        subprocess.run([str(ROOTFS_SCRIPT), "--extract", str(self.root)], check=True,
                       stdout=subprocess.DEVNULL)
        r = self.root
        # slurmctld's host knows itself only: node names are resolved by no one but the node itself.
        (r / "etc/hosts").write_text(f"127.0.0.1 localhost {HOSTNAME}\n")
        (r / "etc/hostname").write_text(HOSTNAME + "\n")
        self.ctld_port, self.slurmd_port = free_ports(2)
        self.write_conf()
        (r / "etc/munge/munge.key").write_bytes(os.urandom(1024))
        os.chmod(r / "etc/munge/munge.key", 0o600)
        self._add_user(r)
        for d in ("usr/local/sbin", "usr/local/src", "etc/hosts.d"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "usr/local/src/reaper.c").write_text(REAPER_C)
        (r / "usr/local/src/srcaddr.c").write_text(SRCADDR_C)
        init = r / "usr/local/sbin/cluster-init"
        # As the controller pod runs it: in the foreground (-D), the container's main process; the init shell exits.
        ctld = "/usr/sbin/slurmctld -D >/dev/null 2>&1 &" if self.config.ctld_foreground else "/usr/sbin/slurmctld"
        init.write_text(INIT_SH.format(hostname=HOSTNAME, power_dir=POWER_DIR, slurmctld=ctld))
        init.chmod(0o755)
        program = r / POWER_PROGRAM.lstrip("/")
        program.write_text(POWER_SH)
        program.chmod(0o755)
        for path, text in self.config.programs.items():
            target = r / path.lstrip("/")
            target.write_text(text)
            target.chmod(0o755)
        for action in ("resume", "suspend", "resume-fail"):
            link = program.with_name(action)
            link.unlink(missing_ok=True)
            link.symlink_to(program.name)
        self.chroot(["gcc", "-O2", "-o", "/usr/local/sbin/reaper", "/usr/local/src/reaper.c"]).check()
        self.chroot(["gcc", "-O2", "-shared", "-fPIC", "-o", SRCADDR_SO, "/usr/local/src/srcaddr.c", "-ldl"]).check()

    def write_conf(self) -> None:
        """(Re)write slurm.conf and topology.conf from self.config; a reconfigure or restart applies them."""
        etc = self.root / "etc/slurm"
        (etc / "slurm.conf").write_text(self.config.render(self.ctld_port, self.slurmd_port))
        topo = etc / "topology.conf"
        if self.config.topology is None:
            topo.unlink(missing_ok=True)
        else:
            topo.write_text(self.config.topology)

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        """At start every cloud node is powered down: wait until sinfo shows them so."""
        names = [n for s in self.config.cloud_sets for n in s.names()]
        wait_for(lambda: all(self.state(n) == "idle~" for n in names) and names, timeout,
                 "every cloud node idle~", interval=0.3)

    # ---- addresses -------------------------------------------------------------------
    def addr(self, name: str) -> str:
        """The node's own loopback address (the pod IP it would get): 127.1.<set>.<ordinal+1> for
        ``<cluster>-<set>-<ordinal>`` of a configured set, so every process that drives the cluster agrees."""
        if name not in self._addr:
            sets = self.config.set_names()
            prefix, _, ordinal = name.rpartition("-")
            set_name = prefix[len(CLUSTER) + 1:] if prefix.startswith(CLUSTER + "-") else ""
            if set_name not in sets or not ordinal.isdigit() or int(ordinal) > 250:
                raise CommandError(f"{name} is not <{CLUSTER}>-<set>-<ordinal> of a configured set")
            self._addr[name] = f"127.1.{sets.index(set_name) + 1}.{int(ordinal) + 1}"
        return self._addr[name]

    # ---- nodes (the worker pods) -----------------------------------------------------
    def start_node(self, name: str, dynamic_conf: str | None = None, extra_args: tuple[str, ...] = (),
                   wait: str | None = "registered", timeout: float = 30) -> str:
        """Start the slurmd of worker ``name`` configless, as its pod would.

        ``dynamic_conf``: start it as a dynamic node (``-Z --conf <dynamic_conf>``) instead of a configured one.
        ``wait``: "registered" waits until slurmctld has heard from it (no longer powering up / unknown), None does
        not wait.
        """
        addr = self.addr(name)
        hosts = self.root / "etc/hosts.d" / name
        hosts.write_text(f"127.0.0.1 localhost\n{addr} {name}\n")
        self.run(["mkdir", "-p", f"/var/spool/slurmd/{name}"]).check()
        argv = ["/usr/sbin/slurmd", "-N", name, "--conf-server", f"127.0.0.1:{self.ctld_port}", *extra_args]
        if dynamic_conf is not None:
            argv += ["-Z", "--conf", dynamic_conf]
        script = (f'mount --bind /etc/hosts.d/{shlex.quote(name)} /etc/hosts && hostname {shlex.quote(name)} && '
                  f'exec {" ".join(shlex.quote(a) for a in argv)}')
        self.run(["unshare", "--uts", "--mount", "--propagation", "private",
                  "env", f"LD_PRELOAD={SRCADDR_SO}", f"SRCADDR={addr}", "sh", "-c", script]).check()
        if wait == "registered":
            wait_for(lambda: self._registered(name), timeout, f"{name} to register", interval=0.3)
        return name

    def _registered(self, name: str) -> bool:
        info = self.node(name)
        flags = info.get("State", "")
        return bool(info) and "POWERING_UP" not in flags and "UNKNOWN" not in flags and "NOT_RESPONDING" not in flags

    def slurmd_pid(self, name: str) -> str | None:
        res = self.run(["cat", f"/run/slurmd-{name}.pid"])
        return res.stdout.strip() if res.returncode == 0 else None

    def stop_node(self, name: str, timeout: float = 20) -> None:
        """The pod goes away: its slurmd ends (SIGTERM, as the kubelet sends)."""
        pid = self.slurmd_pid(name)
        if not pid:
            raise CommandError(f"no slurmd pid for {name}")
        self.run(["kill", "-TERM", pid]).check()
        wait_for(lambda: self.run(["kill", "-0", pid]).returncode != 0, timeout, f"slurmd of {name} to exit")
        self.run(["rm", "-f", f"/run/slurmd-{name}.pid"])

    def running_nodes(self) -> list[str]:
        """Names whose slurmd runs (the pods that exist), from the pid files in the cluster's /run."""
        res = self.run(["sh", "-c", 'for f in /run/slurmd-*.pid; do [ -e "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null '
                                    '&& basename "$f" .pid; done; true'])
        return sorted(line[len("slurmd-"):] for line in res.check().stdout.split())

    # ---- Slurm's view ----------------------------------------------------------------
    def states(self) -> dict[str, str]:
        """sinfo's compact state per node (``idle~``, ``alloc#``, ``down~``...)."""
        res = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=10).check()
        return dict(line.split() for line in res.stdout.splitlines() if line.strip())

    def state(self, name: str) -> str:
        return self.states().get(name, "")

    def node(self, name: str) -> dict[str, str]:
        """``scontrol show node -o`` as a dict ({} when unknown)."""
        res = self.run(["scontrol", "show", "node", "-o", name], timeout=10)
        if res.returncode != 0 or not res.stdout.strip():
            return {}
        return parse_oneliner(res.stdout)

    def job(self, job_id: str) -> dict[str, str]:
        res = self.run(["scontrol", "show", "job", "-o", job_id], timeout=10).check()
        return parse_oneliner(res.stdout)

    def expand(self, hostlist: str) -> list[str]:
        if not hostlist:
            return []
        return self.run(["scontrol", "show", "hostnames", hostlist], timeout=10).check().stdout.split()

    def sbatch(self, *args: str, script: str = "#!/bin/sh\nsrun hostname\n", user: str | None = "alice") -> str:
        """Submit a batch job; its id."""
        path = f"/tmp/job-{time.monotonic_ns()}.sh"
        host_path = self.root / path.lstrip("/")
        host_path.write_text(script)
        host_path.chmod(0o755)
        res = self.run(["sbatch", "--parsable", "-o", "/tmp/slurm-%j.out", *args, path], user=user).check()
        return res.stdout.strip().split(";")[0]

    def calls(self, action: str | None = None) -> list[PowerCall]:
        """Every recorded power program run so far, oldest first."""
        base = self.root / POWER_DIR.lstrip("/")
        out = []
        for p in sorted(base.glob("[0-9]*.*")):
            rec = parse_record(p.read_text())
            if action is None or rec.action == action:
                rec.names = self.expand(rec.hostlist)
                out.append(rec)
        return out

    def slurmd_logs(self, lines: int = 20) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
                         for p in sorted((self.root / "var/log/slurm").glob("slurmd-*.log")))

    def reconfigure(self) -> Result:
        return self.run(["scontrol", "reconfigure"], timeout=60)

    def slurmctld_pids(self) -> list[str]:
        res = self.run(["pgrep", "-x", "slurmctld"])
        return res.stdout.split()


class Operator:
    """The operator's stand-in: serves the recorded power requests in a thread, as the elastic NodeSet controller
    would. resume → start the named slurmd (``-b``: a container's boot time is the host's, see the findings);
    suspend → stop them. Names in ``fail`` are never started (a pod that cannot be scheduled). Every action is kept in
    ``log`` as (time, action, name)."""

    def __init__(self, cluster: CloudCluster, fail: set[str] | None = None, poll: float = 0.2):
        self.cluster = cluster
        self.fail = set(fail or ())
        self.poll = poll
        self.log: list[tuple[float, str, str]] = []
        self.errors: list[str] = []
        self._seen: set[str] = set()
        self._stop = False
        self._thread = None

    def __enter__(self) -> "Operator":
        import threading
        self._seen = {p.name for p in self._records()}  # only requests from now on
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True
        if self._thread:
            self._thread.join(timeout=30)

    def _records(self) -> list[Path]:
        return sorted((self.cluster.root / POWER_DIR.lstrip("/")).glob("[0-9]*.*"))

    def _loop(self) -> None:
        while not self._stop:
            for p in self._records():
                if p.name in self._seen:
                    continue
                self._seen.add(p.name)
                rec = parse_record(p.read_text())
                for name in self.cluster.expand(rec.hostlist):
                    try:
                        self._serve(rec.action, name)
                    except Exception as e:  # keep serving; the test sees the errors
                        self.errors.append(f"{rec.action} {name}: {e}")
            time.sleep(self.poll)

    def _serve(self, action: str, name: str) -> None:
        running = name in self.cluster.running_nodes()
        if action == "resume" and name not in self.fail:
            if running:  # a pod left from before: replace it, or the node never reports a new boot
                self.cluster.stop_node(name)
            self.cluster.start_node(name, extra_args=("-b",), wait=None)
        elif action in ("suspend", "resume-fail") and running:
            self.cluster.stop_node(name)
        else:
            action += " (nothing to do)"
        self.log.append((time.time(), action, name))


def parse_oneliner(text: str) -> dict[str, str]:
    """``Key=Value Key=Value`` of ``scontrol -o`` (values without spaces; a few keys hold spaces: kept raw)."""
    out: dict[str, str] = {}
    key = None
    for word in text.strip().split(" "):
        if "=" in word and (k := word.split("=", 1)[0]) and k[0].isalpha():
            key, value = word.split("=", 1)
            out[key] = value
        elif key:
            out[key] += " " + word
    return out


def parse_record(text: str) -> PowerCall:
    kv: dict[str, str] = {}
    env: dict[str, str] = {}
    resume = None
    for line in text.splitlines():
        if line.startswith("env:"):
            k, _, v = line[4:].partition("=")
            env[k] = v
        elif line.startswith("resume_file:"):
            resume = json.loads(line[len("resume_file:"):])
        else:
            k, _, v = line.partition("=")
            kv[k] = v
    return PowerCall(kv["action"], kv["hostlist"], [], int(kv["uid"]), int(kv["gid"]), env, resume,
                     float(kv["at"]))
