"""hack/gpu-check.sh end to end on this machine, which has no GPU, with a stand-in NVIDIA driver in a private mount
namespace: every stage but the GPU's own work is the real one (the jail built from this machine's files, the
product's exposure code, the jail entered as a task is, the loader finding libcuda through the node's cache, the
health program reading nvidia-smi, the recordings written), so that the one run on a real GPU is not spent on the
script's own faults. tests/unit/test_gpu_check.py shows that without a driver it stops at once.

The stand-ins (tests/standin_driver.py, built here with gcc in a temporary directory):
* libcuda.so.1 computes the check's kernel on the CPU; libnvidia-ml.so.1;
* nvidia-smi, linked against libnvidia-ml.so.1: without arguments it prints a line saying it is a stand-in; with
  arguments it serves recorded real outputs (tests/unit/fixtures/gpu: an H100's --query-gpu columns in the order
  asked, an A100's -q -x);
* the driver's procfs entry of one GPU, on a tmpfs over /proc/driver; a loader cache listing the stand-in libraries
  bound over /etc/ld.so.cache and nvidia-smi in /usr/bin (an overlay), as the driver's installer or the container
  toolkit leaves a machine.
Needs root (mounts, chroot), like the script itself.
"""

import os
import subprocess
import sys

import pytest
import standin_driver
import yaml
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack"))
import gpu_check  # noqa: E402  (the check's Python parts: the health program's query)

SCRIPT = os.path.join(ROOT, "hack", "gpu-check.sh")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "gpu")


@pytest.fixture(autouse=True, scope="module")
def _root():
    require_root("mounts and chroot, as the script")


# The driver's tool as the H200 machine has it: a wrapper in /usr/bin around the program in /usr/local/nvidia/bin.
WRAPPER = ("#!/bin/sh\nLD_LIBRARY_PATH=/usr/local/nvidia/lib64\nexport LD_LIBRARY_PATH\n"
           "exec /usr/local/nvidia/bin/nvidia-smi \"$@\"\n")
BUS = "0000:00:09.0"
INFORMATION = standin_driver.information(BUS, 0)


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return yaml.safe_load(f)["stdout"]


def query(fields, header):
    """The H100 recording's columns ``fields``, in that order, as nvidia-smi --query-gpu prints them."""
    return standin_driver.columns(recorded("h100-query-gpu.yaml"), fields, header)


def answers():
    health = gpu_check._load_health()
    return {
        "-L": "GPU 0: %s (UUID: GPU-00000000-0000-0000-0000-000000000000)\n" % standin_driver.MODEL,
        "-q -x": recorded("a100-sxm4-v12-q-x.yaml"),
        "--query-gpu=name,driver_version --format=csv,noheader": query(["name", "driver_version"], False),
        "--query-gpu=%s --format=csv" % ",".join(health.QUERY_FIELDS): query(health.QUERY_FIELDS, True),
    }


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    base = tmp_path_factory.mktemp("standin-driver")
    lib, bin_dir, program = base / "lib", base / "bin", base / "usr-local" / "nvidia" / "bin"
    for d in (lib, bin_dir, program):
        d.mkdir(parents=True)
    standin_driver.build_libraries(str(lib))
    standin_driver.build_smi(str(program / "nvidia-smi"), answers(), str(lib))
    (bin_dir / "nvidia-smi").write_text(WRAPPER)
    (bin_dir / "nvidia-smi").chmod(0o755)
    # This machine's loader cache plus the stand-ins, as a driver's installer leaves it.
    subprocess.run(["ldconfig", "-C", str(base / "ld.so.cache"), str(lib)], check=True, capture_output=True)
    return base


@pytest.fixture(scope="module")
def archive():
    """Stage 7's archive, as `make gpu-check-bundle` builds it (cached)."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "gpu_slurm.py"), "bundle"],
                          capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    if done.returncode != 0:  # say why: a CI log shows the failure, not the captured output
        pytest.fail("gpu_slurm.py bundle exited %d:\n%s%s" % (done.returncode, done.stdout[-4000:],
                                                              done.stderr[-4000:]))
    return os.path.join(ROOT, ".gpu-check", "slurm-rootfs.tar.xz"), done.stdout


# What the NVIDIA driver and its installer leave on a GPU machine, in the test's own mount namespace: the procfs and
# sysfs entries of one GPU, its device files (a /dev of its own: no driver answers them), the loader cache with the
# libraries, the program in /usr/local/nvidia/bin and its wrapper in /usr/bin.
GPU_MACHINE = """\
set -e
mount -t tmpfs -o mode=555 tmpfs /proc/driver
mkdir -p /proc/driver/nvidia/gpus/$BUS
printf '%s' "$INFORMATION" > /proc/driver/nvidia/gpus/$BUS/information
mount -t tmpfs -o mode=755 tmpfs /sys/bus/pci/drivers
mkdir -p /sys/bus/pci/drivers/nvidia/$BUS
cat /sys/devices/system/cpu/online > /sys/bus/pci/drivers/nvidia/$BUS/local_cpulist
mount -t tmpfs -o mode=755 tmpfs /dev
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0" "nvidia0 195 0" "nvidiactl 195 255"; do
  set -- $n; mknod -m 666 /dev/$1 c $2 $3
