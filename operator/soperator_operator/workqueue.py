"""A keyed, delayed, coalescing work queue (the controller-runtime workqueue idea, minus rate limiter objects).

Guarantees, for any key:
- at most one worker holds it at a time;
- any number of ``add`` calls while it waits collapse into one entry (earliest due time wins, reasons merge);
- ``add`` calls while it runs mark it dirty: it runs once more right after ``done`` (and then reads the newest
  object, so the newest generation wins and intermediate ones are never run).

``QueueState`` is the pure state machine (time passed in); ``WorkQueue`` adds a lock, a condition variable and a
clock for worker threads.
"""

import heapq
import itertools
import threading
import time

EVENT = "event"      # the object (or one of its NodeSets) was created, changed generation or is being deleted
DRIFT = "drift"      # an object the cluster owns changed (or went)
RESYNC = "resync"    # the reconcile period elapsed
RETRY = "retry"      # a transient failure's backoff elapsed
REQUEUE = "requeue"  # the role asked to be run again (something under way, or not ready yet)


class QueueState:
    def __init__(self):
        self._pending = {}   # key -> [due, reasons]
        self._heap = []      # (due, seq, key); stale entries skipped on pop
        self._seq = itertools.count()
        self._running = set()
        self._after_run = {}  # key -> [due, reasons]: adds that arrived while the key ran

    def add(self, key, now, delay=0.0, reason=EVENT):
        due = now + max(0.0, delay)
        target = self._after_run if key in self._running else self._pending
        entry = target.get(key)
        if entry is None:
            target[key] = [due, {reason}]
        else:
            entry[0] = min(entry[0], due)
            entry[1].add(reason)
        if target is self._pending and (entry is None or entry[0] == due):
            heapq.heappush(self._heap, (due, next(self._seq), key))

    def pop_ready(self, now):
        """The earliest due key that is not running, as (key, reasons); None if nothing is due."""
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._pending.get(key)
            if entry is None or entry[0] != due:
                heapq.heappop(self._heap)  # superseded
                continue
            if due > now:
                return None
            heapq.heappop(self._heap)
            del self._pending[key]
            self._running.add(key)
            return key, frozenset(entry[1])
        return None

    def next_due(self):
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._pending.get(key)
            if entry is None or entry[0] != due:
                heapq.heappop(self._heap)
                continue
            return due
        return None

    def done(self, key, now, requeue_after=None, reason=RESYNC):
        """Release ``key``; re-add what arrived meanwhile, and/or schedule it again after ``requeue_after``."""
        self._running.discard(key)
        later = self._after_run.pop(key, None)
        if later is not None:
            for why in later[1]:
                self.add(key, now, max(0.0, later[0] - now), why)
        if requeue_after is not None:
            self.add(key, now, requeue_after, reason)

    def forget(self, key):
        """Drop a waiting entry (the object is gone); a running key still finishes."""
        self._pending.pop(key, None)
        self._after_run.pop(key, None)

    def pending(self, key):
        entry = self._pending.get(key) or self._after_run.get(key)
        return (entry[0], frozenset(entry[1])) if entry else None

    def depth(self, now):
        """Keys due now and waiting for a worker."""
        return sum(1 for due, _ in self._pending.values() if due <= now)

    def running_count(self):
        return len(self._running)


class WorkQueue:
    def __init__(self, clock=time.monotonic):
        self._state = QueueState()
        self._clock = clock
        self._cond = threading.Condition()
        self._shutdown = False

    def add(self, key, delay=0.0, reason=EVENT):
        with self._cond:
            self._state.add(key, self._clock(), delay, reason)
            self._cond.notify()

    def get(self, timeout=None):
        """Block until a key is due; (key, reasons), or None on shutdown or timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._shutdown:
                now = self._clock()
                item = self._state.pop_ready(now)
                if item is not None:
                    return item
                wait = None
                nxt = self._state.next_due()
                if nxt is not None:
                    wait = max(0.0, nxt - now)
                if deadline is not None:
                    left = deadline - now
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait if wait is None else max(wait, 0.001))
            return None

    def done(self, key, requeue_after=None, reason=RESYNC):
        with self._cond:
            self._state.done(key, self._clock(), requeue_after, reason)
            self._cond.notify_all()

    def forget(self, key):
        with self._cond:
            self._state.forget(key)

    def depth(self):
        with self._cond:
            return self._state.depth(self._clock())

    def running(self):
        with self._cond:
            return self._state.running_count()

    def shutdown(self):
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
