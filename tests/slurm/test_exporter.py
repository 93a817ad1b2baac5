"""The exporter (exporter/, built by hack/build-binaries.sh slurm-exporter) against real Slurm with accounting:
its /metrics reports the node and job counts sinfo and squeue report, drain reasons, fairshare, scheduler figures;
every metric name the Grafana dashboard queries is one the exporter (or the operator) really serves; and a real
Prometheus scraping it as the rendered ServiceMonitor asks evaluates every exporter panel's query, as Grafana sends
it, to what Slurm says (the operator's panels: tests/operator/test_prometheus.py).

Scrapes never reach Slurm: counted with slurmctld's own RPC statistics (sdiag, by user), 200 concurrent scrapes make
no Slurm call and each gets the last collection, and a flood of scrapes leaves one set of calls per interval.

SOPERATOR_RECORD_FIXTURES=1 rewrites exporter/testdata/*.txt from what the Slurm commands print here: the Go unit
tests of the parsers read those recordings.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from accounting_cluster import accounting_spec
from dynamic_cluster import STATEFULSET, node_name
from slurm_cluster import REPO, free_ports, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext
from ansible_collections.soperator.slurm.plugins.module_utils.render.exporter import exporter_args, service_monitor

sys.path.insert(0, str(REPO / "tests"))
from metrics_check import (  # noqa: E402  (tests/metrics_check.py, shared with the end-to-end test)
    DASHBOARD,
    dashboard,
    dashboard_metric_names,
    grafana_interpolate,
    namespace_variable_query,
    operator_sample_names,
    parse_exposition,
    split_targets,
    value,
)
from prometheus_server import Prometheus, QueryError  # noqa: E402  (tests/prometheus_server.py: Debian's Prometheus)

TESTDATA = REPO / "exporter" / "testdata"
RECORD = os.environ.get("SOPERATOR_RECORD_FIXTURES") == "1"
HEALTH_REASON = "soperator: health: gpu: xid 79 on GPU 0"
# The commands the exporter runs (exporter/collector.go), recorded for its parser tests.
COMMANDS = {
    "sinfo_nodes": ["sinfo", "-h", "-N", "-o", "%N|%T|%R"],
    "sinfo_partitions": ["sinfo", "-h", "-o", "%R|%C"],
    "squeue": ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-a", "-r", "-o", "%P|%T|%C|%r|%u|%V"],
    "sinfo_drains": ["sinfo", "-h", "-N", "-o", "%N|%E|%H|%T"],
    "sshare": ["sshare", "-a", "-n", "-P", "-o", "Account,User,RawShares,NormShares,RawUsage,NormUsage,FairShare"],
    "sdiag": ["sdiag"],
}


@pytest.fixture(scope="module")
def binary():
    return subprocess.run([str(REPO / "hack" / "build-binaries.sh"), "slurm-exporter"], check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()[-1]


def get(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def collected(port: int, timeout: float = 120) -> str:
    """The first scrape that carries a collection (/healthz answers 200 once the first one is in)."""
    wait_for(lambda: get(port, "/healthz")[0] == 200, timeout, "the exporter's first collection")
    status, text = get(port)
    assert status == 200
    return text


@pytest.fixture(scope="module")
def exporter(acct, binary):
    """The exporter with the rendered arguments (accounting on: fairshare included) over a cluster with a running
    job, pending jobs (held, and waiting for a start time) and a node drained by a health check: started once they
    are there (its first collection is what scrapes get until the next one, 30 s later). Its port, once the first
    collection is in."""
    port = free_ports(1)[0]
    args = exporter_args(ClusterContext(accounting_spec(), []))
    acct.run(["scontrol", "update", "nodename=%s" % node_name(1), "state=drain", "reason=%s" % HEALTH_REASON]).check()
    # Long enough to run through the Prometheus tests too (cancelled at the end).
    running = acct.run(["sbatch", "--parsable", "-o", "/dev/null", "-w", node_name(0), "--wrap", "sleep 600"]).check()
    held = acct.run(["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"]).check()
    later = acct.run(["sbatch", "--parsable", "--begin=now+1hour", "-o", "/dev/null", "--wrap", "true"]).check()
    jobs = [j.stdout.strip() for j in (running, held, later)]
    proc = None
    try:
        wait_for(lambda: acct.run(["squeue", "-h", "-j", jobs[0], "-o", "%T"]).stdout.strip() == "RUNNING", 30,
                 "the running job")
        wait_for(lambda: "DRAIN" in acct.run(["scontrol", "show", "node", node_name(1)]).stdout, 10, "the drain")
        if RECORD:
            TESTDATA.mkdir(parents=True, exist_ok=True)
            for name, argv in COMMANDS.items():
                out = acct.run(argv).check().stdout
                (TESTDATA / f"{name}.txt").write_text(out)
        proc = acct.start_exporter(binary, args, port)
        collected(port)
        yield port
    finally:
        acct.run(["scancel", *jobs])
        acct.run(["scontrol", "update", "nodename=%s" % node_name(1), "state=resume"])
        if proc is not None:
            proc.terminate()
            proc.wait(10)


@pytest.fixture(scope="module")
def scrape(exporter):
    text = collected(exporter)
    return parse_exposition(text), text


def test_every_collector_answered(scrape):
    samples, _text = scrape
    results = {lab["collector"]: v for lab, v in samples["slurm_exporter_collector_success"]}
    assert results == {"nodes": 1, "partitions": 1, "queue": 1, "drain_reason": 1, "fairshare": 1, "scheduler": 1}


def test_node_counts_equal_sinfo(acct, scrape):
    samples, _text = scrape
    nodes = set(acct.run(["sinfo", "-h", "-N", "-o", "%N"]).check().stdout.split())
    assert value(samples, "slurm_nodes_total") == len(nodes) == 2

    def listed(states):
        return set(acct.run(["sinfo", "-h", "-N", "-t", states, "-o", "%N"]).check().stdout.split())

    # sinfo's idle includes drained idle nodes; the exporter counts a drained node as drained only.
    assert value(samples, "slurm_nodes_idle", partition="cpu") == len(listed("idle") - listed("drain")) == 0
    assert value(samples, "slurm_nodes_drain", partition="cpu") == len(listed("drain")) == 1
    assert value(samples, "slurm_nodes_alloc") + value(samples, "slurm_nodes_mix") == len(listed("alloc,mix")) == 1
    assert value(samples, "slurm_nodes_down") == len(listed("down")) == 0


def test_job_counts_equal_squeue(acct, scrape):
    samples, _text = scrape
    for state, metric in (("R", "slurm_jobs_running"), ("PD", "slurm_jobs_pending")):
        listed = acct.run(["squeue", "-h", "-t", state, "-o", "%i"]).check().stdout.split()
        assert value(samples, metric) == len(listed), state
    assert value(samples, "slurm_jobs_running") == 1 and value(samples, "slurm_jobs_pending") == 2
    reasons = {lab["reason"] for lab, v in samples["slurm_queue_pending"] if v}
    assert reasons == {"JobHeldUser", "BeginTime"}
    assert value(samples, "slurm_partition_jobs_pending", partition="cpu") == 2
    assert value(samples, "slurm_queue_wait_seconds_max", partition="cpu") >= 0
    assert value(samples, "slurm_partition_cpus_total", partition="cpu") == 4  # two nodes of 2 CPUs


def test_drain_reasons_and_fairshare_and_scheduler(acct, scrape):
    samples, _text = scrape
    drains = [lab for lab, _v in samples["slurm_node_drain_reason_info"]]
    assert [(d["node"], d["reason"]) for d in drains] == [(node_name(1), HEALTH_REASON)]
    # Every account sshare lists (root; the accounting tests' accounts when they ran first, same cluster).
    listed = acct.run(["sshare", "-a", "-n", "-P", "-o", "Account,User"]).check().stdout.splitlines()
    accounts = sorted({line.split("|")[0].strip() for line in listed if not line.split("|")[1]})
    assert sorted(lab["account"] for lab, _v in samples["slurm_account_fairshare_raw_shares"]) == accounts
    assert value(samples, "slurm_user_fairshare", account="root", user="root") == 1.0
    assert value(samples, "slurm_scheduler_jobs_submitted") >= 3
    assert STATEFULSET in node_name(0)


def test_the_dashboard_queries_only_metrics_that_are_served(scrape):
    samples, _text = scrape
    used = dashboard_metric_names()
    served = set(samples) | operator_sample_names()
    assert used - served == set(), "the dashboard queries metrics nobody serves"
    # The panels the dashboard promises: nodes by state, jobs by state, queue wait, partitions, health-check drains,
    # and the operator's own metrics.
    for name in ("slurm_nodes_idle", "slurm_nodes_drain", "slurm_jobs_pending", "slurm_queue_wait_seconds_max",
                 "slurm_partition_cpus_allocated", "slurm_node_drain_reason_info", "soperator_operator_runs_total"):
        assert name in used, name
    board = dashboard()
    assert any("soperator: health" in t["expr"] for p in board["panels"] for t in p.get("targets", []))
    assert Path(DASHBOARD).stat().st_size < 200_000


# ----------------------------------------------------------------------------------------- the dashboard, evaluated
@pytest.fixture(scope="module")
def prometheus(exporter, tmp_path_factory):
    """Debian's Prometheus scraping the exporter as prometheus-operator scrapes the rendered ServiceMonitor: the
    job named after the Service, the target labelled with the cluster's namespace, the monitor's path and interval
    (set short here: 2s)."""
    cluster = accounting_spec()
    cluster["spec"]["exporter"]["serviceMonitor"]["interval"] = "2s"
    monitor = service_monitor(ClusterContext(cluster, []))
    endpoint = monitor["spec"]["endpoints"][0]
    job = {"job_name": monitor["metadata"]["name"], "metrics_path": endpoint["path"],
           "scrape_interval": endpoint["interval"], "scrape_timeout": endpoint["interval"],
           "static_configs": [{"targets": ["127.0.0.1:%d" % exporter],
                               "labels": {"namespace": monitor["metadata"]["namespace"],
                                          "service": monitor["metadata"]["name"], "endpoint": endpoint["port"]}}]}
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"), [job])
    try:
        prom.wait_scraped(job["job_name"], samples=2, timeout=120)
        yield prom, monitor["metadata"]["namespace"]
    finally:
        prom.stop()


@pytest.fixture(scope="module")
def panels(prometheus):
    """Every exporter panel query, as Grafana sends it with the namespace chosen: {(panel, refId): samples}."""
    prom, namespace = prometheus
    slurm, _operator = split_targets()
    return {(title, ref): prom.query(grafana_interpolate(expr, namespace)) for title, ref, expr in slurm}


def test_the_namespace_variable_lists_the_cluster(prometheus):
    prom, namespace = prometheus
    metric, label = namespace_variable_query()
    # Grafana's label_values(metric, label) is this API call.
    assert prom.api("label/%s/values" % label, **{"match[]": metric}) == [namespace]


def test_every_exporter_panel_query_parses_and_returns_data(panels):
    slurm, _operator = split_targets()
    assert len(panels) == len(slurm) >= 30
    empty = [key for key, samples in panels.items() if not samples]
    assert empty == [], "panel queries that return nothing"
    nan = [key for key, samples in panels.items() if any(v != v for _labels, v in samples)]
    assert nan == [], "panel queries that return NaN"


def test_the_panels_show_what_slurm_says(acct, panels):
    def one(title, ref):
        samples = panels[(title, ref)]
        assert len(samples) == 1, (title, ref, samples)
        return samples[0][1]

    def by(title, ref, label):
        return {labels[label]: v for labels, v in panels[(title, ref)]}

    nodes = acct.run(["sinfo", "-h", "-N", "-o", "%N"]).check().stdout.split()
    assert one("Nodes", "A") == len(nodes) == 2
    state = {ref: one("Nodes by state", ref) for ref in "ABCDEFGHIJKLM"}
    assert state["E"] == 1 and state["B"] + state["C"] == 1  # drained by the health check; the running job's
    assert sum(state.values()) == 2 and state["A"] == 0
    assert [one("Health-check drains", ref) for ref in "ABC"] == [1, 0, 0]  # health checks, admins, the operator
    assert [(lab["node"], lab["reason"]) for lab, _v in panels[("Drained and down nodes", "A")]] == [
        (node_name(1), HEALTH_REASON)]
    squeue = {s: len(acct.run(["squeue", "-h", "-t", s, "-o", "%i"]).check().stdout.split()) for s in ("R", "PD")}
    assert [one("Jobs by state", ref) for ref in "ABCDE"] == [squeue["R"], squeue["PD"], 0, 0, 0] == [1, 2, 0, 0, 0]
    assert by("Pending jobs by reason", "A", "reason") == {"JobHeldUser": 1, "BeginTime": 1}
    assert by("Queue wait", "A", "partition").keys() == by("Queue wait", "B", "partition").keys() == {"cpu"}
    assert [one("CPUs asked and in use", ref) for ref in "AB"] == [1, 2]
    assert by("CPU allocation by partition", "A", "partition") == {"cpu": 0.25}  # 1 of 4 CPUs
    assert by("Jobs by partition", "A", "partition") == {"cpu": 1}
    assert by("Jobs by partition", "B", "partition") == {"cpu": 2}
    assert {(lab["account"], lab["user"]): v for lab, v in panels[("Fairshare by user", "A")]}[("root", "root")] == 1
    assert one("slurmdbd queue and scheduler cycle", "A") >= 0 and one("slurmdbd queue and scheduler cycle", "B") > 0
    assert by("Exporter collectors", "A", "collector") == dict.fromkeys(
        ("nodes", "partitions", "queue", "drain_reason", "fairshare", "scheduler"), 1)


def test_a_query_prometheus_cannot_parse_is_refused(prometheus):
    """The evaluation above would catch a broken panel: Prometheus's parser refuses a malformed expression."""
    prom, namespace = prometheus
    with pytest.raises(QueryError, match="bad_data"):
        prom.query(grafana_interpolate('sum(slurm_nodes_total{namespace="$namespace"}', namespace))


