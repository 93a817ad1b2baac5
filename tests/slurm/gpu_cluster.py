"""Real Slurm 24.11 with a CPU NodeSet and a GPU NodeSet of dynamic nodes on one host: the rendered gres.conf,
cgroup.conf, plugstack.conf, slurm.conf defaults and NodeSet/partition lines of a cluster with three partitions
(``cpu``, ``gpu``, ``all``), the jail plugin installed where the images have it, cgroup v1 enforcement (this host's),
and the worker image's ``soperator-driver`` run in each worker's own view before its slurmd starts, as the
entrypoint runs it.

Each worker is a "pod": its slurmd runs in its own UTS and mount namespace (hostname = node name, its own
``/run/soperator``, where a worker shows its driver), on its own loopback address (see dynamic_cluster.py).

No GPU exists here. What stands in for one, each where the NVIDIA driver and container toolkit put it in a GPU pod:

* Device files in the cluster's own ``/dev`` (a tmpfs of its mount namespace, nothing made on the host's): the
  GPUs' ``/dev/nvidia0`` and ``/dev/nvidia1`` (char 195:0, 195:1), ``/dev/nvidiactl`` (195:255), ``/dev/nvidia-uvm``
  (its major is dynamic on a real node: :data:`UVM_MAJOR` stands for it). No driver answers them: opening one that
  the job's device cgroup allows fails with ENXIO ("No such device or address"), one that it denies with EPERM.
* The driver's procfs and sysfs, in GPU workers' view only: ``/proc/driver/nvidia/gpus/<bus id>/information`` per GPU
  with the lines Slurm's gpu/nvidia plugin reads (``Model:``, ``Device Minor:``), on a tmpfs over ``/proc/driver``,
  and ``/sys/bus/pci/drivers/nvidia/<bus id>/local_cpulist`` (every CPU online), on a tmpfs over
  ``/sys/bus/pci/drivers``: Slurm 24.11's gpu/nvidia reads it for the GPU's CPU affinity without checking that it
  exists (``fopen`` unchecked: slurmd crashes where the driver's sysfs entry is missing).
* The driver's user space, in GPU workers' view only: ``libcuda.so.550.54.15`` and ``libnvidia-ml.so.550.54.15``
  (tests/standin_driver.py: built here with gcc, SONAMEs ``libcuda.so.1``, ``libnvidia-ml.so.1``, functions that say
  they are stand-ins), ``nvidia-smi`` a program linked against ``libnvidia-ml.so.1``; the libraries sit in a
  directory the worker's loader cache lists (as the toolkit's update-ldcache hook leaves a container), the tool in
  ``/usr/local/nvidia/bin``.

The jail (``/mnt/jail``, as in the images) has glibc, its static ``ldconfig``, busybox, a library of its own outside
the default directories (``/opt/jailtool/lib``, listed in its ``/etc/ld.so.conf.d``, in its own loader cache), and
two probes: ``cuda-probe`` (linked against ``libcuda.so.1`` and ``libjailtool.so.1``) and ``devopen`` (opens each
path it is given, prints ``path ok`` or the errno's name).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import standin_driver
from dynamic_cluster import DynamicCluster
from resources import load_example
from slurm_cluster import PLUGIN_SRC, REPO, base_conf, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf

CLUSTER = "gputest"
GPU_TYPE = "h100"
BUS_IDS = ("0000:1b:00.0", "0000:43:00.0")  # /dev/nvidia0, /dev/nvidia1
UVM_MAJOR = 511
DRIVER_VERSION = standin_driver.VERSION
MAX_NODES = 4
JAIL = names.JAIL_MOUNT
STANDIN = "/var/lib/standin-driver"  # built here; bound into GPU workers' view only
LIB_VIEW = "/opt/nvidia-driver/lib"  # where a GPU worker's container has the libraries
TOOL_VIEW = "/usr/local/nvidia/bin"
PROBES = "/usr/local/bin"  # in the jail
JAIL_CACHE_SNAPSHOT = "/var/lib/jail-ld.so.cache"  # the jail's own loader cache as built, to compare

STANDIN_SMI_C = r"""
#include <stdio.h>
const char *standin_nvml(void);
int main(void) { printf("nvidia-smi stand-in: %s\n", standin_nvml()); return 0; }
"""
JAILTOOL_C = r"""
const char *jailtool(void) { return "the jail's own library"; }
"""
CUDA_PROBE_C = r"""
#include <stdio.h>
int cuInit(unsigned int flags);
const char *standin_cuda(void);
const char *jailtool(void);
int main(void) { printf("cuInit=%d %s; %s\n", cuInit(0), standin_cuda(), jailtool()); return 0; }
"""
DEVOPEN_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDWR);
        if (fd >= 0) { printf("%s ok\n", argv[i]); close(fd); }
        else printf("%s %s\n", argv[i], strerrorname_np(errno));
    }
    return 0;
}
"""


