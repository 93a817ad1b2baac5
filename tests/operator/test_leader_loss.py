"""Leadership lost means no more writes, at once: the runtime on the host against the real local kube-apiserver.

As client-go's leader election does, a replica that can no longer prove it holds the Lease stops: runs in flight
are killed (with every process they started) and the process exits, so that the pod restarts as a standby. Two
ways to lose it: another replica takes the Lease (we were too slow), or the API server stops answering (no renewal
within the renew deadline, whatever a blocked call does). A run is kept in flight on purpose (the role waits for a
Ready that kwok never gives), so "killed" is observed, not assumed.

The safety property is a bound: the old leader stops acting (its process gone, and every process of its runs) no
later than its Lease expires, i.e. before any standby may take the Lease over and start writing. That is why the
renew deadline must be below the lease duration. ``judge_stop`` asserts it from the Lease itself (renewTime and
leaseDurationSeconds, as the API server stores them) and the moment the stop was seen; a leader that is paused past
its lease (a stopped process, as a frozen VM or a long GC pause would leave it) is shown to fail it.
"""

import os
import select
import signal
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlparse

import pytest
import yaml
from operator_harness import LEASE, Cluster, OperatorProcess, wait_for, write_watches

from soperator_operator.watches import parse_duration

pytestmark = pytest.mark.cluster

RENEW_DEADLINE = parse_duration(LEASE[1])  # the operator's flag, parsed as the operator parses it


def lease_expiry(renewed, duration_seconds):
    return renewed + timedelta(seconds=duration_seconds)


def judge_stop(renewed, duration_seconds, stopped_at, renew_deadline):
    """The bound leader election exists for: the old leader stopped (``stopped_at``) no later than its Lease
    expires, the last renewal the API server stored (``renewed``, its renewTime) plus ``duration_seconds`` (its
    leaseDurationSeconds). A standby counts the duration from when it first saw that renewal (lease.decide), never
    earlier, so before then no other replica can be writing. Returns the figures; fails, naming them, when the stop
    came later, or when the renew deadline leaves no room before the expiry."""
    expiry = lease_expiry(renewed, duration_seconds)
    figures = {"renew deadline": renew_deadline, "lease duration": float(duration_seconds),
               "last renewal -> stopped": (stopped_at - renewed).total_seconds(),
               "stopped -> lease expiry": (expiry - stopped_at).total_seconds()}
    assert renew_deadline < duration_seconds, (
        "renew deadline %.1f s is not below the lease duration %d s: a leader may act after its lease expired"
        % (renew_deadline, duration_seconds))
    assert stopped_at <= expiry, (
        "the old leader stopped %.3f s after its lease expired (renewed %s, lease %d s, stopped %s): a standby could "
        "have been writing meanwhile" % ((stopped_at - expiry).total_seconds(), renewed.isoformat(),
                                         duration_seconds, stopped_at.isoformat()))
    return figures


@pytest.mark.parametrize("offset,late", [(-1.0, False), (-0.001, False), (0.0, False), (0.001, True), (2.0, True)])
def test_the_bound_fails_a_leader_that_stops_after_its_lease(offset, late):
    """The judge alone (no cluster): a stop at or before the expiry passes, any later one fails."""
    renewed = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    stopped = renewed + timedelta(seconds=4 + offset)
    if late:
        with pytest.raises(AssertionError, match="stopped %.3f s after its lease expired" % offset):
            judge_stop(renewed, 4, stopped, 3.0)
    else:
        assert judge_stop(renewed, 4, stopped, 3.0)["stopped -> lease expiry"] == pytest.approx(-offset)


