"""Which watch events deserve a run. Pure.

A run is due when an object is first seen (create, or operator start), when its generation changes (spec edits;
status, label and resourceVersion-only changes do not bump it), or when its deletion starts. Our own status and
finalizer writes therefore never trigger runs: no reconcile storms.
"""

from dataclasses import dataclass

from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True)
class Seen:
    generation: int
    deleting: bool
    owner: str | None = None  # the reconciled owner's name, for kinds that reconcile an owner


def seen_of(obj: KubeObject, owner: str | None = None) -> Seen:
    meta = obj.get("metadata") or {}
    return Seen(int(meta.get("generation") or 0), bool(meta.get("deletionTimestamp")), owner)


def should_run(previous: Seen | None, current: Seen | None, event_type: str) -> bool:
    if event_type == DELETED:
        return True  # our own kind: the key is forgotten; an owner-reconciled kind: its owner prunes
    if previous is None or current is None:
        return True
    return (current.generation != previous.generation or current.deleting != previous.deleting
            or current.owner != previous.owner)


def owners_to_enqueue(previous: Seen | None, current: Seen | None) -> list[str]:
    """Owner names to reconcile for an owner-reconciled object (both, when its owner reference moved)."""
    names: list[str] = []
    for seen in (previous, current):
        if seen is not None and seen.owner and seen.owner not in names:
            names.append(seen.owner)
    return names