EXAMPLE = "mixed-cluster-local.yaml"


def definition():
    """examples/mixed-cluster-local.yaml, validated: ``cpu`` in partitions cpu (the default) and all, ``gpu`` in gpu
    and all. What differs here, and why: the cluster's name (its nodes' names apart from the other harnesses' on this
    host's cgroups), two GPUs instead of one (so that a one-GPU job is seen not to open the other), and
    ``maxNodeCount`` (the harness's bound on dynamic nodes)."""
    cluster, nodesets = load_example(EXAMPLE)
    cluster["metadata"]["name"] = CLUSTER
    cluster["spec"]["slurm"]["maxNodeCount"] = MAX_NODES
    for nodeset in nodesets:
        nodeset["spec"]["clusterRef"]["name"] = CLUSTER
        if nodeset["spec"].get("gpu"):
            assert nodeset["spec"]["gpu"]["type"] == GPU_TYPE, nodeset
            nodeset["spec"]["gpu"]["count"] = len(BUS_IDS)
    return spec.validate_cluster_with_nodesets(cluster, nodesets)


def node_name(nodeset: str, ordinal: int) -> str:
    return "%s-%d" % (names.worker_name(CLUSTER, nodeset), ordinal)


def node_addr(nodeset: str, ordinal: int) -> str:
    return "127.0.1.%d" % ((1 if nodeset == "cpu" else 101) + ordinal)


def slurm_conf_text(ctld_port: int, slurmd_port: int, cluster, nodesets) -> str:
    """The harness's identity lines (one host, munge's socket) with the rendered defaults (cgroup proctrack and task
    plugins, PrologFlags=Contain), GresTypes and the rendered NodeSet and partition lines."""
    defaults = dict(slurm_conf.SLURM_CONF_DEFAULTS)
    base = [line for line in base_conf(CLUSTER, ctld_port, slurm_user=names.SLURM_USER).splitlines()
            if line.split("=", 1)[0] not in defaults]
    rendered = slurm_conf.render_slurm_conf(cluster, nodesets).splitlines()
    nodes_and_partitions = rendered[rendered.index("# NodeSets: dynamic nodes (slurmd -Z) register with "
                                                   "Feature=<nodeset>"):]
    lines = base + ["%s=%s" % kv for kv in slurm_conf.SLURM_CONF_DEFAULTS] + [
        "GresTypes=gpu", "SlurmdPort=%d" % slurmd_port, "CommunicationParameters=NoInAddrAny",
        "MaxNodeCount=%d" % MAX_NODES, "SlurmdTimeout=30"] + nodes_and_partitions
    assert [line for line in rendered if line.startswith("GresTypes=")] == ["GresTypes=gpu"]
    return "\n".join(lines) + "\n"


