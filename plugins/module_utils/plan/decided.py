# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one pass decided: the :class:`Plan` ``converge.plan`` returns and the adapters carry out. Pure.

A tree of small frozen dataclasses, one per concern. The planners fill a :class:`model.Draft` (each its own fields,
in ``converge.plan``'s order); :func:`freeze` makes this tree of it once they are done, so that no adapter, status
writer or later planner can change what was decided. The one thing an adapter adds, the job ids Slurm names for the
nodes a plan waits for or gives up (:meth:`Plan.nodes_with_jobs`), makes a new Plan (:meth:`Plan.with_jobs`).

    Plan
      definition  Definition    the validated SlurmCluster and NodeSets (validated once per pass), the invalid ones
      objects     Objects       what to apply (in order) and what prune must leave alone
      slurm       SlurmChanges  what slurmctld is told: drain, resume, down, forget, features, power, reconfigure
      pods        PodChanges    what is done to pods besides applying: scale, delete, evict, make, ungate, give up
      events      Events        what is said on NodeSets and the SlurmCluster beside those
      report      Report        the status: Ready and why, what is pending, the NodeSets' and pods' facts
      read_mounted_config       the planner needs the controller's mounted slurm.conf: the adapter reads it, plans again

Each sequence or mapping here is what the Draft's field of the same name held (model.py documents their shapes),
typed read-only: mypy refuses a write to one (``make test`` checks plan/, k8s/ and the operator strictly).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy
from dataclasses import dataclass, replace
from typing import Mapping, Optional, Sequence, TypeVar

from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    BackupStatus, ComponentCondition, Draft, Event, Eviction, GiveUp, LabelEvent, LostPod, NodeSetFacts, ObjectRef,
    PodCondition, PodRef, SlurmConfigStatus, Ungate, Waiting,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster


@dataclass(frozen=True)
class Definition:
    """The definition as validation left it (``converge.validate``, once per pass): the renderers and the adapters
    trust it."""

    cluster: Optional[SlurmCluster]  # validated and defaulted (None only in a Plan made by hand)
    valid_nodesets: Sequence[NodeSet]  # its valid NodeSets, defaulted
    invalid: Mapping[str, str]  # NodeSet name -> "path: message; ..." (left alone this pass)


@dataclass(frozen=True)
class Objects:
    """The Kubernetes objects of the cluster."""

    manifests: Sequence[KubeObject]  # to apply, in apply order
    keep: Sequence[ObjectRef]  # live objects prune leaves alone this time
    release: Sequence[str]  # NodeSets (being deleted) whose finalizer may go: nothing of them is left
    secrets_held: Sequence[str]  # Secrets a pod of the cluster mounts (a missing one is never generated anew)


@dataclass(frozen=True)
class SlurmChanges:
    """What slurmctld is told, in the adapter's order: drain, resume, (pods), down, features, reconfigure, forget,
    power."""

    drain: Mapping[str, Sequence[str]]  # reason -> nodes
    resume: Sequence[str]  # nodes whose drain of ours is over
    down: Mapping[str, Sequence[str]]  # reason -> nodes set DOWN right before their pods go with jobs
    delete_nodes: Sequence[str]  # node records whose pods are gone for good
    set_features: Mapping[str, Sequence[str]]  # node -> its features (labels under featureLabelPrefix)
    reconfigure: Optional[str]  # why slurmctld rereads its configuration (scontrol reconfigure), or None
    power_up: Sequence[str]  # elastic nodes to power up (minNodes)
    power_down: Sequence[str]  # elastic nodes to power down once idle (an older pod template)
    power_down_force: Sequence[str]  # elastic nodes handed back after a failed resume
    topology: Optional[str]  # topology.conf (spec.topology) as rendered into slurm-config; None without one

    @property
    def any(self) -> bool:
        """Whether slurmctld is told anything (the adapter then needs to reach it)."""
        return bool(self.drain or self.resume or self.down or self.delete_nodes or self.power_up or self.power_down
                    or self.power_down_force or self.set_features or self.reconfigure)


@dataclass(frozen=True)
class PodChanges:
    """What is done to pods besides applying their controllers."""

    scale: Mapping[str, int]  # StatefulSet -> replicas, for the workers of NodeSets being deleted
    delete_pods: Sequence[PodRef]  # outdated or going worker pods (their nodes drained and idle), by uid
    evict: Sequence[Eviction]  # cordon the pod's Kubernetes node, evict the pod
    replace_lost: Sequence[LostPod]  # delete now, no grace period: the pod's kubelet is lost
    create_pods: Sequence[KubeObject]  # elastic nodes Slurm powered up, every-node workers to make
    ungate: Mapping[str, Ungate]  # gated pinned pod -> how to let it go
    give_up: Sequence[GiveUp]  # busy nodes whose pods go now, past a drain timeout (each said in an Event)


@dataclass(frozen=True)
class Events:
    """Events said on the NodeSets and the SlurmCluster (beside the give-ups of ``PodChanges``)."""

    power: Sequence[Event]  # elastic power changes, on their NodeSets
    labels: Sequence[LabelEvent]  # node labels refused (LabelRefused)


@dataclass(frozen=True)
class Report:
    """What the status says (``status.cluster_status``, ``status.nodeset_status``) and when to look again."""

    ready: bool  # the Ready condition
    phase: str  # model.PHASE_READY, PHASE_PROGRESSING or PHASE_MAINTENANCE
    message: str  # what is ready, or what is not
    requeue_after: Optional[int]  # seconds until the next look; None: settled
    pending: Sequence[str]  # what keeps the cluster from settling
    underway: Sequence[str]  # the part of it a later pass completes by itself (drains, removals)
    deferred: Sequence[str]  # work a later pass does that keeps nothing from Ready
    degraded: Sequence[str]  # what failed and needs someone
    login_outdated: Optional[int]  # login pods on an older template (None: not known)
    slurm_user_kept: Optional[str]  # why slurmctld keeps an older SlurmUser (None: it does not)
    components: Mapping[str, ComponentCondition]  # condition type -> of an optional component
    backup: Optional[BackupStatus]  # status.backup; None: no backups configured
    slurm_config: Optional[SlurmConfigStatus]  # status.slurmConfig; None: not recorded yet
    nodesets: Mapping[str, NodeSetFacts]  # NodeSet name -> the facts of its status
    pod_conditions: Mapping[str, PodCondition]  # worker pod -> its SlurmNodeReady condition


@dataclass(frozen=True)
class Plan:
    """One pass's decision (see the module's docstring for the tree)."""

    definition: Definition
    objects: Objects
    slurm: SlurmChanges
    pods: PodChanges
    events: Events
    report: Report
    read_mounted_config: bool  # the adapter reads the controller's mounted slurm.conf and plans again

    def nodes_with_jobs(self) -> list[str]:
        """Nodes whose running jobs the status or an Event names: waited for by a rolling update, or given up."""
        found = [w["node"] for facts in self.report.nodesets.values() for w in facts.get("waitingFor") or ()]
        return sorted(set(found + [g["node"] for g in self.pods.give_up]))

    def with_jobs(self, jobs: Mapping[str, Sequence[str]]) -> Plan:
        """This plan with the job ids Slurm named (``{node: [ids]}``; a node absent: not known) in its waiting and
        given-up entries (new entries: this plan's are left as they are)."""
        nodesets: dict[str, NodeSetFacts] = {}
        for name, facts in self.report.nodesets.items():
            if facts.get("waitingFor"):
                facts = copy.copy(facts)
                facts["waitingFor"] = [_with_jobs(w, jobs) for w in facts["waitingFor"]]
            nodesets[name] = facts
        return replace(self, report=replace(self.report, nodesets=nodesets),
                       pods=replace(self.pods, give_up=[_with_jobs(g, jobs) for g in self.pods.give_up]))


# A waiting or given-up entry: both name a node and its jobs.
_Entry = TypeVar("_Entry", Waiting, GiveUp)


def _with_jobs(entry: _Entry, jobs: Mapping[str, Sequence[str]]) -> _Entry:
    """``entry`` with the job ids Slurm named for its node (a copy), or itself when Slurm named none."""
    if entry["node"] not in jobs:
        return entry
    named = copy.copy(entry)
    named["jobs"] = list(jobs[entry["node"]])
    return named


def freeze(d: Draft) -> Plan:
    """The Plan of a Draft the planners filled (``converge.plan``, which then drops the Draft and with it the only
    handle that could change a container the Plan took over)."""
    return Plan(
        definition=Definition(cluster=d.cluster, valid_nodesets=d.valid_nodesets, invalid=d.invalid),
        objects=Objects(manifests=d.manifests, keep=d.keep, release=d.release, secrets_held=d.secrets_held),
        slurm=SlurmChanges(drain=d.drain, resume=d.resume, down=d.down, delete_nodes=d.delete_nodes,
                           set_features=d.set_features, reconfigure=d.reconfigure, power_up=d.power_up,
                           power_down=d.power_down, power_down_force=d.power_down_force, topology=d.topology),
        pods=PodChanges(scale=d.scale, delete_pods=d.delete_pods, evict=d.evict, replace_lost=d.replace_lost,
                        create_pods=d.create_pods, ungate=d.ungate, give_up=d.give_up),
        events=Events(power=d.events, labels=d.label_events),
        report=Report(ready=d.ready, phase=d.phase, message=d.message, requeue_after=d.requeue_after,
                      pending=d.pending, underway=d.underway, deferred=d.deferred, degraded=d.degraded,
                      login_outdated=d.login_outdated, slurm_user_kept=d.slurm_user_kept, components=d.components,
                      backup=d.backup, slurm_config=d.slurm_config, nodesets=d.nodesets,
                      pod_conditions=d.pod_conditions),
        read_mounted_config=d.read_mounted_config)
