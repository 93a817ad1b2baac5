"""A real Prometheus (Debian's `prometheus` package, installed by hack/install-deps.sh) on loopback, for the tests
that evaluate the dashboard's queries: tests/slurm/test_prometheus.py (the exporter over real Slurm) and
tests/operator/test_prometheus.py (the operator's runtime on the host). Its configuration is checked by Prometheus's
own `promtool check config` before it starts; queries go through its HTTP API, so Prometheus's parser and engine
judge every expression."""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _poll(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)  # polling cadence, not synchronisation
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))


class QueryError(AssertionError):
    """Prometheus refused an expression (bad_data: a parse error; execution: an evaluation error)."""


class Prometheus:
    """``scrape_configs`` as in prometheus.yml; every job scraped each ``interval``."""

    def __init__(self, workdir, scrape_configs, interval="1s"):
        missing = [b for b in (PROMETHEUS, PROMTOOL) if not os.access(b, os.X_OK)]
        assert not missing, "Prometheus is not installed (hack/install-deps.sh installs Debian's): %s" % missing
        self.dir = os.path.join(str(workdir), "prometheus")
        os.makedirs(self.dir, exist_ok=True)
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            yaml.safe_dump({"global": {"scrape_interval": interval, "evaluation_interval": interval},
                            "scrape_configs": scrape_configs}, f)
        check = subprocess.run([PROMTOOL, "check", "config", self.config], capture_output=True, text=True)
        assert check.returncode == 0, "promtool check config: %s%s" % (check.stdout, check.stderr)
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + self.config, "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            _poll(lambda: self._ready() or self.proc.poll() is not None, 60, "Prometheus to be ready")
            assert self.proc.poll() is None, "Prometheus exited %s:\n%s" % (self.proc.returncode, self.logs())
        except BaseException:
            self.stop()
            raise

    def _ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def logs(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def api(self, path, **params):
        """GET /api/v1/<path>: the ``data`` of a success; QueryError with Prometheus's message otherwise."""
        url = "%s/api/v1/%s?%s" % (self.url, path, urllib.parse.urlencode(params, doseq=True))
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise QueryError("%s: %s: %s" % (params.get("query", path), body.get("errorType"), body.get("error")))
        return body["data"]

    def query(self, expr):
        """An instant query: ``[(labels, value)]`` of a vector (a scalar is one sample with no labels)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        assert data["resultType"] == "vector", data
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def targets(self):
        return self.api("targets")["activeTargets"]

    def wait_scraped(self, job, samples=2, timeout=60):
        """Every target of ``job`` up and scraped at least ``samples`` times: rate() has two points to use."""
        def scraped():
            ups = self.query('count_over_time(up{job="%s"}[10m])' % job)
            up = self.query('min(up{job="%s"})' % job)
            return ups and all(v >= samples for _l, v in ups) and up and up[0][1] == 1
        return _poll(scraped, timeout, "Prometheus to scrape job %s %d times (targets: %s)" % (
            job, samples, [(t["scrapeUrl"], t["health"], t["lastError"]) for t in self.targets()]))

    def wait_for(self, expr, predicate, timeout=60):
        """Poll ``expr`` until ``predicate(result)``; return the result."""
        return _poll(lambda: (lambda r: predicate(r) and r)(self.query(expr)), timeout, "%s to satisfy the test" % expr)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
