# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Status of SlurmClusters and NodeSets: conditions and counts, computed from a converge plan. Pure.

The reconciler (the ``slurm_cluster`` module, in ``site.yml`` and under the operator alike) owns
``observedGeneration``, ``phase``, the ``Ready`` and ``Degraded`` conditions and a NodeSet's replica and Slurm
node counts; the operator runtime adds operator-sdk's ``Running``/``Successful``/``Failure``. Conditions of
other types are kept untouched.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Literal, Mapping, Sequence, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils.api.durations import iso
from ansible_collections.soperator.slurm.plugins.module_utils.plan.decided import Plan
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import NodeSetFacts, Waiting
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

MAX_MESSAGE = 32768

REASON_RECONCILED = "Reconciled"
REASON_PROGRESSING = "Progressing"
REASON_MAINTENANCE = "Maintenance"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_RECONCILE_ERROR = "ReconcileError"
REASON_CLUSTER_NOT_FOUND = "ClusterNotFound"
REASON_LEAVING = "Removing"
REASON_ROLLING = "RollingUpdate"
REASON_WAITS_FOR_MAINTENANCE = "WaitsForMaintenance"  # a change Slurm takes only with no worker running
REASON_FAILED = "Failed"                # something of the cluster failed and needs someone (the populate Job)
REASON_SECRET_MISSING = "SecretMissing"  # a key Secret is gone while pods hold its keys

# Conditions of the optional components (components.component_conditions), present while the component is enabled.
COMPONENT_CONDITIONS = ("AccountingReady", "RestApiReady", "ExporterReady", "BackupReady", "IdentityReady")

MAX_JOBS = 1024  # job ids per node in status.rollingUpdate (the schema's maxItems)

COUNT_KEYS: Tuple[Literal["idle", "allocated", "mixed", "drained", "down", "updatedReplicas",
                          "outdatedReplicas"], ...] = (
    "idle", "allocated", "mixed", "drained", "down", "updatedReplicas", "outdatedReplicas")


def set_condition(conditions: Iterable[KubeObject] | None, ctype: str, status: str, reason: str, message: str | None,
                  generation: int | None, now: str) -> list[KubeObject]:
    """A new list with condition ``ctype`` set; lastTransitionTime moves only when ``status`` changes."""
    result: list[KubeObject] = []
    found = False
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


def remove_condition(conditions: Iterable[KubeObject] | None, ctype: str) -> list[KubeObject]:
    return [c for c in conditions or [] if c.get("type") != ctype]


def get_condition(conditions: Iterable[KubeObject] | None, ctype: str) -> KubeObject | None:
    for cond in conditions or []:
        if cond.get("type") == ctype:
            return cond
    return None


def _condition(ctype: str, status: str, reason: str, message: str | None, generation: int | None,
               transition: str) -> KubeObject:
    cond: KubeObject = {"type": ctype, "status": status, "reason": reason, "message": (message or "")[:MAX_MESSAGE],
                        "lastTransitionTime": transition}
    if generation is not None:
        cond["observedGeneration"] = int(generation)
    return cond


def same_status(old: KubeObject | None, new: KubeObject | None) -> bool:
    """True when writing ``new`` would change nothing but timestamps (skip the write)."""
    def strip(status: KubeObject | None) -> KubeObject:
        status = dict(status or {})
        status["conditions"] = sorted(
            (dict((k, v) for k, v in c.items() if k != "lastTransitionTime") for c in status.get("conditions") or []),
            key=lambda c: c.get("type", ""))
        return status
    return strip(old) == strip(new)


def label_selector(match_labels: Mapping[str, str] | None) -> str:
    """``matchLabels`` as the string form the scale subresource and HPA read (``a=b,c=d``, sorted)."""
    return ",".join("%s=%s" % (k, v) for k, v in sorted((match_labels or {}).items()))


def generation(obj: KubeObject | None) -> int:
    return int(((obj or {}).get("metadata") or {}).get("generation") or 0)


