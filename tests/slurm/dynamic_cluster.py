"""A real Slurm 24.11 cluster with DYNAMIC nodes (``slurmd -Z``) on one host, for the scale-in tests.

The same rootfs, namespaces and reaper as ``slurm_cluster.Cluster`` (no jail, no SPANK plugin), but:

* slurm.conf has no ``NodeName=`` line: workers register themselves with ``slurmd -Z -N <pod name>
  --conf "... Feature=<nodeset>"``, exactly as the worker pods do, and a partition spans them through
  ``NodeSet=<nodeset> Feature=<nodeset>``. ``MaxNodeCount`` bounds them; ``TreeWidth=65533`` because
  dynamic nodes do not know each other (no message fan-out through them).
* Several slurmd on one host (measured on 24.11.5). ``Port=`` is refused in ``--conf``; a per-slurmd
  ``SlurmdPort`` (own slurm.conf via ``-f``) does not help either: slurmctld reaches a dynamic node at
  ``NodeAddr:<its own SlurmdPort>``. ``NodeAddr=`` in ``--conf`` is ignored too: slurmctld takes the source
  address of the registration. What works, and mirrors a pod: every node gets its own loopback ADDRESS
  (127.0.1.<n>, in /etc/hosts under the node name) and its own UTS namespace with hostname = node name;
  ``CommunicationParameters=NoInAddrAny`` makes its slurmd listen on that address only, so all share one
  ``SlurmdPort``; and a tiny ``LD_PRELOAD`` (``srcaddr.so``, below) binds its outgoing sockets to that
  address, so slurmctld records it as the node's NodeAddr. In Kubernetes each pod has its own IP: this is a
  one-host test device only.
* Nodes come and go during a test (``start_node`` / ``stop_node``), as pods do when a StatefulSet scales.
* slurmctld runs as ``SlurmUser=slurm``, as the rendered slurm.conf has it (Debian's slurm user, uid 64030).
"""

from __future__ import annotations

import os
import subprocess
import textwrap

from slurm_cluster import HOSTNAME, REAPER_C, ROOTFS_SCRIPT, Cluster, CommandError, base_conf, free_ports, wait_for

NODESET = "cpu"
SLURM_USER = "slurm"  # as rendered (names.SLURM_USER)
STATEFULSET = "demo-" + NODESET  # <cluster>-<nodeset>; Slurm node name = pod name = <statefulset>-<ordinal>
MAX_NODES = 4
NODE_CONF = "CPUs=2 RealMemory=500 Feature=" + NODESET


def node_name(ordinal: int) -> str:
    return f"{STATEFULSET}-{ordinal}"


def node_addr(ordinal: int) -> str:
    return f"127.0.1.{ordinal + 1}"


def slurm_conf(ctld_port: int, slurmd_port: int) -> str:
    """Dynamic nodes (slurmd -Z) of one NodeSet, each on its own 127.0.1.N address sharing one port."""
    return base_conf("scaletest", ctld_port, slurm_user=SLURM_USER) + f"""\
SlurmdPort={slurmd_port}
CommunicationParameters=NoInAddrAny
MaxNodeCount={MAX_NODES}
TreeWidth=65533
SlurmdTimeout=30
NodeSet={NODESET} Feature={NODESET}
PartitionName={NODESET} Nodes={NODESET} Default=YES MaxTime=INFINITE State=UP
"""


