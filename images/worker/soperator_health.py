# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node health for soperator: the checks slurmd runs as its HealthCheckProgram (``soperator-health-check``) and the
NCCL bandwidth check a CronJob runs as Slurm jobs (``soperator-nccl-check``).

Python 3 standard library only (the worker image's python3). The decisions are pure functions of text and
numbers (parsers of nvidia-smi, dmesg, scontrol and all_reduce_perf output, thresholds, drain/resume), unit-tested
with recorded real outputs in tests/unit; the I/O around them runs commands with deadlines and never a shell.

Drains: ``soperator: health: <check>: <detail>``. A later pass resumes a node only when its current reason starts
with ``soperator: health:`` (ours) and every check passes; any other reason (an administrator's, or another drain of
the operator's, such as a scale-in) is never overwritten or resumed. NCCL drains (``soperator: health: nccl:``) are
not resumed by the node checks, which cannot measure bandwidth: an administrator resumes them.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

REASON_PREFIX = "soperator: health:"
NCCL_REASON_PREFIX = REASON_PREFIX + " nccl:"
# Slurm keeps reasons of any length; a short one stays readable in `sinfo -R`.
MAX_REASON = 160
CONFIG = "/etc/soperator/health/health.json"
NCCL_CONFIG = "/etc/soperator/health/nccl.json"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Written by `soperator-driver expose` on a GPU node (soperator_driver.DRIVER_DIR).
DRIVER_CACHE_SOURCE = "/run/soperator/nvidia/ld.so.cache.source"
# slurmd kills its HealthCheckProgram after 60 s: every command shares this budget.
BUDGET = 45.0

# The GPU facts the checks need, as `nvidia-smi --query-gpu` names them. remapped_rows.* are refused by drivers
# that predate row remapping ("is not a valid field to query"): then `nvidia-smi -q -x` gives the facts instead.
QUERY_FIELDS = ("index", "pci.bus_id", "persistence_mode", "ecc.errors.uncorrected.volatile.total",
                "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
                "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure")
# Xids that mean a GPU needs a reset or a repair (NVIDIA's Xid catalogue): DBE, row remapping failure and event,
# NVLink error, fallen off the bus, high single-bit rate, contained/uncontained ECC errors.
DEFAULT_XIDS = (48, 63, 64, 74, 79, 92, 94, 95)
_XID_RE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


# ------------------------------------------------------------------------------------------------ pure: GPU facts
def _value(text):
    """nvidia-smi's value text -> int, bool, or None when not supported ("[N/A]", "N/A", "[Not Supported]")."""
    text = (text or "").strip()
    if not text or text.strip("[]").lower() in ("n/a", "not supported", "unknown error", "requested functionality "
                                                                                        "has been deprecated"):
        return None
    lowered = text.lower()
    if lowered in ("yes", "enabled", "true"):
        return True
    if lowered in ("no", "disabled", "false"):
        return False
    try:
        return int(text)
    except ValueError:
        return text


def _gpu(bus_id, persistence=None, ecc=None, sbe=None, dbe=None, pending=None, remap_unc=None, remap_pending=None,
         remap_failure=None):
    return {"bus_id": bus_id, "persistence": persistence, "ecc_uncorrected": ecc, "retired_sbe": sbe,
            "retired_dbe": dbe, "retired_pending": pending, "remapped_uncorrectable": remap_unc,
            "remap_pending": remap_pending, "remap_failure": remap_failure}


def parse_query_csv(text):
    """``nvidia-smi --query-gpu=... --format=csv`` (with its header) -> one fact dict per GPU, columns by name."""
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows:
        return []
    header = [h.strip().split(" [")[0] for h in rows[0]]  # "memory.total [MiB]" -> "memory.total"
    if "pci.bus_id" not in header:
        raise ValueError("not a --query-gpu CSV with a header: %r" % text[:120])
    gpus = []
    for row in rows[1:]:
        d = dict(zip(header, (c.strip() for c in row)))
        gpus.append(_gpu(d.get("pci.bus_id"), _value(d.get("persistence_mode")),
                         _value(d.get("ecc.errors.uncorrected.volatile.total")),
                         _value(d.get("retired_pages.single_bit_ecc.count")),
                         _value(d.get("retired_pages.double_bit.count")), _value(d.get("retired_pages.pending")),
                         _value(d.get("remapped_rows.uncorrectable")), _value(d.get("remapped_rows.pending")),
                         _value(d.get("remapped_rows.failure"))))
    return gpus


def _text(node, path):
    found = node.find(path)
    return found.text if found is not None else None


def parse_query_xml(text):
    """``nvidia-smi -q -x`` -> the same fact dicts, one per ``<gpu>`` element (DTD v10 to v13 names)."""
    root = ET.fromstring(text.encode("utf-8") if isinstance(text, str) else text)
    gpus = []
    for gpu in root.findall("gpu"):
        ecc = _value(_text(gpu, "ecc_errors/volatile/dram_uncorrectable"))  # v12+
        sram = _value(_text(gpu, "ecc_errors/volatile/sram_uncorrectable"))
        if ecc is None and sram is None:
            ecc = _value(_text(gpu, "ecc_errors/volatile/double_bit/total"))  # v10, v11
        elif isinstance(sram, int):
            ecc = (ecc or 0) + sram
        pending = _value(_text(gpu, "retired_pages/pending_retirement"))
        if pending is None:
            pending = _value(_text(gpu, "retired_pages/pending_blacklist"))
        gpus.append(_gpu(gpu.get("id"), _value(_text(gpu, "persistence_mode")), ecc,
                         _value(_text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count")),
                         _value(_text(gpu, "retired_pages/double_bit_retirement/retired_count")), pending,
                         _value(_text(gpu, "remapped_rows/remapped_row_unc")),
                         _value(_text(gpu, "remapped_rows/remapped_row_pending")),
                         _value(_text(gpu, "remapped_rows/remapped_row_failure"))))
    return gpus


def gpu_problems(gpus, cfg):
    """Details of what is wrong with the GPUs (empty: healthy). ``cfg``: the NodeSet's ``gpu`` settings."""
    problems = []
    want = cfg.get("count") or 0
    if len(gpus) != want:
        problems.append("%d of %d GPUs visible" % (len(gpus), want))
    for gpu in gpus:
        where = "GPU %s" % gpu["bus_id"]
        if cfg.get("persistenceMode", True) and gpu["persistence"] is False:
            problems.append("%s: persistence mode disabled" % where)
        if isinstance(gpu["ecc_uncorrected"], int) and gpu["ecc_uncorrected"] > cfg.get("maxUncorrectedEccErrors", 0):
            problems.append("%s: %d uncorrected ECC errors" % (where, gpu["ecc_uncorrected"]))
        retired = sum(v for v in (gpu["retired_sbe"], gpu["retired_dbe"]) if isinstance(v, int))
        if retired > cfg.get("maxRetiredPages", 60):
            problems.append("%s: %d retired pages" % (where, retired))
        if gpu["retired_pending"] is True:
            problems.append("%s: page retirement pending (needs a reset)" % where)
        if gpu["remap_failure"] is True:
            problems.append("%s: row remapping failed" % where)
        elif gpu["remap_pending"] is True:
            problems.append("%s: row remapping pending (needs a reset)" % where)
        if isinstance(gpu["remapped_uncorrectable"], int) and \
                gpu["remapped_uncorrectable"] > cfg.get("maxRemappedRows", 512):
            problems.append("%s: %d rows remapped for uncorrectable errors" % (where, gpu["remapped_uncorrectable"]))
    return problems


def smi_failure(rc, out, err):
    """One line saying why nvidia-smi failed (its own first words: "GPU is lost", "couldn't communicate")."""
    lines = [line.strip() for line in (out + "\n" + err).splitlines() if line.strip()]
    return "nvidia-smi exited %d: %s" % (rc, lines[0] if lines else "no output")


def xid_counts(kernel_log, codes):
    """``{code: count}`` of the NVRM Xid events among ``codes`` in the kernel log text."""
    counts = {}
    for match in _XID_RE.finditer(kernel_log):
        code = int(match.group(2))
        if code in codes:
            counts[code] = counts.get(code, 0) + 1
    return counts


# ------------------------------------------------------------------------------------------------ pure: the node
def disk_problem(path, free_bytes, min_free_mib):
    free_mib = free_bytes // (1024 * 1024)
    if free_mib < min_free_mib:
        return "%s has %d MiB free (< %d MiB)" % (path, free_mib, min_free_mib)
    return None


def meminfo(text):
    """/proc/meminfo -> {key: KiB}."""
    result = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            result[key.strip()] = int(parts[0])
    return result


def memory_problems(info, cfg):
    problems = []
    total, available = info.get("MemTotal", 0) // 1024, info.get("MemAvailable", 0) // 1024
    if cfg.get("minTotalMiB") and total < cfg["minTotalMiB"]:
        problems.append("%d MiB of memory, the node is declared with %d MiB" % (total, cfg["minTotalMiB"]))
    if cfg.get("minAvailableMiB") and available < cfg["minAvailableMiB"]:
        problems.append("%d MiB available (< %d MiB)" % (available, cfg["minAvailableMiB"]))
    return problems


def parse_node(text):
    """One ``scontrol show node -o`` line -> {name, state, flags, reason, features}; None for no line."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if not line.startswith("NodeName="):
        return None
    reason = None
    at = line.find(" Reason=")
    if at >= 0:
        reason = re.sub(r"\s*\[[^\[\]@\s]+@[^\[\]\s]+\]\s*$", "", line[at + len(" Reason="):]).strip() or None
        line = line[:at]
    fields = dict(m.groups() for m in re.finditer(r"(?:^|\s)([A-Za-z]+)=(\S*)", line))
    parts = fields.get("State", "").rstrip("*~#!%$@^-").upper().split("+")
    return {"name": fields.get("NodeName"), "state": parts[0], "flags": parts[1:],
            "reason": None if reason in ("(null)", "none") else reason,
            "features": [f for f in fields.get("AvailableFeatures", "").split(",") if f and f != "(null)"]}


def held(node):
    """Drained, draining, failed or down: Slurm keeps the last reason after a resume, so it counts only then."""
    return bool(node) and (node["state"] in ("DOWN", "DRAIN", "FAIL") or "DRAIN" in node["flags"]
                           or "FAIL" in node["flags"])


def reason_text(check, detail):
    text = "%s %s: %s" % (REASON_PREFIX, check, " ".join(detail.split()))
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def decide(node, problems, own_prefix=REASON_PREFIX, never_resume=(NCCL_REASON_PREFIX,)):
    """(action, reason): ("drain", reason), ("resume", None) or (None, None) for a node and its check results.

    ``problems``: [(check, detail)]. Only reasons starting with ``own_prefix`` are ours to replace or resume; a
    node drained or down for any other reason is left as it is, whatever the checks say.
    """
    ours = held(node) and bool(node["reason"]) and node["reason"].startswith(own_prefix)
    if held(node) and not ours:
        return None, None
    if problems:
        reason = reason_text(*problems[0])
        if ours and node["reason"] == reason:
            return None, None
        return "drain", reason
    if ours and not node["reason"].startswith(tuple(never_resume)):
        return "resume", None
    return None, None


# ------------------------------------------------------------------------------------------------ pure: NCCL
def parse_all_reduce(text):
    """all_reduce_perf output -> {busbw: at the largest size (best of out-of-place and in-place), size, avg, wrong,
    out_of_bounds}; None when it holds no result row."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8 or line.lstrip().startswith("#") or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        rows.append((int(parts[0]), parts))
    if not rows:
        return None
    size, parts = max(rows, key=lambda r: r[0])
    # Columns: size count type redop [root] time algbw busbw #wrong|error time algbw busbw #wrong|error
    tail = parts[-8:]
    busbw = max(float(tail[2]), float(tail[6]))
    wrong = sum(int(v) for v in (tail[3], tail[7]) if v.isdigit())
    avg = re.search(r"# Avg bus bandwidth\s*:\s*([0-9.]+)", text)
    oob = re.search(r"# Out of bounds values\s*:\s*(\d+)", text)
    return {"busbw": busbw, "size": size, "avg": float(avg.group(1)) if avg else None, "wrong": wrong,
            "out_of_bounds": int(oob.group(1)) if oob else 0}


def nccl_verdict(result, threshold):
    """None when the run passes, else why it fails (with its figure)."""
    if result is None:
        return "no result in the output"
    if result["out_of_bounds"] or result["wrong"]:
        return "%d wrong values" % max(result["out_of_bounds"], result["wrong"])
    if result["busbw"] < threshold:
        return "busbw %.2f GB/s < %d GB/s" % (result["busbw"], threshold)
    return None


def pairs(nodes):
    """Disjoint neighbour pairs of a node list (the last one waits when the count is odd)."""
    return [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]


def retest_pairs(failed_pairs, good_nodes):
    """Each member of a failed pair with a partner that passed: a node that fails again is the bad one."""
    plan = []
    partners = [n for n in good_nodes]
    for pair in failed_pairs:
        for member in pair:
            other = next((p for p in partners if p not in pair), None)
            if other is not None:
                plan.append((member, other))
    return plan


def blame(failed_first, failed_retest, retest_plan):
    """Nodes to drain after pair tests: in a failed pair, a member whose retest with a good partner failed too;
    when there was no partner to retest with, nobody (a link cannot be pinned on either node)."""
    bad = []
    retested = dict((pair[0], pair) for pair in retest_plan)
    for pair in failed_first:
        for member in pair:
            if member in retested and retested[member] in failed_retest and member not in bad:
                bad.append(member)
    return bad


def metrics_text(results, now):
    lines = ["# HELP soperator_nccl_busbw_gbps all_reduce_perf bus bandwidth at its largest message size, GB/s.",
             "# TYPE soperator_nccl_busbw_gbps gauge"]
    for r in results:
        if r.get("busbw") is not None:
            lines.append('soperator_nccl_busbw_gbps{test="%s",nodes="%s"} %s' % (r["test"], ",".join(r["nodes"]),
                                                                               r["busbw"]))
    lines += ["# HELP soperator_nccl_check_pass 1 when the test passed its threshold.",
              "# TYPE soperator_nccl_check_pass gauge"]
    for r in results:
        lines.append('soperator_nccl_check_pass{test="%s",nodes="%s"} %d' % (r["test"], ",".join(r["nodes"]),
                                                                            0 if r.get("problem") else 1))
    lines += ["# HELP soperator_nccl_check_timestamp_seconds When the last check finished.",
              "# TYPE soperator_nccl_check_timestamp_seconds gauge", "soperator_nccl_check_timestamp_seconds %d" % now]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ I/O
class Clock(object):
    def __init__(self, budget):
        self.deadline = time.monotonic() + budget

    def left(self, most):
        return max(1.0, min(most, self.deadline - time.monotonic()))


def run(argv, timeout, stdin_data=None):
    """(rc, stdout, stderr); 124 on timeout. Never waits for a process stuck in the kernel (a dead NFS mount)."""
    env = dict(os.environ, PATH=PATH, LC_ALL="C")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    except OSError as exc:
        return 127, "", str(exc)
    box = {}

    def talk():
        box["out"] = proc.communicate(stdin_data)

    t = threading.Thread(target=talk, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        proc.kill()
        t.join(1.0)
        return 124, "", "timed out after %ds" % timeout
    out, err = box["out"]
    return proc.returncode, out or "", err or ""


def check_munge(clock):
    rc, cred, err = run(["munge", "-n"], clock.left(10))
    if rc != 0:
        return "munge -n: %s" % (err.strip() or "exit %d" % rc)
    rc, out, err = run(["unmunge"], clock.left(10), stdin_data=cred)
    if rc != 0:
        return "unmunge: %s" % (err.strip() or out.strip() or "exit %d" % rc)
    return None


def check_jail(cfg, clock):
    path = cfg["path"]
    if cfg.get("requireMount", True):
        rc, _, _ = run(["mountpoint", "-q", path], clock.left(10))
        if rc == 124:
            return "%s does not answer (a hung mount?)" % path
        if rc != 0:
            return "%s is not mounted" % path
    sentinel = os.path.join(path, cfg.get("sentinel", ".soperator-populated"))
    rc, _, err = run(["head", "-c", "1", sentinel], clock.left(10))
    if rc == 124:
        return "%s does not answer (a hung mount?)" % path
    if rc != 0:
        return "%s is not readable: %s" % (sentinel, err.strip())
    return None


def check_gpus(cfg, clock):
    if not shutil.which("nvidia-smi", path=PATH):
        return ["nvidia-smi not found"]
    query = ["nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv"]
    rc, out, err = run(query, clock.left(20))
    if rc != 0 and "is not a valid field" in out + err:
        rc, out, err = run(["nvidia-smi", "-q", "-x"], clock.left(20))
        if rc != 0:
            return [smi_failure(rc, out, err)]
        gpus = parse_query_xml(out)
    elif rc != 0:
        return [smi_failure(rc, out, err)]
    else:
        gpus = parse_query_csv(out)
    problems = gpu_problems(gpus, cfg)
    codes = cfg.get("xids", list(DEFAULT_XIDS))
    if codes:
        rc, log, _ = run(["dmesg"], clock.left(5))
        if rc == 0:  # without CAP_SYSLOG (kernel.dmesg_restrict=1) the kernel log is not ours to read
            counts = xid_counts(log, codes)
            if sum(counts.values()) > cfg.get("maxXidEvents", 0):
                problems.append("Xid " + ", ".join("%d (%dx)" % kv for kv in sorted(counts.items())))
    return problems


def check_dcgm(cfg, clock):
    if not shutil.which("dcgmi", path=PATH):
        return None
    rc, out, err = run(["dcgmi", "diag", "-r", str(cfg.get("level", 1))], clock.left(30))
    if rc == 0:
        return None
    failed = [line.strip(" |") for line in out.splitlines() if "Fail" in line]
    return "diag -r %d: %s" % (cfg.get("level", 1), (failed[0] if failed else (err.strip() or "exit %d" % rc)))


def run_checks(cfg, clock):
    """[(check, detail)] of everything that failed, in the order the checks ran."""
    problems = []
    checks = cfg.get("checks", {})
    if checks.get("munge", True):
        found = check_munge(clock)
        if found:
            problems.append(("munge", found))
    if checks.get("jail"):
        found = check_jail(checks["jail"], clock)
        if found:
            problems.append(("jail", found))
    for disk in checks.get("disks", ()):
        try:
            st = os.statvfs(disk["path"])
        except OSError as exc:
            problems.append(("disk", "%s: %s" % (disk["path"], exc.strerror)))
            continue
        found = disk_problem(disk["path"], st.f_bavail * st.f_frsize, disk["minFreeMiB"])
        if found:
            problems.append(("disk", found))
    if checks.get("memory"):
        with open("/proc/meminfo") as handle:
            problems += [("memory", p) for p in memory_problems(meminfo(handle.read()), checks["memory"])]
    if checks.get("gpu") and checks["gpu"].get("count"):
        problems += [("gpu", p) for p in check_gpus(checks["gpu"], clock)]
    if checks.get("dcgm"):
        found = check_dcgm(checks["dcgm"], clock)
        if found:
            problems.append(("dcgm", found))
    return problems


def slurm_env():
    # configless slurmd caches its configuration here; scontrol finds it only when told
    if "SLURM_CONF" not in os.environ and os.path.exists("/run/slurm/conf/slurm.conf"):
        os.environ["SLURM_CONF"] = "/run/slurm/conf/slurm.conf"


def show_node(name, timeout=15):
    rc, out, err = run(["scontrol", "show", "node", "-o", name], timeout)
    return parse_node(out) if rc == 0 else None


def update_node(name, *settings):
    rc, out, err = run(["scontrol", "update", "nodename=" + name] + list(settings), 15)
    if rc != 0:
        print("scontrol update %s %s: %s" % (name, " ".join(settings), (err or out).strip()))
    return rc == 0


def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def refresh_driver_cache(clock):
    """On a GPU node whose driver the entrypoint showed to jobs: the jobs' loader cache again when the jail's changed
    (soperator-driver refresh), so that libraries an administrator adds to the jail reach GPU jobs too."""
    if not os.path.exists(DRIVER_CACHE_SOURCE):
        return
    rc, _out, err = run(["soperator-driver", "refresh"], clock.left(20))
    sys.stderr.write(err)
    if rc != 0:
        print("warning: soperator-driver refresh exited %d: GPU jobs keep the jail's earlier libraries" % rc)


def main_check(argv=None):
    """slurmd's HealthCheckProgram: run the checks, drain or resume this node; exit 1 when unhealthy."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = load(argv[0] if argv else os.environ.get("SOPERATOR_HEALTH_CONFIG", CONFIG))
    slurm_env()
    name = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    clock = Clock(BUDGET)
    refresh_driver_cache(clock)
    problems = run_checks(cfg, clock) if cfg.get("enabled", True) else []
    for check, detail in problems:
        print("FAIL %s: %s" % (check, detail))
    node = show_node(name)
    if node is None:
        # slurmd runs the program once before it registers: a dynamic node is not known yet, the next pass acts
        print("%s: not registered with slurmctld yet; nothing to drain or resume" % name)
        return 1 if problems else 0
    action, reason = decide(node, problems)
    if action == "drain":
        update_node(name, "state=drain", "reason=" + reason)
        print("drained %s: %s" % (name, reason))
    elif action == "resume":
        update_node(name, "state=resume")
        print("resumed %s (was: %s)" % (name, node["reason"]))
    else:
        print("%s: %s" % (name, "healthy" if not problems else "unhealthy, left as it is (%s)" % node["reason"]))
    return 1 if problems else 0


# ------------------------------------------------------------------------------------------------ NCCL
def nccl_candidates(show_all_text, nodeset):
    """Nodes of ``nodeset`` (their Feature) that are idle and in service: the ones a test may take."""
    found = []
    for line in show_all_text.splitlines():
        node = parse_node(line)
        if node and nodeset in node["features"] and node["state"] == "IDLE" and not held(node) \
                and "NOT_RESPONDING" not in node["flags"]:
            found.append(node["name"])
    return sorted(found, key=lambda n: (len(n), n))


def srun_argv(cfg, nodes, gpus):
    argv = ["srun", "--job-name=soperator-nccl-check", "--nodes=%d" % len(nodes), "--nodelist=" + ",".join(nodes),
            "--exclusive", "--immediate=60", "--time=%d" % cfg.get("timeLimitMinutes", 10), "--kill-on-bad-exit=1"]
    if cfg.get("partition"):
        argv.append("--partition=" + cfg["partition"])
    if cfg.get("gres", True) and gpus:
        argv.append("--gpus-per-node=%d" % gpus)
    if len(nodes) == 1:
        argv += ["--ntasks=1", "--mpi=none", cfg["command"]] + list(cfg.get("args", ())) + ["-g", str(gpus or 1)]
    else:
        argv += ["--ntasks-per-node=%d" % max(1, gpus), "--mpi=" + cfg.get("mpi", "pmix"), cfg["command"]] + \
            list(cfg.get("args", ())) + ["-g", "1"]
    return argv


def run_tests(cfg, tests, gpus):
    """Run each node list as one srun job, in parallel; [(nodes, rc, output)]."""
    results = {}

    def one(nodes):
        rc, out, err = run(srun_argv(cfg, nodes, gpus), cfg.get("timeLimitMinutes", 10) * 60 + 120)
        results[nodes] = (rc, out + err)

    threads = [threading.Thread(target=one, args=(t,), daemon=True) for t in tests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [(t,) + results[t] for t in tests]


def main_nccl(argv=None):
    """The CronJob: all_reduce_perf per node, then across node pairs; drain nodes under the threshold."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = load(argv[0] if argv else os.environ.get("SOPERATOR_NCCL_CONFIG", NCCL_CONFIG))
    slurm_env()
    rc, show, err = run(["scontrol", "show", "node", "-o"], 30)
    if rc != 0:
        print("scontrol show node: %s" % (err or show).strip())
        return 2
    results, drained = [], []
    for nodeset, ns_cfg in sorted(cfg.get("nodesets", {}).items()):
        threshold, gpus = ns_cfg["minBusBandwidthGBps"], ns_cfg.get("gpus", 0)
        nodes = nccl_candidates(show, nodeset)
        verdicts = {}
        for (test_nodes, code, output) in run_tests(cfg, [(n,) for n in nodes], gpus):
            parsed = parse_all_reduce(output)
            problem = nccl_verdict(parsed, threshold) if parsed or code == 0 else "srun exited %d: %s" % (
                code, (output.strip().splitlines() or [""])[-1][:100])
            results.append({"test": "node", "nodeset": nodeset, "nodes": list(test_nodes), "rc": code,
                            "busbw": parsed["busbw"] if parsed else None, "problem": problem})
            verdicts[test_nodes[0]] = (parsed, problem)
        bad = [n for n, (parsed, problem) in verdicts.items() if parsed is not None and problem]
        good = [n for n in nodes if n in verdicts and not verdicts[n][1]]
        for node in bad:
            drained.append((node, "%s %s" % (NCCL_REASON_PREFIX, verdicts[node][1])))
        if cfg.get("pairs", True) and len(good) >= 2:
            first = pairs(good)
            failed = []
            for (test_nodes, code, output) in run_tests(cfg, first, gpus):
                parsed = parse_all_reduce(output)
                problem = nccl_verdict(parsed, threshold) if parsed else "srun exited %d" % code
                results.append({"test": "pair", "nodeset": nodeset, "nodes": list(test_nodes), "rc": code,
                                "busbw": parsed["busbw"] if parsed else None, "problem": problem})
                if parsed is not None and problem:
                    failed.append(test_nodes)
            passed = [n for pair in first if pair not in failed for n in pair]
            plan = retest_pairs(failed, passed)
            failed_again = []
            for (test_nodes, code, output) in run_tests(cfg, plan, gpus):
                parsed = parse_all_reduce(output)
                problem = nccl_verdict(parsed, threshold) if parsed else "srun exited %d" % code
                results.append({"test": "pair-retest", "nodeset": nodeset, "nodes": list(test_nodes), "rc": code,
                                "busbw": parsed["busbw"] if parsed else None, "problem": problem})
                if parsed is not None and problem:
                    failed_again.append(test_nodes)
            for node in blame(failed, failed_again, plan):
                figure = next(r["problem"] for r in results if r["test"] == "pair-retest" and r["nodes"][0] == node)
                drained.append((node, "%s %s (pairs)" % (NCCL_REASON_PREFIX, figure)))
    for node, reason in drained:
        current = show_node(node)
        if current is None or held(current):
            continue  # drained meanwhile (an administrator, another check): their reason stays
        update_node(node, "state=drain", "reason=" + reason_text("nccl", reason[len(NCCL_REASON_PREFIX):].strip()))
        print("drained %s: %s" % (node, reason))
    for r in results:
        print("%-11s %-40s %s" % (r["test"], ",".join(r["nodes"]), r["problem"] or "ok (busbw %s GB/s)" % r["busbw"]))
    now = int(time.time())
    out_dir = cfg.get("resultsDir")
    if out_dir:
        try:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, "last.json.tmp"), "w") as handle:
                json.dump({"time": now, "results": results, "drained": [n for n, _ in drained]}, handle, indent=1)
            os.replace(os.path.join(out_dir, "last.json.tmp"), os.path.join(out_dir, "last.json"))
            with open(os.path.join(out_dir, "nccl.prom.tmp"), "w") as handle:
                handle.write(metrics_text(results, now))
            os.replace(os.path.join(out_dir, "nccl.prom.tmp"), os.path.join(out_dir, "nccl.prom"))
        except OSError as exc:
            print("cannot keep the results in %s: %s" % (out_dir, exc))
    return 1 if any(r["problem"] for r in results) else 0
