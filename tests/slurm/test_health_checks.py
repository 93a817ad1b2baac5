"""Node health with real Slurm 24.11: slurmd itself runs the worker image's health program as its HealthCheckProgram
(images/worker/soperator-health-check, installed in the rootfs as in the image) on dynamic nodes, and the NCCL check
submits all_reduce_perf as real Slurm jobs.

slurm.conf is the rendered one's in what matters here: ``SlurmUser=slurm`` and ``DisableRootJobs=YES``; the NCCL
check runs as its CronJob runs it, as SlurmUser (``slurm``), not root.

No GPU exists here: ``nvidia-smi`` and ``all_reduce_perf`` on the nodes' PATH are fakes that serve recorded real
outputs (tests/unit/fixtures/gpu and nccl, each naming its source), chosen per node. Each fake call is logged per
node, so "within one interval" is checked as "by the first health check that saw the fault", not with a clock.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from dynamic_cluster import DynamicCluster, node_name
from slurm_cluster import USER, running, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "unit" / "fixtures"
INTERVAL = 5
NODES = 3
THRESHOLD = 100  # GB/s: the A100 node (235) and the H100 pair (339) pass, the PCIe 2080 Ti node (4.00) does not
ADMIN_REASON = "bad DIMM, ticket=42"

# Serves a recorded nvidia-smi output for this node (its hostname): the columns a --query-gpu asks for, in its order
# (nvidia-smi refuses an unknown field as the real one does), or the whole recording; logs each call.
FAKE_NVIDIA_SMI = r"""#!/usr/bin/python3
import csv, io, json, os, socket, sys
host = socket.gethostname()
with open("/var/lib/fake-gpu/%s.json" % host) as f:
    rec = json.load(f)
with open("/var/lib/fake-gpu/%s.calls" % host, "a") as f:
    f.write(rec["name"] + "\n")
asked = [a[len("--query-gpu="):].split(",") for a in sys.argv[1:] if a.startswith("--query-gpu=")]
recorded = [a for a in rec["command"] if a.startswith("--query-gpu=")]
if rec["rc"] != 0 or not asked:
    sys.stdout.write(rec["stdout"])
    sys.exit(rec["rc"])
if not recorded:
    sys.stdout.write("Invalid combination of input arguments.\n")
    sys.exit(2)
rows = list(csv.reader(io.StringIO(rec["stdout"]), skipinitialspace=True))
header = [h.strip() for h in rows[0]]
for field in asked[0]:
    if field not in header:
        sys.stdout.write('Field "%s" is not a valid field to query.\n' % field)
        sys.exit(2)
cols = [header.index(field) for field in asked[0]]
for row in rows:
    sys.stdout.write(", ".join(row[c] for c in cols) + "\n")
