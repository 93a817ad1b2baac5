"""Entry point: ``python -m soperator_operator --watches watches.yaml`` (like operator-sdk's ``make run``)."""

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from ansible_collections.soperator.slurm.plugins.module_utils import names

from . import __version__
from .metrics import OperatorMetrics
from .watches import load_watches, parse_duration

if TYPE_CHECKING:
    from ansible_collections.soperator.slurm.plugins.module_utils.api.policy import Policy

log = logging.getLogger("soperator_operator")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="soperator_operator", description=__doc__)
    p.add_argument("--watches", default=os.environ.get("WATCHES_FILE", "/opt/ansible/watches.yaml"),
                   help="operator-sdk watches file")
    p.add_argument("--namespace", action="append", default=None,
                   help="watch only this namespace (repeatable); default: WATCH_NAMESPACE (comma-separated), "
                        "else all namespaces")
    p.add_argument("--max-workers", type=int, default=int(os.environ.get("MAX_WORKERS", "4")),
                   help="role runs in parallel (different objects); one object never runs twice at once")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                   help="kubeconfig (default: in-cluster config, else KUBECONFIG)")
    p.add_argument("--context", default=None)
    p.add_argument("--leader-elect", dest="leader_elect", action="store_true", default=True)
    p.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    p.add_argument("--lease-name", default="soperator-operator")
    p.add_argument("--lease-namespace", default=None, help="default: the pod's namespace")
    p.add_argument("--lease-duration", default="15s")
    p.add_argument("--renew-deadline", default="10s")
    p.add_argument("--retry-period", default="2s")
    p.add_argument("--identity", default=None, help="lease holder identity (default: POD_NAME, else host_pid)")
    p.add_argument("--health-bind", default="0.0.0.0:8080",
                   help="host:port for /healthz, /readyz and /metrics (port 0: any free port)")
    p.add_argument("--work-dir", default=None, help="where run directories live (default: $TMPDIR)")
    p.add_argument("--shutdown-timeout", default="60s", help="on SIGTERM, how long a run in flight may finish")
    p.add_argument("--run-timeout", default="1h", help="a run longer than this is cancelled")
    p.add_argument("--backoff-cap", default="5m", help="longest wait between retries of a transient failure")
    p.add_argument("--reconcile-period", default=os.environ.get("RECONCILE_PERIOD") or None,
                   help="override every watch's reconcilePeriod (for drift-checked kinds: the in-memory check)")
    p.add_argument("--watch-nodes", action="store_true", default=False,
                   help="watch Kubernetes Nodes: a cordon runs the converge of the clusters with workers on it "
                        "(needs get/list/watch on nodes: the role's operator_read_nodes)")
    p.add_argument("--status-period", default=os.environ.get("STATUS_PERIOD", "30s"),
                   help="how often Slurm's node states are read into NodeSet counts and worker pod conditions "
                        "(one scontrol exec per cluster; 0: only when the role runs)")
    p.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    p.add_argument("--version", action="version", version=__version__)
    args = p.parse_args(argv)
    if args.namespace is None:
        env = os.environ.get("WATCH_NAMESPACE", "")
        args.namespace = [n.strip() for n in env.split(",") if n.strip()]
    return args



def installer_policy(environ: Mapping[str, str]) -> "Policy":
    """The installer's policy the role's runs get (watches.yaml: cluster_policy from the same variable),
    normalized; ValueError when it is malformed."""
    from ansible_collections.soperator.slurm.plugins.module_utils.api import policy
    raw = environ.get(names.POLICY_ENV) or "{}"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError("not JSON: %s" % exc) from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return policy.normalize(value)


def default_identity() -> str:
    return os.environ.get("POD_NAME") or "%s_%d" % (socket.gethostname(), os.getpid())


