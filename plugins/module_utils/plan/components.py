# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Components and readiness: what the cluster's pods say. Pure.

The optional components (accounting, REST API, exporter) each get a condition from their pods, with the reason
their entrypoint gave when they fail (``DatabaseAccessDenied: ...``); a failed populate Job degrades the cluster;
the key Secrets a pod mounts are held by it (never generated anew under it); the cluster is Ready when nothing is
pending, every StatefulSet's pods are ready and every worker is a serving Slurm node.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import identity
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    JOB_NAME_LABEL, PHASE_MAINTENANCE, PHASE_PROGRESSING, PHASE_READY, REQUEUE_PROGRESSING, Context, Draft, labels,
    name, replicas,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, Spec

_REASON = re.compile(r"^([A-Z][A-Za-z]+): ")


def pod_problem(pod: KubeObject | None) -> str | None:
    """Why a pod's container keeps failing, from its status: the last termination message (our entrypoints end
    with ``<Reason>: <what to do>``; Slurm's own last log lines otherwise), or the waiting reason. None if fine."""
    statuses = ((pod or {}).get("status") or {})
    for status in (statuses.get("initContainerStatuses") or []) + (statuses.get("containerStatuses") or []):
        if status.get("ready"):
            continue
        waiting = (status.get("state") or {}).get("waiting") or {}
        terminated = (status.get("lastState") or {}).get("terminated") or (status.get("state") or {}).get(
            "terminated") or {}
        message = (terminated.get("message") or "").strip()
        if terminated.get("exitCode") and message:
            return "%s: %s" % (status.get("name"), message.splitlines()[-1])
        if waiting.get("reason") in ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull",
                                     "CreateContainerConfigError", "CreateContainerError"):
            return "%s: %s%s" % (status.get("name"), waiting["reason"],
                                 ": " + waiting["message"] if waiting.get("message") else "")
    return None


def _problems_of(pods: Mapping[str, KubeObject], sts_name: str) -> list[str]:
    found = [pod_problem(pods[n]) for n in sorted(pods) if names.ordinal(n, sts_name) is not None]
    return [w for w in found if w]


def plan_components(p: Draft, ctx: Context) -> None:
    """A condition per optional component (AccountingReady, RestApiReady, ExporterReady) into ``p.components``:
    its pods ready, or why not, with the reason its entrypoint gave (DatabaseAccessDenied: ...). IdentityReady is
    the directory's as the controller's sssd sidecar sees it (``identity.condition``)."""
    spec, cluster_name = ctx.spec, ctx.name
    parts = [("accounting", "AccountingReady", [names.accounting_name(cluster_name)]
              + ([names.database_name(cluster_name)] if spec["accounting"]["database"]["type"] == "InCluster"
                 else [])),
             ("restApi", "RestApiReady", [names.rest_name(cluster_name)]),
             ("exporter", "ExporterReady", [names.exporter_name(cluster_name)])]
    for field, ctype, sts_names in parts:
        if not spec[field]["enabled"]:
            continue
        if spec["maintenance"]:
            p.components[ctype] = ("False", "Maintenance", "the cluster is in maintenance")
            continue
        problems: list[str] = []
        reason = "Progressing"
        for sts_name in sts_names:
            want = next((m["spec"]["replicas"] for m in p.manifests
                         if m["kind"] == "StatefulSet" and m["metadata"]["name"] == sts_name), 0)
            live = ctx.statefulsets.get(sts_name)
            ready = int(((live or {}).get("status") or {}).get("readyReplicas") or 0)
            if live is not None and ready >= want and replicas(live) == want:
                continue
            why = _problems_of(ctx.pods, sts_name)
            for text in why:
                found = _REASON.match(text.split(": ", 1)[-1])
                if found:
                    reason = found.group(1)
                    break
            problems.append("%s: %d/%d pods ready%s" % (sts_name, ready, want, "; " + "; ".join(why) if why else ""))
        if problems:
            p.components[ctype] = ("False", reason, "; ".join(problems))
        else:
            p.components[ctype] = ("True", "Ready", "every pod ready")
    condition = identity.condition(spec, ctx.observed.get("identity"), ctx.observed.get("identity_error"))
    if condition is not None:
        p.components[identity.CONDITION] = condition