# --- scrapes never reach Slurm -------------------------------------------------------------------------------------
FLOOD_USER = "daemon"  # the flood tests' exporter runs as its own user: sdiag counts its RPCs apart


def rpcs_of(acct, user: str) -> int:
    """RPCs slurmctld counted from ``user`` since it started (sdiag's statistics by user; sdiag runs as root)."""
    out = acct.run(["sdiag"]).check().stdout
    section = out.split("Remote Procedure Call statistics by user", 1)[1].split("\n\n", 1)[0]
    found = re.search(r"^\s*%s\s+\(\s*[0-9]+\) count:([0-9]+)" % re.escape(user), section, re.M)
    return int(found.group(1)) if found else 0


def flood_exporter(acct, binary, interval: str):
    """The exporter rendered with ``spec.exporter.collectInterval: interval``, as FLOOD_USER, on a port of its own."""
    cluster = accounting_spec()
    cluster["spec"]["exporter"]["collectInterval"] = interval
    args = exporter_args(ClusterContext(cluster, []))
    assert "--collect.interval=%s" % interval in args
    port = free_ports(1)[0]
    return acct.start_exporter(binary, args, port, user=FLOOD_USER, log="exporter-flood.log"), port


def slurm_samples(text: str) -> dict:
    """The Slurm values of a scrape: everything but the exporter's own process and the age of the values."""
    return {name: sorted(map(repr, values)) for name, values in parse_exposition(text).items()
            if name.startswith("slurm_") and name != "slurm_exporter_last_collection_age_seconds"}


