"""The worker image's health program (images/worker/soperator_health.py): its parsers against recorded real outputs
of nvidia-smi and all_reduce_perf (tests/unit/fixtures/gpu, nccl; each names its source), its thresholds, and its
drain/resume decision. Real slurmd runs it in tests/slurm/test_health_checks.py."""

import glob
import importlib.util
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")
spec = importlib.util.spec_from_file_location("soperator_health",
                                              os.path.join(ROOT, "images", "worker", "soperator_health.py"))
health = importlib.util.module_from_spec(spec)
spec.loader.exec_module(health)


# Where a recording comes from: a public capture (its URL), or hack/gpu-check.sh on a real GPU machine.
RECORDED_HERE = "hack/gpu-check.sh on "


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        doc = yaml.safe_load(handle)
    assert doc["source"].startswith(("https://github.com/", RECORDED_HERE)), name
    return doc


def recorded_here(suffix):
    """The fixtures hack/gpu-check.sh recorded on a real GPU (tests/unit/fixtures/gpu/*<suffix>)."""
    found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(FIXTURES, "gpu", "*" + suffix)))
    return [name for name in found if fixture("gpu/" + name)["source"].startswith(RECORDED_HERE)]


GPU_DEFAULTS = {"count": 1, "persistenceMode": True, "maxUncorrectedEccErrors": 0, "maxRetiredPages": 60}


@pytest.mark.parametrize("name,bus", [("h100-query-gpu.yaml", "00000000:00:09.0"),
                                      ("h200-query-gpu.yaml", "00000000:83:00.0")])
def test_a_healthy_recorded_gpu_passes(name, bus):
    gpus = health.parse_query_csv(fixture("gpu/" + name)["stdout"])
    assert [g["bus_id"] for g in gpus] == [bus]
    assert gpus[0]["persistence"] is True and gpus[0]["ecc_uncorrected"] == 0
    assert gpus[0]["retired_dbe"] is None  # "[N/A]": Hopper remaps rows instead of retiring pages
    assert gpus[0]["remap_pending"] is False and gpus[0]["remap_failure"] is False
    assert health.gpu_problems(gpus, GPU_DEFAULTS) == []


@pytest.mark.parametrize("name", recorded_here("-health-query-gpu.yaml"))
def test_a_gpu_recorded_by_the_gpu_check_passes_what_the_program_asks(name):
    """hack/gpu-check.sh records exactly the health program's query on a GPU it found healthy (its health stage)."""
    doc = fixture("gpu/" + name)
    assert doc["command"] == ["nvidia-smi", "--query-gpu=" + ",".join(health.QUERY_FIELDS), "--format=csv"]
    gpus = health.parse_query_csv(doc["stdout"])
    assert gpus and all(g["bus_id"] and g["ecc_uncorrected"] == 0 for g in gpus)
    assert health.gpu_problems(gpus, dict(GPU_DEFAULTS, count=len(gpus))) == []


@pytest.mark.parametrize("name", recorded_here("-q-x.yaml"))
def test_the_xml_recorded_by_the_gpu_check_gives_the_facts_of_its_query(name):
    xml = health.parse_query_xml(fixture("gpu/" + name)["stdout"])
    csv_gpus = health.parse_query_csv(fixture("gpu/" + name.replace("-q-x.yaml", "-health-query-gpu.yaml"))["stdout"])
    assert [g["persistence"] for g in xml] == [g["persistence"] for g in csv_gpus]
    assert [g["ecc_uncorrected"] for g in xml] == [g["ecc_uncorrected"] for g in csv_gpus]


def test_the_count_must_match_the_nodesets():
    gpus = health.parse_query_csv(fixture("gpu/h100-query-gpu.yaml")["stdout"])
    assert health.gpu_problems(gpus, dict(GPU_DEFAULTS, count=8)) == ["1 of 8 GPUs visible"]


def test_persistence_mode_off_is_a_problem_unless_allowed():
    gpus = health.parse_query_csv(fixture("gpu/l40s-query-gpu.yaml")["stdout"])
    assert health.gpu_problems(gpus, GPU_DEFAULTS) == ["GPU 00000000:01:00.0: persistence mode disabled"]
    assert health.gpu_problems(gpus, dict(GPU_DEFAULTS, persistenceMode=False)) == []


def test_the_csv_is_read_by_column_name_so_any_field_order_works():
    text = fixture("gpu/h100-query-gpu.yaml")["stdout"]
    header, row = text.splitlines()[:2]
    cols = list(zip(header.split(", "), row.split(", ")))
    wanted = [c for c in cols if c[0] in health.QUERY_FIELDS][::-1]  # a projection, reversed
    projected = ", ".join(c[0] for c in wanted) + "\n" + ", ".join(c[1] for c in wanted) + "\n"
    assert health.parse_query_csv(projected) == health.parse_query_csv(text)


@pytest.mark.parametrize("name,persistence,ecc,pending", [("a100-sxm4-v12-q-x.yaml", False, 0, None),
                                                          ("tesla-t4-q-x.yaml", False, 0, False)])
