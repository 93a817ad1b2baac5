# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The login pods' rolling update: ``OnDelete`` too; an outdated login pod goes once nobody is logged in to it, or
once ``spec.login.updateGracePeriod`` has passed since its template changed. That wait is *deferred* work: it keeps
nothing from Ready, and ``site.yml`` does not wait for it. Pure.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_DRAINING, REQUEUE_PROGRESSING, REVISION_LABEL, Context, Draft, labels, pod_ready, replicas, revision_seen,
    template_hash,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


def template_since(sts: KubeObject | None) -> int | None:
    """Epoch seconds of the StatefulSet's template-since annotation, None when absent or unreadable."""
    return durations.epoch_of((((sts or {}).get("metadata") or {}).get("annotations") or {}).get(
        names.ANNOTATION_TEMPLATE_SINCE))


def outdated_login_pods(cluster_name: str, statefulsets: Mapping[str, KubeObject],
                        pods: Mapping[str, KubeObject]) -> list[str]:
    """Names of the login pods on another template revision than their StatefulSet's update revision."""
    sts = statefulsets.get(names.login_name(cluster_name))
    revision = ((sts or {}).get("status") or {}).get("updateRevision")
    if not revision:
        return []
    return sorted(pod for pod, obj in pods.items()
                  if names.ordinal(pod, names.login_name(cluster_name)) is not None
                  and labels(obj).get(REVISION_LABEL) != revision)


def plan_login(p: Draft, ctx: Context) -> None:
    """Stamp the login StatefulSet this pass renders (in ``p.manifests``) with when its template last changed (the
    grace period's start), and replace one outdated login pod at a time once nobody is logged in to it
    (``observed["login_sessions"]``: {pod: open sessions}, absent or None when unknown) or once the grace period has
    passed. Writes ``p.login_outdated``, ``p.delete_pods`` and the waits (deferred while sessions are open)."""
    sessions = ctx.observed.get("login_sessions") or {}
    now, spec, pods = ctx.now, ctx.spec, ctx.pods
    sts_name = names.login_name(ctx.name)
    desired = next((m for m in p.manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == sts_name), None)
    if desired is None:
        return
    live = ctx.statefulsets.get(sts_name)
    since = template_since(live) if live is not None and template_hash(live) == template_hash(desired) else None
    if since is None:
        since = now
    desired["metadata"].setdefault("annotations", {})[names.ANNOTATION_TEMPLATE_SINCE] = durations.iso(since)
    if live is None or spec["maintenance"]:
        return
    if template_hash(live) != template_hash(desired):
        p.wait(REQUEUE_PROGRESSING, "login: new pod template; its rolling update follows")
        return
    if not revision_seen(live):
        p.wait(REQUEUE_PROGRESSING, "login: waiting for the StatefulSet's new revision")
        return
    outdated = outdated_login_pods(ctx.name, ctx.statefulsets, pods)
    p.login_outdated = len(outdated)
    if not outdated:
        return
    mine = [names.pod_name(sts_name, o) for o in range(min(spec["login"]["replicas"], replicas(live)))]
    if any(pod not in pods or (pods[pod].get("metadata") or {}).get("deletionTimestamp")
           or (pod not in outdated and not pod_ready(pods[pod])) for pod in mine):
        p.wait(REQUEUE_PROGRESSING, "login: rolling update, waiting for a replaced pod to be ready")
        return
    pod = max(outdated, key=lambda n: names.ordinal(n, sts_name) or 0)  # (login pods have one)
    deadline = since + durations.seconds(spec["login"]["updateGracePeriod"])
    open_sessions = sessions.get(pod)
    if open_sessions == 0 or now >= deadline:
        p.delete_pods.append((pod, (pods[pod].get("metadata") or {}).get("uid")))
        p.wait(REQUEUE_PROGRESSING, "login: replacing %s (%s)" % (
            pod, "no session" if open_sessions == 0 else "grace period over"))
        return
    p.defer(REQUEUE_DRAINING, "login: %s has %s; replaced when they end or at %s" % (
        pod, "%d open session(s)" % open_sessions if open_sessions is not None else "sessions not known yet",
        durations.iso(deadline)))
