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


# ------------------------------------------------------------------------------------------------ stage 7's parts
import gpu_slurm  # noqa: E402
import standin_driver  # noqa: E402


@pytest.mark.parametrize("model,expected", [("NVIDIA H200", "nvidia_h200"),
                                            ("NVIDIA H100 80GB HBM3", "nvidia_h100_80gb_hbm3"),
                                            ("NVIDIA A100-SXM4-80GB", "nvidia_a100-sxm4-80gb")])
def test_the_gres_type_is_slurms_name_of_the_model(model, expected):
    assert gpu_slurm.slurm_gpu_type(model) == expected


def test_the_drivers_information_file_gives_the_model_and_the_minor():
    assert gpu_slurm.parse_information(standin_driver.information("0000:00:09.0", 3)) == (
        "NVIDIA H100 80GB HBM3", "3")


def test_the_single_host_slurm_conf_rewrites_the_named_keys_and_appends_the_rest():
    conf = "# Generated\nSlurmctldHost=c-0(c-0.svc)\nSlurmctldPort=6817\n# SlurmdPort=1 (a comment)\nSlurmdPort=6818\n"
    out = gpu_slurm.single_host(conf, {"SlurmctldHost": "h(127.0.0.1)", "SlurmdPort": 4000}, ["SlurmdDebug=debug"])
    assert out.splitlines() == ["# Generated", "SlurmctldHost=h(127.0.0.1)", "SlurmctldPort=6817",
                                "# SlurmdPort=1 (a comment)", "SlurmdPort=4000", "",
                                "# gpu-check: one host instead of the pod network", "SlurmdDebug=debug"]
    with pytest.raises(ValueError, match="no HealthCheckInterval line"):
        gpu_slurm.single_host(conf, {"HealthCheckInterval": 5}, [])


def test_container_args_expand_their_env_as_the_kubelet_does():
    assert gpu_slurm.expand(["-N", "$(SLURMD_NODENAME)", "--conf", "$(PARAMS)", "$(UNSET)"],
                            {"SLURMD_NODENAME": "n-0", "PARAMS": "Gres=gpu:h200:1 Feature=gpu"}) == [
        "-N", "n-0", "--conf", "Gres=gpu:h200:1 Feature=gpu", "$(UNSET)"]


def test_a_nodes_reason_is_read_whole_without_slurms_stamp():
    line = ("NodeName=n-0 Arch=x86_64 State=IDLE+DRAIN Reason=soperator: health: gpu: 1 of 2 GPUs visible "
            "[root@2026-11-28T20:20:20] Comment=(null)")
    assert gpu_slurm.node_reason(line) == "soperator: health: gpu: 1 of 2 GPUs visible"
    assert gpu_slurm.node_reason("NodeName=n-0 State=IDLE") == ""


def test_the_controllers_the_product_constraints_need_are_read_from_cgroup_v2(tmp_path):
    controllers = tmp_path / "cgroup.controllers"
    controllers.write_text("cpu io memory pids\n")
    assert gpu_slurm.missing_controllers(str(controllers)) == ["cpuset"]
    controllers.write_text("cpuset cpu io memory pids\n")
    assert gpu_slurm.missing_controllers(str(controllers)) == []
    assert gpu_slurm.missing_controllers(str(tmp_path / "absent")) == []  # cgroup v1: nothing to say


def test_the_stage_runs_what_the_collection_renders_for_a_gpu_nodeset():
    r = gpu_slurm.rendered("nvidia_h200", 1)
    assert r["node"] == "gpucheck-gpu-0"
    assert r["args"][:3] == ["/usr/sbin/slurmd", "-D", "-Z"] and "--conf-server" in r["args"]
    assert r["env"]["SLURMD_CONF_PARAMS"] == "Gres=gpu:nvidia_h200:1 Feature=gpu"
    assert "AutoDetect=nvidia" in r["files"]["gres.conf"]
    assert "ConstrainDevices=yes" in r["files"]["cgroup.conf"]
    assert "spank_chroot.so jail=/mnt/jail bind=/run/soperator/nvidia/ld.so.cache" in r["files"]["plugstack.conf"]
    assert "HealthCheckProgram=/usr/local/sbin/soperator-health-check" in r["files"]["slurm.conf"]
    assert yaml.safe_load(r["health"])["checks"]["gpu"]["count"] == 1
