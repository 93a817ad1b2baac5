"""Orchestration: watch caches -> work queue -> (is a run needed?) -> role runs -> status, Events, finalizers.

The roles decide and apply everything. For a watch with ``x-soperator-drift-check`` the runtime asks the
collection's pure core whether a run would change anything (``drift.needs_run``) before starting one, so a resync
with nothing to do costs a render in memory; and whether a worker StatefulSet only grows (``drift.scale_outs``),
which it then applies ahead of the run, exactly as the run would (the run still follows and finds it in sync).
"""

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence, Set
from typing import Any

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api import errors as failures
from ansible_collections.soperator.slurm.plugins.module_utils.api.policy import Policy
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

from . import cache, classify, drift, triggers, workqueue
from . import conditions as cond
from .extravars import extra_vars
from .kube import Kube, describe, now_iso
from .metrics import OperatorMetrics
from .runner import RoleRunner, RunResult, new_ident
from .watches import Watch
from .workqueue import Key

log = logging.getLogger(__name__)

# The kinds a SlurmCluster's converge applies, plus its pods (readiness), cached by the managed-by label.
OWNED = tuple(cache.Resource(k.group, k.version, k.plural, k.kind) for k in kinds.applied() + (kinds.POD,))
OWNED_SELECTOR = "%s=%s" % (names.LABEL_MANAGED_BY, names.MANAGED_BY)
DRIFT_DELAY = 0.2        # coalesce a burst of owned-object events into one check
# Pods coming up (created, Running, Ready, and their StatefulSets' status following) arrive one by one over
# seconds: an event-started check waits while a pod of the cluster is still coming up (Pending, or Running and not
# Ready) and until no such event has come for SETTLE_QUIET, but no longer than SETTLE_CAP after the first, so that
# a StatefulSet's pods turning Ready cost one run, not one per run's duration. Other events (a pod going, an
# object edited) do not extend the wait; a new generation, a retry or a requeue never waits.
SETTLE_QUIET = 1.0
SETTLE_CAP = 5.0
MAX_PROGRESS_WAIT = 300  # longest requeue while a cluster is progressing without change

# What a reconcile asks of the queue: requeue after these seconds (None: not), for this reason (workqueue.RESYNC...).
Requeue = tuple[float | None, str]


def _pod_state(pod: KubeObject | None) -> tuple[Any, str | None, bool]:
    return (((pod or {}).get("status") or {}).get("phase"), readiness.status(pod),
            bool((pod or {}).get("metadata", {}).get("deletionTimestamp")))


def _settling(etype: str, old: KubeObject | None, new: KubeObject | None) -> bool:
    """An event of pods coming up: a pod created or changing phase or readiness (not going: deleted, being deleted,
    ended), or a StatefulSet created or its status changed (not its spec: the same generation)."""
    kind = (new or old or {}).get("kind")
    if etype == cache.DELETED or new is None:  # (only a deletion comes without the new object)
        return False
    if kind == "Pod":
        phase, _ready, deleting = _pod_state(new)
        return not deleting and phase not in ("Failed", "Succeeded")
    if kind == "StatefulSet":
        return old is None or (old.get("metadata") or {}).get("generation") == (new.get("metadata") or {}).get(
            "generation")
    return False


def coming_up(pod: KubeObject) -> bool:
    """A pod on its way to Ready: Pending, or Running and not Ready (not one being deleted)."""
    phase, ready, deleting = _pod_state(pod)
    return not deleting and (phase == "Pending" or phase == "Running" and ready != "True")


def settle_wait(burst: Sequence[float] | None, now: float, progressing: bool) -> float:
    """Seconds a check started by pods coming up still waits: ``burst`` = (first, last) time of their events, or
    None; ``progressing``: a pod of the cluster is still coming up. Pure."""
    if burst is None:
        return 0.0
    first, last = burst
    until = first + SETTLE_CAP if progressing else min(last + SETTLE_QUIET, first + SETTLE_CAP)
    return max(0.0, until - now)


