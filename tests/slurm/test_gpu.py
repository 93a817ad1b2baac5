"""GPU and CPU workers under real Slurm 24.11 (tests/slurm/gpu_cluster.py): a cluster with a CPU NodeSet and a GPU
NodeSet of two GPUs in three partitions, its slurm.conf, gres.conf (``AutoDetect=nvidia``), cgroup.conf and
plugstack.conf as the collection renders them, the jail plugin, and the worker image's ``soperator-driver`` run in
each worker's view before its slurmd starts.

No GPU exists here: the GPU worker's devices are device files with the NVIDIA majors and minors that no driver answers
(open: ENXIO when the job's device cgroup allows the file, EPERM when it denies it), its driver's procfs entries are
written for the test, its driver user space is gcc-built stand-ins (tests/standin_driver.py). What is real: Slurm's
gpu/nvidia detection, the registration, the scheduler's GRES and partition decisions, the cgroup device constraint,
the jail plugin, the loader and ``ldconfig``.
"""

from __future__ import annotations

import hashlib

import pytest
import standin_driver
from gpu_cluster import BUS_IDS, GPU_TYPE, JAIL_CACHE_SNAPSHOT, LIB_VIEW, GpuCluster, node_name
from slurm_cluster import USER, running

from ansible_collections.soperator.slurm.plugins.module_utils import names

CPU, GPU = node_name("cpu", 0), node_name("gpu", 0)
DEVICES = ["/dev/nvidia%d" % i for i in range(len(BUS_IDS))]


@pytest.fixture(scope="module")
def gpus(real_slurm_host):
    with running(GpuCluster()) as c:
        yield c


@pytest.fixture(scope="module")
def workers(gpus):
    """One worker of each NodeSet: what scontrol showed the moment slurmctld first knew it, and what its
    entrypoint's soperator-driver said."""
    seen = {}
    for nodeset in ("cpu", "gpu"):
        name, said = gpus.start_worker(nodeset, 0)
        seen[name] = (gpus.show_node(name), said)
    for name in seen:
        gpus.wait_idle(name)
    return seen


def srun(gpus, *args, timeout=90):
    return gpus.srun(*args, user=USER, timeout=timeout)


def opened(text):
    """devopen's lines: {path: 'ok' or the errno's name}."""
    return dict(line.split(" ", 1) for line in text.splitlines() if line.startswith("/dev/"))


def test_the_gpu_worker_registers_with_its_gres_at_once(gpus, workers):
    first, _said = workers[GPU]
    # "(S:0)": the GPUs' socket, which gpu/nvidia derives from the driver's local_cpulist (the stand-in's lists every
    # CPU of this one-socket host); Slurm appends it to Gres wherever the driver reports an affinity.
    assert first["Gres"] == "gpu:%s:%d(S:0)" % (GPU_TYPE, len(BUS_IDS)), first
    now = gpus.show_node(GPU)
    assert now["State"] == "IDLE+DYNAMIC_NORM" and "Reason" not in now, now  # a dynamic node (slurmd -Z), idle
    assert workers[CPU][0]["Gres"] == "(null)"
    # Slurm's gpu/nvidia plugin found both stand-in GPUs in the driver's procfs: the node took the configured count
    # and type at once, with no count it would have had to lower.
    log = gpus.log("slurmd-%s.log" % GPU)
    for complaint in ("lower than configured", "System GPU detection failed", "Device file and Minor number not found",
                      "Device name not found"):
        assert complaint not in log, log[-3000:]


def test_a_job_with_one_gpu_sees_one_device_and_cannot_open_the_other(gpus, workers):
    res = srun(gpus, "-p", "gpu", "--gres=gpu:1", "sh", "-c",
               "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; devopen %s /dev/nvidiactl" % " ".join(DEVICES)).check()
    assert "CUDA_VISIBLE_DEVICES=0" in res.stdout.splitlines(), res.stdout
    seen = opened(res.stdout)
    # Its own GPU passes the device cgroup (no driver answers: ENXIO); the other one is denied (EPERM).
    assert sorted(seen[d] for d in DEVICES) == ["ENXIO", "EPERM"], seen
    assert seen["/dev/nvidiactl"] == "ENXIO", seen


