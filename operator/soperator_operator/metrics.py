"""A small Prometheus text-format registry (counters, gauges, histograms with labels). Pure, thread-safe."""

import calendar
import datetime
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Generic, NamedTuple, TypeVar

from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

DEFAULT_BUCKETS: tuple[float, ...] = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)

# A series' label values by label name (each written as str(value)).
Labels = Mapping[str, object]
# One series of a gauge: its labels and its value (:meth:`Gauge.replace`, :func:`backup_samples`).
Sample = tuple[Labels, float]
# A series' label values in the order of the metric's label names.
_SeriesKey = tuple[str, ...]
V = TypeVar("V")


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: Sequence[tuple[str, str]] | None = None) -> str:
    pairs = list(zip(names, values)) + list(extra or [])
    if not pairs:
        return ""
    return "{" + ",".join('%s="%s"' % (k, _escape(v)) for k, v in pairs) + "}"


def _num(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Metric(Generic[V]):
    """A metric's series (``V`` per label values) behind one lock."""
    kind = ""

    def __init__(self, name: str, help_text: str, labelnames: Iterable[str] = ()) -> None:
        self.name, self.help, self.labelnames = name, help_text, tuple(labelnames)
        self._lock = threading.Lock()
        self._values: dict[_SeriesKey, V] = {}

    def _key(self, labels: Labels) -> _SeriesKey:
        return tuple(str(labels.get(n, "")) for n in self.labelnames)

    def header(self) -> list[str]:
        return ["# HELP %s %s" % (self.name, self.help), "# TYPE %s %s" % (self.name, self.kind)]


class Counter(_Metric[float]):
    kind = "counter"

    def inc(self, amount: float = 1.0, /, **labels: object) -> None:
        with self._lock:
            key = self._key(labels)
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: object) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return self.header() + ["%s_total%s %s" % (self.name, _labels(self.labelnames, k), _num(v))
                                for k, v in items]


class Gauge(Counter):
    kind = "gauge"

    def set(self, value: float, /, **labels: object) -> None:
        with self._lock:
            self._values[self._key(labels)] = float(value)

    def replace(self, samples: Iterable[Sample]) -> None:
        """All of the gauge's series at once: ``[(labels dict, value)]`` (a series left out is gone)."""
        values = dict((self._key(labels), float(value)) for labels, value in samples)
        with self._lock:
            self._values = values

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return self.header() + ["%s%s %s" % (self.name, _labels(self.labelnames, k), _num(v)) for k, v in items]


class _Observed(NamedTuple):
    """A histogram series: the observations at or below each bucket's bound, their sum, and how many."""
    counts: list[int]
    total: float
    observations: int


class Histogram(_Metric[_Observed]):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, labelnames: Iterable[str] = (),
                 buckets: Iterable[float] = DEFAULT_BUCKETS) -> None:
        super().__init__(name, help_text, labelnames)
        self.buckets = tuple(sorted(buckets))

    def observe(self, value: float, /, **labels: object) -> None:
        with self._lock:
            key = self._key(labels)
            counts, total, count = self._values.get(key, _Observed([0] * len(self.buckets), 0.0, 0))
            counts = [c + (1 if value <= b else 0) for c, b in zip(counts, self.buckets)]
            self._values[key] = _Observed(counts, total + value, count + 1)

    def count(self, **labels: object) -> int:
        with self._lock:
            entry = self._values.get(self._key(labels))
            return entry[2] if entry else 0

    def render(self) -> list[str]:
        lines = self.header()
        with self._lock:
            items = sorted(self._values.items())
        for key, (counts, total, count) in items:
            for bound, c in zip(self.buckets, counts):
                lines.append("%s_bucket%s %s" % (self.name, _labels(self.labelnames, key, [("le", _num(bound))]),
                                                 _num(c)))
            lines.append("%s_bucket%s %s" % (self.name, _labels(self.labelnames, key, [("le", "+Inf")]), count))
            lines.append("%s_sum%s %s" % (self.name, _labels(self.labelnames, key), _num(total)))
            lines.append("%s_count%s %s" % (self.name, _labels(self.labelnames, key), count))
        return lines


M = TypeVar("M", bound="Counter | Histogram")  # any metric (a Gauge is a Counter)


class Registry:
    def __init__(self) -> None:
        self._metrics: list[Counter | Histogram] = []

    def register(self, metric: M) -> M:
        self._metrics.append(metric)
        return metric

    def exposition(self) -> str:
        lines = []
        for metric in self._metrics:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"


