#!/usr/bin/env python3
"""Operator benchmark on a local Kubernetes with kwok nodes: figures printed, nothing asserted about time.

  .venv/bin/python bench/bench_operator.py [--clusters 100] [--workers 10] [--big 5000] [--quick] [--no-scale]

Self-contained: uses the local cluster of $SOPERATOR_LOCALCLUSTER_DIR when one runs there, else starts a private
one under .cache/bench-localcluster (stopped at the end); installs our CRDs; makes the collection importable.

Side by side, alternating on the same apiserver, Soperator (nebius/soperator's Go operator, bench/soperator_side.py;
skipped, with the reason printed, when no build of it is found) and ours (the runtime of operator/ on the host with
the repository's watches.yaml), each alone while measured:
 - create a SlurmCluster + NodeSet -> every object it renders exists (s);
 - a replica change (the NodeSet's scale subresource) -> the worker StatefulSet follows: p50 of 10 (s);
 - a no-op resync: CPU-s of the operator's process tree per check that finds nothing to do (Soperator has no
   periodic check: a forced reconcile, an annotation on the SlurmCluster, which its NodeSet controller reconciles;
   ours checks on its timer, its counter looked at every second, since each look is a request the measured
   process serves);
 - idle CPU-s per minute with the cluster in place; memory (RSS of the main process, PSS of the process tree);
 - API requests per replica change, from the apiserver's audit log (by user agent; leases and watches apart).
Then ours alone: where a role run's time goes (its phases); 100 SlurmClusters x 10 workers (idle CPU, memory,
operator restart -> every cluster checked); one SlurmCluster with 5,000 workers (site.yml converge and no-op, the
operator's create -> applied and no-op check).

kwok nodes run nothing: no slurmctld ever answers, so our clusters converge (every object applied, status
written) but are never Ready; a shrink waits for Slurm, so only scale-outs are timed.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("SOPERATOR_LOCALCLUSTER_DIR", os.path.join(ROOT, ".cache", "bench-localcluster"))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
os.environ["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS
sys.path[:0] = [os.path.join(ROOT, "tests", "operator"), os.path.join(ROOT, "hack"), os.path.join(ROOT, "operator"),
                os.path.join(ROOT, "tests"), os.path.dirname(os.path.abspath(__file__))]

import localcluster  # noqa: E402
import soperator_side  # noqa: E402
from operator_harness import Cluster, OperatorProcess, wait_for, write_watches  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
OURS_AGENTS = ("soperator-operator/", "soperator.slurm/")
BENCH_AGENT = "soperator-bench"
CHANGES = 10
# Seconds between the bench's looks at whether a side is settled while its CPU is being measured (a create, the
# end of the no-op checks), the same for both sides: each look reads the side's /metrics, which the measured
# process serves (ours ~1 ms CPU, in Python). At 0.1 s they were ~20 looks a second for as long as a create lasted.
SETTLE_POLL = 0.5


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


# --- processes -------------------------------------------------------------------------------------------------
def _stat(pid):
    with open("/proc/%d/stat" % pid, encoding="ascii") as handle:
        dummy, tail = handle.read().rsplit(")", 1)
    return tail.split()


def descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(_stat(int(entry))[1]), []).append(int(entry))
            except (OSError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, ()))
    return out


def tree_cpu(pid):
    """CPU seconds of a process and its descendants, reaped children included (utime stime cutime cstime)."""
    total = 0.0
    for p in descendants(pid):
        try:
            fields = _stat(p)
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS
    return total


def _status_kib(pid, key):
    with open("/proc/%d/status" % pid, encoding="ascii") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_mib(pid):
    return _status_kib(pid, "VmRSS") / 1024


def tree_pss_mib(pid):
    """Proportional set size of a process tree (shared pages counted once)."""
    total = 0
    for p in descendants(pid):
        try:
            with open("/proc/%d/smaps_rollup" % p, encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class PeakPss:
    """The peak PSS of a process tree, sampled every ``interval`` seconds in a thread until stopped."""

    def __init__(self, pid, interval=0.05):
        import threading
        self.pid, self.interval, self.peak = pid, interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_pss_mib(self.pid))
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def warm(pid, quiet=1.0):
    """The operator's forkserver has started and finished its imports (its CPU time stands still for ``quiet``
    seconds): its start-up is not counted as the cost of anything measured after."""
    def server():
        for p in descendants(pid):
            try:  # by its name (runner.ForkServer, forked: the operator's command line), or multiprocessing's
                with open("/proc/%d/comm" % p, "rb") as handle:
                    if handle.read().strip() == b"forkserver":
                        return p
                with open("/proc/%d/cmdline" % p, "rb") as handle:
                    if b"forkserver" in handle.read():
                        return p
            except OSError:
                continue
        return None

    first = server()
    if first is None:
        time.sleep(0.2)
        return False
    before = sum(int(x) for x in _stat(first)[11:13])
    time.sleep(quiet)
    return sum(int(x) for x in _stat(first)[11:13]) == before


# --- the API server's audit log --------------------------------------------------------------------------------
class Audit:
    """Counts requests by user agent between two marks. A mark is a request of the bench's own (a GET of a
    namespace that does not exist, by a unique name) waited for in the log: everything before it is written."""

    def __init__(self, path, core):
        self.path, self.core = path, core
        self.offset = os.path.getsize(path) if os.path.exists(path) else 0

    def _flush(self):
        token = "bench-mark-" + uuid.uuid4().hex[:10]
        try:
            self.core.read_namespace(token)
        except Exception:  # noqa: BLE001  404: what we want, a request with that name in the log
            pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
            at = data.find(token.encode())
            if at >= 0:
                return self.offset + data.rfind(b"\n", 0, at) + 1
            time.sleep(0.05)
        raise RuntimeError("the audit log did not show the bench's mark within 30 s")

    def quiet(self, agents, seconds=2.0, timeout=120.0):
        """Wait until ``agents`` sent no request for ``seconds`` (late runs of a change belong to it)."""
        deadline = time.monotonic() + timeout
        last = self.count(agents)
        while time.monotonic() < deadline:
            time.sleep(seconds)
            now = self.count(agents)
            if now == last:
                return now
            last = now
        return last

    def mark(self):
        self.offset = self._flush()

    def count(self, agents, leases=False):
        """Requests since the mark by clients whose user agent starts with one of ``agents``; leader election's
        Lease calls apart (per operator, not per reconcile; ``leases=True`` counts only them); watches apart."""
        end = self._flush()
        n = 0
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            for line in handle.read(end - self.offset).splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                lease = (event.get("objectRef") or {}).get("resource") == "leases"
                if (event.get("userAgent") or "").startswith(tuple(agents)) and event.get("verb") != "watch" \
                        and lease == leases:
                    n += 1
        return n


# --- ours --------------------------------------------------------------------------------------------------------
def small_example(c, name="demo", nodeset="w", workers=2):
    docs = c.example()
    for doc in docs:
        if doc["kind"] == "SlurmCluster":
            doc["metadata"]["name"] = name
            doc["spec"].setdefault("slurm", {})["maxNodeCount"] = max(64, workers * 2)
        else:
            doc["metadata"]["name"] = nodeset
            doc["spec"]["clusterRef"]["name"] = name
            doc["spec"]["replicas"] = workers
            doc["spec"]["resources"] = {"requests": {"cpu": "10m", "memory": "600Mi"},
                                        "limits": {"memory": "600Mi"}}
    return docs


def converged(c, name):
    obj = c.get("SlurmCluster", name) or {}
    st = obj.get("status") or {}
    ok = [x for x in st.get("conditions") or [] if x["type"] == "Successful" and x["status"] == "True"]
    return bool(ok) and st.get("observedGeneration") == obj["metadata"].get("generation")


class Ours:
    label = "ours"
    agents = OURS_AGENTS
    # Seconds between the bench's looks at the check counter while it waits for a no-op check. Each look is a
    # /metrics request the measured process serves (~1 ms CPU in Python): ours checks on its 2 s timer, so looks
    # every 0.05 s were ~40 per check, most of the CPU the row showed (0.052 CPU-s; the check itself 0.004).
    check_poll = 1.0

    def __init__(self, api, kubeconfig, namespace, tmp, period="10m", workers=4):
        self.c = Cluster(api, namespace)
        self.ns = namespace
        self.tmp, self.kubeconfig, self.period, self.workers = tmp, kubeconfig, period, workers
        self.op = None

    def start(self, identity="bench"):
        watches = write_watches(str(self.tmp / ("watches-%s.yaml" % identity)), reconcile_period=self.period)
        self.op = OperatorProcess(self.tmp, self.kubeconfig, COLLECTIONS, self.ns, identity, watches,
                                  extra_args=["--max-workers", str(self.workers)],
                                  lease=("15s", "10s", "2s"))  # the shipped defaults (controller-runtime's too)
        wait_for(lambda: self.c.lease_holder() == identity, 120, what="leadership")
        wait_for(lambda: self.op.get("/readyz")[0] == 200, 60, what="caches synced")
        wait_for(lambda: warm(self.op.proc.pid), 120, 0, what="the forkserver warmed up")
        return self.op

    def stop(self):
        if self.op:
            self.op.terminate()
            self.op.cleanup()
            self.op = None

    @property
    def pid(self):
        return self.op.proc.pid

    def metric(self, name, **labels):
        return self.op.metric(name, **labels)

    def idle(self):
        return self.metric("soperator_operator_runs_in_flight") == 0 and self.metric(
            "soperator_operator_queue_depth") == 0

    # the cluster
    def create(self, name, workers, nodeset="w"):
        for doc in small_example(self.c, name, nodeset, workers):
            self.c.create(doc)

    def delete(self, name, nodeset):
        """The SlurmCluster (its teardown run removes the NodeSet's finalizer), then the NodeSet."""
        self.c.delete("SlurmCluster", name)
        wait_for(lambda: self.c.get("SlurmCluster", name) is None, 120, 0.2, what="%s torn down" % name)
        self.c.delete("NodeSet", nodeset)

    def gone(self, name):
        return self.c.get("SlurmCluster", name) is None

    def children(self, name):
        return {("StatefulSet", name + "-controller"), ("StatefulSet", name + "-login"),
                ("StatefulSet", name + "-w"), ("ConfigMap", name + "-slurm-config"),
                ("Secret", name + "-munge-key"), ("Secret", name + "-ssh-host-keys"),
                ("PersistentVolumeClaim", name + "-jail"), ("Service", name + "-controller"),
                ("Service", name + "-login"), ("Job", name + "-populate-jail-initial")}

    def live_children(self, name):
        c, have, selector = self.c, set(), "slurm.soperator.dev/cluster=" + name
        for kind, lister in (("StatefulSet", c.apps.list_namespaced_stateful_set),
                             ("ConfigMap", c.core.list_namespaced_config_map),
                             ("Secret", c.core.list_namespaced_secret),
                             ("PersistentVolumeClaim", c.core.list_namespaced_persistent_volume_claim),
                             ("Service", c.core.list_namespaced_service), ("Job", c.batch.list_namespaced_job)):
            have |= {(kind, i.metadata.name) for i in lister(self.ns, label_selector=selector).items}
        return have

    def settled(self, name):
        """Converged, nothing running or due, and every pod of the cluster Ready (kwok): pods still coming up start
        a run (held while they come, controller.SETTLE_QUIET), which belongs to what started them."""
        return converged(self.c, name) and self.idle() and all(
            (s.status.ready_replicas or 0) == s.spec.replicas for s in self.c.apps.list_namespaced_stateful_set(
                self.ns, label_selector="slurm.soperator.dev/cluster=" + name).items)

    def reconciles(self):
        return self.metric("soperator_operator_runs_total")

    def scale(self, replicas):
        self.c.scale("w", replicas)

    def worker_replicas(self, name):
        try:
            return self.c.apps.read_namespaced_stateful_set(name + "-w", self.ns).spec.replicas
        except Exception:  # noqa: BLE001  not there yet
            return None

    def checks(self):
        return self.metric("soperator_operator_drift_checks_total", result="skip")

    def resyncing(self):
        """The same operator with a 2 s reconcilePeriod (until then the shipped 10m: timed checks in a change's
        window would be counted as its requests)."""
        self.stop()
        self.period = "2s"
        self.start("bench-resync")

    def noop(self):
        """Nothing to do: the periodic check (every reconcilePeriod) does it by itself."""


# --- Soperator ---------------------------------------------------------------------------------------------------
class Soperator:
    label = "Soperator"
    agents = (soperator_side.AGENT,)
    check_poll = 0.05  # its check follows the bench's annotation within milliseconds: one or two looks each

    def __init__(self, api, kubeconfig, namespace, tmp, binary):
        from kubernetes import client
        self.api, self.ns, self.kubeconfig, self.tmp, self.binary = api, namespace, kubeconfig, tmp, binary
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.manager = self.marker = None
        self._noops = 0

    def start(self):
        self.marker = soperator_side.KruiseStatus(self.custom, self.ns)
        self.manager = soperator_side.Manager(self.binary, self.kubeconfig, self.ns,
                                              str(self.tmp / ("soperator-%s.log" % self.ns)))
        wait_for(lambda: self._get("/readyz", self.manager.probe_port) == 200, 60, what="Soperator ready")
        wait_for(lambda: "successfully acquired lease" in self.manager.logs().lower(), 120, what="Soperator leadership")

    def stop(self):
        if self.manager:
            self.manager.stop()
            self.manager = None
        if self.marker:
            self.marker.stop()
            self.marker = None

    @property
    def pid(self):
        return self.manager.proc.pid

    def _get(self, path, port):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as resp:
                return resp.status if path != "/metrics" else resp.read().decode()
        except OSError:
            return None

    def metric(self, name, **labels):
        text = self._get("/metrics", self.manager.metrics_port) or ""
        total = 0.0
        for line in text.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and all(
                    '%s="%s"' % kv in line for kv in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def idle(self):
        return self.metric("workqueue_depth") == 0 and self.metric("controller_runtime_active_workers") == 0

    def reconciles(self):
        return self.metric("controller_runtime_reconcile_total")

    def create(self, name, workers, nodeset="w"):
        claim, cluster, nodeset = soperator_side.cluster(name, self.ns, workers, nodeset=nodeset)
        self.core.create_namespaced_persistent_volume_claim(self.ns, claim)
        self.custom.create_namespaced_custom_object(soperator_side.GROUP, soperator_side.CLUSTER_VERSION, self.ns,
                                                    "slurmclusters", cluster)
        self.custom.create_namespaced_custom_object(soperator_side.GROUP, soperator_side.NODESET_VERSION, self.ns,
                                                    "nodesets", nodeset)

    def delete(self, name, nodeset):
        """The cluster, its NodeSet and its claim; its children go by their owner references (the garbage collector)."""
        for plural, obj in (("nodesets", nodeset), ("slurmclusters", name)):
            version = soperator_side.NODESET_VERSION if plural == "nodesets" else soperator_side.CLUSTER_VERSION
            self.custom.delete_namespaced_custom_object(soperator_side.GROUP, version, self.ns, plural, obj)
        self.core.delete_namespaced_persistent_volume_claim(name + "-jail", self.ns)

    def gone(self, name):
        try:
            self.custom.get_namespaced_custom_object(soperator_side.GROUP, soperator_side.CLUSTER_VERSION, self.ns,
                                                     "slurmclusters", name)
        except Exception:  # noqa: BLE001  404: gone
            return True
        return False

    def children(self, name):
        return {("StatefulSet", name + "-controller"), ("StatefulSet", name + "-login"), ("StatefulSet", "w"),
                ("ConfigMap", name + "-slurm-configs"), ("Secret", name + "-munge"),
                ("Secret", name + "-sshd-keys"), ("Service", name + "-controller-svc"),
                ("Service", name + "-login-svc"), ("Service", name + "-nodeset-w-svc"),
                ("Job", name + "-populate-jail")}

    def live_children(self, name):
        group, version, plural = soperator_side.KRUISE
        have = {("StatefulSet", i["metadata"]["name"])
                for i in self.custom.list_namespaced_custom_object(group, version, self.ns, plural)["items"]}
        have |= {("ConfigMap", i.metadata.name) for i in self.core.list_namespaced_config_map(self.ns).items}
        have |= {("Secret", i.metadata.name) for i in self.core.list_namespaced_secret(self.ns).items}
        have |= {("Service", i.metadata.name) for i in self.core.list_namespaced_service(self.ns).items}
        have |= {("Job", i.metadata.name) for i in self.batch.list_namespaced_job(self.ns).items}
        return have

    def settled(self, name):
        return self.idle()

    def scale(self, replicas):
        self.custom.patch_namespaced_custom_object_scale(soperator_side.GROUP, soperator_side.NODESET_VERSION,
                                                         self.ns, "nodesets", "w", {"spec": {"replicas": replicas}})

    def worker_replicas(self, name):
        group, version, plural = soperator_side.KRUISE
        try:
            return self.custom.get_namespaced_custom_object(group, version, self.ns, plural, "w")["spec"]["replicas"]
        except Exception:  # noqa: BLE001  not there yet
            return None

    def checks(self):
        return self.metric("controller_runtime_reconcile_total", controller="nodeset")

    def resyncing(self):
        """Soperator has no periodic check to shorten."""

    def noop(self):
        """A forced reconcile with nothing to change: its NodeSet controller reconciles the NodeSets of a
        SlurmCluster on any update of it (an annotation), its SlurmCluster controller on generation changes only."""
        self._noops += 1
        self.custom.patch_namespaced_custom_object(soperator_side.GROUP, soperator_side.CLUSTER_VERSION, self.ns,
                                                   "slurmclusters", "demo",
                                                   {"metadata": {"annotations": {"bench/noop": str(self._noops)}}})


# --- side by side -----------------------------------------------------------------------------------------------
def create_cost(side, name, nodeset):
    """(CPU-s, runs or reconciles) of one create of a 2-worker cluster, until it stays settled; then deleted."""
    cpu0, reconciles0 = tree_cpu(side.pid), side.reconciles()
    side.create(name, 2, nodeset=nodeset)
    stays_settled(side, name, 300)
    cost = (tree_cpu(side.pid) - cpu0, side.reconciles() - reconciles0)
    side.delete(name, nodeset)
    wait_for(lambda: side.gone(name), 120, 0.2, what="%s: %s deleted" % (side.label, name))
    return cost


def measure(side, audit, rows, idle_seconds, creates=3):
    """The table's rows for one side: the side's operator is running, its namespace empty. A create's CPU varies
    (an RSA key's generation alone takes 0.1-0.4 CPU-s): its row is the median of ``creates`` creates, with the
    least and the most of them below it, so that the spread shows."""
    name = "demo"
    costs = [create_cost(side, "pre%d" % i, "pre%dw" % i) for i in range(creates - 1)]
    stays_settled(side, None, 120)  # the deletions' work done
    audit.mark()
    peak = PeakPss(side.pid)
    cpu0, t0, reconciles0 = tree_cpu(side.pid), time.monotonic(), side.reconciles()
    side.create(name, 2)
    wait_for(lambda: side.children(name) <= side.live_children(name), 300, 0.02, what="%s: children" % side.label)
    rows["create -> all children exist (s)"][side.label] = time.monotonic() - t0
    stays_settled(side, name, 300)
    costs.append((tree_cpu(side.pid) - cpu0, side.reconciles() - reconciles0))
    rows["CPU-s of a create (until settled)"][side.label] = statistics.median(c for c, _ in costs)
    rows["  single creates: least CPU-s"][side.label] = min(c for c, _ in costs)
    rows["  single creates: most CPU-s"][side.label] = max(c for c, _ in costs)
    rows["runs (ours) / reconciles (Soperator) of a create"][side.label] = statistics.median(r for _, r in costs)
    log("%s: %d creates: CPU-s %s; runs/reconciles %s" % (side.label, len(costs), " ".join(
        "%.2f" % c for c, _ in costs), " ".join("%d" % r for _, r in costs)))
    rows["peak PSS of its process tree in a create (MiB)"][side.label] = peak.stop()
    rows["API requests of a create (until settled)"][side.label] = audit.quiet(side.agents)
    times, requests = [], []
    wait_for(lambda: side.settled(name), 120, 0.1, what="%s: settled" % side.label)
    audit.mark()
    audit.quiet(side.agents)
    for replicas in range(3, 3 + CHANGES):
        audit.mark()
        t0 = time.monotonic()
        side.scale(replicas)
        wait_for(lambda r=replicas: side.worker_replicas(name) == r, 120, 0.01, what="%s: StatefulSet at %d" % (
            side.label, replicas))
        times.append(time.monotonic() - t0)
        wait_for(lambda: side.settled(name), 120, 0.1, what="%s: settled" % side.label)
        requests.append(audit.quiet(side.agents))
    rows["replica change -> StatefulSet updated, p50 (s)"][side.label] = statistics.median(times)
    rows["API requests per replica change, p50"][side.label] = statistics.median(requests)
    run_phases = phases(side) if isinstance(side, Ours) else None  # before the restart below
    # idle, as shipped (ours: reconcilePeriod 10m)
    wait_for(lambda: side.settled(name), 120, 0.2, what="%s: settled" % side.label)
    cpu0, t0 = tree_cpu(side.pid), time.monotonic()
    time.sleep(idle_seconds)  # measuring idleness, not waiting for anything
    rows["idle CPU-s per minute (1 cluster)"][side.label] = (tree_cpu(side.pid) - cpu0) * 60 / (
        time.monotonic() - t0)
    rows["RSS of the operator process (MiB)"][side.label] = rss_mib(side.pid)
    rows["PSS of its process tree (MiB)"][side.label] = tree_pss_mib(side.pid)
    # no-op resyncs
    side.resyncing()
    wait_for(lambda: side.settled(name), 120, 0.2, what="%s: settled" % side.label)
    audit.mark()
    checks0, cpu0 = side.checks(), tree_cpu(side.pid)
    for _ in range(CHANGES):
        before = side.checks()
        side.noop()
        wait_for(lambda b=before: side.checks() > b, 120, side.check_poll, what="%s: a no-op check" % side.label)
    wait_for(lambda: side.settled(name), 120, SETTLE_POLL, what="%s: settled" % side.label)
    checks = side.checks() - checks0
    rows["CPU-s per no-op resync"][side.label] = (tree_cpu(side.pid) - cpu0) / checks
    rows["API requests per no-op resync"][side.label] = audit.count(side.agents) / checks
    return run_phases


def stays_settled(side, name, timeout, seconds=2.0):
    """Wait until ``side`` is settled (``name`` None: idle) and stays so for ``seconds`` (a check held or due in a
    moment is not over)."""
    def settled():
        return side.idle() if name is None else side.settled(name)

    def calm():
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not settled():
                return False
            time.sleep(SETTLE_POLL)  # sampling the window, not synchronising
        return True
    wait_for(lambda: settled() and calm(), timeout, SETTLE_POLL, what="%s: settled for %.0f s" % (side.label,
                                                                                               seconds))


ROWS = ("create -> all children exist (s)", "CPU-s of a create (until settled)", "  single creates: least CPU-s",
        "  single creates: most CPU-s", "runs (ours) / reconciles (Soperator) of a create",
        "peak PSS of its process tree in a create (MiB)", "API requests of a create (until settled)",
        "replica change -> StatefulSet updated, p50 (s)", "CPU-s per no-op resync",
        "idle CPU-s per minute (1 cluster)", "RSS of the operator process (MiB)", "PSS of its process tree (MiB)",
        "API requests per replica change, p50", "API requests per no-op resync")


def print_table(rows, soperator_note):
    print("\nside by side on one apiserver (kwok nodes)%s" % ("" if not soperator_note else ": " + soperator_note))
    print("%-48s | %10s | %10s | %8s" % ("metric", "Soperator", "ours", "ratio"))
    for key in ROWS:
        s, o = rows[key].get("Soperator"), rows[key].get("ours")
        ratio = "%.2f" % (o / s) if s and o is not None else "-"
        print("%-48s | %10s | %10s | %8s" % (key, "-" if s is None else "%.3f" % s, "-" if o is None else "%.3f" % o,
                                               ratio))
    print("not equivalent:")
    for note in soperator_side.NOT_EQUIVALENT:
        print("  - " + note)


def phases(ours):
    """Mean seconds per phase of our role runs so far (runner.PHASES, from the operator's metrics)."""
    from soperator_operator.runner import PHASES
    out = {}
    for phase in PHASES:
        count = ours.metric("soperator_operator_run_phase_seconds_count", phase=phase)
        if count:
            out[phase] = ours.metric("soperator_operator_run_phase_seconds_sum", phase=phase) / count
    return out, ours.metric("soperator_operator_run_duration_seconds_count"), ours.metric(
        "soperator_operator_run_duration_seconds_sum")


# --- ours at scale ------------------------------------------------------------------------------------------------
def bench_many(ours, figures, clusters, workers):
    c = ours.c
    names = ["c%03d" % i for i in range(clusters)]
    t0 = time.monotonic()
    for name in names:
        ours.create(name, workers, nodeset="%sw" % name)  # NodeSet names are per namespace
    wait_for(lambda: all(converged(c, n) for n in names), 600 + 20 * clusters, 2,
             what="%d clusters converged" % clusters)
    wait_for(ours.idle, 600, 0.5, what="idle")
    figures["%d clusters x %d workers: create -> all converged (s)" % (clusters, workers)] = time.monotonic() - t0
    figures["%d clusters x %d workers: role runs to converge them" % (clusters, workers)] = ours.metric(
        "soperator_operator_runs_total")
    wait_for(lambda: sum(1 for p in c.core.list_namespaced_pod(c.ns).items if p.status.phase == "Running")
             >= clusters * (workers + 2), 900, 5, what="pods running")
    time.sleep(15)  # the last pod events, and the runs they bring
    wait_for(ours.idle, 600, 0.5, what="idle")
    runs0, cpu0, t0 = ours.metric("soperator_operator_runs_total"), tree_cpu(ours.pid), time.monotonic()
    time.sleep(60)  # measuring a minute of idleness, not waiting for anything
    cpu1, elapsed = tree_cpu(ours.pid), time.monotonic() - t0
    figures["operator %d clusters idle (CPU-s/min)" % clusters] = (cpu1 - cpu0) * 60 / elapsed
    figures["%d clusters idle: role runs started in that minute" % clusters] = ours.metric(
        "soperator_operator_runs_total") - runs0
    figures["%d clusters: RSS of the operator (MiB)" % clusters] = rss_mib(ours.pid)
    figures["%d clusters: PSS of its process tree (MiB)" % clusters] = tree_pss_mib(ours.pid)
    # restart: time until every cluster has been looked at and nothing is queued
    ours.stop()
    t0 = time.monotonic()
    op = ours.start("bench-restart")
    wait_for(lambda: op.metric("soperator_operator_drift_checks_total") >= clusters and ours.idle(), 900, 0.2,
             what="caught up after restart")
    figures["%d clusters: operator restart -> all checked (s)" % clusters] = time.monotonic() - t0
    figures["%d clusters: role runs after the restart" % clusters] = op.metric("soperator_operator_runs_total")
    for name in names:
        c.delete("SlurmCluster", name)
    wait_for(lambda: not c.custom.list_namespaced_custom_object("slurm.soperator.dev", "v1alpha1", c.ns,
                                                                "slurmclusters")["items"], 1800, 2,
             what="clusters torn down")


def bench_site(c, kubeconfig, audit, tmp, figures, workers, keep=False):
    """site.yml on one cluster of ``workers`` workers in a namespace of its own: a fresh converge, then a no-op
    rerun once the StatefulSet's pods are all ready (wall time and API requests, by our user agent, of each)."""
    docs = small_example(c, "big", "w", workers)
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=kubeconfig, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    ns = "bench-site-" + uuid.uuid4().hex[:6]
    site_docs = json.loads(json.dumps(docs))
    for doc in site_docs:
        doc["metadata"]["namespace"] = ns
    varfile = tmp / "big.json"
    varfile.write_text(json.dumps({"soperator_clusters": [{"resources": site_docs, "wait": False}]}))
    argv = ["ansible-playbook", os.path.join(ROOT, "playbooks", "site.yml"), "-e", "@%s" % varfile,
            "-e", "cluster_wait_timeout=0"]
    site, t0 = Cluster(c.api, ns), time.monotonic()
    for label in ("converge", "no-op rerun"):
        if label != "converge":  # every pod ready (kwok done with them): the rerun meets a settled cluster
            wait_for(lambda: (site.apps.read_namespaced_stateful_set("big-w", ns).status.ready_replicas or 0)
                     >= workers, 1800, 2, what="%d pods ready" % workers)
            figures["site.yml, 1 cluster x %d workers: converge -> every pod ready (s)" % workers] = \
                time.monotonic() - t0
        audit.mark()
        t0 = time.monotonic()
        subprocess.run(argv, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        figures["site.yml, 1 cluster x %d workers: %s (s)" % (workers, label)] = time.monotonic() - t0
        figures["site.yml, 1 cluster x %d workers: %s (API requests)" % (workers, label)] = audit.count(
            ("soperator.slurm/",))
    if not keep:
        subprocess.run([localcluster.binpaths()["kubectl"], "--kubeconfig", kubeconfig, "delete", "namespace", ns,
                        "--wait=false"], check=False, capture_output=True)
    return ns


def bench_big(ours, kubeconfig, audit, figures, workers):
    c = ours.c
    bench_site(c, kubeconfig, audit, ours.tmp, figures, workers)
    t0 = time.monotonic()
    ours.create("big", workers)
    wait_for(lambda: ours.worker_replicas("big") == workers, 600, 0.05, what="big StatefulSet")
    figures["operator, 1 cluster x %d workers: create -> applied (s)" % workers] = time.monotonic() - t0
    wait_for(lambda: (c.apps.read_namespaced_stateful_set("big-w", c.ns).status.ready_replicas or 0) >= workers,
             3600, 5, what="%d pods ready" % workers)
    wait_for(ours.idle, 900, 1, what="idle")
    figures["operator, 1 cluster x %d workers: create -> %d pods ready and idle (s)" % (workers, workers)] = \
        time.monotonic() - t0
    figures["operator, 1 cluster x %d workers: role runs until idle" % workers] = ours.metric(
        "soperator_operator_runs_total")
    checks0, cpu0 = ours.checks(), tree_cpu(ours.pid)
    wait_for(lambda: ours.checks() >= checks0 + 5, 900, 0.5, what="5 periodic checks")
    figures["operator, 1 cluster x %d workers: no-op resync (CPU-s)" % workers] = (
        tree_cpu(ours.pid) - cpu0) / (ours.checks() - checks0)
    figures["operator, 1 cluster x %d workers: PSS of its process tree (MiB)" % workers] = tree_pss_mib(ours.pid)
    c.delete("SlurmCluster", "big")
    wait_for(lambda: c.get("SlurmCluster", "big") is None, 1800, 2, what="big torn down")


# --- setup -------------------------------------------------------------------------------------------------------
def ensure_cluster(nodes):
    """The local cluster of SOPERATOR_LOCALCLUSTER_DIR: reused when it runs, else started (True: stop it after)."""
    started = False
    if not localcluster.running(localcluster.load_state()):
        log("starting a local cluster in %s" % localcluster.STATE)
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "up", "--nodes", str(nodes)],
                       check=True, stdout=sys.stderr)
        started = True
    else:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "nodes", str(nodes)],
                       check=True, capture_output=True)
    return started


