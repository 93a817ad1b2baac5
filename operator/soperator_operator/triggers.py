"""Which watch events deserve a run. Pure.

A run is due when an object is first seen (create, or operator start), when its generation changes (spec edits;
status, label and resourceVersion-only changes do not bump it), or when its deletion starts. Our own status and
finalizer writes therefore never trigger runs: no reconcile storms.
"""

from dataclasses import dataclass
from typing import Optional

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True)
class Seen:
    generation: int
    deleting: bool
    owner: Optional[str] = None  # the reconciled owner's name, for kinds that reconcile an owner


def seen_of(obj, owner=None) -> Seen:
    meta = obj.get("metadata") or {}
    return Seen(int(meta.get("generation") or 0), bool(meta.get("deletionTimestamp")), owner)


def should_run(previous: Optional[Seen], current: Optional[Seen], event_type: str) -> bool:
    if event_type == DELETED:
        return True  # our own kind: the key is forgotten; an owner-reconciled kind: its owner prunes
    if previous is None or current is None:
        return True
    return (current.generation != previous.generation or current.deleting != previous.deleting
            or current.owner != previous.owner)


def owners_to_enqueue(previous: Optional[Seen], current: Optional[Seen]):
    """Owner names to reconcile for an owner-reconciled object (both, when its owner reference moved)."""
    names = []
    for seen in (previous, current):
        if seen is not None and seen.owner and seen.owner not in names:
            names.append(seen.owner)
    return names