def _epoch(text: object) -> int | None:
    try:
        return calendar.timegm(datetime.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").timetuple())
    except ValueError:
        return None


def backup_samples(clusters: Iterable[KubeObject]) -> dict[str, list[Sample]]:
    """The jail backups' series from the SlurmClusters' status.backup and BackupReady condition: ``{gauge name:
    [(labels, value)]}``. A cluster without backups has none."""
    found: dict[str, list[Sample]] = dict((name, []) for name in BACKUP_GAUGES)
    for obj in clusters:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        backup = status.get("backup")
        if not isinstance(backup, dict):
            continue
        labels = {"namespace": meta.get("namespace", ""), "cluster": meta.get("name", "")}
        when = _epoch(backup.get("lastSuccessTime"))
        if when is not None:
            found["soperator_jail_backup_last_success_timestamp_seconds"].append((labels, when))
        for key, name in (("sizeBytes", "soperator_jail_backup_size_bytes"),
                          ("addedBytes", "soperator_jail_backup_added_bytes"),
                          ("durationSeconds", "soperator_jail_backup_duration_seconds")):
            if isinstance(backup.get(key), (int, float)):
                found[name].append((labels, backup[key]))
        cond = next((c for c in status.get("conditions") or () if c.get("type") == "BackupReady"), None)
        if cond is not None:
            found["soperator_jail_backup_ready"].append((dict(labels, reason=str(cond.get("reason") or "")),
                                                         1 if cond.get("status") == "True" else 0))
    return found


# name: (help, its labels beyond namespace and cluster)
BACKUP_GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "soperator_jail_backup_last_success_timestamp_seconds": ("When the last successful jail backup ended.", ()),
    "soperator_jail_backup_size_bytes": ("Bytes of the jail the last successful backup read.", ()),
    "soperator_jail_backup_added_bytes": ("Bytes the last successful backup added to the repository.", ()),
    "soperator_jail_backup_duration_seconds": ("How long the last successful backup took.", ()),
    "soperator_jail_backup_ready": ("1 while BackupReady is True (reason: Succeeded, Waiting), else 0 (reason: "
                                    "BackupFailed, Overdue, Maintenance).", ("reason",)),
}


class OperatorMetrics:
    """The operator's metrics, one instance per process."""

    def __init__(self) -> None:
        self.registry = Registry()
        reg = self.registry.register
        self.runs = reg(Counter("soperator_operator_runs", "Role runs by kind and result.", ("kind", "result")))
        self.failures = reg(Counter("soperator_operator_run_failures",
                                    "Failed role runs by kind and class (permanent/transient).", ("kind", "class")))
        self.duration = reg(Histogram("soperator_operator_run_duration_seconds", "Role run duration.", ("kind",)))
        self.queue_depth = reg(Gauge("soperator_operator_queue_depth", "Objects due and waiting for a worker."))
        self.running = reg(Gauge("soperator_operator_runs_in_flight", "Role runs in flight."))
        self.leader = reg(Gauge("soperator_operator_leader", "1 while this replica holds the Lease."))
        self.events = reg(Counter("soperator_operator_watch_events", "Watch events seen by kind and type.",
                                  ("kind", "type")))
        self.checks = reg(Counter("soperator_operator_drift_checks",
                                  "In-memory checks of a resource against the caches, by result (run or skip).",
                                  ("kind", "result")))
        self.scale_outs = reg(Counter("soperator_operator_scale_outs",
                                      "Worker StatefulSets grown ahead of their role run, by result (applied, or "
                                      "refused: left to the run).", ("result",)))
        self.phases = reg(Histogram("soperator_operator_run_phase_seconds",
                                    "Where a role run's time goes (runner.PHASES).", ("phase",),
                                    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)))
        self.cached = reg(Gauge("soperator_operator_cached_objects", "Objects held in the watch caches."))
        self.backup = dict((name, reg(Gauge(name, help_text, ("namespace", "cluster") + extra)))
                           for name, (help_text, extra) in sorted(BACKUP_GAUGES.items()))
        self.elastic_nodes = reg(Gauge("soperator_elastic_nodes",
                                       "Nodes of elastic NodeSets by Slurm power state (up, poweringUp, poweredDown, "
                                       "failed), as the status refresh last read them.",
                                       ("namespace", "cluster", "nodeset", "state")))
        self.elastic_resyncs = reg(Counter("soperator_elastic_resyncs",
                                           "Runs forced because Slurm powered elastic nodes up or down (their pods "
                                           "did not match).", ("namespace", "cluster")))

    def set_backups(self, clusters: Iterable[KubeObject]) -> None:
        """The jail backups' gauges from the cached SlurmClusters (:func:`backup_samples`)."""
        for name, samples in backup_samples(clusters).items():
            self.backup[name].replace(samples)