def cluster_status(old: KubeObject | None, obj: KubeObject, plan: Plan, now: str) -> KubeObject:
    """A SlurmCluster's status after a converge pass that produced ``plan``."""
    status = dict(old or {})
    gen = generation(obj)
    conds = status.get("conditions")
    if plan.report.ready:
        reason = REASON_MAINTENANCE if plan.report.phase == "Maintenance" else REASON_RECONCILED
        conds = set_condition(conds, "Ready", "True", reason, plan.report.message, gen, now)
    else:
        conds = set_condition(conds, "Ready", "False", REASON_PROGRESSING, plan.report.message, gen, now)
    if plan.report.login_outdated is not None:
        outdated = plan.report.login_outdated
        conds = set_condition(conds, "LoginUpToDate", "False" if outdated else "True",
                              REASON_ROLLING if outdated else REASON_RECONCILED,
                              "%d login pod(s) on an older template: each is replaced once nobody is logged in to "
                              "it, or after spec.login.updateGracePeriod" % outdated if outdated else
                              "every login pod on the current template", gen, now)
    if plan.report.slurm_user_kept:
        conds = set_condition(conds, "SlurmUserUpToDate", "False", REASON_WAITS_FOR_MAINTENANCE,
                              plan.report.slurm_user_kept, gen, now)
    else:
        conds = remove_condition(conds, "SlurmUserUpToDate")
    for ctype in COMPONENT_CONDITIONS:
        if ctype in plan.report.components:
            cstatus, reason, message = plan.report.components[ctype]
            conds = set_condition(conds, ctype, cstatus, reason, message, gen, now)
        else:  # the component was switched off
            conds = remove_condition(conds, ctype)
    degraded = list(plan.report.degraded)
    if plan.definition.invalid or degraded:
        message = "; ".join(["NodeSet %s: %s" % kv for kv in sorted(plan.definition.invalid.items())] + degraded)
        reason = REASON_INVALID_SPEC if plan.definition.invalid else REASON_FAILED
        conds = set_condition(conds, "Degraded", "True", reason, message, gen, now)
    else:
        conds = set_condition(conds, "Degraded", "False", REASON_RECONCILED, "", gen, now)
    status.update(conditions=conds, observedGeneration=gen, phase=plan.report.phase)
    # status.slurmConfig: the slurm.conf slurmctld was last given, and how (plan/slurm_config.py).
    if plan.report.slurm_config:
        status["slurmConfig"] = plan.report.slurm_config
    # status.backup: the backups' facts (plan/backup.py); None removes it (a merge patch) once backups are off.
    if plan.report.backup is not None or "backup" in status:
        status["backup"] = plan.report.backup
    return status


def rolling_summary(waiting: Iterable[Waiting]) -> str:
    """One line for `kubectl get nodeset`: each node a rolling update waits for, its jobs, since when, until when."""
    parts: list[str] = []
    for entry in waiting:
        jobs = entry.get("jobs")
        text = entry["node"]
        if jobs:
            text += " (job%s %s)" % ("s" if len(jobs) > 1 else "", ",".join(jobs))
        text += " since " + iso(entry["since"])
        proceed_at = entry.get("proceedAt")
        if proceed_at is not None:
            text += ", replaced at " + iso(proceed_at)
        parts.append(text)
    return "; ".join(parts)[:1024]


def rolling_update_status(waiting: Sequence[Waiting]) -> KubeObject:
    """``status.rollingUpdate`` of a NodeSet from the planner's ``waitingFor`` entries (epoch seconds)."""
    entries: list[KubeObject] = []
    for entry in waiting:
        shown: KubeObject = {"node": entry["node"], "since": iso(entry["since"])}
        jobs, proceed_at = entry.get("jobs"), entry.get("proceedAt")
        if jobs is not None:
            shown["jobs"] = list(jobs)[:MAX_JOBS]
        if proceed_at is not None:
            shown["proceedAt"] = iso(proceed_at)
        entries.append(shown)
    return {"waitingFor": entries, "summary": rolling_summary(waiting)}


def invalid_cluster_status(old: KubeObject | None, obj: KubeObject, message: str, now: str,
                           reason: str = REASON_INVALID_SPEC, phase: str = "Invalid") -> KubeObject:
    """The SlurmCluster's spec is invalid (or, with ``reason``, the cluster cannot be converged safely): nothing was
    applied; the generation was judged."""
    status = dict(old or {})
    gen = generation(obj)
    conds = set_condition(status.get("conditions"), "Ready", "False", reason, message, gen, now)
    conds = set_condition(conds, "Degraded", "True", reason, message, gen, now)
    status.update(conditions=conds, observedGeneration=gen, phase=phase)
    return status