class Controller:
    def __init__(self, kube: Kube, runner: RoleRunner, watches: Sequence[Watch],
                 namespaces: Iterable[str] | None = None, max_workers: int = 4,
                 metrics: OperatorMetrics | None = None, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, backoff_base: float = 1.0, backoff_cap: float = 300.0,
                 policy: Policy | None = None) -> None:
        self.kube = kube
        # The installer's policy the role's runs judge with (``policy.normalize``; None: not judged): the drift
        # check renders with it too, and it is part of the inputs digest.
        self.policy = policy
        self.runner = runner
        self.watches = watches
        self.by_kind = {w.kind: w for w in watches}
        self.namespaces: list[str | None] = list(namespaces or []) or [None]  # None: all namespaces
        self.max_workers = max(1, int(max_workers))
        self.metrics = metrics
        self.clock, self.wall = clock, wall
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.queue: workqueue.WorkQueue[Key] = workqueue.WorkQueue(clock=clock)
        self._seen: dict[Key, triggers.Seen] = {}
        self._seen_lock = threading.Lock()
        self._failures: dict[Key, int] = {}   # consecutive transient failures
        self._progress: dict[Key, int] = {}   # consecutive runs that left the cluster not ready and changed nothing
        self._memo: dict[Key, drift.Memo] = {}
        self._last_full: dict[Key, float] = {}  # clock of the last role run
        # [first, last] clock of the events of pods coming up, not yet checked
        self._settling: dict[Key, list[float]] = {}
        self._stopping = threading.Event()   # no new work
        self._cancel = threading.Event()     # cancel runs in flight
        self._workers: list[threading.Thread] = []
        self.synced = threading.Event()
        self.informers: dict[str, cache.Informer] = {}
        for w in watches:
            res = cache.Resource(w.group, w.version, w.plural, w.kind)
            self.informers[w.kind] = cache.Informer(kube, res, self.namespaces, functools.partial(self._on_cr, w),
                                                    stopping=self._stopping)
        self.owned: dict[str, cache.Informer] = {}
        if any(w.drift_check for w in watches):
            for res in OWNED:
                self.owned[res.kind] = cache.Informer(kube, res, self.namespaces, self._on_owned,
                                                      selector=OWNED_SELECTOR, stopping=self._stopping)

    # --- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        informers = list(self.informers.values()) + list(self.owned.values())
        for inf in informers:
            inf.start()
        # Workers start once every cache has listed: decisions are taken on complete caches, and a cluster and
        # its NodeSets seen at start coalesce into one key.
        for inf in informers:
            while not inf.wait_synced(1.0):
                if self._stopping.is_set():
                    return
        for i in range(self.max_workers):
            t = threading.Thread(target=self._worker, daemon=True, name="worker-%d" % i)
            t.start()
            self._workers.append(t)
        self.synced.set()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop taking work; let runs in flight finish up to ``timeout``, then cancel them."""
        self._stopping.set()
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for t in self._workers:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in self._workers):
            log.warning("runs still in flight after %.0fs: cancelling them", timeout)
            self._cancel.set()
            for t in self._workers:
                t.join(self.runner.stop_grace + 5)

    def abort(self) -> None:
        """Leadership lost: no run may write any more. Kill them now (the process exits next)."""
        self._stopping.set()
        self._cancel.set()
        self.queue.shutdown()
        self.runner.cancel_all()

    # --- events -----------------------------------------------------------------------------------------------
    def _on_cr(self, w: Watch, etype: str, old: KubeObject | None, new: KubeObject | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return  # never: an event carries an object
        meta = obj["metadata"]  # stored by the cache under its name; our custom resources are namespaced
        ident: Key = (w.kind, meta["namespace"], meta["name"])
        if self.metrics:
            self.metrics.events.inc(kind=w.kind, type=etype)
        owner = w.reconcile_owner.owner_name(obj) if w.reconcile_owner else None
        current = None if etype == cache.DELETED else triggers.seen_of(obj, owner)
        with self._seen_lock:
            previous = self._seen.get(ident)
            if current is None:  # deleted
                self._seen.pop(ident, None)
            else:
                self._seen[ident] = current
        if not triggers.should_run(previous, current, etype):
            return
        if w.reconcile_owner:
            for name in triggers.owners_to_enqueue(previous, current):
                self.queue.add((w.reconcile_owner.kind, ident[1], name), reason=workqueue.EVENT)
        elif etype == cache.DELETED:
            self.queue.forget(ident)
            self._forget(ident)
        else:
            self.queue.add(ident, reason=workqueue.EVENT)

    def _on_owned(self, etype: str, old: KubeObject | None, new: KubeObject | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return  # never: an event carries an object
        cluster = cache.cluster_of(obj, names.LABEL_CLUSTER)
        if not cluster:
            return
        if obj.get("kind") == "Pod" and etype == cache.MODIFIED and _pod_state(old) == _pod_state(new):
            return  # pods change status often; only readiness and life matter
        ident = (names.CLUSTER_KIND, obj["metadata"].get("namespace"), cluster)
        if self.informers.get(names.CLUSTER_KIND) and self.informers[names.CLUSTER_KIND].store.get(ident[1],
                                                                                                  cluster):
            if _settling(etype, old, new):
                with self._seen_lock:
                    now = self.clock()
                    self._settling.setdefault(ident, [now, now])[1] = now
            self.queue.add(ident, delay=DRIFT_DELAY, reason=workqueue.DRIFT)

    def _forget(self, ident: Key) -> None:
        for table in (self._failures, self._progress, self._memo, self._last_full, self._settling):
            table.pop(ident, None)

    # --- working ------------------------------------------------------------------------------------------------
    def _worker(self) -> None:
        while not self._stopping.is_set():
            item = self.queue.get(timeout=60.0)  # shutdown() wakes every worker at once
            if item is None:
                continue
            key, reasons = item
            requeue: float | None = None
            why = workqueue.RESYNC
            try:
                requeue, why = self.reconcile(key, reasons)
            except Exception as exc:  # noqa: BLE001  an adapter error: retry with backoff, never kill the worker
                failures_count = self._failures.get(key, 0) + 1
                self._failures[key] = failures_count
                requeue, why = classify.backoff(failures_count, self.backoff_base, self.backoff_cap), \
                    workqueue.RETRY
                log.warning("reconcile of %s/%s/%s failed: %s (retry in %.0fs)", key[0], key[1], key[2],
                            describe(exc), requeue, exc_info=not isinstance(exc, access.KubernetesError))
            finally:
                if self._stopping.is_set():
                    requeue = None
                self.queue.done(key, requeue_after=requeue, reason=why)

    def cached(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        inf = self.informers.get(kind)
        return inf.store.get(namespace, name) if inf else None

    def dependents(self, w: Watch, obj: KubeObject) -> list[tuple[Watch, KubeObject]]:
        """(watch, object) pairs of the kinds that reconcile through this one and point at ``obj``."""
        meta = obj["metadata"]
        result: list[tuple[Watch, KubeObject]] = []
        for dep in self.watches:
            if not dep.reconcile_owner or dep.reconcile_owner.kind != w.kind:
                continue
            items = self.informers[dep.kind].store.list(meta["namespace"])
            result.extend((dep, item) for item in items if dep.reconcile_owner.owner_name(item) == meta["name"])
        return result

    def live_children(self, namespace: str, cluster_name: str) -> dict[tuple[str, str], KubeObject]:
        live: dict[tuple[str, str], KubeObject] = {}
        for kind, inf in self.owned.items():
            for obj in inf.store.list(namespace, lambda o: cache.cluster_of(o, names.LABEL_CLUSTER) == cluster_name):
                live[(kind, obj["metadata"]["name"])] = obj
        return live

    def reconcile(self, key: Key, reasons: Set[str]) -> Requeue:
        """One reconciliation of ``key``; returns (requeue_after seconds or None, reason)."""
        kind, namespace, name = key
        w = self.by_kind[kind]
        obj = self.cached(kind, namespace, name)
        if obj is None:
            self._orphaned(w, namespace, name)
            return None, workqueue.RESYNC
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return self._finalize(w, obj)
        if w.finalizer and w.finalizer.name not in (meta.get("finalizers") or []):
            obj = self.kube.add_finalizer(w, obj, w.finalizer.name)
            meta = obj["metadata"]
        deps = self.dependents(w, obj)
        forced = reasons & {workqueue.RETRY, workqueue.REQUEUE} or not w.drift_check
        # The full-run clock of a cluster starts when this runtime first looks at it (a cluster found in sync
        # at start gets its full run one period later, like any other).
        full_due = self.clock() - self._last_full.setdefault(key, self.clock()) >= w.full_run_period
        memo = self._memo.setdefault(key, drift.Memo())
        why = "periodic full run" if full_due else ",".join(sorted(reasons))
        if w.drift_check and not forced and not full_due:
            nodesets = [d for _, d in deps]
            wait = self._settle_wait(key, obj, nodesets, memo)
            if wait:
                return wait, workqueue.DRIFT  # pods still coming up: one check once they are up
        with self._seen_lock:
            self._settling.pop(key, None)  # what they changed is looked at now
        live = self.live_children(namespace, name) if w.drift_check else {}
        if w.drift_check and not forced and not full_due:
            nodesets = [d for _, d in deps]
            # The timer's check also looks up the create-only objects (Secrets, the jail claim) by name: they are
            # not cached, since listing Secrets would mean reading every Secret of the namespace.
            lookup = self._lookup(namespace) if reasons <= {workqueue.RESYNC} else None
            needed = drift.needs_run(obj, nodesets, live, memo, int(self.wall()), lookup=lookup, policy=self.policy)
            if self.metrics:
                self.metrics.checks.inc(kind=kind, result="run" if needed else "skip")
            if needed is None:
                log.debug("%s %s/%s: in sync, nothing to run", kind, namespace, name)
                return w.reconcile_period, workqueue.RESYNC
            why = needed
        digest = drift.observed_digest(live, self.policy) if w.drift_check else None
        if w.drift_check:
            self._scale_out_first(key, obj, deps, live)
        return self._reconcile_run(w, key, obj, deps, memo, why, digest)

    def _settle_wait(self, key: Key, cluster: KubeObject, nodesets: Sequence[KubeObject], memo: drift.Memo) -> float:
        """Seconds to hold a check started by pods coming up (``settle_wait``); 0 when a generation is new."""
        with self._seen_lock:
            burst = self._settling.get(key)
        if burst is None or drift.generation_change(cluster, nodesets, memo) is not None:
            return 0.0
        namespace, name = key[1], key[2]
        return settle_wait(burst, self.clock(), any(coming_up(p) for p in self.owned["Pod"].store.list(
            namespace, lambda o: cache.cluster_of(o, names.LABEL_CLUSTER) == name)))

    def _scale_out_first(self, key: Key, cluster: KubeObject, deps: Sequence[tuple[Watch, KubeObject]],
                         live: drift.Live) -> None:
        """Worker StatefulSets that only grow are applied now, ahead of the role's run (``drift.scale_outs``
        decides): a scale-out needs no drain, so it need not wait for the run's Slurm checks. Each is the manifest
        the run renders, applied as the field manager that applied it, conditional on the cached resourceVersion:
        the run then finds it in sync and does the rest (status, Slurm, every other object). Within the key's
        worker, so never beside a run of the same cluster; a refusal (a stale cache: 409) leaves it to the run."""
        grown = drift.scale_outs(cluster, [d for _, d in deps], live, int(self.wall()), policy=self.policy)
        for grow in grown:
            what = "%s/%s: StatefulSet %s %d -> %d" % (key[1], key[2], grow.manifest["metadata"]["name"], grow.was,
                                                     grow.replicas)
            try:
                self.kube.apply_as(grow.manifest, grow.manager, grow.resource_version)
            except access.KubernetesError as exc:
                log.info("%s ahead of the run refused (%s): the run applies it", what, describe(exc))
                result = "refused"
            else:
                log.info("%s applied ahead of the run", what)
                result = "applied"
            if self.metrics:
                self.metrics.scale_outs.inc(result=result)

    def _lookup(self, namespace: str) -> drift.Lookup:
        def exists(kind_name: str, name: str) -> bool:
            k = kinds.by_name(kind_name)
            res = cache.Resource(k.group, k.version, k.plural, k.kind)
            if self.kube.exists(res.path(namespace, name)):
                return True
            # An optional kind the cluster does not serve: the role cannot create it either (its apply skips
            # kinds not served), so its absence is no reason to run.
            return k.optional and not self.kube.serves(res)
        return exists

    def _reconcile_run(self, w: Watch, key: Key, obj: KubeObject, deps: Sequence[tuple[Watch, KubeObject]],
                       memo: drift.Memo, why: str, digest: str | None = None) -> Requeue:
        kind, namespace, name = key
        generation = int(obj["metadata"].get("generation") or 0)
        gens = drift.generations(obj, [d for _, d in deps])
        new_generation = memo.generations.get(kind) != generation
        log.info("reconciling %s %s/%s generation %d (%s)", kind, namespace, name, generation, why)
        if new_generation:
            self.kube.event(obj, "Normal", "Reconciling", "Running %s for generation %d" % (w.role or w.playbook,
                                                                                              generation))
            if w.manage_status:
                self.kube.update_status(w, namespace, name,
                                        lambda old, _o: cond.running_status(old, generation, now_iso()))
        self._last_full[key] = self.clock()
        result = self._run(w, obj, w.role, w.playbook, w.vars, key, tasks_from=w.tasks_from)
        if result.status == "canceled" and self._cancel.is_set():
            return None, workqueue.RESYNC
        if result.ok:
            self._failures.pop(key, None)
            memo.generations, memo.ready, memo.invalid_generation = gens, result.ready, None
            # Only a settled run records its inputs: one that left work for later (a drain, a login pod waiting
            # for its sessions: requeue_after) must be run again even if nothing it observed changes.
            if result.requeue_after is not None:
                digest = None
            memo.digest = digest
            log.info("%s %s/%s reconciled in %.1fs (%d changed%s)", kind, namespace, name, result.duration,
                     result.changed, "" if result.ready is None else ", ready" if result.ready else ", not ready")
            if new_generation:
                self.kube.event(obj, "Normal", "Reconciled", "Generation %d reconciled in %.1fs (%d changed)" % (
                    generation, result.duration, result.changed))
            elif result.changed:
                self.kube.event(obj, "Normal", "DriftRepaired", "%s: %d task(s) changed" % (why, result.changed))
            if w.manage_status:
                # From the cache: the role's own status write has normally arrived by now (else a 409, a read).
                self.kube.update_status(w, namespace, name, lambda old, _o: cond.finished_status(
                    old, generation, cond.Outcome(ok=True), now_iso(), digest), current=self.cached(*key))
            return self._after_success(w, key, result)
        return self._after_failure(w, key, obj, memo, gens, result)

    def _after_success(self, w: Watch, key: Key, result: RunResult) -> Requeue:
        if result.requeue_after is None:
            self._progress.pop(key, None)
            return w.reconcile_period, workqueue.RESYNC
        # Under way (drains) or not ready yet: look again soon; slower while nothing changes.
        stalled = self._progress.get(key, 0) + 1 if not result.changed else 0
        self._progress[key] = stalled
        delay = min(MAX_PROGRESS_WAIT, result.requeue_after * (2 ** min(stalled, 6) if stalled > 2 else 1))
        return delay, workqueue.REQUEUE

    def _after_failure(self, w: Watch, key: Key, obj: KubeObject, memo: drift.Memo, gens: dict[str, int],
                       result: RunResult) -> Requeue:
        kind, namespace, name = key
        generation = int(obj["metadata"].get("generation") or 0)
        reason = result.reason
        retry = result.retryable if result.retryable is not None else failures.retryable(reason or "")
        verdict = klass_of(retry)
        if self.metrics:
            self.metrics.failures.inc(kind=kind, **{"class": verdict})
        message = result.message if result.field or not result.task else "%s (task: %s)" % (result.message,
                                                                                          result.task)
        log.warning("%s %s/%s failed (%s%s): %s", kind, namespace, name, verdict,
                    ", " + reason if reason else "", message)
        previous = cond.get_condition((obj.get("status") or {}).get("conditions"), "Failure")
        repeated = previous is not None and previous.get("message") == message and \
            previous.get("observedGeneration") == generation
        if not repeated:
            self.kube.event(obj, "Warning", "InvalidSpec" if not retry else "ReconcileError", message)
        if w.manage_status:
            outcome = cond.Outcome(ok=False, message=message, permanent=not retry, reason=reason or "")
            self.kube.update_status(w, namespace, name,
                                    lambda old, _o: cond.finished_status(old, generation, outcome, now_iso()))
        # A failed run records no inputs (and forgets the last settled run's): nothing but its retry, a new
        # generation or the next check may decide whether the role runs again.
        memo.digest = None
        if not retry:
            self._failures.pop(key, None)
            memo.generations, memo.ready = gens, False
            memo.invalid_generation = generation if reason == failures.INVALID_SPEC else None
            return w.reconcile_period, workqueue.RESYNC
        memo.ready = False
        failures_count = self._failures.get(key, 0) + 1
        self._failures[key] = failures_count
        return classify.backoff(failures_count, self.backoff_base, self.backoff_cap), workqueue.RETRY

    def _run(self, w: Watch, obj: KubeObject, role: str | None, playbook: str | None, extra: dict[str, Any],
             key: Key, tasks_from: str | None = None) -> RunResult:
        variables = extra_vars(obj, w.group, w.kind, extra)
        started = time.monotonic()
        if self.metrics:
            self.metrics.running.set(self.queue.running())
        entry = {"tasks_from": tasks_from} if tasks_from and role else {}
        result = self.runner.run(variables, role=role, playbook=playbook, ident=new_ident(*key),
                                 should_stop=self._cancel.is_set, **entry)
        if self.metrics:
            label = "success" if result.ok else ("canceled" if result.status == "canceled" else "failure")
            self.metrics.runs.inc(kind=w.kind, result=label)
            self.metrics.duration.observe(time.monotonic() - started, kind=w.kind)
            for phase, seconds in (result.phases or {}).items():
                self.metrics.phases.observe(seconds, phase=phase)
        if not result.ok and result.stdout_tail:
            log.debug("ansible output of failed run:\n%s", result.stdout_tail)
        return result

    def _orphaned(self, w: Watch, namespace: str, name: str) -> None:
        """The owner is gone: say so on the dependents that still point at it."""
        outcome = cond.Outcome(ok=False, message="%s %s not found in namespace %s" % (w.kind, name, namespace),
                               reason=cond.REASON_CLUSTER_NOT_FOUND)
        for dep in self.watches:
            if not dep.reconcile_owner or dep.reconcile_owner.kind != w.kind:
                continue
            for item in self.informers[dep.kind].store.list(namespace):
                if dep.reconcile_owner.owner_name(item) != name or item["metadata"].get("deletionTimestamp"):
                    continue
                gen = int(item["metadata"].get("generation") or 0)

                def failed(old: KubeObject, _obj: KubeObject, gen: int = gen) -> KubeObject:
                    return cond.finished_status(old, gen, outcome, now_iso())

                self.kube.update_status(dep, namespace, item["metadata"]["name"], failed)

    def _finalize(self, w: Watch, obj: KubeObject) -> Requeue:
        meta = obj["metadata"]
        fin = w.finalizer
        if not fin or fin.name not in (meta.get("finalizers") or []):
            return None, workqueue.RESYNC
        key = (w.kind, meta["namespace"], meta["name"])
        log.info("finalizing %s %s/%s", w.kind, meta["namespace"], meta["name"])
        self.kube.event(obj, "Normal", "Finalizing", "Running %s before deletion" % (fin.role or fin.playbook
                                                                                     or w.role))
        if fin.role or fin.playbook:
            role, playbook, extra = fin.role, fin.playbook, dict(fin.vars)
        else:  # upstream semantics: no role -> the main role again, with the finalizer's vars on top
            role, playbook, extra = w.role, w.playbook, dict(w.vars, **fin.vars)
        result = self._run(w, obj, role, playbook, extra, key)
        if result.status == "canceled" and self._cancel.is_set():
            return None, workqueue.RESYNC
        if result.ok:
            self.kube.remove_finalizer(w, obj, fin.name)
            log.info("%s %s/%s finalized and released", w.kind, meta["namespace"], meta["name"])
            self._forget(key)
            return None, workqueue.RESYNC
        failures_count = self._failures.get(key, 0) + 1
        self._failures[key] = failures_count
        self.kube.event(obj, "Warning", "FinalizeFailed", result.message)
        if w.manage_status:
            gen = int(meta.get("generation") or 0)
            outcome = cond.Outcome(ok=False, message=result.message, reason="FinalizeFailed")
            self.kube.update_status(w, meta["namespace"], meta["name"],
                                    lambda old, _o: cond.finished_status(old, gen, outcome, now_iso()))
        return classify.backoff(failures_count, self.backoff_base, self.backoff_cap), workqueue.RETRY

    # --- introspection ---------------------------------------------------------------------------------------
    def update_gauges(self) -> None:
        if self.metrics:
            self.metrics.queue_depth.set(self.queue.depth())
            self.metrics.running.set(self.queue.running())
            self.metrics.cached.set(sum(len(i.store) for i in list(self.informers.values())
                                        + list(self.owned.values())))
            clusters = self.informers.get(names.CLUSTER_KIND)
            self.metrics.set_backups(clusters.store.list() if clusters else [])


def klass_of(retry: bool) -> str:
    return classify.TRANSIENT if retry else classify.PERMANENT