done
mkdir /dev/pts /dev/shm && mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts && ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
ln -s /proc/self/fd /dev/fd && ln -s fd/0 /dev/stdin && ln -s fd/1 /dev/stdout && ln -s fd/2 /dev/stderr
mount --bind -o ro "$STANDIN/ld.so.cache" /etc/ld.so.cache
mount -t overlay overlay -o lowerdir="$STANDIN/bin":/usr/bin /usr/bin
mount -t overlay overlay -o lowerdir="$STANDIN/usr-local":/usr/local /usr/local
exec bash "$SCRIPT" "$OUT"
"""


def test_every_stage_passes_with_a_stand_in_driver(standin, archive, tmp_path):
    out = tmp_path / "out"
    before = open("/etc/ld.so.cache", "rb").read()
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", GPU_MACHINE],
                         env=dict(os.environ, INFORMATION=INFORMATION, BUS=BUS, STANDIN=str(standin), SCRIPT=SCRIPT,
                                  OUT=str(out), GPU_CHECK_SLURM_ARCHIVE=archive[0]),
                         capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    report = (out / "report.txt").read_text() if (out / "report.txt").exists() else ""
    print(res.stderr)
    assert res.returncode == 0, res.stdout + res.stderr + report
    for n, name in ((1, "preflight"), (2, "record"), (3, "jail"), (4, "expose"), (5, "job"), (6, "health"),
                    (7, "slurm")):
        assert "stage %d %s: PASS" % (n, name) in res.stderr
    assert res.stderr.rstrip().endswith("every stage passed")
    # The tool is the program, not its wrapper (the H200 machine's layout).
    assert "/usr/bin/nvidia-smi is a script: exposing the program it execs, /usr/local/nvidia/bin/nvidia-smi" in report
    # In the jail, as nobody: the loader found libcuda through the node's cache, in the driver's directory; the
    # kernel's result checked; nvidia-smi ran; without the node's cache no libcuda.
    assert "vadd of 1048576 floats on the GPU: all correct; libcuda from /run/soperator/nvidia/lib/" in report
    smi = (out / "nvidia-smi-in-jail.txt").read_text()
    assert "nvidia-smi stand-in (libnvidia-ml stand-in %s)" % standin_driver.VERSION in smi
    assert "libcuda.so.1 (libc6,x86-64) => /run/soperator/nvidia/lib/libcuda.so.1" in report
    assert "cuda: libcuda.so.1 not found by the loader" in report
    assert "no driver file in it" in report
    # The health program read the (recorded) nvidia-smi and passed every check with the product's defaults.
    assert "parsed 1 GPUs via nvidia-smi --query-gpu; check_gpus: every check passes" in report
    # The recordings read back as fixtures naming their source.
    recorded = sorted(p.name for p in (out / "fixtures" / "gpu").iterdir())
    assert recorded == ["nvidia-h100-80gb-hbm3-health-query-gpu.yaml", "nvidia-h100-80gb-hbm3-q-x.yaml",
                        "nvidia-h100-80gb-hbm3-summary.yaml"]
    doc = yaml.safe_load((out / "fixtures" / "gpu" / recorded[0]).read_text())
    assert doc["source"].startswith("hack/gpu-check.sh on ") and doc["rc"] == 0
    assert doc["stdout"].splitlines()[0].startswith("index, pci.bus_id, persistence_mode")
    listing = yaml.safe_load((out / "fixtures" / "driver" / "nvidia-h100-80gb-hbm3-ldconfig-p.yaml").read_text())
    assert "libcuda.so.1 (libc6,x86-64) => %s/lib/libcuda.so.1" % standin in listing["stdout"]
    # Stage 7, real Slurm: GRES at the first registration with the type Slurm derives from the model, idle with no
    # reason; the CUDA step in the jail through the plugin with one GPU; the device cgroup; the health program.
    slurm = report[report.index("=== stage 7 slurm"):]
    assert "Slurm's type: nvidia_h100_80gb_hbm3" in slurm
    for step in ("Gres=gpu:nvidia_h100_80gb_hbm3:1 at the first registration", "the node idle with no reason",
                 "the CUDA program computed on the GPU in the jail", "the step was given one GPU",
                 "nvidia-smi -L lists exactly the one GPU given",
                 "a step without --gres cannot open /dev/nvidia0 (EPERM)", "a step with --gres=gpu:1 may open",
                 "drained by the health program: soperator: health", "resumed by the health program"):
        assert "ok: " + step in slurm, step
    assert "FAIL" not in slurm and "stage summary: every step passed" in slurm
    # Nothing left behind: no mount, the machine's loader cache untouched.
    assert open("/etc/ld.so.cache", "rb").read() == before
    assert "gpu-check." not in open("/proc/self/mountinfo").read()