# An elastic NodeSet's power states (plan/elastic.facts), as kubectl get nodeset shows them.
ELASTIC_KEYS: Tuple[Literal["poweredUp", "poweringUp", "poweredDown", "failed"], ...] = (
    "poweredUp", "poweringUp", "poweredDown", "failed")
# Facts of a NodeSet that are maps by worker (Slurm node).
_BY_WORKER: Tuple[Literal["labelFeatures", "pins", "workerNodes", "podBackoff"], ...] = (
    "labelFeatures", "pins", "workerNodes", "podBackoff")


def nodeset_status(old: KubeObject | None, obj: KubeObject, plan: Plan, facts: NodeSetFacts | None,
                   selector: str | None, now: str) -> KubeObject:
    """A NodeSet's status: its pods (for the scale subresource), its Slurm nodes, Ready/Degraded."""
    status = dict(old or {})
    gen = generation(obj)
    name = obj["metadata"]["name"]
    conds = status.get("conditions")
    invalid = plan.definition.invalid.get(name)
    if invalid:
        conds = set_condition(conds, "Ready", "False", REASON_INVALID_SPEC, invalid, gen, now)
        conds = set_condition(conds, "Degraded", "True", REASON_INVALID_SPEC, invalid, gen, now)
        status.update(conditions=conds, observedGeneration=gen)
        return status
    conds = set_condition(conds, "Degraded", "False", REASON_RECONCILED, "", gen, now)
    if facts is not None:
        want = facts["desired"]
        ready = (not facts.get("leaving") and facts["replicas"] == want and facts["readyReplicas"] >= want
                 and facts["serving"] >= want and (plan.report.phase != "Maintenance") and not facts.get("problem"))
        if facts.get("leaving"):
            reason, message = REASON_LEAVING, "draining and removing its nodes"
        elif plan.report.phase == "Maintenance":
            reason, message = REASON_MAINTENANCE, "the cluster is in maintenance"
        elif ready:
            reason, message = REASON_RECONCILED, "%d/%d Slurm nodes up" % (facts["serving"], want)
        else:
            reason = REASON_PROGRESSING
            message = "%d/%d pods ready, %d/%d Slurm nodes up" % (facts["readyReplicas"], want, facts["serving"], want)
            if facts["replicas"] != want:
                message += ", %d replicas kept until their nodes drain" % facts["replicas"]
            if facts.get("unschedulable"):
                message += "; not placed: " + "; ".join(facts["unschedulable"])
            if facts.get("problem"):
                message += "; " + facts["problem"]
        conds = set_condition(conds, "Ready", "True" if ready else "False", reason, message, gen, now)
        if facts.get("outdatedReplicas") is not None:
            outdated = facts["outdatedReplicas"]
            proceed = ((obj.get("spec") or {}).get("updateStrategy") or {}).get("proceedAfter")
            message = "every pod on the current template"
            if outdated:
                message = ("%d of %d pods on an older template: each is replaced once its Slurm node is drained and "
                           "idle" % (outdated, outdated + facts["updatedReplicas"]))
                if proceed:
                    message += ", or %s after its drain with its jobs (spec.updateStrategy.proceedAfter)" % proceed
                if facts.get("waitingFor"):
                    message += "; waiting for " + rolling_summary(facts["waitingFor"])
                note = facts.get("note")
                if note:
                    message += "; " + note
            conds = set_condition(conds, "UpToDate", "False" if outdated else "True",
                                  REASON_ROLLING if outdated else REASON_RECONCILED, message, gen, now)
        if facts.get("waitingFor"):
            status["rollingUpdate"] = rolling_update_status(facts["waitingFor"])
        elif "waitingFor" in facts and status.get("rollingUpdate") is not None:
            status["rollingUpdate"] = None  # a merge patch removes it
        status["replicas"] = facts["currentReplicas"]
        status["readyReplicas"] = facts["readyReplicas"]
        for key in COUNT_KEYS + ELASTIC_KEYS:
            if key in facts:
                status[key] = facts[key]
        if "labelsRefused" in facts:
            status["labelsRefused"] = facts["labelsRefused"]
        for field in _BY_WORKER:
            if field in facts:
                # A merge patch: a worker no longer listed is removed by null.
                gone = dict((n, None) for n in ((old or {}).get(field) or {}) if n not in facts[field])
                status[field] = dict(gone, **facts[field])
    if selector:
        status["selector"] = selector
    status.update(conditions=conds, observedGeneration=gen)
    return status
