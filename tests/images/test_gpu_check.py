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
import textwrap

import pytest
import standin_driver
import yaml
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "hack", "gpu-check.sh")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "gpu")


@pytest.fixture(autouse=True, scope="module")
def _root():
    require_root("mounts and chroot, as the script")


SMI_C = r"""
#include <stdio.h>
#include <unistd.h>
const char *standin_nvml(void);
int main(int argc, char **argv) {
    if (argc > 1) { execv(SERVE, argv); perror(SERVE); return 127; }
    printf("nvidia-smi stand-in (%s)\n", standin_nvml());
    return 0;
}
"""
# Serves recorded real outputs: --query-gpu=<fields> in the order asked (the H100's), -q -x (the A100's).
SERVE_PY = r"""
import csv, io, sys, yaml
def load(name):
    with open(FIXTURES + "/" + name) as f:
        return yaml.safe_load(f)["stdout"]
args = sys.argv[1:]
if args == ["-q", "-x"]:
    sys.stdout.write(load("a100-sxm4-v12-q-x.yaml"))
    sys.exit(0)
asked = [a[len("--query-gpu="):].split(",") for a in args if a.startswith("--query-gpu=")]
if not asked:
    sys.stdout.write("nvidia-smi stand-in: no recording for %s\n" % args)
    sys.exit(2)
rows = list(csv.reader(io.StringIO(load("h100-query-gpu.yaml")), skipinitialspace=True))
header = [h.strip().split(" [")[0] for h in rows[0]]
cols = [header.index(f) for f in asked[0]]
first = 0 if "--format=csv" in args else 1
for row in rows[first:]:
    sys.stdout.write(", ".join(row[c].strip() for c in cols) + "\n")
"""
INFORMATION = standin_driver.information("0000:00:09.0", 0)


def cc(*argv):
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", *argv], check=True, capture_output=True)


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    base = tmp_path_factory.mktemp("standin-driver")
    lib, bin_dir = base / "lib", base / "bin"
    lib.mkdir()
    bin_dir.mkdir()
    standin_driver.build_libraries(str(lib))
    serve = base / "serve.py"
    serve.write_text("#!%s\nFIXTURES = %r\n%s" % (sys.executable, FIXTURES, SERVE_PY))
    serve.chmod(0o755)
    (base / "smi.c").write_text(SMI_C)
    cc('-DSERVE="%s"' % serve, "-o", str(bin_dir / "nvidia-smi"), str(base / "smi.c"),
       str(lib / ("libnvidia-ml.so.%s" % standin_driver.VERSION)))
    # This machine's loader cache plus the stand-ins, as a driver's installer leaves it.
    subprocess.run(["ldconfig", "-C", str(base / "ld.so.cache"), str(lib)], check=True, capture_output=True)
    return base


def test_every_stage_passes_with_a_stand_in_driver(standin, tmp_path):
    out = tmp_path / "out"
    before = open("/etc/ld.so.cache", "rb").read()
    script = textwrap.dedent("""\
        set -e
        mount -t tmpfs -o mode=555 tmpfs /proc/driver
        mkdir -p /proc/driver/nvidia/gpus/0000:00:09.0
        printf '%s' "$INFORMATION" > /proc/driver/nvidia/gpus/0000:00:09.0/information
        mount --bind -o ro "$STANDIN/ld.so.cache" /etc/ld.so.cache
        mount -t overlay overlay -o lowerdir="$STANDIN/bin":/usr/bin /usr/bin
        exec bash "$SCRIPT" "$OUT"
        """)
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                         env=dict(os.environ, INFORMATION=INFORMATION, STANDIN=str(standin), SCRIPT=SCRIPT,
                                  OUT=str(out)),
                         capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    report = (out / "report.txt").read_text() if (out / "report.txt").exists() else ""
    print(res.stderr)
    assert res.returncode == 0, res.stdout + res.stderr + report
    for n, name in ((1, "preflight"), (2, "record"), (3, "jail"), (4, "expose"), (5, "job"), (6, "health")):
        assert "stage %d %s: PASS" % (n, name) in res.stderr
    assert res.stderr.rstrip().endswith("every stage passed")
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
    # Nothing left behind: no mount, the machine's loader cache untouched.
    assert open("/etc/ld.so.cache", "rb").read() == before
    assert "gpu-check." not in open("/proc/self/mountinfo").read()
