"""A keyed, delayed, coalescing work queue (the controller-runtime workqueue idea, minus rate limiter objects).

Guarantees, for any key:
- at most one worker holds it at a time;
- any number of ``add`` calls while it waits collapse into one entry (earliest due time wins, reasons merge);
- ``add`` calls while it runs mark it dirty: it runs once more right after ``done`` (and then reads the newest
  object, so the newest generation wins and intermediate ones are never run).

``QueueState`` is the pure state machine (time passed in); ``WorkQueue`` adds a lock, a condition variable and a
clock for worker threads. Both are generic in the key (any hashable); the runtime's is :data:`Key`.
"""

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

EVENT = "event"      # the object (or one of its NodeSets) was created, changed generation or is being deleted
DRIFT = "drift"      # an object the cluster owns changed (or went)
RESYNC = "resync"    # the reconcile period elapsed
RETRY = "retry"      # a transient failure's backoff elapsed
REQUEUE = "requeue"  # the role asked to be run again (something under way, or not ready yet)

# The runtime's key: (kind, namespace, name) of a watched object.
Key = tuple[str, str, str]

K = TypeVar("K", bound=Hashable)


class Item(NamedTuple, Generic[K]):
    """A key handed to a worker, with why it was due (the reasons above: every add since it last ran)."""
    key: K
    reasons: frozenset[str]


@dataclass
class _Entry:
    """A key waiting: when it is due, and why (merged over the adds)."""
    due: float
    reasons: set[str]


class QueueState(Generic[K]):
    def __init__(self) -> None:
        self._pending: dict[K, _Entry] = {}
        self._heap: list[tuple[float, int, K]] = []  # (due, seq, key); stale entries skipped on pop
        self._seq = itertools.count()
        self._running: set[K] = set()
        self._after_run: dict[K, _Entry] = {}  # adds that arrived while the key ran

    def add(self, key: K, now: float, delay: float = 0.0, reason: str = EVENT) -> None:
        due = now + max(0.0, delay)
        target = self._after_run if key in self._running else self._pending
        entry = target.get(key)
        if entry is None:
            target[key] = _Entry(due, {reason})
        else:
            entry.due = min(entry.due, due)
            entry.reasons.add(reason)
        if target is self._pending and (entry is None or entry.due == due):
            heapq.heappush(self._heap, (due, next(self._seq), key))

    def pop_ready(self, now: float) -> Item[K] | None:
        """The earliest due key that is not running, as (key, reasons); None if nothing is due."""
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._pending.get(key)
            if entry is None or entry.due != due:
                heapq.heappop(self._heap)  # superseded
                continue
            if due > now:
                return None
            heapq.heappop(self._heap)
            del self._pending[key]
            self._running.add(key)
            return Item(key, frozenset(entry.reasons))
        return None

    def next_due(self) -> float | None:
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._pending.get(key)
            if entry is None or entry.due != due:
                heapq.heappop(self._heap)
                continue
            return due
        return None

    def done(self, key: K, now: float, requeue_after: float | None = None, reason: str = RESYNC) -> None:
        """Release ``key``; re-add what arrived meanwhile, and/or schedule it again after ``requeue_after``."""
        self._running.discard(key)
        later = self._after_run.pop(key, None)
        if later is not None:
            for why in later.reasons:
                self.add(key, now, max(0.0, later.due - now), why)
        if requeue_after is not None:
            self.add(key, now, requeue_after, reason)

    def forget(self, key: K) -> None:
        """Drop a waiting entry (the object is gone); a running key still finishes."""
        self._pending.pop(key, None)
        self._after_run.pop(key, None)

    def pending(self, key: K) -> tuple[float, frozenset[str]] | None:
        entry = self._pending.get(key) or self._after_run.get(key)
        return (entry.due, frozenset(entry.reasons)) if entry else None

    def depth(self, now: float) -> int:
        """Keys due now and waiting for a worker."""
        return sum(1 for entry in self._pending.values() if entry.due <= now)

    def running_count(self) -> int:
        return len(self._running)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._state: QueueState[K] = QueueState()
        self._clock = clock
        self._cond = threading.Condition()
        self._shutdown = False

    def add(self, key: K, delay: float = 0.0, reason: str = EVENT) -> None:
        with self._cond:
            self._state.add(key, self._clock(), delay, reason)
            self._cond.notify()

    def get(self, timeout: float | None = None) -> Item[K] | None:
        """Block until a key is due; (key, reasons), or None on shutdown or timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._shutdown:
                now = self._clock()
                item = self._state.pop_ready(now)
                if item is not None:
                    return item
                wait: float | None = None
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

    def done(self, key: K, requeue_after: float | None = None, reason: str = RESYNC) -> None:
        with self._cond:
            self._state.done(key, self._clock(), requeue_after, reason)
            self._cond.notify_all()

    def forget(self, key: K) -> None:
        with self._cond:
            self._state.forget(key)

    def depth(self) -> int:
        with self._cond:
            return self._state.depth(self._clock())

    def running(self) -> int:
        with self._cond:
            return self._state.running_count()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
