"""Leader election over a coordination.k8s.io/v1 Lease: the decision, as a pure function of what was observed.

Like client-go, expiry is judged on the local clock from when *we* first saw the current record (holder and
renewTime), never by comparing the record's timestamps with our clock, so clock skew between replicas does not
matter. A record with no holder (released on shutdown) is free at once.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypedDict

CREATE = "create"
ACQUIRE = "acquire"
RENEW = "renew"
WAIT = "wait"


class LeaseSpec(TypedDict):
    """The spec of a coordination.k8s.io/v1 Lease as this module writes it (the API's field names)."""
    holderIdentity: str | None
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


@dataclass(frozen=True)
class LeaseRecord:
    holder: str | None
    duration: float
    renew_time: str | None = None
    acquire_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> "LeaseRecord":
        spec = spec or {}
        return cls(holder=spec.get("holderIdentity") or None,
                   duration=float(spec.get("leaseDurationSeconds") or 0),
                   renew_time=spec.get("renewTime"), acquire_time=spec.get("acquireTime"),
                   transitions=int(spec.get("leaseTransitions") or 0))

    def version(self) -> tuple[str | None, str | None]:
        """What must change for the holder to count as alive."""
        return (self.holder, self.renew_time)


@dataclass(frozen=True)
class Decision:
    action: str
    wait: float = 0.0  # seconds until the current holder's lease runs out (WAIT only)


def decide(record: LeaseRecord | None, identity: str, now: float, observed_at: float | None) -> Decision:
    """What to do with the Lease, given the record (None: no Lease object yet) and when we first saw it."""
    if record is None:
        return Decision(CREATE)
    if record.holder == identity:
        return Decision(RENEW)
    if not record.holder:
        return Decision(ACQUIRE)
    seen = now if observed_at is None else observed_at
    left = seen + record.duration - now
    if left <= 0:
        return Decision(ACQUIRE)
    return Decision(WAIT, left)


def micro_time(when: datetime) -> str:
    """The MicroTime format of Lease timestamps."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def next_spec(record: LeaseRecord | None, identity: str, action: str, wall_now: datetime,
              duration_seconds: float) -> LeaseSpec:
    """The Lease spec to write for ``action`` (CREATE, ACQUIRE or RENEW)."""
    stamp = micro_time(wall_now)
    transitions = record.transitions if record else 0
    if action in (CREATE, ACQUIRE):
        if record is not None and record.holder and record.holder != identity:
            transitions += 1
        acquire = stamp
    else:
        acquire = (record.acquire_time if record else None) or stamp
    return {"holderIdentity": identity, "leaseDurationSeconds": max(1, int(round(duration_seconds))),
            "acquireTime": acquire, "renewTime": stamp, "leaseTransitions": transitions}


def released_spec(record: LeaseRecord, wall_now: datetime) -> LeaseSpec:
    """Give the Lease up on shutdown: no holder, so a standby takes it at its next retry."""
    stamp = micro_time(wall_now)
    return {"holderIdentity": None, "leaseDurationSeconds": 1, "acquireTime": record.acquire_time or stamp,
            "renewTime": stamp, "leaseTransitions": record.transitions}


def still_leader(last_renewed: float | None, now: float, renew_deadline: float) -> bool:
    """A leader that has not renewed within the renew deadline must stop reconciling."""
    return last_renewed is not None and now - last_renewed < renew_deadline
