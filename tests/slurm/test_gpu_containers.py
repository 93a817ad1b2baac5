"""Container steps on a GPU worker (real Slurm 24.11, the stand-in GPU of gpu_cluster.py): a container step with
``--gres=gpu:1`` sees the devices Slurm gave it and the node's driver libraries (the directory the worker exposes,
docs/gpu.md), so a CUDA program in an image without a driver finds ``libcuda.so.1``.

The cluster is gpu_cluster.py's (the rendered slurm.conf, gres.conf, cgroup.conf and plugstack.conf of the mixed
example, here with ``spec.containers`` on and a pull Secret), with daemons in a root of their own as in a pod, and the
local registry of container_cluster.py holding an image with glibc, busybox and two probes: ``cuda-probe`` (linked
against ``libcuda.so.1``, which the image does not have) and ``devopen``.
"""

from __future__ import annotations

import pytest
import standin_driver
from container_cluster import LocalRegistry
from gpu_cluster import BUS_IDS, DEVOPEN_C, STANDIN, GpuCluster, node_name
from slurm_cluster import USER, running

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps

CPU, GPU = node_name("cpu", 0), node_name("gpu", 0)
IMAGE = "gpu/probe:1"
CUDA_PROBE_C = r"""
#include <stdio.h>
int cuInit(unsigned int flags);
const char *standin_cuda(void);
int main(void) { printf("cuInit=%d %s\n", cuInit(0), standin_cuda()); return 0; }
"""


class GpuContainerCluster(LocalRegistry, GpuCluster):
    PIVOT_ROOT = True
    auth_path = container_steps.REGISTRY_AUTH_FILE

    def __init__(self, workdir=None):
        super().__init__(workdir)
        self.cluster["spec"]["containers"] = {"enabled": True, "pullSecretRef": {"name": "regcred"}}
        self.cluster = spec.validate_cluster(self.cluster)

    def prepare(self) -> None:
        super().prepare()
        self.prepare_containers()
        self._cc("cuda-probe", CUDA_PROBE_C, "-o", "/usr/local/bin/cuda-probe",
                 "%s/lib/libcuda.so.%s" % (STANDIN, standin_driver.VERSION))
        self._cc("devopen", DEVOPEN_C, "-o", "/usr/local/bin/devopen")

    def start(self, timeout: float = 60) -> None:
        super().start(timeout)
        self.start_registry()
        self.push_image(IMAGE, {"files": {}, "env": ["PATH=/usr/local/bin:/bin"], "copy": {
            "/usr/lib/x86_64-linux-gnu/libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": "/lib64/ld-linux-x86-64.so.2",
            "/usr/local/bin/cuda-probe": "/usr/local/bin/cuda-probe",
            "/usr/local/bin/devopen": "/usr/local/bin/devopen"}})


@pytest.fixture(scope="module")
def gpus(real_slurm_host):
    with running(GpuContainerCluster()) as c:
        for nodeset in ("cpu", "gpu"):
            c.start_worker(nodeset, 0)
        for name in (CPU, GPU):
            c.wait_idle(name)
        yield c


def test_the_rendered_plugstack_offers_containers_with_the_driver(gpus):
    text = (gpus.root / "etc/slurm/plugstack.conf").read_text()
    assert "container_cache=%s" % container_steps.CACHE_DIR in text
    assert "container_driver=%s" % names.GPU_DRIVER_DIR in text, text


def test_a_gpu_container_step_finds_libcuda_and_its_device(gpus):
    res = gpus.srun("-p", "gpu", "--gres=gpu:1", "--container-image=" + gpus.image(IMAGE), "sh", "-c",
                    "echo CVD=$CUDA_VISIBLE_DEVICES; cuda-probe; devopen %s" % " ".join(
                        "/dev/nvidia%d" % i for i in range(len(BUS_IDS))), user=USER, timeout=120).check()
    out = res.stdout
    assert "CVD=0" in out, res.output
    assert "cuInit=0" in out and "stand-in" in out, res.output
    # the allowed GPU opens (no driver answers: ENXIO), the other is denied by the job's device cgroup
    assert "/dev/nvidia0 ENXIO" in out and "/dev/nvidia1 EPERM" in out, res.output
    assert gpus.node_state(GPU).rstrip("*") in ("idle", "completing", "mixed"), gpus.node_state(GPU)


def test_the_image_itself_has_no_driver(gpus):
    """The same image on the CPU worker: no driver directory there, so libcuda.so.1 is not found."""
    res = gpus.srun("-p", "cpu", "--container-image=" + gpus.image(IMAGE), "cuda-probe", user=USER, timeout=120)
    assert res.returncode != 0 and "libcuda.so.1" in res.output, res.output
