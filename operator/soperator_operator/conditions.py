"""Status the runtime leaves on a resource: operator-sdk's Running/Successful/Failure conditions. Pure.

The reconciler (the converge module) owns ``Ready``, ``phase``, ``observedGeneration`` and a NodeSet's counts;
the runtime adds what upstream's ansible-operator writes, so tooling written for upstream reads ours, plus
``Degraded`` when a run fails (the module clears it on its next success). Other conditions are kept untouched.
"""

from dataclasses import dataclass

from ansible_collections.soperator.slurm.plugins.module_utils.names import STATUS_RECONCILED_DIGEST
from ansible_collections.soperator.slurm.plugins.module_utils.plan.status import (  # noqa: F401  (re-exported)
    REASON_CLUSTER_NOT_FOUND,
    REASON_INVALID_SPEC,
    REASON_RECONCILE_ERROR,
    get_condition,
    remove_condition,
    same_status,
    set_condition,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

REASON_RUNNING = "Running"
REASON_SUCCESSFUL = "Successful"
REASON_FAILED = "Failed"


@dataclass(frozen=True)
class Outcome:
    """What a finished run means for the resource."""
    ok: bool
    message: str = ""
    permanent: bool = False
    reason: str = ""  # overrides the default reason of a failure


def running_status(status: KubeObject | None, generation: int, now: str) -> KubeObject:
    """Status while a run for a new generation is in flight."""
    status = dict(status or {})
    status["conditions"] = set_condition(status.get("conditions"), "Running", "True", REASON_RUNNING,
                                         "Running reconciliation", generation, now)
    return status


def finished_status(status: KubeObject | None, generation: int, outcome: Outcome, now: str,
                    digest: str | None = None) -> KubeObject:
    """Status after a run of ``generation`` ended with ``outcome``; ``digest``: the inputs a settled successful
    run started from (``drift.observed_digest``), kept for the next check (and the next operator). Without one
    (a failure, work left for later) the previous digest is removed (null in the merge patch), so that no later
    check takes these inputs for converged."""
    status = dict(status or {})
    if outcome.ok and digest is not None:
        status[STATUS_RECONCILED_DIGEST] = digest
    elif status.get(STATUS_RECONCILED_DIGEST) is not None:
        status[STATUS_RECONCILED_DIGEST] = None
    conds = status.get("conditions")
    if outcome.ok:
        conds = set_condition(conds, "Running", "True", REASON_SUCCESSFUL, "Awaiting next reconciliation",
                              generation, now)
        conds = set_condition(conds, "Successful", "True", REASON_SUCCESSFUL, "Last reconciliation succeeded",
                              generation, now)
        conds = remove_condition(conds, "Failure")
    else:
        reason = outcome.reason or (REASON_INVALID_SPEC if outcome.permanent else REASON_RECONCILE_ERROR)
        conds = set_condition(conds, "Running", "False", REASON_FAILED, "Reconciliation failed", generation, now)
        conds = set_condition(conds, "Successful", "False", REASON_FAILED, "Last reconciliation failed",
                              generation, now)
        conds = set_condition(conds, "Failure", "True", REASON_FAILED, outcome.message, generation, now)
        conds = set_condition(conds, "Degraded", "True", reason, outcome.message, generation, now)
        if outcome.reason == REASON_CLUSTER_NOT_FOUND:
            conds = set_condition(conds, "Ready", "False", reason, outcome.message, generation, now)
    status["conditions"] = conds
    return status
