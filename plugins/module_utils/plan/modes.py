# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NodeSet modes behind one interface. Pure.

A NodeSet's workers exist in one of three ways (``values.mode``): a StatefulSet of ``spec.replicas`` (fixed), the
names Slurm's power saving powers up (elastic), or one worker per matching Kubernetes node (every-node). Each way is a
:class:`Mode`; the planners that span every NodeSet (maintenance, SlurmUser, labels and topology, Slurm's view on the
pods, the health program's drains) ask a NodeSet's mode what they need and never which mode it is, so that a fourth
mode is one more implementation here (``tests/unit/module_utils/plan/test_modes.py`` adds one). What only one mode does
(a StatefulSet's scale and rolling update, power up and down, binding to a node) stays in its own module (``scale.py``
with ``rolls.py``, ``elastic.py``, ``every_node.py``), which is the only code that filters views by mode
(``Context.of``).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Dict, List, Optional, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains, elastic, every_node
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    Context, Draft, View, deleting, drain_timeout, nodeset_pods, replicas,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan.scale import give_up_expired
from ansible_collections.soperator.slurm.plugins.module_utils.render import topology
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import merge_placement
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

Pods = Dict[str, KubeObject]


class Mode(object):
    """What every planner may ask of a NodeSet's mode. Defaults are a mode whose workers are pods named
    ``<statefulset>-<ordinal>`` that Slurm knows by their pod names."""

    key = ""
    # Features from the labels of a worker's Kubernetes node (spec.featureLabelPrefix) and their refusals apply.
    labels = True
    # Its workers may be evicted to another Kubernetes node (spec.healthChecks.kubernetesNodes.evictUnhealthyAfter).
    movable = False
    # Slurm's node states go onto its pods (a SlurmNodeReady condition) and cordoned nodes drain its workers.
    projected = True

    def rendered(self, view: View) -> bool:
        """Whether this pass renders the NodeSet (its names are in slurm.conf and topology.conf)."""
        return not view.leaving

    def pods(self, ctx: Context, view: View) -> Pods:
        """Its live worker pods (none being deleted), by name: the Slurm node name of each."""
        prefix = names.worker_name(ctx.name, view.name)
        return dict((n, pod) for n, pod in ctx.pods.items()
                    if names.statefulset_of(n) == prefix and names.ordinal(n, prefix) is not None
                    and not deleting(pod))

    def hosts(self, ctx: Context, view: View) -> Dict[str, str]:
        """``{Slurm node: Kubernetes node}`` of its workers scheduled on a node."""
        found = {}
        for pod_name, pod in self.pods(ctx, view).items():
            host = (pod.get("spec") or {}).get("nodeName")
            if host:
                found[pod_name] = host
        return found

    def nodes(self, ctx: Context, view: View) -> List[str]:
        """The Slurm node names its workers have now: maintenance drains them, the end of a maintenance and a
        health program no longer running resume the drains of ours on them."""
        raise NotImplementedError

    def placed_names(self, ctx: Context, view: View, counts: Dict[str, int]) -> List[str]:
        """The names topology.conf places for it; ``counts``: ``{nodeset: replicas}`` this pass renders."""
        return self.nodes(ctx, view)

    def fixed_path(self, ctx: Context, view: View, levels: List[str]) -> Optional[List[str]]:
        """A placement (switches, leaf first) every worker of it has wherever it runs, or None: the topology of a name
        whose pod is on no node yet."""
        return None

    def has_workers(self, ctx: Context, view: View) -> bool:
        """Whether a worker of it runs (its slurmd took the configuration slurmctld gave: the SlurmUser)."""
        return bool(self.pods(ctx, view))

    def maintenance(self, p: Draft, ctx: Context, view: View) -> List[str]:
        """``spec.maintenance``: drain (or power down) its workers; the names maintenance still waits for."""
        raise NotImplementedError

    def maintenance_done(self, p: Draft, ctx: Context, view: View) -> None:
        """Every NodeSet's workers are idle (or past their drainTimeout): record what goes with its jobs."""

    def unschedulable(self, ctx: Context, view: View) -> List[str]:
        """``<pod>: <the scheduler's message>`` of its workers the scheduler could not place."""
        return []


class Fixed(Mode):
    """A StatefulSet of ``spec.replicas`` (scale.py, rolls.py, pins.py)."""

    key = values.FIXED
    movable = True

    def nodes(self, ctx: Context, view: View) -> List[str]:
        sts_name = ctx.worker_statefulset(view.nodeset)
        sts = ctx.statefulsets.get(sts_name)
        return [] if sts is None else [names.pod_name(sts_name, o) for o in range(replicas(sts))]

    def placed_names(self, ctx: Context, view: View, counts: Dict[str, int]) -> List[str]:
        sts_name = ctx.worker_statefulset(view.nodeset)
        return [names.pod_name(sts_name, o) for o in range(counts.get(view.name, view.nodeset["spec"]["replicas"]))]

    def has_workers(self, ctx: Context, view: View) -> bool:
        return bool(self.nodes(ctx, view))

    def _entries(self, ctx: Context, view: View) -> List[drains.Victim]:
        return drains.plan_scale_in(drains.answered(ctx.slurm), self.nodes(ctx, view), now=ctx.now,
                                    drain_timeout=drain_timeout(view.nodeset))

    def maintenance(self, p: Draft, ctx: Context, view: View) -> List[str]:
        entries = self._entries(ctx, view)
        for entry in entries:
            if entry["action"] == drains.DRAIN:
                p.drain_node(entry["name"], names.REASON_MAINTENANCE)
        return [e["name"] for e in entries if not e["removable"]]

    def maintenance_done(self, p: Draft, ctx: Context, view: View) -> None:
        give_up_expired(p, view.nodeset, self._entries(ctx, view), drains.answered(ctx.slurm), "maintenance")

    def unschedulable(self, ctx: Context, view: View) -> List[str]:
        sts_name = ctx.worker_statefulset(view.nodeset)
        found = []
        for pod_name in sorted(ctx.pods, key=lambda n: names.ordinal(n, sts_name) or 0):
            pod = ctx.pods[pod_name]
            if names.statefulset_of(pod_name) != sts_name or names.ordinal(pod_name, sts_name) is None:
                continue
            for cond in (pod.get("status") or {}).get("conditions") or ():
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    found.append("%s: %s" % (pod_name, (cond.get("message") or cond.get("reason") or "")[:200]))
        return found


class Elastic(Mode):
    """The names Slurm's power saving powers up and down (elastic.py): every name is in slurm.conf from the start."""

    key = values.ELASTIC
    # Its Slurm nodes exist before any Kubernetes node does: a feature set now would be lost when Slurm powers the
    # node down and up elsewhere (validation refuses featureLabelPrefix on an elastic NodeSet).
    labels = False
    # Its pods live as Slurm powers their nodes up and down: their states are the NodeSet's status.powerStates, not a
    # condition on each pod, and a cordon is for Slurm's power saving to route around.
    projected = False

    def rendered(self, view: View) -> bool:
        return True  # one being deleted stays in slurm.conf until its nodes are powered down (elastic.leave)

    def nodes(self, ctx: Context, view: View) -> List[str]:
        return [] if view.leaving else elastic.node_names(ctx.name, view.nodeset)

    def placed_names(self, ctx: Context, view: View, counts: Dict[str, int]) -> List[str]:
        return elastic.node_names(ctx.name, view.nodeset)  # Slurm plans jobs onto powered-down names too

    def fixed_path(self, ctx: Context, view: View, levels: List[str]) -> Optional[List[str]]:
        # Its pods can run only where its nodeSelector says: when that names every level, so is every name placed.
        selector = merge_placement(ctx.spec.get("placement"), view.nodeset["spec"].get("placement")).get(
            "nodeSelector")
        path, dummy = topology.placement_of(selector, levels)
        return path or None

    def maintenance(self, p: Draft, ctx: Context, view: View) -> List[str]:
        return [] if view.leaving else elastic.maintenance(p, ctx, view.nodeset)


class EveryNode(Mode):
    """One worker bound to every matching Kubernetes node (every_node.py), named for the node."""

    key = values.EVERY_NODE

    def rendered(self, view: View) -> bool:
        return not view.leaving

    def pods(self, ctx: Context, view: View) -> Pods:
        return dict((n, pod) for n, pod in nodeset_pods(ctx.pods, view.name).items() if not deleting(pod))

    def nodes(self, ctx: Context, view: View) -> List[str]:
        return [] if view.leaving else every_node.own_slurm_nodes(ctx, view.nodeset)

    def placed_names(self, ctx: Context, view: View, counts: Dict[str, int]) -> List[str]:
        k8s_nodes = (ctx.observed.get("k8s_nodes") if ctx.observed.get("k8s_nodes") is not None else None)
        wanted = every_node.wanted(ctx.name, ctx.spec.get("placement"), view.nodeset, k8s_nodes) if k8s_nodes else {}
        return sorted(set(nodeset_pods(ctx.pods, view.name)) | set(wanted))  # its workers now, and those to come

    def has_workers(self, ctx: Context, view: View) -> bool:
        return bool(nodeset_pods(ctx.pods, view.name))

    def maintenance(self, p: Draft, ctx: Context, view: View) -> List[str]:
        return [] if view.leaving else every_node.maintenance(p, ctx, view.nodeset)


MODES = dict((m.key, m) for m in (Fixed(), Elastic(), EveryNode()))


def of(view: View) -> Mode:
    """The implementation of a view's mode."""
    return MODES[view.mode]


def projected_pods(ctx: Context) -> Tuple[Pods, Pods]:
    """(workers that may move to another Kubernetes node, workers that may not) whose Slurm states go onto their pods
    (projection.plan_projection), each NodeSet's by its mode."""
    movable: Pods = {}
    bound: Pods = {}
    for view in ctx.views:
        mode = of(view)
        if mode.projected:
            (movable if mode.movable else bound).update(mode.pods(ctx, view))
    return movable, bound


def replaceable_pods(ctx: Context) -> Pods:
    """Workers a lost Kubernetes node may give up to another node (lost.plan_lost): those of movable modes, not
    pinned, not leaving, by their Slurm names; Terminating ones too (the pod a lost kubelet never confirms)."""
    found: Pods = {}
    for view in ctx.views:
        mode = of(view)
        if mode.movable and not view.leaving and not (view.nodeset["spec"].get("placement") or {}).get("pinned"):
            found.update((n, ctx.pods[n]) for n in mode.nodes(ctx, view) if n in ctx.pods)
    return found


def set_names(ctx: Context) -> Dict[str, str]:
    """``{lower-case name: name}`` of every NodeSet of the cluster, however it stands (valid, leaving, invalid):
    Slurm compares features without case, as ``api/spec.py`` does for ``spec.features``."""
    found = dict((v.name.lower(), v.name) for v in ctx.views)
    found.update((n.lower(), n) for n in ctx.invalid or ())
    return found


__all__ = ["Mode", "Fixed", "Elastic", "EveryNode", "MODES", "of", "projected_pods", "replaceable_pods", "set_names"]
