"""The dashboard's operator panels, evaluated by a real Prometheus (Debian's) scraping the operator's runtime on the
host while it converges a cluster on the real local kube-apiserver (kwok nodes): every operator panel query, as
Grafana sends it, parses and returns data, and the data says what the operator did (a successful run, its
duration, this replica the leader). The exporter's panels: tests/slurm/test_exporter.py."""

import math
import os
import sys

import pytest
from operator_harness import ROOT, Cluster, OperatorProcess, wait_for, write_watches

sys.path.insert(0, os.path.join(ROOT, "tests"))
from metrics_check import grafana_interpolate, split_targets  # noqa: E402
from prometheus_server import Prometheus  # noqa: E402

pytestmark = pytest.mark.cluster
JOB = "soperator-operator"


@pytest.fixture
def observed(tmp_path, kubeconfig, collections_path, namespace, apply_crds, k8s):
    """The operator with Prometheus scraping it every second, the example cluster created and converged, then
    scaled out: a run Prometheus saw happen."""
    apply_crds("soperator-tests")
    cluster = Cluster(k8s, namespace)
    op = OperatorProcess(tmp_path, kubeconfig, collections_path, namespace, "op-metrics",
                         write_watches(str(tmp_path / "watches.yaml"), reconcile_period="10m"))
    prom = None
    try:
        # As a PodMonitor over the operator's port "http" is scraped (roles/operator): job, namespace and pod.
        prom = Prometheus(tmp_path, [{
            "job_name": JOB, "metrics_path": "/metrics", "scrape_interval": "1s", "scrape_timeout": "1s",
            "static_configs": [{"targets": ["127.0.0.1:%d" % op.http_port()],
                                "labels": {"namespace": namespace, "pod": op.identity}}]}])
        prom.wait_scraped(JOB, samples=1)
        wait_for(lambda: op.metric("soperator_operator_leader") == 1, 60, what="op-metrics to lead")
        for doc in cluster.example():
            cluster.create(doc)
        wait_for(lambda: (cluster.condition("SlurmCluster", "demo", "Successful") or {}).get("status") == "True",
                 180, what="SlurmCluster converged")
        # rate() counts what a counter gained between two scrapes, not a series' first sample: once Prometheus has
        # the runs' series, one more run (a scale-out: no Slurm needed) must show as a rate.
        prom.wait_for('min(count_over_time(soperator_operator_runs_total{result="success"}[5m]))',
                      lambda r: r and r[0][1] >= 2)
        cluster.scale("cpu", 3)
        prom.wait_for('sum(rate(soperator_operator_runs_total{result="success"}[5m]))', lambda r: r and r[0][1] > 0,
                      timeout=120)
        yield prom, op
    finally:
        if prom is not None:
            prom.stop()
        op.terminate()  # SIGTERM: a run in flight (the scale-out's) finishes, so none re-adds a finalizer later
        op.cleanup()
        cluster.release_finalizers()


def test_every_operator_panel_query_parses_and_shows_the_runs(observed, namespace):
    prom, op = observed
    _slurm, operator = split_targets()
    assert len(operator) >= 5
    panels = {(title, ref): prom.query(grafana_interpolate(expr, namespace)) for title, ref, expr in operator}
    empty = [key for key, samples in panels.items() if not samples]
    assert empty == [], "operator panel queries that return nothing"

    runs = {labels["result"]: v for labels, v in panels[("Operator role runs", "A")]}
    assert runs.get("success", 0) > 0, runs  # a rate over the runs Prometheus saw happen
    (_labels, p90), = panels[("Operator run duration (p90)", "A")]
    assert math.isfinite(p90) and p90 > 0  # histogram_quantile over buckets that moved: a real duration
    leadership = {ref: samples[0][1] for (title, ref), samples in panels.items()
                  if title == "Operator queue and leadership"}
    assert leadership["C"] == 1  # the one replica holds the Lease
    assert leadership["A"] >= 0 and leadership["B"] >= 0
    assert op.metric("soperator_operator_runs_total", result="success") >= 1
