"""Leadership lost means no more writes, at once: the runtime on the host against the real local kube-apiserver.

As client-go's leader election does, a replica that can no longer prove it holds the Lease stops: runs in flight
are killed (with every process they started) and the process exits, so that the pod restarts as a standby. Two
ways to lose it: another replica takes the Lease (we were too slow), or the API server stops answering (no renewal
within the renew deadline, whatever a blocked call does). A run is kept in flight on purpose (the role waits for a
Ready that kwok never gives), so "killed" is observed, not assumed.
"""

import os
import select
import socket
import threading
import time
from datetime import datetime, timezone
from urllib.parse import urlparse

import pytest
import yaml
from operator_harness import Cluster, OperatorProcess, wait_for, write_watches

pytestmark = pytest.mark.cluster

LEASE = ("4s", "3s", "0.5s")  # duration, renew deadline, retry period


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
    runs = descendants(op.proc.pid)
    assert len(runs) >= 2, "expected the forkserver and a run below the operator: %s" % runs
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


def test_an_api_server_that_stops_answering_stops_the_leader_within_its_renew_deadline(operators, cluster,
                                                                                          kubeconfig, tmp_path):
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
        t0 = time.monotonic()
        assert op.proc.wait(60) == 1, op.logs()[-3000:]
        print("\noperator: API server frozen -> leader stopped in %.1f s (renew deadline %s)"
              % (time.monotonic() - t0, LEASE[1]))
        assert "could not renew lease" in op.logs() and "lost leadership" in op.logs(), op.logs()[-3000:]
        assert wait_for(lambda: not alive(runs), 10, what="every process of the run gone"), alive(runs)
    finally:
        proxy.close()