def burst(port: int, count: int = 200) -> list[tuple[int, str]]:
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda _i: get(port), range(count)))


def test_200_concurrent_scrapes_make_no_slurm_call_and_each_gets_the_last_collection(acct, binary):
    """An interval longer than the test: after the first collection only a scrape could make slurmctld count an RPC
    from the exporter's user."""
    assert rpcs_of(acct, FLOOD_USER) == 0  # nothing else of the cluster runs as this user
    proc, port = flood_exporter(acct, binary, "1h")
    try:
        first = collected(port)
        one_collection = rpcs_of(acct, FLOOD_USER)
        assert one_collection >= len(COMMANDS), one_collection  # at least one RPC per command
        answers = burst(port)
        print("one collection: %d RPCs; after 200 concurrent scrapes: %d" % (one_collection, rpcs_of(acct, FLOOD_USER)))
        assert rpcs_of(acct, FLOOD_USER) == one_collection
        assert [status for status, _text in answers] == [200] * 200
        for _status, text in answers:
            assert value(parse_exposition(text), "slurm_exporter_collections_total") == 1
            assert slurm_samples(text) == slurm_samples(first)
        assert value(parse_exposition(first), "slurm_nodes_total") == 2
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_flood_of_scrapes_leaves_one_set_of_slurm_calls_per_interval(acct, binary):
    """Rounds of 200 concurrent scrapes over several intervals of the shortest interval the API allows: slurmctld
    counts at most one collection's RPCs per interval begun (the first collection's count is one set), and every
    scrape is answered, with collections that only ever go forward."""
    before = rpcs_of(acct, FLOOD_USER)
    proc, port = flood_exporter(acct, binary, "%ds" % schema.EXPORTER_MIN_INTERVAL_SECONDS)
    try:
        collected(port)
        start, one_set = time.monotonic(), rpcs_of(acct, FLOOD_USER) - before
        scrapes, seen = 0, []
        while time.monotonic() - start < 3 * schema.EXPORTER_MIN_INTERVAL_SECONDS:
            answers = burst(port)
            assert [status for status, _text in answers] == [200] * len(answers)
            scrapes += len(answers)
            seen.append(max(value(parse_exposition(text), "slurm_exporter_collections_total") for _s, text in answers))
        elapsed = time.monotonic() - start
        calls = rpcs_of(acct, FLOOD_USER) - before - one_set
    finally:
        proc.terminate()
        proc.wait(10)
    intervals_begun = int(elapsed // schema.EXPORTER_MIN_INTERVAL_SECONDS) + 1
    print("%d scrapes in %.1f s (%d intervals begun): %d RPCs after the first collection (%d each), collections "
          "seen %s" % (scrapes, elapsed, intervals_begun, calls, one_set, seen))
    assert scrapes >= 400 and seen == sorted(seen) and seen[-1] > 1, (scrapes, seen)
    assert calls <= one_set * intervals_begun, (calls, one_set, elapsed, scrapes)
    assert calls >= one_set * (seen[-1] - 1)  # each collection the scrapes saw was one whole set