class GpuCluster(DynamicCluster):
    def __init__(self, workdir: Path | None = None):
        super().__init__(workdir)
        self.jail = self.root / JAIL.lstrip("/")
        self.cluster, self.nodesets = definition()

    def nodeset(self, name: str):
        return next(ns for ns in self.nodesets if ns["metadata"]["name"] == name)

    def hosts(self) -> list[str]:
        return ["%s %s" % (node_addr(s, i), node_name(s, i)) for s in ("cpu", "gpu") for i in range(MAX_NODES)]

    def slurm_conf_text(self, ctld_port: int, slurmd_port: int) -> str:
        return slurm_conf_text(ctld_port, slurmd_port, self.cluster, self.nodesets)

    # ---- setup -----------------------------------------------------------------------
    def prepare(self) -> None:
        """DynamicCluster's rootfs, munge and slurmctld with this cluster's slurm.conf; then the rendered cgroup.conf,
        gres.conf and plugstack.conf, the worker image's driver tool, the stand-in driver, the jail, the plugin."""
        super().prepare()
        r = self.root
        files = slurm_conf.render_config_files(self.cluster, self.nodesets)
        for name in ("cgroup.conf", "gres.conf", "plugstack.conf"):
            (r / "etc/slurm" / name).write_text(files[name])
        for d in ("usr/local/lib/soperator", LIB_VIEW, TOOL_VIEW, "run"):
            (r / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        # The worker image's driver tool, where the image has it.
        shutil.copy2(REPO / "images/worker/soperator_driver.py", r / "usr/local/lib/soperator/soperator_driver.py")
        shutil.copy2(REPO / "images/worker/soperator-driver", r / "usr/local/sbin/soperator-driver")
        self.build_standin_driver()
        self.build_jail()
        self.build_plugin()

    def _cc(self, name: str, source: str, *args: str) -> None:
        src = "/usr/local/src/%s.c" % name
        (self.root / src.lstrip("/")).write_text(source)
        self.chroot(["gcc", "-O2", "-Wall", "-Werror", src, *args]).check()

    def build_standin_driver(self) -> None:
        """The driver's stand-in files, and the loader cache of a GPU worker's container that lists them."""
        lib = STANDIN + "/lib"
        (self.root / lib.lstrip("/")).mkdir(parents=True)
        (self.root / STANDIN.lstrip("/") / "bin").mkdir()
        standin_driver.build_libraries(str(self.root / lib.lstrip("/")))
        self._cc("nvidia-smi", STANDIN_SMI_C, "-o", STANDIN + "/bin/nvidia-smi",
                 "%s/libnvidia-ml.so.%s" % (lib, DRIVER_VERSION))
        # In the worker's view the libraries are at LIB_VIEW: ldconfig (not -X: the toolkit's hook makes the SONAME
        # links too) writes that view's cache.
        script = ('mount --bind {lib} {view} && ldconfig -C {standin}/ld.so.cache {view}'
                  .format(lib=lib, view=LIB_VIEW, standin=STANDIN))
        subprocess.run(["unshare", "-m", "--propagation", "private", "chroot", str(self.root), "sh", "-c", script],
                       check=True)

    def build_jail(self) -> None:
        """A small jail with glibc: busybox, ldconfig, a library of its own outside the default directories, its own
        loader cache, the probes, the image's links to the driver's tools."""
        j, r = self.jail, self.root
        for d in ("usr/lib/x86_64-linux-gnu", "usr/bin", "usr/sbin", "usr/local/bin", "etc/ld.so.conf.d",
                  "opt/jailtool/lib", "tmp", "run", "home", "root", "proc", "sys", "dev"):
            (j / d).mkdir(parents=True, exist_ok=True)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib")):
            (j / link).symlink_to(target)
        os.chmod(j / "tmp", 0o1777)
        for name in ("libc.so.6", "ld-linux-x86-64.so.2"):
            shutil.copy2(r / "usr/lib/x86_64-linux-gnu" / name, j / "usr/lib/x86_64-linux-gnu" / name)
        (j / "usr/lib/ld-linux-x86-64.so.2").symlink_to("x86_64-linux-gnu/ld-linux-x86-64.so.2")
        shutil.copy2(r / "usr/sbin/ldconfig", j / "usr/sbin/ldconfig")
        shutil.copy2(r / "usr/bin/busybox", j / "usr/bin/busybox")
        subprocess.run(["chroot", str(j), "/usr/bin/busybox", "--install", "-s", "/usr/bin"], check=True)
        for name in ("ld.so.conf",):
            shutil.copy2(r / "etc" / name, j / "etc" / name)
        for conf in (r / "etc/ld.so.conf.d").iterdir():
            if not conf.name.startswith("00-nvcr"):
                shutil.copy2(conf, j / "etc/ld.so.conf.d" / conf.name)
        (j / "etc/ld.so.conf.d/jailtool.conf").write_text("/opt/jailtool/lib\n")
        (j / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (j / "etc/group").write_text("root:x:0:\n")
        self._add_user(j)
        self._cc("jailtool", JAILTOOL_C, "-shared", "-fPIC", "-Wl,-soname,libjailtool.so.1",
                 "-o", JAIL + "/opt/jailtool/lib/libjailtool.so.1")
        self._cc("cuda-probe", CUDA_PROBE_C, "-o", JAIL + PROBES + "/cuda-probe",
                 "%s/lib/libcuda.so.%s" % (STANDIN, DRIVER_VERSION), JAIL + "/opt/jailtool/lib/libjailtool.so.1")
        self._cc("devopen", DEVOPEN_C, "-o", JAIL + PROBES + "/devopen")
        subprocess.run(["chroot", str(j), "/usr/sbin/ldconfig"], check=True)
        shutil.copy2(j / "etc/ld.so.cache", r / JAIL_CACHE_SNAPSHOT.lstrip("/"))
        # As the jail image does (images/jail/Containerfile).
        for tool in ("nvidia-smi",):
            (j / "usr/local/bin" / tool).symlink_to("%s/bin/%s" % (names.GPU_DRIVER_DIR, tool))
        (j / ".soperator-populated").write_text("image=gputest\n")

    def build_plugin(self) -> None:
        """spank_chroot compiled in the rootfs and installed where the images have it (the rendered
        plugstack.conf names it there)."""
        src = self.root / "usr/local/src/spank_chroot"
        shutil.copytree(PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.so", "*.o", "soperator-bind-*"))
        self.chroot(["make", "-C", "/usr/local/src/spank_chroot", "all"]).check()
        self.chroot(["install", "-D", "-m", "0755", "/usr/local/src/spank_chroot/spank_chroot.so",
                     names.SPANK_CHROOT_PLUGIN]).check()

    def dev_mounts(self) -> str:
        """The cluster's own /dev: what a container gets, and the NVIDIA device files of a GPU node."""
        nodes = ["null c 1 3", "zero c 1 5", "full c 1 7", "random c 1 8", "urandom c 1 9", "tty c 5 0"]
        nodes += ["nvidia%d c 195 %d" % (i, i) for i in range(len(BUS_IDS))]
        nodes += ["nvidiactl c 195 255", "nvidia-uvm c %d 0" % UVM_MAJOR]
        lines = ['mount -t tmpfs -o mode=755 tmpfs "$R/dev"']
        lines += ['mknod -m 666 "$R/dev/%s" %s' % tuple(n.split(" ", 1)) for n in nodes]
        lines += ['mkdir "$R/dev/pts" "$R/dev/shm"', 'mount -t devpts -o newinstance,ptmxmode=0666 devpts "$R/dev/pts"',
                  'ln -s pts/ptmx "$R/dev/ptmx"', 'mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"']
        return "\n".join(lines)

    # ---- workers ---------------------------------------------------------------------
    def pod_script(self, nodeset: str, shown: int | None = None) -> str:
        """What a worker's pod is before its slurmd starts: its own /run/soperator; for a GPU worker, what the
        NVIDIA runtime puts into the container (the driver's files, its procfs entries of ``shown`` GPUs, default
        all); then the entrypoint's `soperator-driver expose`."""
        lines = ["set -e", "mkdir -p /run/soperator", "mount -t tmpfs -o mode=755 tmpfs /run/soperator"]
        if self.nodeset(nodeset)["spec"]["gpu"]["count"]:
            lines += ["mount --bind %s/lib %s" % (STANDIN, LIB_VIEW), "mount --bind %s/bin %s" % (STANDIN, TOOL_VIEW),
                      "mount --bind %s/ld.so.cache /etc/ld.so.cache" % STANDIN,
                      "mount -t tmpfs -o mode=555 tmpfs /proc/driver",
                      "cpus=$(cat /sys/devices/system/cpu/online)",
                      "mount -t tmpfs -o mode=755 tmpfs /sys/bus/pci/drivers"]
            for minor, bus in enumerate(BUS_IDS[:shown]):
                info = standin_driver.information(bus, minor)
                lines += ["mkdir -p /proc/driver/nvidia/gpus/%s /sys/bus/pci/drivers/nvidia/%s" % (bus, bus),
                          "printf '%%s' %s > /proc/driver/nvidia/gpus/%s/information" % (shlex.quote(info), bus),
                          'echo "$cpus" > /sys/bus/pci/drivers/nvidia/%s/local_cpulist' % bus]
        lines.append("/usr/local/sbin/soperator-driver expose")
        return "\n".join(lines)

    def start_worker(self, nodeset: str, ordinal: int, timeout: float = 30,
                     shown: int | None = None) -> tuple[str, str]:
        """Start the pod of worker ``<nodeset>-<ordinal>`` and its slurmd; (node name, what its entrypoint said).
        Returns as soon as slurmctld knows the node (its first registration). ``shown``: see :meth:`pod_script`."""
        name = node_name(nodeset, ordinal)
        conf = slurm_conf.node_conf_params(self.nodeset(nodeset))
        started = self.start_slurmd(name, node_addr(nodeset, ordinal), conf, self.pod_script(nodeset, shown)).check()
        try:
            wait_for(lambda: self._known(name), timeout, "%s registered" % name, interval=0.1)
        except TimeoutError as exc:
            raise TimeoutError("%s\n--- the pod said:\n%s\n%s" % (exc, started.stderr, self.logs(name))) from None
        return name, started.stderr

    def wait_idle(self, name: str, timeout: float = 30) -> None:
        try:
            wait_for(lambda: self.node_state(name).rstrip("*") == "idle", timeout, "%s idle" % name, interval=0.3)
        except TimeoutError as exc:
            shown = self.run(["scontrol", "show", "node", name], timeout=10).stdout
            raise TimeoutError("%s\n--- scontrol show node:\n%s\n%s" % (exc, shown, self.logs(name))) from None

    def logs(self, name: str) -> str:
        """The tails of the node's slurmd log and of slurmctld's, for a failure's message."""
        return "--- slurmd-%s.log:\n%s\n--- slurmctld.log:\n%s" % (
            name, self.log("slurmd-%s.log" % name)[-4000:], self.log("slurmctld.log")[-3000:])

    def show_node(self, name: str) -> dict[str, str]:
        out = self.run(["scontrol", "show", "node", "-o", name]).check().stdout
        return dict(word.split("=", 1) for word in out.split() if "=" in word)

    def remove(self) -> None:
        self.remove_cgroups()
        super().remove()

    def remove_cgroups(self) -> None:
        """The cgroup v1 directories slurmd made on this host for these nodes (the harness shares the host's
        /sys): empty once the cluster stopped, removed deepest first."""
        ours = [node_name(s, i) for s in ("cpu", "gpu") for i in range(MAX_NODES)]
        for controller in Path("/sys/fs/cgroup").iterdir():
            for top in controller.glob("slurm*"):
                if top.name.split("_", 1)[-1] not in ours:
                    continue
                for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    path.rmdir()
                top.rmdir()

