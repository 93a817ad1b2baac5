#!/usr/bin/env python3
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 7 of hack/gpu-check.sh: the product's real Slurm on this machine's GPUs, and the archive it runs from.

    gpu_slurm.py bundle [DIR]   build DIR/slurm-rootfs.tar.xz (default: .gpu-check/ in the checkout, which the
                                device tool carries): hack/slurm-rootfs.sh's Debian trixie tree with Slurm 24.11, munge
                                and python3, the jail plugin (spank_chroot/) built in it and installed where the images
                                have it, the real-Slurm suite's reaper; without the compiler, MariaDB, slurmdbd,
                                slurmrestd, headers, static libraries and documentation (at most 60 MiB: a GPU machine
                                has no network and receives only what is sent). Cached in ~/.cache/soperator/gpu-check,
                                keyed by the tree's recipe, the plugin's sources and this bundle's recipe.
    gpu_slurm.py run ARCHIVE JAIL PYTHON
                                (root, in the check's own mount namespace) the stage itself; JAIL is stage 3's jail
                                (this machine's python3 and libraries, no driver file), PYTHON its interpreter.

What ``run`` does, with what the product ships and nothing else standing in:
  1. The GPUs as Slurm's gpu/nvidia plugin sees them (/proc/driver/nvidia/gpus/*/information); the NodeSet's
     ``gpu.type`` is Slurm's name of the model (``NVIDIA H200`` -> ``nvidia_h200``), its count the GPUs found.
  2. The cluster's objects rendered by the collection (render_cluster): slurm.conf, gres.conf, cgroup.conf and
     plugstack.conf from the slurm-config ConfigMap, the health program's settings from the health ConfigMap, slurmd's
     arguments and environment from the worker StatefulSet. What one host needs instead of a pod network is replaced
     and said (:func:`single_host`): the controller's address, free ports, log files, a 5 s health interval.
  3. The archive unpacked and run as the real-Slurm suite runs a cluster (tests/slurm/slurm_cluster.py: fresh mount,
     UTS and PID namespaces, munge and slurmctld; on cgroup v2 a cgroup of its own, as a container has); slurmd's
     container gets the driver as the NVIDIA container
     toolkit's legacy hook gives it (each driver library bound into /usr/lib/x86_64-linux-gnu, its tools into
     /usr/bin, ldconfig run), the host's /dev, /sys and the driver's /proc/driver, and stage 3's jail at /mnt/jail.
  4. The worker entrypoint's step, unchanged: ``soperator-driver expose``; then slurmd with the StatefulSet's own
     arguments (``-D`` left out: the namespace's reaper keeps it), configless from slurmctld.
  5. Checks: ``Gres=gpu:<type>:<n>`` at the first registration and the node idle with no reason; ``srun
     --gres=gpu:1`` as a user runs the CUDA program in the jail through the jail plugin with CUDA_VISIBLE_DEVICES
     set and ``nvidia-smi -L`` there lists exactly one GPU; a step without ``--gres`` cannot open /dev/nvidia0 (EPERM)
     and one with it can; the health program, slurmd's HealthCheckProgram, drains the node when its settings ask for
     one GPU more than there are and resumes it when they are right again, leaving it idle (Slurm keeps the last
     reason after a resume).
Every step prints its command and output; a failed step prints FAIL and the daemons' logs, and the exit status is 0
only when every step passed. Python >= 3.7, standard library only.
"""

import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "slurm"))
import gpu_check  # noqa: E402  (the check's own Python parts: the collection's import)
import slurm_cluster  # noqa: E402  (the real-Slurm suite's harness: namespaces, reaper, commands)
from dynamic_cluster import INIT_SH  # noqa: E402  (munge and slurmctld, workers started apart)

ARCHIVE_NAME = "slurm-rootfs.tar.xz"
DEFAULT_BUNDLE_DIR = os.path.join(REPO, ".gpu-check")
MAX_ARCHIVE_BYTES = 60 * 1024 * 1024
CLUSTER, NAMESPACE, NODESET = "gpucheck", "gpu-check", "gpu"
HEALTH_INTERVAL = 5
LEGACY_LIB_DIR = "/usr/lib/x86_64-linux-gnu"  # where the toolkit's legacy hook binds the driver's libraries
REAPER = "/usr/local/sbin/reaper"
CGROUP_V2_ROOT = "/sys/fs/cgroup"

# Removed from the tree before it is packed: what building and the accounting tests need, nothing slurmctld, slurmd,
# srun, munge or python3 run. Globs below the tree's root.
PRUNE = (
    "usr/lib/gcc", "usr/libexec/gcc", "usr/bin/*gcc*", "usr/bin/*g++*", "usr/bin/cpp*", "usr/bin/*-cpp*",
    "usr/bin/x86_64-linux-gnu-*", "usr/bin/as", "usr/bin/ld", "usr/bin/ld.*", "usr/bin/gprof*", "usr/bin/lto-dump*",
    "usr/lib/x86_64-linux-gnu/libasan*", "usr/lib/x86_64-linux-gnu/libtsan*", "usr/lib/x86_64-linux-gnu/liblsan*",
    "usr/lib/x86_64-linux-gnu/libubsan*", "usr/lib/x86_64-linux-gnu/libhwasan*", "usr/lib/x86_64-linux-gnu/libgprofng*",
    "usr/lib/x86_64-linux-gnu/libbfd*", "usr/lib/x86_64-linux-gnu/libctf*", "usr/lib/x86_64-linux-gnu/libopcodes*",
    "usr/lib/x86_64-linux-gnu/libsframe*", "usr/lib/x86_64-linux-gnu/libisl*", "usr/lib/x86_64-linux-gnu/libmpc*",
    "usr/lib/x86_64-linux-gnu/libmpfr*", "usr/lib/x86_64-linux-gnu/*.a", "usr/lib/x86_64-linux-gnu/*.o",
    "usr/include", "usr/local/src", "usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
    "usr/share/mysql", "usr/share/mariadb", "usr/lib/mysql", "usr/sbin/mariadbd", "usr/sbin/mysqld",
    "usr/bin/mariadb*", "usr/bin/mysql*", "usr/bin/myisam*", "usr/bin/aria_*", "usr/bin/innochecksum",
    "usr/lib/x86_64-linux-gnu/libmariadb*", "usr/lib/x86_64-linux-gnu/galera*", "usr/lib/galera",
    "usr/sbin/slurmdbd", "usr/sbin/slurmrestd", "usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so",
    "usr/bin/perror", "usr/bin/my_print_defaults", "usr/bin/resolve_stack_dump", "usr/bin/resolveip",
    "usr/bin/replace", "usr/lib/linux", "usr/lib/x86_64-linux-gnu/libperl*", "usr/lib/x86_64-linux-gnu/perl*",
    "usr/share/perl", "usr/bin/perl*", "var/lib/mysql", "var/cache/apt",
    "var/cache/debconf/*-old", "var/lib/apt/lists",
    # The container tests' tools (hack/slurm-rootfs.sh): stage 7 runs no container step.
    "usr/bin/skopeo", "usr/bin/umoci", "usr/bin/docker-registry", "usr/lib/podman", "etc/docker/registry",
)
# Bump when _build changes in a way PRUNE does not show.
BUNDLE_RECIPE = 1


def log(message):
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------ pure
def slurm_gpu_type(model):
    """The GRES type Slurm's gpu/nvidia plugin derives from the driver's ``Model:`` line: lowercased, every blank an
    underscore (``NVIDIA H100 80GB HBM3`` -> ``nvidia_h100_80gb_hbm3``)."""
    return re.sub(r"\s+", "_", model.strip()).lower()


def parse_information(text):
    """``Model:`` and ``Device Minor:`` of a /proc/driver/nvidia/gpus/<bus>/information file."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields.get("Model", ""), fields.get("Device Minor", "")


def single_host(conf, replace, append):
    """The rendered slurm.conf with ``replace``'s keys' values set (each key's line rewritten, in place) and
    ``append``'s lines added at the end: what one host needs instead of the pod network."""
    lines, seen = [], set()
    for line in conf.splitlines():
        key = line.split("=", 1)[0].strip()
        if key in replace and "=" in line and not line.lstrip().startswith("#"):
            lines.append("%s=%s" % (key, replace[key]))
            seen.add(key)
        else:
            lines.append(line)
    missing = sorted(set(replace) - seen)
    if missing:
        raise ValueError("the rendered slurm.conf has no %s line" % ", ".join(missing))
    return "\n".join(lines + ["", "# gpu-check: one host instead of the pod network"] + list(append)) + "\n"


def expand(args, env):
    """A container's args with Kubernetes' ``$(VAR)`` references to its env expanded, as the kubelet does."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


def shown_node(text):
    """``scontrol show node -o`` -> {key: value} (a value's first word: see :func:`node_reason`)."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def node_reason(text):
    """The node's Reason in ``scontrol show node`` output, whole (it has blanks), without Slurm's ``[user@time]``."""
    match = re.search(r"\bReason=(.*?) \[[^\]\s]*@[^\]\s]*\]", text)
    return match.group(1) if match else ""


# ------------------------------------------------------------------------------------------------ rendering
def definition(gpu_type, count):
    api = "slurm.soperator.dev/v1alpha1"
    cluster = {"apiVersion": api, "kind": "SlurmCluster", "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
               "spec": {"jail": {"existingClaim": "jail"}, "partitions": [{"name": NODESET, "default": True}]}}
    nodeset = {"apiVersion": api, "kind": "NodeSet", "metadata": {"name": NODESET, "namespace": NAMESPACE},
               "spec": {"clusterRef": {"name": CLUSTER}, "replicas": 1, "partitions": [NODESET],
                        "gpu": {"count": count, "type": gpu_type}}}
    return cluster, [nodeset]


def rendered(gpu_type, count):
    """What the collection renders for a one-GPU-NodeSet cluster: {files, health, args, env, node}."""
    gpu_check.import_collection()
    from ansible_collections.soperator.slurm.plugins.module_utils import names
    from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

    objects = render.render_cluster(*definition(gpu_type, count))

    def find(kind, name):
        return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)

    config = find("ConfigMap", names.slurm_config_name(CLUSTER))["data"]
    health = find("ConfigMap", names.health_config_name(CLUSTER))["data"]["%s.json" % NODESET]
    workers = find("StatefulSet", names.worker_name(CLUSTER, NODESET))
    container = next(c for c in workers["spec"]["template"]["spec"]["containers"] if c["name"] == "slurmd")
    env = dict((e["name"], e.get("value", "")) for e in container["env"])
    node = names.pod_name(names.worker_name(CLUSTER, NODESET), 0)
    env["SLURMD_NODENAME"] = node  # the pod's name (a fieldRef)
    return {"files": config, "health": health, "args": container["args"], "env": env, "node": node,
            "plugin": names.SPANK_CHROOT_PLUGIN, "jail": names.JAIL_MOUNT,
            "health_config": names.HEALTH_CONFIG_MOUNT + "/" + names.HEALTH_CONFIG_FILE}


# ------------------------------------------------------------------------------------------------ bundle
def _digest(paths):
    h = hashlib.sha256()
    for path in paths:
        h.update(path.encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def bundle(out_dir):
    """Build (or reuse) the archive; copy it to ``out_dir``; return its path."""
    tarball = subprocess.run([os.path.join(HERE, "slurm-rootfs.sh")], check=True, stdout=subprocess.PIPE,
                             universal_newlines=True).stdout.strip()
    sources = sorted(p for p in glob.glob(os.path.join(REPO, "spank_chroot", "*")) if os.path.isfile(p))
    recipe = json.dumps([BUNDLE_RECIPE, PRUNE, slurm_cluster.REAPER_C])
    key = hashlib.sha256(("%s %s %s" % (tarball, _digest(sources), recipe)).encode()).hexdigest()[:12]
    cache = os.path.join(os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator")), "gpu-check")
    cached = os.path.join(cache, "slurm-rootfs-%s.tar.xz" % key)
    if not os.path.exists(cached):
        os.makedirs(cache, exist_ok=True)
        _build(cached)
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, ARCHIVE_NAME)
    shutil.copyfile(cached, target)
    log("gpu-check bundle: %s (%.1f MiB)" % (target, os.path.getsize(target) / 1048576.0))
    return target


def _build(cached):
    started = time.time()
    work = tempfile.mkdtemp(prefix="gpu-check-bundle-")
    root = os.path.join(work, "rootfs")
    try:
        subprocess.run([os.path.join(HERE, "slurm-rootfs.sh"), "--extract", root], check=True,
                       stdout=subprocess.DEVNULL)
        gpu_check.import_collection()
        from ansible_collections.soperator.slurm.plugins.module_utils import names

        src = os.path.join(root, "usr/local/src")
        os.makedirs(src, exist_ok=True)
        shutil.copytree(os.path.join(REPO, "spank_chroot"), os.path.join(src, "spank_chroot"),
                        ignore=shutil.ignore_patterns("build", "*.so", "*.o", "soperator-bind-*"))
        with open(os.path.join(src, "reaper.c"), "w") as f:
            f.write(slurm_cluster.REAPER_C)

        def chroot(*argv):
            subprocess.run(["chroot", root] + list(argv), check=True, stdout=subprocess.DEVNULL)

        chroot("make", "-C", "/usr/local/src/spank_chroot", "all", "check-symbols")
        chroot("install", "-D", "-m", "0755", "/usr/local/src/spank_chroot/spank_chroot.so", names.SPANK_CHROOT_PLUGIN)
        chroot("gcc", "-O2", "-o", REAPER, "/usr/local/src/reaper.c")
        for pattern in PRUNE:
            for path in glob.glob(os.path.join(root, pattern)):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        for required in ("usr/sbin/slurmctld", "usr/sbin/slurmd", "usr/sbin/slurmstepd", "usr/bin/srun",
                         "usr/sbin/munged", "usr/bin/python3", names.SPANK_CHROOT_PLUGIN.lstrip("/"),
                         REAPER.lstrip("/"), "usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvidia.so"):
            if subprocess.run(["chroot", root, "test", "-e", "/" + required]).returncode != 0:  # links within it
                raise SystemExit("gpu-check bundle: %s missing from the tree" % required)
        partial = cached + ".partial"
        subprocess.run("tar -C %s --numeric-owner -cf - . | xz -T0 -6 > %s" % (shlex.quote(root), shlex.quote(partial)),
                       shell=True, check=True)
        size = os.path.getsize(partial)
        if size > MAX_ARCHIVE_BYTES:
            os.unlink(partial)
            raise SystemExit("gpu-check bundle: %.1f MiB, over the %d MiB a GPU machine is sent" % (
                size / 1048576.0, MAX_ARCHIVE_BYTES // 1048576))
        os.replace(partial, cached)
        log("gpu-check bundle: built %s (%.1f MiB) in %.0f s" % (cached, size / 1048576.0, time.time() - started))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ run
class GpuCheckCluster(slurm_cluster.Cluster):
    """The product's GPU worker on this machine: the archive's tree as slurmctld's and slurmd's container."""

    def __init__(self, archive, jail, driver, r, ports):
        super().__init__()
        self.archive, self.host_jail, self.driver, self.r, self.ports = archive, jail, driver, r, ports
        # cgroup v2: the namespace's processes get a cgroup of their own, as a container has. slurmd's cgroup/v2
        # plugin manages the cgroup it starts in and refuses one holding processes it cannot see ("contains pids from
        # outside of our pid namespace": the H200 machine's first run, where the check's own cgroup held the
        # sandbox's processes).
        self.cgroup = CGROUP_V2_ROOT + "/soperator-gpu-check-%d" % os.getpid() if os.path.exists(
            CGROUP_V2_ROOT + "/cgroup.controllers") else None

    def prepare(self):
        started = time.time()
        with tarfile.open(self.archive) as tar:
            tar.extractall(self.root, numeric_owner=True, **({"filter": "fully_trusted"}
                                                             if hasattr(tarfile, "fully_trusted_filter") else {}))
        log("unpacked %s in %.1f s" % (os.path.basename(self.archive), time.time() - started))
        r, files = str(self.root), self.r["files"]
        ctld_port, slurmd_port = self.ports
        files = dict(files)
        files["slurm.conf"] = single_host(files["slurm.conf"], {
            "SlurmctldHost": "%s(127.0.0.1)" % slurm_cluster.HOSTNAME, "SlurmctldPort": ctld_port,
            "SlurmdPort": slurmd_port, "HealthCheckInterval": HEALTH_INTERVAL}, [
            "SlurmctldLogFile=/var/log/slurm/slurmctld.log", "SlurmdLogFile=/var/log/slurm/slurmd-%n.log",
            "SlurmctldPidFile=/run/slurmctld.pid", "SlurmdPidFile=/run/slurmd-%n.pid", "SlurmdDebug=debug"])
        os.makedirs(os.path.join(r, "etc/slurm"), exist_ok=True)
        for name, text in files.items():
            _write(os.path.join(r, "etc/slurm", name), text)
        _write(os.path.join(r, "etc/hosts"), "127.0.0.1 localhost %s %s\n" % (slurm_cluster.HOSTNAME, self.r["node"]))
        _write(os.path.join(r, "etc/hostname"), slurm_cluster.HOSTNAME + "\n")
        with open(os.path.join(r, "etc/munge/munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(r, "etc/munge/munge.key"), 0o600)
        self._add_user(self.root)
        _write(os.path.join(r, "usr/local/sbin/cluster-init"), INIT_SH.format(hostname=slurm_cluster.HOSTNAME), 0o755)
        # The worker image's programs, as the image installs them (images/worker/Containerfile), from this checkout.
        worker = os.path.join(REPO, "images", "worker")
        for name in ("soperator_driver.py", "soperator_health.py"):
            _copy(os.path.join(worker, name), os.path.join(r, "usr/local/lib/soperator", name), 0o644)
        for name in ("soperator-driver", "soperator-health-check"):
            _copy(os.path.join(worker, name), os.path.join(r, "usr/local/sbin", name), 0o755)
        self.health_settings(json.loads(self.r["health"]))
        for d in (self.r["jail"], "var/spool/slurmd"):
            os.makedirs(os.path.join(r, d.lstrip("/")), exist_ok=True)
        if self.cgroup:
            os.mkdir(self.cgroup)

    def health_settings(self, settings):
        _write(os.path.join(str(self.root), self.r["health_config"].lstrip("/")), json.dumps(settings, indent=1))

    def wait_nodes_idle(self, timeout=60):
        return None  # the worker starts apart (start_worker)

    def dev_mounts(self):
        """The container's /dev (the host's, with the GPUs'), the driver's procfs, the jail, and the driver's files
        as the toolkit's legacy hook puts them into a container (then its ldconfig)."""
        q = shlex.quote
        # munge and slurmctld start in it (children of this namespace's init); slurmd joins it (_start_slurmd)
        lines = ["echo $$ > %s/cgroup.procs" % q(self.cgroup)] if self.cgroup else []
        lines += ['mount --rbind /dev "$R/dev"', 'mount --rbind /proc/driver "$R/proc/driver"',
                 'mount --bind %s "$R%s"' % (q(self.host_jail), self.r["jail"])]
        for base, real in sorted(self.driver["libraries"].items()):
            target = '"$R"%s' % q("%s/%s" % (LEGACY_LIB_DIR, base))
            lines += [": > %s" % target, "mount --bind -o ro %s %s" % (q(real), target)]
        for tool, real in sorted(self.driver["tools"].items()):
            target = '"$R"%s' % q("/usr/bin/" + tool)
            lines += [": > %s" % target, "mount --bind -o ro %s %s" % (q(real), target)]
        lines.append('chroot "$R" /sbin/ldconfig')
        return "\n".join(lines)


def _write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def _copy(src, dst, mode):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


class Steps:
    """Each check prints what it ran and what came back; failures are counted, never raised past the next step."""

    def __init__(self, cluster):
        self.c, self.failed = cluster, []

    def run(self, title, argv, srun=False, **kw):
        """``argv`` in the cluster (as root, or ``user=``), through ``srun --immediate`` when ``srun``; shown."""
        res = self.c.srun(*argv, **kw) if srun else self.c.run(argv, **kw)
        who = kw.get("user") or "root"
        out = res.output if res.output.endswith("\n") or not res.output else res.output + "\n"
        log("--- %s\n%s$ %s%s\n%s(exit %d)" % (title, who, "srun " if srun else "",
                                            " ".join(shlex.quote(a) for a in argv), out, res.returncode))
        return res

    def expect(self, ok, what):
        log(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            self.failed.append(what)
        return ok


def visible_gpus():
    """[(bus id, model, minor)] of the GPUs the driver shows, in bus order."""
    found = []
    for path in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        with open(path) as f:
            model, minor = parse_information(f.read())
        found.append((os.path.basename(os.path.dirname(path)), model, minor))
    return found


def driver_files():
    res = subprocess.run([sys.executable, os.path.join(REPO, "images/worker/soperator_driver.py"), "list"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if res.returncode != 0:
        raise SystemExit("soperator_driver.py list exited %d: %s" % (res.returncode, res.stderr))
    sys.stdout.write(res.stderr)
    return json.loads(res.stdout)


def cgroup_facts():
    for path in ("/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/cgroup.subtree_control"):
        if os.path.exists(path):
            with open(path) as f:
                log("%s: %s" % (path, f.read().strip() or "(empty)"))
    if not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        log("cgroup v1 (hybrid): %s" % " ".join(sorted(os.listdir("/sys/fs/cgroup"))))


def run(archive, jail, python):
    gpus = visible_gpus()
    if not gpus:
        log("FAIL: no GPU in /proc/driver/nvidia/gpus")
        return 1
    model = gpus[0][1]
    gpu_type = slurm_gpu_type(model)
    log("GPUs: %s; Slurm's type: %s" % ("; ".join("%s %s (minor %s)" % g for g in gpus), gpu_type))
    cgroup_facts()
    r = rendered(gpu_type, len(gpus))
    log("the worker's --conf (SLURMD_CONF_PARAMS): %s" % r["env"]["SLURMD_CONF_PARAMS"])
    cluster = GpuCheckCluster(archive, jail, driver_files(), r, slurm_cluster.free_ports(2))
    steps = Steps(cluster)
    try:
        cluster.prepare()
        cluster.start()
        worker(steps, cluster, r, gpu_type, len(gpus), python)
    except Exception as exc:  # noqa: BLE001  (a harness error is this stage's failure, said with its cause)
        steps.expect(False, "the cluster: %s: %s" % (type(exc).__name__, exc))
        _logs(cluster)
    finally:
        cluster.stop()
        _remove_cgroups(r["node"], cluster.cgroup)
        if os.environ.get("SPANK_TEST_KEEP"):
            log("kept %s" % cluster.workdir)
        else:
            cluster.remove()
    log("stage summary: %s" % ("every step passed" if not steps.failed else "%d failed: %s" % (
        len(steps.failed), "; ".join(steps.failed))))
    return 0 if not steps.failed else 1


def worker(steps, c, r, gpu_type, count, python):
    node = r["node"]
    res = steps.run("the worker entrypoint's step", ["/usr/local/sbin/soperator-driver", "expose"])
    if not steps.expect(res.returncode == 0, "soperator-driver expose in slurmd's container"):
        return
    args = expand(r["args"], dict(r["env"], SLURM_CONF_SERVER="127.0.0.1:%d" % c.ports[0]))
    args = [a for a in args if a != "-D"]  # the worker runs it in the foreground; here the reaper keeps it
    started = time.time()
    if not _start_slurmd(steps, c, node, args):
        _logs(c)
        lacking = missing_controllers()
        if not lacking:
            return
        # Learn what else holds on this machine: the product's cgroup.conf asks for controllers it lacks. The stage
        # has failed already; the rest runs without those constraints and says so.
        _without_constraints(steps, c, lacking)
        started = time.time()
        if not _start_slurmd(steps, c, node, args):
            _logs(c)
            return
    first = steps.run("at the first registration (%.1f s after slurmd started)" % (time.time() - started),
                      ["scontrol", "show", "node", node])
    want = "gpu:%s:%d" % (gpu_type, count)
    gres = shown_node(first.stdout.replace("\n", " ")).get("Gres", "")
    steps.expect(gres.split("(")[0] == want, "Gres=%s at the first registration (shown: Gres=%s)" % (want, gres))
    if not _idle(steps, c, node, "the node idle with no reason"):
        _logs(c)
        return
    steps.run("sinfo", ["sinfo", "-N", "-o", "%N %t %G %f %E"])

    py = [python, "-I", "-S", "/opt/gpu-check/gpu_check.py"]
    if not _jobs(steps, c, py) and missing_controllers():
        _logs(c)
        _without_constraints(steps, c, missing_controllers())
        if not (_start_slurmd(steps, c, node, args) and _idle(steps, c, node, "the node idle again")):
            _logs(c)
            return
        _jobs(steps, c, py)

    settings = json.loads(r["health"])
    wrong = json.loads(r["health"])
    wrong["checks"]["gpu"]["count"] = count + 1
    c.health_settings(wrong)
    log("--- the health program (slurmd's HealthCheckProgram, every %d s) with settings asking for %d GPUs"
        % (HEALTH_INTERVAL, count + 1))
    try:
        reason = slurm_cluster.wait_for(lambda: _reason(c, node).startswith("soperator: health"), 40,
                                        "a health drain")
        steps.expect(True, "drained by the health program: %s" % _reason(c, node))
    except TimeoutError as exc:
        reason = None
        steps.expect(False, "the health program drains a node that lacks a GPU: %s" % exc)
    c.health_settings(settings)
    log("--- the health program with the right settings again (%d GPU(s))" % count)
    if reason is not None and _idle(steps, c, node, "resumed by the health program: idle, not drained, responding",
                                    timeout=40, reason_left=True):
        res = steps.run("a job on the resumed node", ["--gres=gpu:1"] + py + ["devopen", "/dev/nvidia0"], srun=True,
                        user=slurm_cluster.USER)
        steps.expect(res.returncode == 0, "the resumed node runs jobs")
    time.sleep(HEALTH_INTERVAL * 2)  # two more health checks: the node must stay as it is
    _idle(steps, c, node, "still idle and responding after two more health checks", timeout=5, reason_left=True)
    steps.run("at the end", ["scontrol", "show", "node", node])
    _logs(c, 25 if not steps.failed else 60)


def _jobs(steps, c, py):
    """The job checks, as a user; whether the first step (the CUDA program) ran at all."""
    user = slurm_cluster.USER
    res = steps.run("the CUDA program in the jail, one GPU", ["--gres=gpu:1"] + py + ["cuda"], srun=True,
                    user=user, timeout=120)
    ran = res.returncode == 0
    steps.expect(ran and "all correct; libcuda from /run/soperator/nvidia/lib/" in res.stdout,
                 "the CUDA program computed on the GPU in the jail, libcuda from the node's driver directory")
    steps.expect("CUDA_VISIBLE_DEVICES=0" in res.stdout and "1 device(s)" in res.stdout,
                 "the step was given one GPU (CUDA_VISIBLE_DEVICES=0, CUDA sees 1 device)")
    res = steps.run("nvidia-smi -L in the jail, one GPU", ["--gres=gpu:1", "/usr/local/bin/nvidia-smi", "-L"],
                    srun=True, user=user)
    listed = [line for line in res.stdout.splitlines() if line.startswith("GPU ")]
    steps.expect(res.returncode == 0 and len(listed) == 1, "nvidia-smi -L lists exactly the one GPU given")
    res = steps.run("no GPU asked: open /dev/nvidia0", py + ["devopen", "/dev/nvidia0"], srun=True, user=user)
    steps.expect("/dev/nvidia0 EPERM" in res.stdout, "a step without --gres cannot open /dev/nvidia0 (EPERM)")
    res = steps.run("one GPU asked: open /dev/nvidia0", ["--gres=gpu:1"] + py + ["devopen", "/dev/nvidia0"],
                    srun=True, user=user)
    steps.expect(res.returncode == 0 and "/dev/nvidia0" in res.stdout and "EPERM" not in res.stdout,
                 "a step with --gres=gpu:1 may open /dev/nvidia0")
    return ran


def _start_slurmd(steps, c, node, args):
    argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', node] + args
    if c.cgroup:  # a command entered from outside keeps the caller's cgroup: slurmd joins the container's first
        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', c.cgroup] + argv
    res = steps.run("slurmd as the worker StatefulSet starts it, in a UTS namespace named after its pod", argv)
    if not steps.expect(res.returncode == 0, "slurmd started"):
        return False
    def registered():
        if "slurmd initialization failed" in c.log("slurmd-%s.log" % node):
            raise TimeoutError("slurmd of %s ended: its initialization failed (its log, below)" % node)
        return c.run(["scontrol", "show", "node", "-o", node], timeout=10).returncode == 0
    try:
        slurm_cluster.wait_for(registered, 60, "%s registered" % node, interval=0.2)
        return True
    except TimeoutError as exc:
        return steps.expect(False, str(exc))


# cgroup.conf's constraints and the cgroup v2 controller each needs.
CONSTRAINT_CONTROLLERS = (("ConstrainCores", "cpuset"), ("ConstrainRAMSpace", "memory"))


def missing_controllers(path="/sys/fs/cgroup/cgroup.controllers"):
    """cgroup v2 controllers the product's cgroup.conf needs that this machine's root cgroup does not offer."""
    try:
        with open(path) as f:
            offered = f.read().split()
    except OSError:
        return []  # cgroup v1
    return [controller for _key, controller in CONSTRAINT_CONTROLLERS if controller not in offered]


def _without_constraints(steps, c, lacking):
    keys = [key for key, controller in CONSTRAINT_CONTROLLERS if controller in lacking]
    steps.expect(False, "slurmd with the product's cgroup.conf on this machine, whose cgroup v2 lacks %s (%s=yes); "
                 "retrying with %s=no to check the rest" % (", ".join(lacking), "=yes, ".join(keys),
                                                            "=no, ".join(keys)))
    path = os.path.join(str(c.root), "etc/slurm/cgroup.conf")
    with open(path) as f:
        text = f.read()
    for key in keys:
        text = re.sub(r"(?m)^%s=.*$" % key, "%s=no" % key, text)
    _write(path, text)
    c.run(["sh", "-c", "kill $(cat /run/slurmd-*.pid) 2>/dev/null; true"])
    steps.run("slurmctld reads the changed cgroup.conf", ["scontrol", "reconfigure"])


def _reason(c, node):
    res = c.run(["scontrol", "show", "node", "-o", node], timeout=10)
    return node_reason(res.stdout) if res.returncode == 0 else ""


def _idle(steps, c, node, what, timeout=60, reason_left=False):
    """Wait for the node to be IDLE, not draining; with no reason unless ``reason_left`` (Slurm keeps the last reason
    of a drain after a resume)."""
    def idle():
        shown = shown_node(c.run(["scontrol", "show", "node", "-o", node], timeout=10).stdout)
        state = shown.get("State", "").split("+")
        return state[0] == "IDLE" and not {"DRAIN", "NOT_RESPONDING"} & set(state[1:]) \
            and (reason_left or not shown.get("Reason")) and shown
    try:
        shown = slurm_cluster.wait_for(idle, timeout, what, interval=0.5)
        return steps.expect(True, "%s (State=%s)" % (what, shown["State"]))
    except TimeoutError as exc:
        return steps.expect(False, "%s: %s" % (what, exc))


def _logs(c, last=60):
    """The daemons' logs and the namespace's own output (its mounts, munged, slurmctld's start), last lines each."""
    paths = [os.path.join(str(c.workdir), "init.log")] + sorted(glob.glob(os.path.join(str(c.root),
                                                                                         "var/log/slurm/*.log")))
    for path in paths:
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
            log("--- %s (last %d lines)\n%s" % (os.path.relpath(path, str(c.workdir)), last,
                                              "\n".join(lines[-last:])))


def _remove_cgroups(node, own=None):
    """The cgroups made for this node on the host (the stage shares the host's /sys): v1's slurm_<node> under each
    controller, v2's cgroup of the namespace (``own``) with what slurmd made below it; emptied once the cluster
    stopped, removed deepest first. Others' are never touched."""
    tops = glob.glob("/sys/fs/cgroup/*/slurm_%s" % node) + ([own] if own and os.path.isdir(own) else [])
    for top in tops:
        for path in sorted((os.path.join(d, n) for d, ns, _ in os.walk(top) for n in ns), key=len, reverse=True):
            try:
                os.rmdir(path)
            except OSError:
                pass
        try:
            os.rmdir(top)
        except OSError:
            pass


def main(argv):
    if argv[:1] == ["bundle"] and len(argv) <= 2:
        bundle(argv[1] if len(argv) == 2 else DEFAULT_BUNDLE_DIR)
        return 0
    if argv[:1] == ["run"] and len(argv) == 4:
        return run(*argv[1:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