def mounted_secrets(pod: KubeObject) -> list[str]:
    """The names of the Secrets ``pod`` mounts (volumes, projected volumes) or reads into its environment."""
    spec = pod.get("spec") or {}
    found = []
    for volume in spec.get("volumes") or ():
        found.append((volume.get("secret") or {}).get("secretName"))
        found += [(source.get("secret") or {}).get("name")
                  for source in (volume.get("projected") or {}).get("sources") or ()]
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        found += [((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                  for env in container.get("env") or ()]
        found += [(source.get("secretRef") or {}).get("name") for source in container.get("envFrom") or ()]
    return [secret for secret in found if secret]


def populate_failure(cluster_name: str, spec: Spec, pods: Mapping[str, KubeObject]) -> str | None:
    """Why the current populate Job failed (its last failed pod's words), or None while it has not failed."""
    job = names.populate_job_name(cluster_name, spec["jail"]["populate"]["repopulateToken"])
    mine = [p for p in pods.values() if labels(p).get(JOB_NAME_LABEL, labels(p).get("job-name")) == job]
    if any((p.get("status") or {}).get("phase") == "Succeeded" for p in mine):
        return None
    failed = sorted((p for p in mine if (p.get("status") or {}).get("phase") == "Failed"),
                    key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    if not failed:
        return None
    said = ""
    for status in (failed[-1].get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if status.get("name") == "populate" and terminated.get("message"):
            said = terminated["message"].strip().splitlines()[-1]
    return "populate Job %s failed%s (spec.jail.populate)" % (job, ": " + said if said else "")


def plan_guards(p: Draft, ctx: Context) -> None:
    """What the pods hold and what failed: ``p.secrets_held`` (a key Secret a pod of the cluster mounts: while that
    pod exists a missing one must not be generated anew, see the converge adapter's check) and ``p.degraded`` (a
    failed populate Job)."""
    p.secrets_held = sorted(set(secret for pod in ctx.pods.values() for secret in mounted_secrets(pod)))
    failure = populate_failure(ctx.name, ctx.spec, ctx.pods) if not ctx.spec["maintenance"] else None
    if failure:
        p.degraded.append(failure)


def plan_readiness(p: Draft, ctx: Context, maintenance_ready: bool) -> None:
    """``p.ready``, ``p.phase`` and ``p.message``: Ready when nothing is pending, every StatefulSet's pods are ready
    and every worker is a serving Slurm node. Nothing is requeued for readiness alone: a worker pod turns Ready when
    its Slurm node is up (its probe), and that pod event is what brings the next look; only work under way asks for a
    timed look."""
    if p.invalid:
        p.pending.append("invalid NodeSet(s): %s" % ", ".join(sorted(p.invalid)))
    p.pending.extend(p.degraded)
    if maintenance_ready:
        # Maintenance is reached when the pods are gone, not when the StatefulSets are told zero: a restore in place
        # (api/restore.py) waits for this phase and must not write the jail while a pod still mounts it.
        stopping = ["%s (%d)" % (n, count) for n, count in sorted(
            (n, int(((sts or {}).get("status") or {}).get("replicas") or 0)) for n, sts in ctx.statefulsets.items())
            if count]
        if stopping:
            p.wait(REQUEUE_PROGRESSING, "maintenance: waiting for the pods of %s to stop" % ", ".join(stopping))
        p.phase = PHASE_PROGRESSING if stopping else PHASE_MAINTENANCE
        p.ready = not p.pending
        p.message = "maintenance: every StatefulSet scaled to 0" if p.ready else "; ".join(p.pending)
        return
    problems = list(p.pending)
    for obj in p.manifests:
        if obj["kind"] != "StatefulSet":
            continue
        want = obj["spec"]["replicas"]
        live = ctx.statefulsets.get(name(obj))
        ready = int(((live or {}).get("status") or {}).get("readyReplicas") or 0)
        if live is None or ready < want or replicas(live) != want:
            failing = _problems_of(ctx.pods, name(obj))
            problems.append("%s: %d/%d pods ready%s" % (name(obj), ready if live else 0, want,
                                                        " (%s)" % "; ".join(failing) if failing else ""))
    if ctx.slurm is None:
        why = ctx.observed.get("slurm_error") or ""
        problems.append("slurmctld does not answer" + (": " + why if why else ""))
    else:
        for set_name, facts in sorted(p.nodesets.items()):
            if facts.get("elastic"):  # powering up and down is its normal life: never a reason to be unready
                continue
            want = facts["replicas"] if not facts["leaving"] else 0
            if facts["serving"] < want:
                problems.append("NodeSet %s: %d/%d Slurm nodes up" % (set_name, facts["serving"], want))
    p.ready = not problems
    p.phase = PHASE_READY if p.ready else PHASE_PROGRESSING
    p.message = "; ".join(["every pod ready and every Slurm node up"] + p.deferred) if p.ready else "; ".join(
        problems + p.deferred)
