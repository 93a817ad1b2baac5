"""hack/gpu-check.sh, the prepared check for a machine with a real NVIDIA GPU, on a machine without one: it stops at
once, says why and exits 2, having checked nothing; its recordings are fixtures the tests read back; its CUDA program
says so when the loader finds no libcuda. tests/images/test_gpu_check.py runs every stage with a stand-in driver."""

import glob
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "hack", "gpu-check.sh")
sys.path.insert(0, os.path.join(ROOT, "hack"))
import gpu_check  # noqa: E402

HAS_GPU = bool(glob.glob("/proc/driver/nvidia/gpus/*"))


# not a prerequisite: a GPU machine runs the check itself (tests/images/test_gpu_check.py), it cannot see it stop.
@pytest.mark.skipif(HAS_GPU, reason="this machine has an NVIDIA GPU: the check would run, not stop")
def test_without_a_gpu_the_check_fails_at_once_saying_so(tmp_path):
    out = tmp_path / "out"
    res = subprocess.run(["bash", SCRIPT, str(out)], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "error: no NVIDIA GPU on this machine" in res.stderr and "nothing was checked" in res.stderr
    assert "PASS" not in res.stderr
    report = (out / "report.txt").read_text()
    assert "no NVIDIA GPU" in report
    assert sorted(p.name for p in out.iterdir()) == ["report.txt"]  # no recording, no jail


# not a prerequisite: as above, the GPU this test needs absent is there.
@pytest.mark.skipif(HAS_GPU, reason="this machine has an NVIDIA GPU")
def test_without_a_gpu_the_check_fails_also_through_the_device_tools_out(tmp_path):
    """The device tool's command line: OUT from the environment."""
    res = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                         env=dict(os.environ, OUT=str(tmp_path)))
    assert res.returncode == 2 and (tmp_path / "report.txt").exists()


@pytest.mark.parametrize("text", ["index, pci.bus_id\n0, 00000000:00:09.0\n", "  leading blanks\nline\n",
                                  "<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n\t<gpu id=\"1\"/>\n</nvidia_smi_log>\n",
                                  "", "no final line break", "blank lines at the end\n\n\n",
                                  "Mon Nov 24 10:00:00 2026\n+-----+\n| NVIDIA-SMI 550.54.15 |\n"])
def test_a_recorded_output_reads_back_verbatim_as_a_fixture(text):
    doc = yaml.safe_load(gpu_check.fixture_text("A real output.\nSecond line.", "hack/gpu-check.sh on host (x)",
                                                ["nvidia-smi", "-q", "-x"], 0, text))
    assert doc == {"source": "hack/gpu-check.sh on host (x)", "command": ["nvidia-smi", "-q", "-x"], "rc": 0,
                   "stdout": text}


def test_the_cuda_program_says_when_the_loader_finds_no_libcuda():
    code = "import sys; sys.path.insert(0, %r); import gpu_check; sys.exit(gpu_check.cuda())" % os.path.join(
        ROOT, "hack")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""})
    if res.returncode == 0:
        # not a prerequisite: the libcuda this test needs absent is there.
        pytest.skip("this machine has a working libcuda.so.1")
    assert res.returncode == 3, res.stdout + res.stderr
    assert res.stdout.startswith("cuda: libcuda.so.1 not found by the loader")