def ensure_collection():
    """The collection importable as ansible_collections.soperator.slurm (hack/collection-link.sh, as for the tests)."""
    subprocess.run([os.path.join(ROOT, "hack", "collection-link.sh")], check=True, stdout=subprocess.DEVNULL)


def kubectl_apply(kubeconfig, *paths):
    kubectl = localcluster.binpaths()["kubectl"]
    for path in paths:
        subprocess.run([kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "--force-conflicts",
                        "--field-manager", "soperator-bench", "-f", path], check=True, capture_output=True)
        # kubectl wait fails at once on a CRD without conditions yet (the large SlurmCluster schema right after
        # the apply: "accessor error: <nil>"): asked again until it waits.
        deadline = time.monotonic() + 60
        while True:
            waited = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "wait", "--for=condition=Established",
                                     "--timeout=60s", "-f", path], capture_output=True, text=True)
            if waited.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("CRDs in %s not Established: %s" % (path, waited.stderr.strip()))
            time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--big", type=int, default=5000)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idleness measured per side")
    parser.add_argument("--quick", action="store_true", help="only the side-by-side figures")
    parser.add_argument("--site-only", action="store_true", help="only site.yml on one cluster of --big workers "
                                                                  "(fresh converge and no-op rerun)")
    parser.add_argument("--no-scale", dest="scale", action="store_false", help="skip the 100-cluster and "
                                                                                "5,000-worker figures")
    args = parser.parse_args()
    scale = args.scale and not args.quick

    pods = 40 + (args.clusters * (args.workers + 3) + args.big if scale else 0) + (args.big if args.site_only else 0)
    started = ensure_cluster(max(3, pods // 100 + 2))
    ensure_collection()
    kubeconfig = localcluster.state_path("kubeconfig")
    kubectl_apply(kubeconfig, os.path.join(ROOT, "roles", "crds", "files"))

    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    api.user_agent = BENCH_AGENT
    core = client.CoreV1Api(api)
    audit = Audit(localcluster.state_path("logs", "audit.log"), core)
    tmp = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    namespaces, figures, sides = [], {}, []
    rows = dict((key, {}) for key in ROWS)

    def namespace(prefix):
        name = "%s-%s" % (prefix, uuid.uuid4().hex[:6])
        core.create_namespace({"metadata": {"name": name}})
        wait_for(lambda: core.list_namespaced_service_account(name).items, 30, 0.1, what="default ServiceAccount")
        namespaces.append(name)
        return name

    soperator = soperator_side.locate()
    note = None
    if soperator is None:
        note = ("Soperator not measured: no build of nebius/soperator %s found (set SOPERATOR_MANAGER and "
                "SOPERATOR_CRDS, or build it into ~/.cache/soperator/soperator-%s/)" % (soperator_side.COMMIT,
                                                                                       soperator_side.COMMIT))
    else:
        kubectl_apply(kubeconfig, *sorted(os.path.join(soperator[1], f) for f in os.listdir(soperator[1])
                                          if f.startswith("slurm.nebius.ai_") and f.endswith(".yaml")))
        crd = tmp / "kruise-statefulsets.json"
        crd.write_text(json.dumps(soperator_side.kruise_statefulset_crd()))
        kubectl_apply(kubeconfig, str(crd))

    ours = None
    if args.site_only:
        site = {}
        try:
            bench_site(Cluster(api, namespace("bench-site")), kubeconfig, audit, tmp, site, args.big)
        finally:
            report_scale(site)
            for name in namespaces:
                core.delete_namespace(name)
            if started and os.environ.get("SOPERATOR_KEEP_CLUSTER") != "1":
                subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "down"], check=False,
                               stdout=sys.stderr)
        return
    try:
        order = ["Soperator", "ours"] if soperator else ["ours"]
        for label in order:  # alternating: each alone on the apiserver while measured
            if label == "ours":
                side = ours = Ours(api, kubeconfig, namespace("bench-ours"), tmp)
            else:
                side = Soperator(api, kubeconfig, namespace("bench-soperator"), tmp, soperator[0])
            sides.append(side)
            log("measuring %s" % label)
            side.start()
            run_phases = measure(side, audit, rows, args.idle)
            if run_phases:
                figures["phases"] = run_phases
            side.stop()
        report_single(rows, figures, note)
        if scale:
            log("%d clusters x %d workers" % (args.clusters, args.workers))
            ours = Ours(api, kubeconfig, namespace("bench-many"), tmp, period="10m", workers=4)
            sides.append(ours)
            ours.start()
            many = {}
            try:
                bench_many(ours, many, args.clusters, args.workers)
            finally:
                ours.stop()
                key = "operator %d clusters idle (CPU-s/min)" % args.clusters
                if key in many:
                    print("operator %d clusters idle: %.3f CPU-s/min" % (args.clusters, many.pop(key)), flush=True)
                report_scale(many)
            log("%d workers" % args.big)
            ours = Ours(api, kubeconfig, namespace("bench-big"), tmp, period="30s")
            sides.append(ours)
            ours.start()
            big = {}
            try:
                bench_big(ours, kubeconfig, audit, big, args.big)
            finally:
                ours.stop()
                report_scale(big)
    finally:
        for side in sides:
            side.stop()
        for name in namespaces:
            Cluster(api, name).release_finalizers()
            core.delete_namespace(name)
        if started and os.environ.get("SOPERATOR_KEEP_CLUSTER") != "1":
            subprocess.run([sys.executable, os.path.join(ROOT, "hack", "localcluster.py"), "down"], check=False,
                           stdout=sys.stderr)


def report_single(rows, figures, note):
    print("operator benchmark (%d cores, load %.1f)" % (os.cpu_count(), os.getloadavg()[0]))
    print("operator no-op resync: %.4f CPU-s" % rows["CPU-s per no-op resync"]["ours"])
    print("operator change->applied p50: %.3f s" % rows["replica change -> StatefulSet updated, p50 (s)"]["ours"])
    print_table(rows, note)
    means, runs, total = figures.pop("phases", ({}, 0, 0))
    if runs:
        print("\nwhere a role run's time goes (ours, mean of %d runs, %.2f s each)" % (runs, total / runs))
        for phase, seconds in means.items():
            print("  %-20s %.3f s" % (phase, seconds))
    sys.stdout.flush()


def report_scale(figures):
    if figures:
        print("\nscale (ours, load %.1f)" % os.getloadavg()[0])
        for key, value in figures.items():
            print("  %-72s %s" % (key, ("%.3f" % value) if isinstance(value, float) else value))
    sys.stdout.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