"""

# all_reduce_perf as rank 0 prints it: one recorded output per node, or the pair recording across nodes.
FAKE_ALL_REDUCE = r"""#!/bin/sh
[ "${SLURM_PROCID:-0}" = 0 ] || exit 0
if [ "${SLURM_JOB_NUM_NODES:-1}" -gt 1 ]; then exec cat /var/lib/fake-nccl/pair.txt; fi
exec cat "/var/lib/fake-nccl/$(hostname).txt"
"""


class HealthCluster(DynamicCluster):
    def prepare(self) -> None:
        super().prepare()
        r = self.root
        with open(r / "etc/slurm/slurm.conf", "a") as conf:
            conf.write(f"HealthCheckProgram=/usr/local/sbin/soperator-health-check\nHealthCheckInterval={INTERVAL}\n"
                       "HealthCheckNodeState=ANY\nDisableRootJobs=YES\n")
        (r / "usr/local/lib/soperator").mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "images/worker/soperator_health.py", r / "usr/local/lib/soperator/soperator_health.py")
        for program in ("soperator-health-check", "soperator-nccl-check"):
            shutil.copy2(REPO / "images/worker" / program, r / "usr/local/sbin" / program)
        for path, text in (("usr/local/bin/nvidia-smi", FAKE_NVIDIA_SMI),
                           ("usr/local/bin/all_reduce_perf", FAKE_ALL_REDUCE)):
            (r / path).write_text(text)
            (r / path).chmod(0o755)
        for d in ("var/lib/fake-gpu", "var/lib/fake-nccl", "etc/soperator/health", "srv/jail"):
            (r / d).mkdir(parents=True, exist_ok=True)
        # The NCCL check's results directory is SlurmUser's (the jail image makes /var/lib/soperator/nccl so).
        self.chroot(["install", "-d", "-m", "0755", "-o", names.SLURM_USER, "-g", names.SLURM_USER,
                     "/var/lib/nccl-results"]).check()
        (r / "srv/jail/.soperator-populated").write_text("image=test\n")
        # What the renderer writes for a NodeSet with one GPU, with this rootfs's paths (no jail mount here).
        (r / "etc/soperator/health/health.json").write_text(json.dumps({"enabled": True, "checks": {
            "munge": True,
            "jail": {"path": "/srv/jail", "requireMount": False},
            "disks": [{"path": "/var/spool/slurmd", "minFreeMiB": 16}, {"path": "/tmp", "minFreeMiB": 16}],
            "memory": {"minTotalMiB": 500},
            "gpu": {"count": 1, "persistenceMode": True, "maxUncorrectedEccErrors": 0, "maxRetiredPages": 60,
                    "xids": []}}}))
        (r / "etc/soperator/health/nccl.json").write_text(json.dumps({
            "command": "/usr/local/bin/all_reduce_perf", "args": ["-b", "512M", "-e", "8G", "-f", "2"],
            "mpi": "none", "gres": False, "pairs": True, "timeLimitMinutes": 2, "resultsDir": "/var/lib/nccl-results",
            "nodesets": {"cpu": {"gpus": 1, "minBusBandwidthGBps": THRESHOLD}}}))

    def gpu(self, ordinal: int, fixture: str) -> None:
        doc = yaml.safe_load((FIXTURES / "gpu" / fixture).read_text())
        doc["name"] = fixture
        (self.root / f"var/lib/fake-gpu/{node_name(ordinal)}.json").write_text(json.dumps(doc))

    def nccl(self, target: str, fixture: str) -> None:
        doc = yaml.safe_load((FIXTURES / "nccl" / fixture).read_text())
        (self.root / f"var/lib/fake-nccl/{target}.txt").write_text(doc["stdout"])

    def calls(self, ordinal: int) -> list[str]:
        path = self.root / f"var/lib/fake-gpu/{node_name(ordinal)}.calls"
        return path.read_text().split() if path.exists() else []

    def node(self, ordinal: int) -> dict:
        out = self.run(["scontrol", "show", "node", "-o", node_name(ordinal)]).check().stdout
        state = out.split(" State=")[1].split()[0]
        reason = out.split(" Reason=")[1].rsplit(" [", 1)[0] if " Reason=" in out else None
        return {"state": state.split("+")[0].rstrip("*"), "drained": "DRAIN" in state, "reason": reason}


@pytest.fixture(scope="module")
def hc(real_slurm_host):
    cluster = HealthCluster()
    with running(cluster) as c:
        for i in range(NODES):
            c.gpu(i, "h100-query-gpu.yaml")
            c.start_node(i)
        yield c


def checks_after(hc, ordinal, count):
    """Wait until the node's health check has called nvidia-smi ``count`` more times than now."""
    seen = len(hc.calls(ordinal))
    wait_for(lambda: len(hc.calls(ordinal)) >= seen + count, INTERVAL * (count + 2) + 20,
             f"{count} more health checks on {node_name(ordinal)}", interval=0.2)


def test_a_healthy_node_stays_idle(hc):
    checks_after(hc, 0, 2)
    for i in range(NODES):
        node = hc.node(i)
        assert node["state"] == "IDLE" and not node["drained"], node