def test_the_xml_of_older_drivers_gives_the_same_facts(name, persistence, ecc, pending):
    gpus = health.parse_query_xml(fixture("gpu/" + name)["stdout"])
    assert len(gpus) == 1
    assert gpus[0]["persistence"] is persistence and gpus[0]["ecc_uncorrected"] == ecc
    assert gpus[0]["retired_pending"] is pending
    assert gpus[0]["remap_pending"] is None  # <remapped_rows>N/A</remapped_rows>


def test_thresholds_on_memory_faults():
    sick = health._gpu("0000:3B:00.0", True, 3, 10, 55, True, 12, True, False)
    found = health.gpu_problems([sick], GPU_DEFAULTS)
    assert found == ["GPU 0000:3B:00.0: 3 uncorrected ECC errors", "GPU 0000:3B:00.0: 65 retired pages",
                     "GPU 0000:3B:00.0: page retirement pending (needs a reset)",
                     "GPU 0000:3B:00.0: row remapping pending (needs a reset)"]
    failed = health._gpu("0000:3B:00.0", True, 0, 0, 0, False, 0, False, True)
    assert health.gpu_problems([failed], GPU_DEFAULTS) == ["GPU 0000:3B:00.0: row remapping failed"]
    tolerant = dict(GPU_DEFAULTS, maxUncorrectedEccErrors=5, maxRetiredPages=100)
    assert health.gpu_problems([health._gpu("x", True, 3, 10, 55, False, 0, False, False)], tolerant) == []


def test_a_lost_gpu_is_reported_with_nvidia_smis_words():
    doc = fixture("gpu/gpu-lost.yaml")
    assert health.smi_failure(doc["rc"], doc["stdout"], "") == (
        "nvidia-smi exited 15: Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU")


def test_xid_events_are_counted_by_code():
    # Kernel log lines as NVSentinel quotes them (https://github.com/NVIDIA/NVSentinel/issues/155)
    log = ("[ 1843.308145] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\n"
           "[ 1850.000000] NVRM: Xid (PCI:0000:44:00): 13, Graphics Engine Exception\n")
    assert health.xid_counts(log, health.DEFAULT_XIDS) == {79: 1}
    assert health.xid_counts(log, [13]) == {13: 1}


def test_node_checks():
    assert health.disk_problem("/tmp", 100 * 2 ** 20, 1024) == "/tmp has 100 MiB free (< 1024 MiB)"
    assert health.disk_problem("/tmp", 2048 * 2 ** 20, 1024) is None
    info = health.meminfo("MemTotal:       16384000 kB\nMemFree: 1 kB\nMemAvailable:     512000 kB\n")
    assert health.memory_problems(info, {"minTotalMiB": 32000, "minAvailableMiB": 1024}) == [
        "16000 MiB of memory, the node is declared with 32000 MiB", "500 MiB available (< 1024 MiB)"]
    assert health.memory_problems(info, {"minTotalMiB": 15000}) == []


# --- drain and resume: scontrol show node -o lines as Slurm 24.11 prints them (tests/unit/fixtures/scontrol) ------
def scontrol_line(name, text):
    doc = yaml.safe_load(open(os.path.join(FIXTURES, "scontrol", name)))
    return next(line for line in doc["stdout"].splitlines() if text in line)


def node(state, reason=None):
    return {"name": "n", "state": state.split("+")[0], "flags": state.split("+")[1:], "reason": reason,
            "features": []}


def test_parse_node_reads_state_reason_and_features():
    parsed = health.parse_node(scontrol_line("admin-drained.yaml", "bad DIMM"))
    assert "DRAIN" in parsed["flags"]
    assert parsed["reason"] == "bad DIMM, ticket=42 [hw]"  # the admin's text; "[root@<time>]" stripped
    assert "cpu" in parsed["features"]
    assert health.held(parsed)


def test_decide_drains_a_sick_node_and_resumes_only_our_own_drain():
    gpu = [("gpu", "1 of 8 GPUs visible")]
    assert health.decide(node("IDLE"), gpu) == ("drain", "soperator: health: gpu: 1 of 8 GPUs visible")
    assert health.decide(node("IDLE"), []) == (None, None)
    ours = node("IDLE+DRAIN", "soperator: health: gpu: 1 of 8 GPUs visible")
    assert health.decide(ours, gpu) == (None, None)  # same reason: nothing to write
    assert health.decide(ours, [("munge", "unmunge: Invalid credential")]) == (
        "drain", "soperator: health: munge: unmunge: Invalid credential")
    assert health.decide(ours, []) == ("resume", None)
    assert health.decide(node("MIXED+DRAIN", "soperator: health: disk: /tmp full"), []) == ("resume", None)


@pytest.mark.parametrize("reason", ["bad DIMM, ticket=42", "soperator: scale-in", "soperator: update",
                                    "soperator: health: nccl: busbw 4.00 GB/s < 100 GB/s"])
