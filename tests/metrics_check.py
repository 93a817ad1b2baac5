"""What the Grafana dashboard queries, and what a Prometheus scrape serves: shared by the host harness
(tests/slurm/test_exporter.py) and the end-to-end test on the real node (tests/e2e/test_accounting.py)."""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "dashboards", "soperator-slurm.json")


def parse_exposition(text):
    """Prometheus text format -> {sample name: [(labels, value)]}."""
    samples = {}
    pattern = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        found = pattern.match(line)
        assert found, line
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', found.group(3) or ""))
        samples.setdefault(found.group(1), []).append((labels, float(found.group(4))))
    return samples


def value(samples, name, **labels):
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == w for k, w in labels.items()))


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def dashboard_metric_names():
    """Every metric name in the dashboard's PromQL expressions and template variables."""
    board = dashboard()
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for var in board.get("templating", {}).get("list", []):
        query = var.get("query", "")
        exprs.append(query.get("query", "") if isinstance(query, dict) else query)
    names = set()
    for expr in exprs:
        names.update(re.findall(r"\b((?:slurm|soperator)_[a-z0-9_]+)\b", expr))
    return names


def operator_sample_names():
    """The sample names the operator's /metrics serves (operator/soperator_operator/metrics.py)."""
    sys.path.insert(0, os.path.join(ROOT, "operator"))
    from soperator_operator.metrics import OperatorMetrics

    names = set()
    for line in OperatorMetrics().registry.exposition().splitlines():
        kind = re.match(r"^# TYPE (\S+) (\S+)$", line)
        if kind:
            base, typ = kind.groups()
            names.update({"counter": [base + "_total"], "gauge": [base],
                          "histogram": [base + "_bucket", base + "_sum", base + "_count"]}[typ])
    return names


def dashboard_targets():
    """Every panel query: ``(panel title, refId, expr)``, in the dashboard's order."""
    return [(p["title"], t["refId"], t["expr"]) for p in dashboard()["panels"] for t in p.get("targets", [])]


def namespace_variable_query():
    """The ``namespace`` template variable's query: Grafana's ``label_values(metric, label)``, as (metric, label)."""
    var = next(v for v in dashboard()["templating"]["list"] if v["name"] == "namespace")
    found = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["query"]["query"])
    assert found, var
    return found.group(1), found.group(2)


def grafana_interpolate(expr, namespace):
    """What Grafana sends to Prometheus for ``expr`` with the namespace variable set (no other variable is used:
    one left over fails here rather than reaching Prometheus as a parse error)."""
    out = expr.replace("${namespace}", namespace).replace("$namespace", namespace)
    assert "$" not in out, "a Grafana variable the tests do not set: %s" % expr
    return out


def split_targets():
    """The panel queries over the exporter's metrics (slurm_*) and those over the operator's
    (soperator_operator_*): each suite evaluates its half, and every query is in exactly one."""
    targets = dashboard_targets()
    slurm = [t for t in targets if re.search(r"\bslurm_", t[2])]
    operator = [t for t in targets if re.search(r"\bsoperator_operator_", t[2])]
    odd = [t for t in targets if (t in slurm) == (t in operator)]
    assert odd == [], "queries over both sources or over neither: %s" % odd
    return slurm, operator
