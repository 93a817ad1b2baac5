# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A worker on a lost Kubernetes node made again elsewhere (``spec.healthChecks.kubernetesNodes.replaceLostAfter``).
Pure.

When a kubelet goes silent, Kubernetes marks its Node not Ready and, after the pods' unreachable toleration, marks
them for deletion; but a StatefulSet pod stays Terminating until that kubelet confirms, so its StatefulSet never
makes it again and the Slurm node stays DOWN for as long as the machine is away. The converge deletes such a pod at
once (no grace period) when two independent witnesses agree that it is gone:

* Kubernetes: its Node has not been Ready for ``replaceLostAfter`` (the Ready condition's last transition);
* Slurm: slurmctld gets no answer from its slurmd (the node's ``NOT_RESPONDING`` flag).

The second is the interlock: a node whose kubelet died but whose slurmd still answers keeps its pod, so a Slurm node
name never runs in two pods. The StatefulSet then makes the pod again on a Ready node (the lost one carries the
node lifecycle controller's unreachable taint) and its slurmd registers under the same name; Slurm ends the jobs
that were on it as its policy says (requeued where allowed). Workers bound to their node (pinned, every-node) are
never candidates (``modes.replaceable_pods``).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import List, Mapping, NamedTuple, Optional

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_PROGRESSING, REQUEUE_SLURM_UNREACHABLE, Context, LostPod, NodeFacts, Draft, labels,
)
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

# The Event on the NodeSet when one of its pods is deleted for this.
EVENT_LOST_WORKER_REPLACED = "LostWorkerReplaced"


class Verdict(NamedTuple):
    """What :func:`judge` decides for one worker pod whose Kubernetes node is not Ready."""

    pod: str
    host: str
    action: str  # REPLACE, WAIT (the bound has not passed) or KEEP (its slurmd still answers)
    seconds: int  # REPLACE, KEEP: how long the node has not been Ready; WAIT: seconds left until the bound
    why: str


REPLACE, WAIT, KEEP = "replace", "wait", "keep"


def judge(pods: Mapping[str, KubeObject], k8s_nodes: Mapping[str, NodeFacts],
          slurm: Mapping[str, SlurmNode], after_seconds: float, now: int) -> List[Verdict]:
    """A verdict for each pod (by name) scheduled on a known Kubernetes node that is not Ready; none for the rest
    (a node Ready, not read, or whose Ready condition has no time: nothing to measure the bound from)."""
    found = []
    for pod_name in sorted(pods):
        host = (pods[pod_name].get("spec") or {}).get("nodeName")
        facts = k8s_nodes.get(host) if host else None
        if facts is None or facts["conditions"].get("Ready") == "True":
            continue
        since: Optional[int] = facts.get("ready_since")
        if since is None:
            continue
        lost_for = max(0, now - since)
        state = facts["conditions"].get("Ready", "absent")
        if lost_for < after_seconds:
            found.append(Verdict(pod_name, str(host), WAIT, int(after_seconds - lost_for + 0.999),
                                 "Kubernetes node %s not Ready (%s) for %d s" % (host, state, lost_for)))
            continue
        node = slurm.get(pod_name)
        if node is None or "NOT_RESPONDING" not in node["flags"]:
            found.append(Verdict(pod_name, str(host), KEEP, lost_for,
                                 "Kubernetes node %s not Ready (%s) for %d s, but slurmctld %s" % (
                                     host, state, lost_for, "does not know the node" if node is None
                                     else "still gets answers from its slurmd")))
            continue
        found.append(Verdict(pod_name, str(host), REPLACE, lost_for,
                             "Kubernetes node %s not Ready (%s) for %d s and its slurmd not responding (Slurm state "
                             "%s)" % (host, state, lost_for, "+".join([node["state"]] + node["flags"]))))
    return found


def plan_lost(p: Draft, ctx: Context, pods: Mapping[str, KubeObject]) -> None:
    """``p.replace_lost``: the worker pods (``modes.replaceable_pods``) to delete now, each with its reason, and a
    wait while a lost node's bound runs. Nothing without the setting, Slurm's answer or the Nodes."""
    setting = ctx.spec["healthChecks"]["kubernetesNodes"].get("replaceLostAfter")
    k8s_nodes = ctx.observed.get("k8s_nodes")
    if not setting or ctx.slurm is None or not pods:
        return
    if k8s_nodes is None:
        why = ctx.observed.get("k8s_nodes_error") or "Kubernetes nodes not read"
        p.deferred.append("spec.healthChecks.kubernetesNodes.replaceLostAfter: %s" % why)
        return
    for verdict in judge(pods, k8s_nodes, ctx.slurm, durations.seconds(setting), ctx.now):
        if verdict.action == REPLACE:
            pod = pods[verdict.pod]
            p.replace_lost.append(LostPod(verdict.pod, pod["metadata"].get("uid"), verdict.host,
                                          labels(pod).get(names.LABEL_NODESET, ""), verdict.why))
            p.wait(REQUEUE_PROGRESSING, "%s: %s: its pod is made again on a Ready node" % (verdict.pod, verdict.why))
        elif verdict.action == WAIT:
            p.wait(max(REQUEUE_PROGRESSING, verdict.seconds), "%s: %s: made again elsewhere in %d s "
                   "(replaceLostAfter %s) unless it returns" % (verdict.pod, verdict.why, verdict.seconds, setting))
        else:
            # Not work under way (a run would wait for it): looked at again, in case slurmd falls silent too.
            p.deferred.append("%s: %s: its pod is kept" % (verdict.pod, verdict.why))
            p.requeue_after = min(p.requeue_after or REQUEUE_SLURM_UNREACHABLE, REQUEUE_SLURM_UNREACHABLE)