# LD_PRELOAD for one slurmd: binds its outgoing IPv4 sockets to $SRCADDR before connect(), so its
# registration reaches slurmctld FROM the node's own loopback address (on loopback the kernel would
# otherwise pick 127.0.0.1 for everyone) and slurmctld records that address as the node's NodeAddr.
SRCADDR_SO = "/usr/local/lib/srcaddr.so"
SRCADDR_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
int connect(int fd, const struct sockaddr *to, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    const char *src = getenv("SRCADDR");
    if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    if (src && to && to->sa_family == AF_INET) {
        struct sockaddr_in me = {0}, cur = {0};
        socklen_t l = sizeof(cur);
        if (getsockname(fd, (struct sockaddr *)&cur, &l) == 0 && cur.sin_port == 0) {
            me.sin_family = AF_INET;
            if (inet_pton(AF_INET, src, &me.sin_addr) == 1) bind(fd, (struct sockaddr *)&me, sizeof(me));
        }
    }
    return real(fd, to, len);
}
"""

INIT_SH = """\
#!/bin/sh
# Started by the reaper inside the rootfs: munge and slurmctld; workers come later (start_node).
set -e
hostname {hostname}
mkdir -p /run/munge /var/log/slurm
chown munge:munge /run/munge /etc/munge /etc/munge/munge.key /var/lib/munge /var/log/munge
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged
# slurmctld drops root for SlurmUser: its state and its log are that user's.
install -d -m 0700 -o slurm -g slurm /var/spool/slurmctld
install -m 0640 -o slurm -g slurm /dev/null /var/log/slurm/slurmctld.log
/usr/sbin/slurmctld
"""


class DynamicCluster(Cluster):
    """Subclasses with other nodes or configuration override :meth:`hosts` and :meth:`slurm_conf_text`, extend
    :meth:`prepare`, and start their workers with :meth:`start_slurmd`."""

    def hosts(self) -> list[str]:
        """/etc/hosts lines of the workers that may register (each its own loopback address)."""
        return [f"{node_addr(i)} {node_name(i)}" for i in range(MAX_NODES)]

    def slurm_conf_text(self, ctld_port: int, slurmd_port: int) -> str:
        return slurm_conf(ctld_port, slurmd_port)

    def prepare(self) -> None:
        subprocess.run([str(ROOTFS_SCRIPT), "--extract", str(self.root)], check=True,
                       stdout=subprocess.DEVNULL)
        r = self.root
        (r / "etc/hosts").write_text("\n".join([f"127.0.0.1 localhost {HOSTNAME}", *self.hosts()]) + "\n")
        (r / "etc/hostname").write_text(HOSTNAME + "\n")
        ctld_port, slurmd_port = free_ports(2)
        (r / "etc/slurm/slurm.conf").write_text(self.slurm_conf_text(ctld_port, slurmd_port))
        (r / "etc/munge/munge.key").write_bytes(os.urandom(1024))
        os.chmod(r / "etc/munge/munge.key", 0o600)
        self._add_user(r)
        (r / "usr/local/sbin").mkdir(parents=True, exist_ok=True)
        (r / "usr/local/src").mkdir(parents=True, exist_ok=True)
        (r / "usr/local/src/reaper.c").write_text(REAPER_C)
        init = r / "usr/local/sbin/cluster-init"
        init.write_text(INIT_SH.format(hostname=HOSTNAME))
        init.chmod(0o755)
        self.chroot(["gcc", "-O2", "-o", "/usr/local/sbin/reaper", "/usr/local/src/reaper.c"]).check()
        (r / "usr/local/src/srcaddr.c").write_text(SRCADDR_C)
        self.chroot(["gcc", "-O2", "-shared", "-fPIC", "-o", SRCADDR_SO, "/usr/local/src/srcaddr.c", "-ldl"]).check()

    def wait_nodes_idle(self, timeout: float = 60) -> None:  # no node at start
        return None

    # ---- workers (the pods of the StatefulSet) ------------------------------------------
    def start_node(self, ordinal: int, timeout: float = 30) -> str:
        """Start the slurmd of pod ``<statefulset>-<ordinal>`` as a dynamic node; wait until it is idle."""
        name = node_name(ordinal)
        self.start_slurmd(name, node_addr(ordinal), NODE_CONF).check()
        wait_for(lambda: self.node_state(name).rstrip("*") == "idle" if self._known(name) else False,
                 timeout, f"{name} idle", interval=0.3)
        return name

    def start_slurmd(self, name: str, addr: str, conf: str, pod_script: str = ""):
        """Start ``slurmd -Z -N <name> --conf <conf>`` (it daemonizes; the Result is its start's). Its own UTS
        namespace with hostname = node name, as a pod has: NoInAddrAny binds the address the hostname resolves to
        (/etc/hosts), and slurmctld records that hostname. ``pod_script``: shell lines run first, in a mount
        namespace of the node's own (what its container has before the entrypoint starts slurmd)."""
        self.run(["mkdir", "-p", f"/var/spool/slurmd/{name}"]).check()
        script = pod_script + '\nhostname "$0" && exec /usr/sbin/slurmd -Z -N "$0" --conf "$1"'
        mount_ns = ["--mount", "--propagation", "private"] if pod_script else []
        return self.run(["unshare", "--uts", *mount_ns, "env", f"LD_PRELOAD={SRCADDR_SO}", f"SRCADDR={addr}",
                         "sh", "-c", script, name, conf])

    def stop_node(self, ordinal: int, timeout: float = 20) -> None:
        """The pod goes away: its slurmd ends (the node record stays in slurmctld until deleted)."""
        name = node_name(ordinal)
        # /run is the namespace's own tmpfs: read the pid file and signal from inside.
        pid = self.run(["cat", f"/run/slurmd-{name}.pid"]).check().stdout.strip()
        self.run(["kill", "-TERM", pid]).check()
        wait_for(lambda: self.run(["kill", "-0", pid]).returncode != 0, timeout, f"slurmd of {name} to exit")

    def _known(self, name: str) -> bool:
        return self.run(["scontrol", "show", "node", name], timeout=10).returncode == 0

    def nodes(self) -> list[str]:
        """Node names in ``sinfo`` (what users see)."""
        res = self.run(["sinfo", "-h", "-N", "-o", "%N"], timeout=10).check()
        return sorted(set(res.stdout.split()))

    def command_prefix(self) -> list[str]:
        """argv prefix that runs a command inside the cluster (the adapter's local transport)."""
        if self.init_pid is None:
            raise CommandError("cluster not started")
        env = ["PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin", "LANG=C.UTF-8", "HOME=/root"]
        return ["nsenter", "-t", str(self.init_pid), "-m", "-u", "-p", "-r", "-w", "env", "-i", *env]

    def slurmd_logs(self) -> str:
        return textwrap.indent("\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-20:])
            for p in sorted((self.root / "var/log/slurm").glob("slurmd-*.log"))), "  ")