def test_a_gpu_fault_drains_the_node_at_the_first_check_and_a_cleared_fault_resumes_it(hc):
    hc.gpu(1, "gpu-lost.yaml")
    drained = wait_for(lambda: hc.node(1)["drained"] and hc.node(1), INTERVAL * 3 + 20, "demo-cpu-1 drained",
                       interval=0.2)
    # The first check that met the fault drained the node: one interval, whatever the clock says.
    assert hc.calls(1).count("gpu-lost.yaml") == 1
    assert drained["reason"] == ("soperator: health: gpu: nvidia-smi exited 15: Unable to determine the device "
                                 "handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU")
    assert not hc.node(0)["drained"] and not hc.node(2)["drained"]
    # A drained node takes no job (bounded: srun would wait for it forever).
    assert hc.run(["srun", "--immediate=3", "-w", node_name(1), "true"], user=USER, timeout=20).returncode != 0

    hc.gpu(1, "h100-query-gpu.yaml")
    wait_for(lambda: not hc.node(1)["drained"], INTERVAL * 3 + 20, "demo-cpu-1 resumed", interval=0.2)
    assert hc.node(1)["state"] == "IDLE"
    # Takes jobs again (slurmctld may still count the refused srun's allocation attempt for a moment).
    wait_for(lambda: hc.run(["srun", "--immediate=5", "-w", node_name(1), "true"], user=USER,
                            timeout=20).returncode == 0, 60, "a job on the resumed node", interval=0.5)


def test_an_admin_drain_is_never_resumed_nor_overwritten(hc):
    hc.run(["scontrol", "update", f"nodename={node_name(2)}", "state=drain", f"reason={ADMIN_REASON}"]).check()
    checks_after(hc, 2, 2)
    assert hc.node(2)["reason"] == ADMIN_REASON and hc.node(2)["drained"]
    hc.gpu(2, "l40s-query-gpu.yaml")  # persistence mode off: a fault of its own
    checks_after(hc, 2, 2)
    assert hc.node(2)["reason"] == ADMIN_REASON and hc.node(2)["drained"]
    hc.gpu(2, "h100-query-gpu.yaml")
    hc.run(["scontrol", "update", f"nodename={node_name(2)}", "state=resume"]).check()
    checks_after(hc, 2, 1)
    assert not hc.node(2)["drained"]


def test_a_failing_nccl_figure_drains_exactly_the_failing_node(hc):
    hc.nccl(node_name(0), "a100x8-node.yaml")
    hc.nccl(node_name(1), "rtx2080ti-pcie-node.yaml")
    hc.nccl(node_name(2), "a100x8-node.yaml")
    hc.nccl("pair", "h100x16-pair.yaml")
    wait_for(lambda: all(hc.node(i)["state"] == "IDLE" for i in range(NODES)), 30, "all nodes idle")
    # As root its jobs would be refused (DisableRootJobs=YES); its CronJob runs it as SlurmUser.
    refused = hc.run(["srun", "--immediate=10", "-w", node_name(0), "true"], timeout=30)
    assert refused.returncode != 0 and "invalid user id" in refused.output.lower(), refused.output
    res = hc.run(["/usr/local/sbin/soperator-nccl-check", "/etc/soperator/health/nccl.json"],
                 user=names.SLURM_USER, timeout=240)
    assert res.returncode == 1, res.output  # a test failed
    assert hc.node(1)["drained"] and hc.node(1)["reason"] == "soperator: health: nccl: busbw 4.00 GB/s < 100 GB/s"
    assert not hc.node(0)["drained"] and not hc.node(2)["drained"]
    results = json.loads((hc.root / "var/lib/nccl-results/last.json").read_text())
    tests = dict((r["test"] + ":" + ",".join(r["nodes"]), r) for r in results["results"])
    assert tests[f"node:{node_name(0)}"]["busbw"] == 235.26 and not tests[f"node:{node_name(0)}"]["problem"]
    assert tests[f"pair:{node_name(0)},{node_name(2)}"]["busbw"] == 338.82  # the pair ran as one 2-node job
    assert results["drained"] == [node_name(1)]
    prom = (hc.root / "var/lib/nccl-results/nccl.prom").read_text()
    assert f'soperator_nccl_busbw_gbps{{test="node",nodes="{node_name(1)}"}} 4.0' in prom
    # The node checks cannot measure bandwidth: they never resume an NCCL drain.
    checks_after(hc, 1, 2)
    assert hc.node(1)["reason"] == "soperator: health: nccl: busbw 4.00 GB/s < 100 GB/s"
    hc.run(["scontrol", "update", f"nodename={node_name(1)}", "state=resume"]).check()