def test_decide_never_touches_other_drains(reason):
    drained = node("IDLE+DRAIN", reason)
    assert health.decide(drained, []) == (None, None)
    if not reason.startswith(health.REASON_PREFIX):
        assert health.decide(drained, [("gpu", "1 of 8 GPUs visible")]) == (None, None)


def test_decide_leaves_a_down_node_to_slurm():
    assert health.decide(node("DOWN", "Not responding"), [("munge", "x")]) == (None, None)


def test_a_stale_reason_on_a_resumed_node_holds_nothing():
    # Slurm 24.11 keeps the last reason on a resumed node
    assert health.decide(node("IDLE", "bad DIMM"), [("gpu", "x")]) == ("drain", "soperator: health: gpu: x")


def test_long_details_are_shortened():
    reason = health.reason_text("gpu", "x" * 400)
    assert len(reason) == health.MAX_REASON and reason.endswith("...")


# --- NCCL ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,busbw,size,avg", [("a100x8-node.yaml", 235.26, 8589934592, 68.4048),
                                                 ("h100x16-pair.yaml", 338.82, 8589934592, 70.742),
                                                 ("rtx2080ti-pcie-node.yaml", 4.00, 1073741824, 2.05774)])
def test_all_reduce_perf_figures(name, busbw, size, avg):
    result = health.parse_all_reduce(fixture("nccl/" + name)["stdout"])
    assert result["busbw"] == busbw and result["size"] == size and result["avg"] == avg
    assert result["wrong"] == 0 and result["out_of_bounds"] == 0


def test_nccl_verdicts():
    fast = health.parse_all_reduce(fixture("nccl/a100x8-node.yaml")["stdout"])
    slow = health.parse_all_reduce(fixture("nccl/rtx2080ti-pcie-node.yaml")["stdout"])
    assert health.nccl_verdict(fast, 100) is None
    assert health.nccl_verdict(slow, 100) == "busbw 4.00 GB/s < 100 GB/s"
    assert health.nccl_verdict(dict(fast, out_of_bounds=50), 100) == "50 wrong values"
    assert health.nccl_verdict(None, 100) == "no result in the output"
    assert health.parse_all_reduce("srun: error: Unable to allocate resources\n") is None


def test_pair_tests_pin_a_bad_link_on_the_node_that_fails_with_two_partners():
    nodes = ["g-0", "g-1", "g-2", "g-3", "g-4"]
    assert health.pairs(nodes) == [("g-0", "g-1"), ("g-2", "g-3")]
    failed = [("g-0", "g-1")]
    plan = health.retest_pairs(failed, ["g-2", "g-3"])
    assert plan == [("g-0", "g-2"), ("g-1", "g-2")]
    assert health.blame(failed, [("g-1", "g-2")], plan) == ["g-1"]
    assert health.blame(failed, [], plan) == []  # both fine with another partner: the link, not a node
    assert health.blame(failed, [], []) == []    # nobody to retest with: nobody blamed


def test_nccl_candidates_are_idle_nodes_of_the_nodeset_in_service():
    doc = yaml.safe_load(open(os.path.join(FIXTURES, "scontrol", "idle-and-busy.yaml")))
    found = health.nccl_candidates(doc["stdout"], "cpu")
    states = dict((health.parse_node(line)["name"], health.parse_node(line)["state"])
                  for line in doc["stdout"].splitlines() if line.strip())
    assert found and all(states[n] == "IDLE" for n in found)
    assert health.nccl_candidates(doc["stdout"], "gpu") == []


def test_srun_never_goes_through_a_shell():
    cfg = {"command": "/opt/nccl-tests/all_reduce_perf", "args": ["-b", "512M", "-e", "8G", "-f", "2"], "mpi": "pmix"}
    one = health.srun_argv(cfg, ("g-0",), 8)
    assert one[0] == "srun" and "--nodelist=g-0" in one and "--gpus-per-node=8" in one
    assert one[-9:] == ["/opt/nccl-tests/all_reduce_perf", "-b", "512M", "-e", "8G", "-f", "2", "-g", "8"]
    two = health.srun_argv(cfg, ("g-0", "g-1"), 8)
    assert "--nodes=2" in two and "--ntasks-per-node=8" in two and "--mpi=pmix" in two and two[-2:] == ["-g", "1"]


def test_metrics_text_is_prometheus_exposition():
    text = health.metrics_text([{"test": "node", "nodes": ["g-0"], "busbw": 235.26, "problem": None},
                                {"test": "node", "nodes": ["g-1"], "busbw": 4.0, "problem": "busbw 4.00 GB/s < 100"}],
                               1700000000)
    assert 'soperator_nccl_busbw_gbps{test="node",nodes="g-0"} 235.26' in text
    assert 'soperator_nccl_check_pass{test="node",nodes="g-1"} 0' in text
    assert text.endswith("soperator_nccl_check_timestamp_seconds 1700000000\n")
