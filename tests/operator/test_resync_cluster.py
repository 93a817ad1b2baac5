"""The runtime's resync against the real apiserver, with the real runner (warm forkserver, real role runs).

The controller runs in this process, so every process a run needs can be counted where it is asked for: the
runner's forkserver (each role run is one ``Process`` of it) and forks of this process itself (a subprocess
would be one). kwok pods run nothing, so the cluster converges but is never Ready: exactly the case where a
runtime that reran not-ready clusters on each event or restart would never go quiet.
"""

import logging
import os
import threading

import pytest
from operator_harness import Cluster, wait_for, write_watches

pytestmark = pytest.mark.cluster

_FORKS = {"n": 0}
_REGISTERED = []


def _count_forks():
    if not _REGISTERED:
        os.register_at_fork(after_in_parent=lambda: _FORKS.__setitem__("n", _FORKS["n"] + 1))
        _REGISTERED.append(True)


class CountingContext:
    """The runner's forkserver, counting the processes it is asked to start."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.started = 0
        self.lock = threading.Lock()

    def Process(self, *args, **kwargs):  # noqa: N802  (multiprocessing's name)
        with self.lock:
            self.started += 1
        return self._ctx.Process(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


@pytest.fixture(scope="module")
def crds(apply_crds):
    apply_crds("soperator-tests")


@pytest.fixture
def runtime(tmp_path, kubeconfig, collections_path, namespace, crds, k8s):
    """Start controllers in this process; each gets a fresh memory (a restarted operator), the same runner."""
    from soperator_operator.__main__ import installer_policy
    from soperator_operator.controller import Controller
    from soperator_operator.kube import Kube, api_client
    from soperator_operator.metrics import OperatorMetrics
    from soperator_operator.runner import RoleRunner
    from soperator_operator.watches import load_watches

    saved_env = dict(os.environ)
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = collections_path
    runner = RoleRunner(work_dir=str(tmp_path / "work"), env={"KUBECONFIG": kubeconfig,
                                                              "K8S_AUTH_KUBECONFIG": kubeconfig})
    runner.ctx = CountingContext(runner.ctx)
    runner.start()  # the forkserver (one fork, before anything is counted)
    _count_forks()
    watches = load_watches(write_watches(str(tmp_path / "watches.yaml"), reconcile_period="1s"))
    controllers = []

    def start():
        kube = Kube(api_client(kubeconfig, None, "soperator-operator/test"), identity="test")
        ctl = Controller(kube, runner, watches, namespaces=[namespace], metrics=OperatorMetrics(), max_workers=2,
                         backoff_cap=5.0, policy=installer_policy(os.environ))  # as __main__ reads it
        threading.Thread(target=ctl.start, daemon=True).start()
        assert ctl.synced.wait(60)
        controllers.append(ctl)
        return ctl

    yield start, runner
    for ctl in controllers:
        ctl.stop(timeout=30)
    runner.close()
    Cluster(k8s, namespace).release_finalizers()
    os.environ.clear()
    os.environ.update(saved_env)


def idle(ctl):
    return ctl.queue.running() == 0 and ctl.queue.depth() == 0


def settled(ctl, c, runner, quiet=3.0):
    """Converged (status for generation 1) and no run started for ``quiet`` seconds of 1 s resyncs."""
    wait_for(lambda: (c.get("SlurmCluster", "demo") or {}).get("status", {}).get("observedGeneration") == 1, 180,
             what="converged")

    def quiet_now():
        before = runner.ctx.started
        skips = ctl.metrics.checks.value(kind="SlurmCluster", result="skip")
        wait_for(lambda: ctl.metrics.checks.value(kind="SlurmCluster", result="skip") >= skips + quiet, 60,
                 0.1, what="periodic checks")
        return runner.ctx.started == before and idle(ctl)

    wait_for(quiet_now, 180, 0, what="no run for %.0f periodic checks" % quiet)


def example_cluster(k8s, namespace):
    """The example created in ``namespace``, as a user's ``kubectl apply`` would."""
    c = Cluster(k8s, namespace)
    for doc in c.example():
        c.create(doc)
    return c


def forkserver_children(runner):
    """Live children of the runner's forkserver (an ansible run in flight would be one)."""
    pid = runner.server.pid
    kids = []
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task), encoding="ascii") as handle:
            kids += handle.read().split()
    return kids


