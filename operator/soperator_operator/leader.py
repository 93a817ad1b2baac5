"""Leader election loop around the pure ``lease.decide`` (adapter + thread)."""

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

from . import lease as L

if TYPE_CHECKING:
    from .kube import Kube

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, kube: "Kube", namespace: str, name: str, identity: str, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_started: Callable[[], object] | None = None, on_stopped: Callable[[], object] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry-period < renew-deadline < lease-duration")
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_started, self.on_stopped = on_started or (lambda: None), on_stopped or (lambda: None)
        self.clock, self.wall = clock, wall
        self.is_leader = False
        self.api_ok = threading.Event()   # at least one successful round trip (readiness)
        self._stop = threading.Event()
        self._lose_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._observed: tuple[tuple[str | None, str | None], float] | None = None  # (record version, first seen)
        self._last_renewed: float | None = None
        self._rv: str | None = None
        # The record this replica last wrote, while it holds the Lease at self._rv.
        self._written: L.LeaseRecord | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="leader-election")
        self._thread.start()
        # The renew deadline is checked apart from the loop: a Lease call that hangs must not keep a replica
        # that may have lost the Lease reconciling (every call also has a timeout).
        threading.Thread(target=self._watchdog, daemon=True, name="leader-watchdog").start()

    def _watchdog(self) -> None:
        # Wakes at the renew deadline of the last renewal it knows of (an idle process does not tick), and at
        # least every retry period to pick up a new leadership.
        wait = self.retry_period
        while not self._stop.wait(wait):
            leader = self.is_leader  # read first: a leader's renewal time is set before it becomes one
            now, renewed = self.clock(), self._last_renewed
            if leader and not L.still_leader(renewed, now, self.renew_deadline):
                self._lose("could not renew lease %s/%s within %.1fs" % (self.namespace, self.name,
                                                                         self.renew_deadline))
                return
            # A leader that gets here has renewed (still_leader is False without a renewal).
            wait = max(0.01, renewed + self.renew_deadline - now) if leader and renewed is not None else \
                self.retry_period

    def _lose(self, why: str) -> None:
        with self._lose_lock:
            if not self.is_leader:
                return
            log.error("%s: stopping", why)
            self.is_leader = False
            self._stop.set()
        self.on_stopped()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(self.retry_period + 10)
        if release and self.is_leader:
            self.release()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception as exc:  # noqa: BLE001  API unavailable: keep trying until the renew deadline
                log.warning("leader election round failed: %s", exc)
            if self.is_leader and not L.still_leader(self._last_renewed, self.clock(), self.renew_deadline):
                self._lose("could not renew lease %s/%s within %.1fs" % (self.namespace, self.name,
                                                                         self.renew_deadline))
                return
            self._stop.wait(self.retry_period)

    def _round(self) -> None:
        if self.is_leader and self._written is not None and self._rv and self._renew():
            return
        self._written = None
        body = self.kube.get_lease(self.namespace, self.name)
        self.api_ok.set()
        now = self.clock()
        record = L.LeaseRecord.from_spec(body["spec"]) if body else None
        self._rv = (body or {}).get("metadata", {}).get("resourceVersion")
        if record is not None and (self._observed is None or self._observed[0] != record.version()):
            self._observed = (record.version(), now)
        decision = L.decide(record, self.identity, now, self._observed[1] if self._observed else None)
        if decision.action == L.WAIT:
            if self.is_leader:  # someone else took it (we were too slow)
                self._lose("lease %s taken by %s" % (self.name, record.holder if record else None))
            return
        # The renew deadline counts from before the renewTime written, not from the answer: a slow write must not
        # let this replica act past the Lease it wrote (a standby counts its duration from that renewal).
        sent = self.clock()
        spec = L.next_spec(record, self.identity, decision.action, self.wall(), self.lease_duration)
        try:
            if decision.action == L.CREATE:
                written = self.kube.create_lease(self.namespace, self.name, spec)
            else:
                written = self.kube.replace_lease(self.namespace, self.name, self._rv, spec)
        except (access.Conflict, access.Invalid):  # another replica wrote first
            return
        self._last_renewed = sent
        self._remember(written, spec)
        if not self.is_leader:
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
            self.is_leader = True
            self.on_started()

    def _renew(self) -> bool:
        """The leader's renewal in one request, as client-go does: the record it wrote last, at the
        resourceVersion that write got. True when renewed; False (nothing written) when the Lease moved on meanwhile,
        and the round reads it first."""
        sent = self.clock()
        spec = L.next_spec(self._written, self.identity, L.RENEW, self.wall(), self.lease_duration)
        try:
            written = self.kube.replace_lease(self.namespace, self.name, self._rv, spec)
        except (access.Conflict, access.Invalid, access.NotFound):
            return False
        self.api_ok.set()
        self._last_renewed = sent
        self._remember(written, spec)
        return True

    def _remember(self, written: KubeObject | None, spec: L.LeaseSpec) -> None:
        """What the next renewal replaces: the Lease as written (its new resourceVersion), or nothing known."""
        rv = ((written or {}).get("metadata") or {}).get("resourceVersion") if isinstance(written, dict) else None
        self._rv, self._written = (rv, L.LeaseRecord.from_spec(spec)) if rv else (self._rv, None)

    def release(self) -> None:
        try:
            body = self.kube.get_lease(self.namespace, self.name)
            if not body or (body.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            record = L.LeaseRecord.from_spec(body["spec"])
            self.kube.replace_lease(self.namespace, self.name, body["metadata"]["resourceVersion"],
                                    L.released_spec(record, self.wall()))
            log.info("released lease %s/%s", self.namespace, self.name)
        except Exception as exc:  # noqa: BLE001  best effort: the lease expires anyway
            log.warning("could not release lease: %s", exc)
        finally:
            self.is_leader = False