def limit_malloc_arenas(arenas: int = 2) -> None:
    """glibc gives each thread that allocates an arena of its own (up to 8 per core), each holding freed memory of
    its own; the operator's threads mostly wait on the GIL and the network: two are enough (MALLOC_ARENA_MAX)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc
        return
    if "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(-8, arenas)  # M_ARENA_MAX


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    limit_malloc_arenas()  # before any thread
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s")
    # Imported here so --help works without the kubernetes client.
    from .controller import Controller
    from .kube import Kube, api_client, own_namespace
    from .leader import LeaderElector
    from .runner import RoleRunner
    from .server import serve

    watches = load_watches(args.watches)
    try:
        policy = installer_policy(os.environ)
    except ValueError as exc:
        log.error("%s: %s", names.POLICY_ENV, exc)
        return 2
    if args.reconcile_period:
        import dataclasses
        period = parse_duration(args.reconcile_period)
        watches = [dataclasses.replace(w, reconcile_period=period) for w in watches]
    identity = args.identity or default_identity()
    env: dict[str, str] = {}
    if args.kubeconfig:
        env.update(KUBECONFIG=os.path.abspath(args.kubeconfig), K8S_AUTH_KUBECONFIG=os.path.abspath(args.kubeconfig))
    if args.context:
        env["K8S_AUTH_CONTEXT"] = args.context
    runner = RoleRunner(work_dir=args.work_dir, env=env, timeout=parse_duration(args.run_timeout))
    # The forkserver is forked now, before any thread starts, and shares what this process imported; it imports
    # Ansible and the collection's converge code once, in the background (a few CPU-seconds): standbys too, so
    # that a takeover reconciles at once.
    runner.start(wait=False)
    metrics = OperatorMetrics()
    lease_call_timeout = max(1.0, parse_duration(args.renew_deadline) / 2)
    kube = Kube(api_client(args.kubeconfig, args.context, "soperator-operator/" + __version__), identity=identity,
                lease_timeout=lease_call_timeout)
    controller = Controller(kube, runner, watches, namespaces=args.namespace, max_workers=args.max_workers,
                            metrics=metrics, backoff_cap=parse_duration(args.backoff_cap), policy=policy)
    done = threading.Event()
    state = {"exit": 0, "started": False}
    start_lock = threading.Lock()

    def start_controller() -> None:
        with start_lock:
            if state["started"] or done.is_set():
                return
            state["started"] = True
        metrics.leader.set(1)
        log.info("leading: watching %s in %s", ", ".join(w.kind for w in watches),
                 ", ".join(args.namespace) or "all namespaces")
        controller.start()
        if args.watch_nodes:
            from .nodes import NodeWatch
            NodeWatch(kube, controller).start()
        if parse_duration(args.status_period) > 0:
            from .slurmstatus import SlurmStatus
            SlurmStatus(kube, controller, parse_duration(args.status_period)).start()

    def lost_leadership() -> None:
        # As client-go's leader election: stop at once. Runs in flight are killed (SSA and scontrol are
        # idempotent, the new leader redoes whatever was cut short) and the process exits; the pod restarts.
        metrics.leader.set(0)
        log.error("lost leadership: cancelling runs in flight and exiting")
        controller.abort()
        runner.close(helpers=True)
        logging.shutdown()
        os._exit(1)

    elector = None
    if args.leader_elect:
        elector = LeaderElector(kube, args.lease_namespace or own_namespace(), args.lease_name, identity,
                                lease_duration=parse_duration(args.lease_duration),
                                renew_deadline=parse_duration(args.renew_deadline),
                                retry_period=parse_duration(args.retry_period),
                                on_started=lambda: threading.Thread(target=start_controller, daemon=True).start(),
                                on_stopped=lost_leadership)

    def ready() -> bool:
        if elector is not None:
            return elector.api_ok.is_set() and (not elector.is_leader or controller.synced.is_set())
        return controller.synced.is_set()

    def metrics_text() -> str:
        controller.update_gauges()
        return metrics.registry.exposition()

    host, _, port = args.health_bind.rpartition(":")
    server = serve(host or "0.0.0.0", int(port), lambda: not done.is_set() or state["exit"] == 0, ready,
                   metrics_text)
    log.info("soperator-operator %s as %s; health and metrics on %s:%d", __version__, identity,
             server.server_address[0], server.server_address[1])

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if elector is not None:
        elector.start()
    else:
        start_controller()
    done.wait()  # a signal or the loss of leadership (another thread) sets it
    controller.stop(timeout=parse_duration(args.shutdown_timeout))
    if elector is not None:
        elector.stop(release=state["exit"] == 0)
    metrics.leader.set(0)
    runner.close()
    server.shutdown()
    log.info("stopped")
    return state["exit"]


if __name__ == "__main__":
    sys.exit(main())
