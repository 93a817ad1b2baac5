"""Status a run leaves on a resource: operator-sdk conditions and Kubernetes-style Ready/Degraded. Pure.

- ``Running``, ``Successful``, ``Failure`` as operator-sdk's ansible-operator writes them (``Failure`` carries
  the failing task's message), so tooling written for upstream reads ours;
- ``Ready`` (the current generation was applied successfully) and ``Degraded`` (the last run failed), each with
  reason, message and observedGeneration, plus ``status.observedGeneration`` and ``status.phase``.
Conditions of other types (set by a role, for example) are kept untouched.
"""

from dataclasses import dataclass

OPERATOR_TYPES = ("Running", "Successful", "Failure", "Ready", "Degraded")

REASON_RUNNING = "Running"
REASON_SUCCESSFUL = "Successful"
REASON_FAILED = "Failed"
REASON_RECONCILED = "Reconciled"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_RECONCILE_ERROR = "ReconcileError"
REASON_CLUSTER_NOT_FOUND = "ClusterNotFound"

MAX_MESSAGE = 32768


@dataclass(frozen=True)
class Outcome:
    """What a finished run means for the resource."""
    ok: bool
    message: str = ""
    permanent: bool = False
    reason: str = ""  # overrides the default reason of a failure


def set_condition(conditions, ctype, status, reason, message, generation, now):
    """A new list with condition ``ctype`` set; lastTransitionTime moves only when ``status`` changes."""
    result, found = [], False
    for cond in conditions or []:
        if cond.get("type") != ctype:
            result.append(cond)
            continue
        found = True
        transition = cond.get("lastTransitionTime") if cond.get("status") == status else now
        result.append(_condition(ctype, status, reason, message, generation, transition or now))
    if not found:
        result.append(_condition(ctype, status, reason, message, generation, now))
    return result


def remove_condition(conditions, ctype):
    return [c for c in conditions or [] if c.get("type") != ctype]


def get_condition(conditions, ctype):
    for cond in conditions or []:
        if cond.get("type") == ctype:
            return cond
    return None


def _condition(ctype, status, reason, message, generation, transition):
    cond = {"type": ctype, "status": status, "reason": reason, "message": (message or "")[:MAX_MESSAGE],
            "lastTransitionTime": transition}
    if generation is not None:
        cond["observedGeneration"] = int(generation)
    return cond


def running_status(status, generation, now):
    """Status while a run for a new generation is in flight."""
    status = dict(status or {})
    conds = set_condition(status.get("conditions"), "Running", "True", REASON_RUNNING, "Running reconciliation",
                          generation, now)
    status["conditions"] = conds
    if not status.get("phase") or status.get("phase") == "Pending":
        status["phase"] = "Provisioning"
    return status


def finished_status(status, generation, outcome: Outcome, now):
    """Status after a run of ``generation`` ended with ``outcome``."""
    status = dict(status or {})
    conds = status.get("conditions")
    if outcome.ok:
        conds = set_condition(conds, "Running", "True", REASON_SUCCESSFUL, "Awaiting next reconciliation",
                              generation, now)
        conds = set_condition(conds, "Successful", "True", REASON_SUCCESSFUL, "Last reconciliation succeeded",
                              generation, now)
        conds = remove_condition(conds, "Failure")
        conds = set_condition(conds, "Ready", "True", outcome.reason or REASON_RECONCILED,
                              outcome.message or "All objects are applied", generation, now)
        conds = set_condition(conds, "Degraded", "False", outcome.reason or REASON_RECONCILED, "", generation, now)
        status["observedGeneration"] = int(generation)
        status["phase"] = "Ready"
    else:
        reason = outcome.reason or (REASON_INVALID_SPEC if outcome.permanent else REASON_RECONCILE_ERROR)
        conds = set_condition(conds, "Running", "False", REASON_FAILED, "Reconciliation failed", generation, now)
        conds = set_condition(conds, "Successful", "False", REASON_FAILED, "Last reconciliation failed",
                              generation, now)
        conds = set_condition(conds, "Failure", "True", REASON_FAILED, outcome.message, generation, now)
        conds = set_condition(conds, "Ready", "False", reason, outcome.message, generation, now)
        conds = set_condition(conds, "Degraded", "True", reason, outcome.message, generation, now)
        if outcome.permanent:
            # The generation was looked at and judged: nothing to wait for until the spec changes.
            status["observedGeneration"] = int(generation)
        status["phase"] = "Failed"
    status["conditions"] = conds
    return status


def same_status(old, new):
    """True when writing ``new`` would change nothing but timestamps (skip the write)."""
    def strip(status):
        status = dict(status or {})
        status["conditions"] = sorted(
            ({k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []),
            key=lambda c: c.get("type", ""))
        return status
    return strip(old) == strip(new)


def label_selector(match_labels):
    """``matchLabels`` as the string form the scale subresource and HPA read (``a=b,c=d``, sorted)."""
    return ",".join("%s=%s" % (k, v) for k, v in sorted((match_labels or {}).items()))


def nodeset_status(status, generation, outcome: Outcome, statefulset, now):
    """A NodeSet's status after its cluster's run: conditions plus pod counts and selector from its StatefulSet."""
    status = finished_status(status, generation, outcome, now)
    if statefulset:
        sts_status = statefulset.get("status") or {}
        status["replicas"] = int(sts_status.get("replicas") or 0)
        status["readyReplicas"] = int(sts_status.get("readyReplicas") or 0)
        selector = label_selector(((statefulset.get("spec") or {}).get("selector") or {}).get("matchLabels"))
        if selector:
            status["selector"] = selector
    return status
