"""A real Slurm 24.11 cluster on one host, for tests of spank_chroot.

The adapter between the tests and Slurm: it unpacks the trixie rootfs built by
hack/slurm-rootfs.sh, writes a static slurm.conf with two logical nodes (``slurmd -N``, one
Port= each), builds and installs spank_chroot inside the rootfs, and runs munge, slurmctld and
the slurmds there in fresh mount, UTS and PID namespaces (host network, free ports). Nothing leaks to the host:
killing the namespace's init ends every daemon, job and mount at once.

Used by conftest.py (one cluster per test session) and bench_spank.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTFS_SCRIPT = REPO / "hack" / "slurm-rootfs.sh"
PLUGIN_SRC = REPO / "spank_chroot"

HOSTNAME = "slurm-test"
NODES = ("n1", "n2")
USER, UID, GID = "alice", 1001, 1001
# A supplementary group of USER (node and jail alike): the jail plugin acts with the job's groups.
GROUP, GROUP_GID = "proj", 1500
JAIL = "/srv/jail"  # inside the rootfs
MARKER = "/JAIL_MARKER"  # exists only in the jail
PLUGIN_PATH = "/usr/local/lib/slurm/spank_chroot.so"
PLUGSTACK_DROPIN = "/etc/slurm/plugstack.conf.d/spank_chroot.conf"

@contextlib.contextmanager
def running(cluster):
    """Prepare and start a test cluster; stop it and remove its work directory (unless SPANK_TEST_KEEP is set)."""
    try:
        cluster.prepare()
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if os.environ.get("SPANK_TEST_KEEP"):
            print(f"\nkept {cluster.workdir}")
        else:
            cluster.remove()


def base_conf(cluster_name: str, ctld_port: int, slurmd_debug: str = "info", slurm_user: str = "root") -> str:
    """The slurm.conf lines every test cluster shares (one host, munge's own socket, no accounting)."""
    return f"""\
ClusterName={cluster_name}
SlurmctldHost={HOSTNAME}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser={slurm_user}
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=/run/munge/munge.socket.2
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MailProg=/bin/true
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmdSpoolDir=/var/spool/slurmd/%n
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmdDebug={slurmd_debug}
SlurmctldDebug=info
InactiveLimit=0
KillWait=5
MinJobAge=300
"""


def slurm_conf(ctld_port: int, node_ports: dict[str, int]) -> str:
    """Static slurm.conf: two logical nodes on this host, told apart by Port=."""
    conf = base_conf("spanktest", ctld_port, slurmd_debug="debug")
    conf += "PrologFlags=Contain\nLaunchParameters=use_interactive_step\n"
    for name, port in node_ports.items():
        conf += (f"NodeName={name} NodeHostname={HOSTNAME} NodeAddr=127.0.0.1 Port={port} "
                 "CPUs=2 RealMemory=500 State=UNKNOWN\n")
    conf += (f"PartitionName=debug Nodes={','.join(node_ports)} Default=YES MaxTime=INFINITE "
             "State=UP OverSubscribe=FORCE:4\n")
    return conf


def free_ports(n: int) -> list[int]:
    """n TCP ports free right now: the cluster shares the host's network with other work."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()



# PID 1 of the namespace: reaps orphans (slurmstepd double-forks), exits on SIGTERM.
REAPER_C = r"""
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void bye(int s) { (void)s; _exit(0); }
int main(int argc, char **argv) {
    signal(SIGTERM, bye);
    signal(SIGINT, bye);
    if (argc > 1 && fork() == 0) { execv(argv[1], argv + 1); _exit(127); }
    for (;;) if (wait(NULL) < 0 && errno == ECHILD) pause();
}
"""

INIT_SH = """\
#!/bin/sh
# Started by the reaper inside the rootfs: munge, slurmctld, one slurmd per node.
set -e
hostname {hostname}
mkdir -p /run/munge /var/log/slurm /var/spool/slurmctld
chown munge:munge /run/munge /etc/munge /etc/munge/munge.key /var/lib/munge /var/log/munge
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged
/usr/sbin/slurmctld
for n in {nodes}; do mkdir -p /var/spool/slurmd/$n; /usr/sbin/slurmd -N $n; done
"""


class CommandError(AssertionError):
    pass


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def check(self) -> "Result":
        if self.returncode != 0:
            raise CommandError(
                f"{' '.join(self.argv)} exited {self.returncode}\n"
                f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
            )
        return self


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    """Poll predicate() until it returns a truthy value; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Cluster:
    # The daemons' root: a chroot (default), or a root of their namespace's own made by pivot_root, as a container
    # runtime gives a pod. Container steps need the latter: a task joins the container's mount namespace, which puts
    # it in that namespace's root.
    PIVOT_ROOT = False

    def __init__(self, workdir: Path | None = None):
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="soperator-slurm-"))
        self.root = self.workdir / "rootfs"
        self.jail = self.root / JAIL.lstrip("/")
        self._unshare: subprocess.Popen | None = None
        self.init_pid: int | None = None

    # ---- setup -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Unpack the rootfs, write configuration, build the jail and the plugin."""
        subprocess.run([str(ROOTFS_SCRIPT), "--extract", str(self.root)], check=True,
                       stdout=subprocess.DEVNULL)
        r = self.root
        (r / "etc/hosts").write_text(f"127.0.0.1 localhost {HOSTNAME}\n")
        (r / "etc/hostname").write_text(HOSTNAME + "\n")
        ports = free_ports(1 + len(NODES))
        (r / "etc/slurm/slurm.conf").write_text(slurm_conf(ports[0], dict(zip(NODES, ports[1:]))))
        # Our own munge key, not the one baked into the cached tarball.
        (r / "etc/munge/munge.key").write_bytes(os.urandom(1024))
        os.chmod(r / "etc/munge/munge.key", 0o600)
        self._add_user(r)
        (r / "usr/local/sbin").mkdir(parents=True, exist_ok=True)
        (r / "usr/local/src").mkdir(parents=True, exist_ok=True)
        (r / "usr/local/src/reaper.c").write_text(REAPER_C)
        init = r / "usr/local/sbin/cluster-init"
        init.write_text(INIT_SH.format(hostname=HOSTNAME, nodes=" ".join(NODES)))
        init.chmod(0o755)
        self.chroot(["gcc", "-O2", "-o", "/usr/local/sbin/reaper", "/usr/local/src/reaper.c"]).check()
        self.build_jail()
        self.build_plugin()

    @staticmethod
    def _add_user(base: Path) -> None:
        with open(base / "etc/passwd", "a") as f:
            f.write(f"{USER}:x:{UID}:{GID}::/home/{USER}:/bin/sh\n")
        with open(base / "etc/group", "a") as f:
            f.write(f"{USER}:x:{GID}:\n{GROUP}:x:{GROUP_GID}:{USER}\n")
        home = base / "home" / USER
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, UID, GID)

    def build_jail(self) -> None:
        """A small busybox root: /bin/sh, cat, ls, id, hostname; a marker; a shared dir."""
        j = self.jail
        if j.exists():
            shutil.rmtree(j)
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "shared"):
            (j / d).mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.root / "usr/bin/busybox", j / "bin/busybox")
        subprocess.run(["chroot", str(j), "/bin/busybox", "--install", "-s"], check=True)
        (j / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (j / "etc/group").write_text("root:x:0:\n")
        self._add_user(j)
        (j / MARKER.lstrip("/")).write_text("inside the jail\n")
        os.chmod(j / "shared", 0o1777)

    def build_plugin(self) -> None:
        """Compile spank_chroot inside the rootfs against trixie's libslurm-dev; install it."""
        src = self.root / "usr/local/src/spank_chroot"
        if src.exists():
            shutil.rmtree(src)
        shutil.copytree(PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.so", "*.o"))
        self.chroot(["make", "-C", "/usr/local/src/spank_chroot", "all", "check-symbols"]).check()
        self.chroot(["make", "-C", "/usr/local/src/spank_chroot", "install", "DESTDIR=/",
                     "PREFIX=/usr/local", f"JAIL={JAIL}"]).check()

    def chroot(self, argv: list[str], timeout: float = 300) -> Result:
        """Run in the rootfs before the cluster is up (no /proc there)."""
        return self._run(["chroot", str(self.root), *argv], timeout)

    # ---- lifecycle -------------------------------------------------------------------
    def dev_mounts(self) -> str:
        """Shell lines that give the rootfs its /dev ($R is the rootfs): the host's."""
        return 'mount --rbind /dev "$R/dev"'

    def start(self, timeout: float = 60) -> None:
        r = self.root
        script = textwrap.dedent(f"""\
            set -e
            R='{r}'
            # a mount point, as a container's root is: pivot_root needs one
            mount --rbind "$R" "$R"
            mount -t proc proc "$R/proc"
            """) + self.dev_mounts() + textwrap.dedent("""
            mount --rbind /sys "$R/sys"
            mount -t tmpfs -o mode=755 tmpfs "$R/run"
            """) + (self.enter_root_by_pivot() if self.PIVOT_ROOT else
                    'exec chroot "$R" /usr/local/sbin/reaper /usr/local/sbin/cluster-init\n')
        log = open(self.workdir / "init.log", "w")
        self._unshare = subprocess.Popen(
            ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child",
             "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.init_pid = wait_for(self._child_of_unshare, 10, "the namespace's init")
        wait_for(lambda: self.run(["scontrol", "ping"], timeout=10).returncode == 0, timeout,
                 "slurmctld to answer")
        self.wait_nodes_idle(timeout)

    @staticmethod
    def enter_root_by_pivot() -> str:
        """Shell lines that make $R the namespace's root (pivot_root), drop the host's, and start the init."""
        return textwrap.dedent("""\
            cd "$R"
            mkdir -p .host-root
            pivot_root . .host-root
            exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c \\
              'umount -l /.host-root && rmdir /.host-root && exec /usr/local/sbin/reaper /usr/local/sbin/cluster-init'
            """)

    def _child_of_unshare(self) -> int | None:
        if self._unshare.poll() is not None:
            raise CommandError(f"unshare exited {self._unshare.returncode}")
        try:
            kids = Path(f"/proc/{self._unshare.pid}/task/{self._unshare.pid}/children").read_text().split()
        except OSError:
            return None
        if not kids:
            return None
        pid = int(kids[0])
        # ready once it has chrooted (or pivoted) into the rootfs
        try:
            if self.PIVOT_ROOT:
                return pid if os.readlink(f"/proc/{pid}/exe").endswith("/reaper") else None
            return pid if os.readlink(f"/proc/{pid}/root") == str(self.root) else None
        except OSError:
            return None

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        def idle():
            res = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
            states = dict(line.split() for line in res.stdout.splitlines() if line.strip())
            return all(states.get(n, "").rstrip("*") == "idle" for n in NODES) and states
        wait_for(idle, timeout, "both nodes idle", interval=0.5)

    def stop(self) -> None:
        # The init (reaper) exits on SIGTERM; the kernel then kills everything else in its
        # PID namespace, and the mount namespace with its mounts goes away. unshare itself
        # ignores SIGTERM; SIGKILL on it makes --kill-child SIGKILL the init.
        if self.init_pid:
            try:
                os.kill(self.init_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if self._unshare:
            try:
                self._unshare.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._unshare.kill()
                self._unshare.wait()
        if self.init_pid:
            wait_for(lambda: not Path(f"/proc/{self.init_pid}").exists(), 20, "init to exit")

    def remove(self) -> None:
        mounts = Path("/proc/self/mountinfo").read_text()
        if str(self.workdir) in mounts:
            raise CommandError(f"mounts left under {self.workdir}; not removing it")
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- commands --------------------------------------------------------------------
    def run(self, argv: list[str], user: str | None = None, timeout: float = 60,
            cwd: str = "/tmp", env: dict[str, str] | None = None) -> Result:
        """Run argv inside the cluster's namespaces and rootfs, as root or as `user`.

        Always bounded: `timeout` kills the command (srun to a drained node waits forever).
        """
        if self.init_pid is None:
            raise CommandError("cluster not started")
        environ = {"PATH": "/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin", "LANG": "C.UTF-8"}
        if user:
            environ.update(HOME=f"/home/{user}", USER=user, LOGNAME=user)
            prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
        else:
            environ.update(HOME="/root", USER="root", LOGNAME="root")
            prefix = []
        environ.update(env or {})
        inner = " ".join(_sh_quote(a) for a in argv)
        full = ["nsenter", "-t", str(self.init_pid), "-m", "-u", "-p", "-r", "-w",
                "env", "-i", *[f"{k}={v}" for k, v in environ.items()],
                "sh", "-c", f"cd {_sh_quote(cwd)} && exec {' '.join(_sh_quote(p) for p in prefix)} "
                f"timeout -k 5 {int(timeout)} {inner}"]
        return self._run(full, timeout + 15)

    def srun(self, *args: str, user: str | None = None, timeout: float = 60, **kw) -> Result:
        return self.run(["srun", "--immediate=30", *args], user=user, timeout=timeout, **kw)

    def sbatch_wait(self, script: str, *args: str, user: str | None = None,
                    timeout: float = 90, cwd: str = "/tmp") -> tuple[Result, str]:
        """Submit a batch script with --wait; return the result and the job's output file."""
        tag = f"sbatch-{time.monotonic_ns()}"
        path = f"/tmp/{tag}.sh"
        out = f"/tmp/{tag}.out"
        host_path = self.root / path.lstrip("/")
        host_path.write_text(script)
        host_path.chmod(0o755)
        res = self.run(["sbatch", "--wait", "-o", out, "-e", out, *args, path], user=user,
                       timeout=timeout, cwd=cwd)
        host_out = self.root / out.lstrip("/")
        return res, host_out.read_text() if host_out.exists() else ""

    def log(self, name: str) -> str:
        p = self.root / "var/log/slurm" / name
        return p.read_text(errors="replace") if p.exists() else ""

    def node_state(self, node: str) -> str:
        """The node's state as sinfo shows it ("" while slurmctld does not know it). ``sinfo -N`` prints one line
        per node AND partition: a node in two partitions is "idle" twice, which is one state."""
        res = self.run(["sinfo", "-h", "-n", node, "-N", "-o", "%T"], timeout=10).check()
        return " ".join(sorted(set(res.stdout.split())))

    def plugstack(self, text: str | None) -> None:
        """Replace the spank_chroot drop-in (None: remove it)."""
        p = self.root / PLUGSTACK_DROPIN.lstrip("/")
        if text is None:
            p.unlink(missing_ok=True)
        else:
            p.write_text(text)

    @staticmethod
    def _run(argv: list[str], timeout: float) -> Result:
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            return Result(argv, 124, _text(e.stdout), _text(e.stderr) + "\n[harness timeout]")
        return Result(argv, cp.returncode, cp.stdout, cp.stderr)


def _text(b) -> str:
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


def _sh_quote(s: str) -> str:
    import shlex
    return shlex.quote(s)
