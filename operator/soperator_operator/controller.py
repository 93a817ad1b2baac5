"""Orchestration: watch events -> work queue -> role runs -> status, Events, finalizers.

Never renders manifests: everything the cluster should look like is decided by the roles.
"""

import logging
import threading
import time

from kubernetes.client.rest import ApiException

from . import classify as klass
from . import conditions as cond
from . import triggers, workqueue
from .extravars import extra_vars
from .kube import describe, now_iso, status_code
from .runner import new_ident

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, kube, runner, watches, namespaces=None, max_workers=4, metrics=None,
                 clock=time.monotonic, backoff_base=1.0, backoff_cap=300.0):
        self.kube = kube
        self.runner = runner
        self.watches = watches
        self.by_kind = {w.kind: w for w in watches}
        self.namespaces = list(namespaces or []) or [None]  # None: all namespaces
        self.max_workers = max(1, int(max_workers))
        self.metrics = metrics
        self.clock = clock
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.queue = workqueue.WorkQueue(clock=clock)
        self._seen = {}          # (kind, ns, name) -> triggers.Seen
        self._seen_lock = threading.Lock()
        self._failures = {}      # key -> consecutive transient failures
        self._stopping = threading.Event()   # no new work
        self._cancel = threading.Event()     # cancel runs in flight
        self._threads = []
        self._workers = []
        self.synced = threading.Event()

    # --- lifecycle ----------------------------------------------------------------------------------------------
    def start(self):
        pending = []
        for w in self.watches:
            for ns in self.namespaces:
                ready = threading.Event()
                pending.append(ready)
                t = threading.Thread(target=self._watch_loop, args=(w, ns, ready), daemon=True,
                                     name="watch-%s-%s" % (w.kind, ns or "all"))
                t.start()
                self._threads.append(t)
        # Workers start once every watch has listed: a cluster and its NodeSets seen at start coalesce into one
        # run instead of a run plus an immediate rerun.
        for ready in pending:
            while not ready.wait(1.0):
                if self._stopping.is_set():
                    return
        for i in range(self.max_workers):
            t = threading.Thread(target=self._worker, daemon=True, name="worker-%d" % i)
            t.start()
            self._workers.append(t)
        self.synced.set()

    def stop(self, timeout=60.0):
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

    # --- watching ------------------------------------------------------------------------------------------------
    def _watch_loop(self, w, namespace, ready):
        failures = 0
        while not self._stopping.is_set():
            try:
                items, rv = self.kube.list(w, namespace)
                self._relisted(w, namespace, items)
                ready.set()
                failures = 0
                while not self._stopping.is_set():
                    for etype, obj in self.kube.watch(w, namespace, rv):
                        if self._stopping.is_set():
                            return
                        rv = ((obj or {}).get("metadata") or {}).get("resourceVersion") or rv
                        if etype in (triggers.ADDED, triggers.MODIFIED, triggers.DELETED):
                            self._observe(w, etype, obj)
            except ApiException as exc:
                if exc.status == 410:
                    log.info("watch of %s expired; relisting", w.kind)
                    continue
                failures += 1
                log.warning("watch of %s failed %s; retrying", w.kind, describe(exc))
            except Exception as exc:  # noqa: BLE001  network errors of any kind: relist after a backoff
                failures += 1
                log.warning("watch of %s failed: %s; retrying", w.kind, exc)
            self._stopping.wait(klass.backoff(failures, 0.5, 30.0))

    def _relisted(self, w, namespace, items):
        live = set()
        for obj in items:
            meta = obj["metadata"]
            live.add((w.kind, meta["namespace"], meta["name"]))
            self._observe(w, triggers.ADDED, obj)
        with self._seen_lock:
            gone = [k for k in self._seen if k[0] == w.kind and (namespace is None or k[1] == namespace)
                    and k not in live]
        for key in gone:  # deleted while we were not watching
            self._observe(w, triggers.DELETED, {"metadata": {"namespace": key[1], "name": key[2]}})

    def _observe(self, w, etype, obj):
        meta = obj.get("metadata") or {}
        ident = (w.kind, meta.get("namespace"), meta.get("name"))
        if self.metrics:
            self.metrics.events.inc(kind=w.kind, type=etype)
        owner = w.reconcile_owner.owner_name(obj) if w.reconcile_owner else None
        current = None if etype == triggers.DELETED else triggers.seen_of(obj, owner)
        with self._seen_lock:
            previous = self._seen.get(ident)
            if etype == triggers.DELETED:
                self._seen.pop(ident, None)
            else:
                self._seen[ident] = current
        if not triggers.should_run(previous, current, etype) or (etype == triggers.DELETED and previous is None
                                                                 and not w.reconcile_owner):
            return
        if w.reconcile_owner:
            for name in triggers.owners_to_enqueue(previous, current):
                self.queue.add((w.reconcile_owner.kind, ident[1], name), reason=workqueue.EVENT)
        elif etype == triggers.DELETED:
            self.queue.forget(ident)
            self._failures.pop(ident, None)
        else:
            self.queue.add(ident, reason=workqueue.EVENT)

    # --- working -------------------------------------------------------------------------------------------------
    def _worker(self):
        while not self._stopping.is_set():
            item = self.queue.get(timeout=1.0)
            if item is None:
                continue
            key, reasons = item
            requeue, why = None, workqueue.RESYNC
            try:
                requeue, why = self.reconcile(key, reasons)
            except Exception as exc:  # noqa: BLE001  an adapter error: retry with backoff, never kill the worker
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                requeue, why = klass.backoff(failures, self.backoff_base, self.backoff_cap), workqueue.RETRY
                log.warning("reconcile of %s/%s/%s failed: %s (retry in %.0fs)", key[0], key[1], key[2], describe(exc),
                            requeue, exc_info=not isinstance(exc, ApiException))
            finally:
                if self._stopping.is_set():
                    requeue = None
                self.queue.done(key, requeue_after=requeue, reason=why)

    def dependents(self, w, obj):
        """(watch, object) pairs of the kinds that reconcile through this one and point at ``obj``."""
        result = []
        meta = obj["metadata"]
        for dep in self.watches:
            if not dep.reconcile_owner or dep.reconcile_owner.kind != w.kind:
                continue
            items, _ = self.kube.list(dep, meta["namespace"])
            result.extend((dep, item) for item in items if dep.reconcile_owner.owner_name(item) == meta["name"])
        return result

    def reconcile(self, key, reasons):
        """One reconciliation of ``key``; returns (requeue_after seconds or None, reason)."""
        kind, namespace, name = key
        w = self.by_kind[kind]
        obj = self.kube.get(w, namespace, name)
        if obj is None:
            self._orphaned(w, namespace, name)
            return None, workqueue.RESYNC
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return self._finalize(w, obj)
        if w.finalizer:
            obj = self.kube.add_finalizer(w, obj, w.finalizer.name)
            meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        deps = self.dependents(w, obj)
        loud = self._needs_announcing(obj) or any(self._needs_announcing(d) for _, d in deps)
        if loud:
            log.info("reconciling %s %s/%s generation %d (%s)", kind, namespace, name, generation,
                     ",".join(sorted(reasons)))
        if loud and workqueue.EVENT in reasons:  # retries of the same generation are not news
            self.kube.event(obj, "Normal", "Reconciling", "Running %s for generation %d" % (w.role or w.playbook,
                                                                                              generation))
            if w.manage_status:
                self.kube.update_status(w, namespace, name,
                                        lambda old, _o: cond.running_status(old, generation, now_iso()))
        else:
            log.debug("resync of %s %s/%s", kind, namespace, name)
        result = self._run(w, obj, w.role, w.playbook, w.vars, key)
        if result.status == "canceled" and self._cancel.is_set():
            return None, workqueue.RESYNC
        if result.ok:
            self._failures.pop(key, None)
            outcome = cond.Outcome(ok=True, message="Applied by %s in %.1fs" % (w.role or w.playbook,
                                                                                result.duration))
            log.info("%s %s/%s reconciled in %.1fs (%d changed)", kind, namespace, name, result.duration,
                     result.changed)
            if loud:
                self.kube.event(obj, "Normal", "Reconciled", "Generation %d reconciled in %.1fs (%d changed)" % (
                    generation, result.duration, result.changed))
            elif result.changed:
                self.kube.event(obj, "Normal", "DriftRepaired", "Resync changed %d task(s)" % result.changed)
            self._write_status(w, obj, deps, outcome)
            return w.reconcile_period, workqueue.RESYNC
        verdict = klass.classify(result.message, result.field)
        permanent = verdict == klass.PERMANENT
        if self.metrics:
            self.metrics.failures.inc(kind=kind, **{"class": verdict})
        message = result.message if not result.task else "%s (task: %s)" % (result.message, result.task)
        if permanent:
            message = result.message  # the role names the field; the task name adds nothing
        log.warning("%s %s/%s failed (%s): %s", kind, namespace, name, verdict, message)
        outcome = cond.Outcome(ok=False, message=message, permanent=permanent)
        previous = cond.get_condition((obj.get("status") or {}).get("conditions"), "Failure")
        repeated = previous is not None and previous.get("message") == message and \
            previous.get("observedGeneration") == generation
        if not repeated:
            self.kube.event(obj, "Warning", "InvalidSpec" if permanent else "ReconcileError", message)
        self._write_status(w, obj, deps, outcome)
        if permanent:
            self._failures.pop(key, None)
            return w.reconcile_period, workqueue.RESYNC
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        return klass.backoff(failures, self.backoff_base, self.backoff_cap), workqueue.RETRY

    def _needs_announcing(self, obj):
        """A run is announced (Running condition, Events) unless it is a resync of an already-Ready generation."""
        status = obj.get("status") or {}
        generation = int((obj.get("metadata") or {}).get("generation") or 0)
        ready = cond.get_condition(status.get("conditions"), "Ready")
        return status.get("observedGeneration") != generation or not ready or ready.get("status") != "True"

    def _run(self, w, obj, role, playbook, extra, key):
        variables = extra_vars(obj, w.group, w.kind, extra)
        started = time.monotonic()
        if self.metrics:
            self.metrics.running.set(self.queue.running())
        result = self.runner.run(variables, role=role, playbook=playbook, ident=new_ident(*key),
                                 should_stop=self._cancel.is_set)
        if self.metrics:
            label = "success" if result.ok else ("canceled" if result.status == "canceled" else "failure")
            self.metrics.runs.inc(kind=w.kind, result=label)
            self.metrics.duration.observe(time.monotonic() - started, kind=w.kind)
        if not result.ok and result.stdout_tail:
            log.debug("ansible output of failed run:\n%s", result.stdout_tail)
        return result

    def _write_status(self, w, obj, deps, outcome):
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        if w.manage_status:
            self.kube.update_status(w, meta["namespace"], meta["name"],
                                    lambda old, _o: cond.finished_status(old, generation, outcome, now_iso()))
        for dep_w, dep in deps:
            if not dep_w.manage_status:
                continue
            dmeta = dep["metadata"]
            dgen = int(dmeta.get("generation") or 0)
            sts = self.kube.get_statefulset(dmeta["namespace"], "%s-%s" % (meta["name"], dmeta["name"])) \
                if outcome.ok else None
            self.kube.update_status(
                dep_w, dmeta["namespace"], dmeta["name"],
                lambda old, _o, g=dgen, s=sts: cond.nodeset_status(old, g, outcome, s, now_iso()))

    def _orphaned(self, w, namespace, name):
        """The owner is gone: say so on the dependents that still point at it."""
        outcome = cond.Outcome(ok=False, message="%s %s not found in namespace %s" % (w.kind, name, namespace),
                               reason=cond.REASON_CLUSTER_NOT_FOUND)
        for dep in self.watches:
            if not dep.reconcile_owner or dep.reconcile_owner.kind != w.kind or not dep.manage_status:
                continue
            items, _ = self.kube.list(dep, namespace)
            for item in items:
                if dep.reconcile_owner.owner_name(item) != name or item["metadata"].get("deletionTimestamp"):
                    continue
                gen = int(item["metadata"].get("generation") or 0)
                self.kube.update_status(dep, namespace, item["metadata"]["name"],
                                        lambda old, _o, g=gen: cond.finished_status(old, g, outcome, now_iso()))

    def _finalize(self, w, obj):
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
            self._failures.pop(key, None)
            return None, workqueue.RESYNC
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        self.kube.event(obj, "Warning", "FinalizeFailed", result.message)
        if w.manage_status:
            gen = int(meta.get("generation") or 0)
            outcome = cond.Outcome(ok=False, message=result.message, reason="FinalizeFailed")
            self.kube.update_status(w, meta["namespace"], meta["name"],
                                    lambda old, _o: cond.finished_status(old, gen, outcome, now_iso()))
        return klass.backoff(failures, self.backoff_base, self.backoff_cap), workqueue.RETRY

    # --- introspection ---------------------------------------------------------------------------------------
    def update_gauges(self):
        if self.metrics:
            self.metrics.queue_depth.set(self.queue.depth())
            self.metrics.running.set(self.queue.running())


def api_error_is_transient(exc):
    return klass.is_transient_api_status(status_code(exc))