def test_a_resync_with_nothing_to_do_starts_no_process_and_a_real_difference_does(runtime, k8s, namespace):
    start, runner = runtime
    ctl = start()
    c = example_cluster(k8s, namespace)
    settled(ctl, c, runner)

    forks, runs, started = _FORKS["n"], ctl.metrics.runs.value(kind="SlurmCluster", result="success"), \
        runner.ctx.started
    skips = ctl.metrics.checks.value(kind="SlurmCluster", result="skip")
    for _ in range(10):  # ten 1 s resyncs, sampled: nothing forked, nothing alive under the forkserver
        wait_for(lambda s=skips: ctl.metrics.checks.value(kind="SlurmCluster", result="skip") > s, 30, 0.05,
                 what="a periodic check")
        skips = ctl.metrics.checks.value(kind="SlurmCluster", result="skip")
        assert forkserver_children(runner) == []
    assert runner.ctx.started == started
    assert _FORKS["n"] == forks
    assert ctl.metrics.runs.value(kind="SlurmCluster", result="success") == runs

    # a real difference: the role runs (a process is started) and repairs it
    c.core.delete_namespaced_config_map("demo-slurm-config", namespace)
    wait_for(lambda: "demo-slurm-config" in c.names("configmaps"), 60, what="ConfigMap recreated")
    assert runner.ctx.started > started


def test_a_deleted_munge_key_secret_runs_the_role(runtime, k8s, namespace, caplog):
    """Seen by the timer's GET by name (Secrets are never listed); the role decides what to do about it."""
    start, runner = runtime
    ctl = start()
    c = example_cluster(k8s, namespace)
    settled(ctl, c, runner)
    started = runner.ctx.started
    with caplog.at_level(logging.INFO, logger="soperator_operator.controller"):
        c.core.delete_namespaced_secret("demo-munge-key", namespace)
        wait_for(lambda: any("Secret demo-munge-key is missing" in r.getMessage() for r in caplog.records), 30,
                 0.1, what="a run for the deleted munge key")
        # the reason is logged just before the run's process starts: wait for the start, do not sample it
        wait_for(lambda: runner.ctx.started > started, 30, 0.05, what="the role run's process started")


def test_a_restarted_operator_reruns_no_never_ready_cluster(runtime, k8s, namespace):
    """The inputs of the last run are in the status: a new operator finds them unchanged and runs nothing; a pod
    change while it was away would run it."""
    start, runner = runtime
    first = start()
    c = example_cluster(k8s, namespace)
    settled(first, c, runner)
    assert c.condition("SlurmCluster", "demo", "Ready")["status"] == "False"  # kwok: never Ready
    first.stop(timeout=30)

    started = runner.ctx.started
    second = start()
    wait_for(lambda: second.metrics.checks.value(kind="SlurmCluster", result="skip") >= 5, 60, 0.1,
             what="five checks by the new operator")
    assert runner.ctx.started == started
    assert second.metrics.runs.value(kind="SlurmCluster", result="success") == 0
    second.stop(timeout=30)

    c.core.delete_namespaced_pod("demo-cpu-0", namespace, grace_period_seconds=0)
    third = start()
    wait_for(lambda: third.metrics.runs.value(kind="SlurmCluster", result="success") >= 1, 60, 0.1,
             what="a run for the replaced pod")


def test_an_optional_kind_not_served_is_told_from_a_missing_object(k8s, namespace):
    """The lookup's excuse for an optional data kind (a MariaDB where mariadb-operator is not installed): the API
    server answers 404 for the object either way, discovery tells which."""
    from ansible_collections.soperator.slurm.plugins.module_utils import kinds
    from soperator_operator.cache import Resource
    from soperator_operator.kube import Kube

    kube = Kube(k8s, identity="test")
    as_resource = dict((k.kind, Resource(k.group, k.version, k.plural, k.kind)) for k in kinds.OWNED)
    mariadb = as_resource["MariaDB"]
    assert not kube.exists(mariadb.path(namespace) + "/nothing")
    assert not kube.serves(mariadb)
    assert not kube.exists(as_resource["Secret"].path(namespace) + "/nothing")
    assert kube.serves(as_resource["Secret"]) and kube.serves(as_resource["StatefulSet"])