def test_the_bound_needs_a_renew_deadline_below_the_lease_duration():
    renewed = datetime(2025, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(AssertionError, match="renew deadline 4.0 s is not below the lease duration 4 s"):
        judge_stop(renewed, 4, renewed, 4.0)


@pytest.fixture(scope="module")
def crds(apply_crds):
    apply_crds("soperator-tests")


def blocking_watches(path):
    """The shipped watches file, but the cluster role waits (up to 10 min) for a Ready that kwok never gives:
    a run that stays in flight."""
    write_watches(path, reconcile_period="1h")
    with open(path, encoding="utf-8") as handle:
        entries = yaml.safe_load(handle)
    for entry in entries:
        if entry["kind"] == "SlurmCluster":
            entry["vars"].update(cluster_wait=True, cluster_wait_timeout=600)
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(entries, handle)
    return path


def descendants(pid):
    """{pid: start time} of every live process below ``pid`` (by parent links, runs' own sessions included)."""
    children, starts = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        starts[int(entry)] = fields[19]
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def alive(procs):
    """Those of ``procs`` ({pid: start time}) still running (the same process, not a reused pid)."""
    left = []
    for pid, start in procs.items():
        try:
            with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            left.append(pid)
    return left


def leading_with_a_run_in_flight(operators, cluster, identity, kubeconfig=None):
    op = operators(identity, **({"kubeconfig": kubeconfig} if kubeconfig else {}))
    wait_for(lambda: cluster.lease_holder() == identity, 60, what="%s leading" % identity)
    for doc in cluster.example():
        cluster.create(doc)
    wait_for(lambda: op.metric("soperator_operator_runs_in_flight") >= 1, 90, what="a run in flight")
    # the run's process follows its count at once, or once the forkserver has done its imports
    runs = wait_for(lambda: (lambda found: found if len(found) >= 2 else None)(descendants(op.proc.pid)), 60,
                    0.05, what="the forkserver and a run below the operator")
    return op, runs


@pytest.fixture
def operators(tmp_path, kubeconfig, collections_path, namespace, crds, k8s):
    started = []
    watches = blocking_watches(str(tmp_path / "watches.yaml"))

    def start(identity, kubeconfig=kubeconfig):
        op = OperatorProcess(tmp_path, kubeconfig, collections_path, namespace, identity, watches, lease=LEASE)
        started.append(op)
        return op

    yield start
    for op in started:
        op.cleanup()
        if os.environ.get("SOPERATOR_SHOW_OPERATOR_LOGS") == "1":
            print("==== %s ====\n%s" % (op.identity, op.logs()))
    Cluster(k8s, namespace).release_finalizers()


@pytest.fixture
def cluster(k8s, namespace):
    return Cluster(k8s, namespace)


def test_a_stolen_lease_stops_the_leader_and_kills_its_runs(operators, cluster):
    op, runs = leading_with_a_run_in_flight(operators, cluster, "victim")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.coord.patch_namespaced_lease("soperator-operator", cluster.ns, {"spec": {
        "holderIdentity": "thief", "acquireTime": now, "renewTime": now, "leaseDurationSeconds": 3600}})
    assert op.proc.wait(30) == 1, op.logs()[-3000:]
    logs = op.logs()
    assert "taken by thief" in logs and "lost leadership" in logs, logs[-3000:]
    assert wait_for(lambda: not alive(runs), 10, what="every process of the run gone"), alive(runs)
    assert cluster.lease_holder() == "thief"  # the loser does not release or overwrite it


class FreezableProxy:
    """A TCP relay to the API server that can stop relaying without closing anything: calls hang, as they do
    when an API server or the network to it stalls."""

    def __init__(self, target):
        self.target = target
        self.frozen = threading.Event()
        self.closed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, a, b):
        peers = {a: b, b: a}
        try:
            while not self.closed.is_set():
                if self.frozen.is_set():
                    time.sleep(0.1)  # hold both ends open, relay nothing
                    continue
                readable, _, _ = select.select(list(peers), [], [], 0.1)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except OSError:
            return
        finally:
            a.close()
            b.close()

    def close(self):
        self.closed.set()
        self.listener.close()


def stop_seen(op, runs, timeout=60):
    """The moment the old leader was seen stopped: its process exited and no process of its run is left (polled
    every 10 ms: seen a little late, never early). Returns (exit code, wall time)."""
    deadline = time.monotonic() + timeout
    while op.proc.poll() is None or alive(runs):
        assert time.monotonic() < deadline, "still acting after %d s: operator exit %s, run processes %s" % (
            timeout, op.proc.poll(), alive(runs))
        time.sleep(0.01)  # polling cadence
    return op.proc.returncode, datetime.now(timezone.utc)


def last_renewal(cluster):
    """The Lease as the API server stores it: (renewTime, leaseDurationSeconds)."""
    spec = cluster.coord.read_namespaced_lease("soperator-operator", cluster.ns).spec
    return spec.renew_time, spec.lease_duration_seconds


@pytest.mark.parametrize("paused", [False, True], ids=["as-is", "paused-past-its-lease"])
def test_an_api_server_that_stops_answering_stops_the_leader_before_its_lease_expires(operators, cluster,
                                                                                      kubeconfig, tmp_path, paused):
    """Frozen API server: the leader cannot renew, stops at its renew deadline, and is gone with its runs before the
    Lease it last renewed expires. Paused (SIGSTOP) from the freeze until past that expiry, the same leader stops
    late, and the same judgement fails: the bound is measured, not assumed."""
    with open(kubeconfig, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    server = urlparse(config["clusters"][0]["cluster"]["server"])
    proxy = FreezableProxy((server.hostname, server.port))
    config["clusters"][0]["cluster"]["server"] = "https://%s:%d" % (server.hostname, proxy.port)
    proxied = str(tmp_path / "kubeconfig-proxied")
    with open(proxied, "w", encoding="utf-8") as handle:
        yaml.safe_dump(config, handle)
    try:
        op, runs = leading_with_a_run_in_flight(operators, cluster, "stalled", kubeconfig=proxied)
        proxy.frozen.set()
        frozen_at = datetime.now(timezone.utc)
        if paused:
            os.kill(op.proc.pid, signal.SIGSTOP)
            # past the expiry of the Lease as stored (re-read: a renewal relayed just before the freeze may land)
            wait_for(lambda: datetime.now(timezone.utc) > lease_expiry(*last_renewal(cluster)) + timedelta(
                seconds=0.5), 30, 0.05, what="the paused leader's lease expired")
            assert alive(runs), "the paused leader's run should still be running past its lease"
            os.kill(op.proc.pid, signal.SIGCONT)
        code, stopped_at = stop_seen(op, runs)
        assert code == 1, op.logs()[-3000:]
        assert "could not renew lease" in op.logs() and "lost leadership" in op.logs(), op.logs()[-3000:]
        renewed, duration = last_renewal(cluster)
        if paused:
            with pytest.raises(AssertionError, match="after its lease expired") as late:
                judge_stop(renewed, duration, stopped_at, RENEW_DEADLINE)
            print("\noperator: paused past its lease, judged: %s" % str(late.value).split("\n")[0])
            return
        figures = judge_stop(renewed, duration, stopped_at, RENEW_DEADLINE)
        print("\noperator: API server frozen -> leader and its run stopped in %.2f s; %s" % (
            (stopped_at - frozen_at).total_seconds(), ", ".join("%s %.2f s" % kv for kv in figures.items())))
    finally:
        proxy.close()