def test_a_job_with_both_gpus_may_open_both(gpus, workers):
    """The positive control: the cgroup denies only what the job was not given."""
    res = srun(gpus, "-p", "gpu", "--gres=gpu:%d" % len(BUS_IDS), "sh", "-c",
               "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; devopen %s" % " ".join(DEVICES)).check()
    assert "CUDA_VISIBLE_DEVICES=0,1" in res.stdout.splitlines(), res.stdout
    assert set(opened(res.stdout).values()) == {"ENXIO"}, res.stdout


def test_a_job_without_gres_sees_no_gpu(gpus, workers):
    res = srun(gpus, "-p", "gpu", "sh", "-c",
               "echo CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}; devopen %s" % " ".join(DEVICES)).check()
    assert "CUDA_VISIBLE_DEVICES=unset" in res.stdout.splitlines(), res.stdout
    assert set(opened(res.stdout).values()) == {"EPERM"}, res.stdout


def test_more_gpus_than_a_node_has_are_refused(gpus, workers):
    res = gpus.run(["srun", "-p", "gpu", "--gres=gpu:%d" % (len(BUS_IDS) + 1), "true"], user=USER, timeout=60)
    assert res.returncode != 0 and "Requested node configuration is not available" in res.stderr, res.stderr


def test_each_partition_runs_its_jobs_where_they_belong(gpus, workers):
    assert srun(gpus, "-p", "cpu", "hostname").check().stdout.split() == [CPU]
    assert srun(gpus, "-p", "gpu", "hostname").check().stdout.split() == [GPU]
    assert sorted(srun(gpus, "-p", "all", "-N2", "hostname").check().stdout.split()) == [CPU, GPU]
    assert srun(gpus, "hostname").check().stdout.split() == [CPU]  # cpu is the default partition
    refused = gpus.run(["srun", "-p", "cpu", "--gres=gpu:1", "true"], user=USER, timeout=60)
    assert refused.returncode != 0 and "Requested node configuration is not available" in refused.stderr


def test_gpu_jobs_find_the_nodes_driver_in_the_jail(gpus, workers):
    _first, said = workers[GPU]
    assert "soperator-driver: exposed 2 driver libraries (libcuda.so.%s, libnvidia-ml.so.%s) and 1 tools " \
           "(nvidia-smi)" % (standin_driver.VERSION, standin_driver.VERSION) in said, said
    listing = srun(gpus, "-p", "gpu", "ldconfig", "-p").check().stdout
    for soname in ("libcuda.so.1", "libnvidia-ml.so.1"):
        assert "%s (libc6,x86-64) => %s/lib/%s" % (soname, names.GPU_DRIVER_DIR, soname) in listing, listing
    # The jail's own libraries stay listed (its cache plus the driver's, not the container's cache).
    assert "libjailtool.so.1 (libc6,x86-64) => /opt/jailtool/lib/libjailtool.so.1" in listing, listing
    assert LIB_VIEW not in listing
    probe = srun(gpus, "-p", "gpu", "cuda-probe").check()
    assert probe.stdout.strip() == "cuInit=0 libcuda stand-in %s; the jail's own library" % standin_driver.VERSION
    smi = srun(gpus, "-p", "gpu", "nvidia-smi").check()  # the jail image's link /usr/local/bin/nvidia-smi
    assert smi.stdout.strip() == "nvidia-smi stand-in: libnvidia-ml stand-in %s" % standin_driver.VERSION
    # Nothing of the driver was written into the shared jail.
    found = [str(p) for p in gpus.jail.rglob("*") if p.name.startswith(("libcuda", "libnvidia-"))]
    assert found == []


def test_a_cpu_worker_keeps_the_jails_own_loader_cache(gpus, workers):
    _first, said = workers[CPU]
    assert "soperator-driver: no NVIDIA driver library or tool in this container" in said, said
    snapshot = hashlib.sha256((gpus.root / JAIL_CACHE_SNAPSHOT.lstrip("/")).read_bytes()).hexdigest()
    res = srun(gpus, "-p", "cpu", "sh", "-c", "sha256sum /etc/ld.so.cache; ldconfig -p").check()
    assert res.stdout.split()[0] == snapshot, res.stdout
    assert "libcuda" not in res.stdout and "libjailtool.so.1" in res.stdout
    probe = gpus.run(["srun", "-p", "cpu", "cuda-probe"], user=USER, timeout=60)
    assert probe.returncode != 0 and "libcuda.so.1: cannot open shared object file" in probe.stderr, probe.stderr
    assert gpus.run(["srun", "-p", "cpu", "nvidia-smi"], user=USER, timeout=60).returncode != 0
