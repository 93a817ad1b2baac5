# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes node labels onto Slurm: features (``spec.featureLabelPrefix`` of a NodeSet) and the network topology
(``spec.topology`` of the cluster). Pure.

**Features.** Workers are dynamic nodes (``slurmd -Z``): ``scontrol update nodename=X AvailableFeatures=...`` takes
effect at once and survives a reconfigure and restarts of slurmd and slurmctld (slurm/version.py's SLURM), so
no slurm.conf line and no reconfigure is needed. A node's features are then the NodeSet's (registered with ``slurmd
--conf``), an administrator's (``scontrol update``) and ours; nothing in Slurm says which is which, so the features
we added are recorded in the NodeSet's ``status.labelFeatures`` and only those are ever removed. A label yielding a
feature the node already has and that is not ours (the NodeSet's or an administrator's) is not claimed: removing the
label then leaves it.

**Topology.** Each worker name is placed by the labels (``spec.topology.levels``) of the Kubernetes node its pod
runs on; a name whose pod is not on a node (Pending, being replaced, not read) keeps the placement of the file the
controller has now, so pod churn does not rewrite it; a name never placed is ``unknown``. Slurm reads
topology.conf only at a reconfigure, and places a dynamic node only if it existed at that reconfigure (version.py's
SLURM): the planner asks for one reconfigure when Slurm's placement of a registered node differs from the file, once
the controller pod's mounted copy is the file rendered now and the ConfigMap has not been written for
``TOPOLOGY_QUIET`` seconds: label changes less than that apart are one burst, applied by one reconfigure, however soon
the kubelet brings the controller pod an intermediate file. An elastic node that never ran is placed by its NodeSet's
nodeSelector when that names every level's label (its pods can run nowhere else), else ``unknown``; with block
(elastic NodeSets only, ``api/spec.py``) this is what a powered-down node's block means to Slurm.

A label value that cannot become a feature or a switch name (a newline, ``=``, a space, a comma, longer than a feature
may be) is refused with an Event; that node keeps what it had (features and placement). A feature that is another
NodeSet's name is refused the same way (slurm.conf's ``NodeSet=<name> Feature=<name>`` would put the node into that
NodeSet's partitions, which ``spec.features`` refuses at validation): the node never has it from us, one we added
before the NodeSet came is removed, and its other labels still apply.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Collection, Dict, List, Mapping, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.plan import modes
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import (
    REQUEUE_PROGRESSING, Context, LabelEvent, NodeFacts, Draft, View, name,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render import topology as topo

# The feature a label gives: the NodeSet's own feature rules (spec.features), one owner.
FEATURE_RE = re.compile(schema.FEATURE_PATTERN)
FEATURE_MAX = schema.MAX_SHORT
EVENT_LABEL_REFUSED = "LabelRefused"
# Seconds the cluster's ConfigMap must have gone unwritten before a topology change is handed to slurmctld: the end of
# a burst of label changes (each render rewrites it). The kubelet's sync of the pod's copy usually takes longer anyway.
TOPOLOGY_QUIET = 10
# Slurm node -> its switches, leaf first (topology.conf's placement of it).
Placement = Dict[str, List[str]]


def features_from_labels(labels: Mapping[str, object] | None, prefix: str) -> tuple[list[str], list[str]]:
    """(sorted features, [problems]) of a Kubernetes node's ``labels`` under ``prefix``: the rest of the key when
    the value is 'true' or empty, <rest>_<value> otherwise, none for 'false'."""
    labels = labels or {}
    found: set[str] = set()
    problems: list[str] = []
    for key in sorted(labels):
        if not key.startswith(prefix) or key == prefix:
            continue
        rest, value = key[len(prefix):], str(labels[key])
        if value.lower() == "false":
            continue
        feature = rest if value in ("", "true") else "%s_%s" % (rest, value)
        if len(feature) > FEATURE_MAX or not FEATURE_RE.fullmatch(feature):
            problems.append("label %s=%r cannot be a Slurm feature (at most %d characters of %s)"
                            % (key, value, FEATURE_MAX, schema.FEATURE_PATTERN))
            continue
        found.add(feature)
    return sorted(found), problems


nodeset_names = modes.set_names  # kept here for its callers


def other_nodesets(features: Sequence[str], set_name: str, nodesets: Mapping[str, str],
                   prefix: str = "") -> tuple[list[str], list[str]]:
    """(features that name no NodeSet but ``set_name``, [problems]) of the ``features`` a node's labels under
    ``prefix`` give; ``nodesets`` as ``nodeset_names`` gives them."""
    kept: list[str] = []
    problems: list[str] = []
    for feature in features:
        other = nodesets.get(feature.lower())
        if other is not None and other != set_name:
            problems.append("a label under %s gives feature %r, the name of NodeSet %s: the node would join that "
                            "NodeSet's partitions" % (prefix, feature, other))
        else:
            kept.append(feature)
    return kept, problems


def node_features(current: Sequence[str], recorded: Collection[str],
                  wanted: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """(features to set or None when unchanged, ours now) of one Slurm node: ``current`` its features,
    ``recorded`` what we added before, ``wanted`` what its labels give now."""
    ours_before = [f for f in recorded if f in current]
    others = [f for f in current if f not in ours_before]
    ours = [f for f in wanted if f not in others]
    result = others + ours
    return (None if result == current else result), ours


def _nodes(ctx: Context) -> dict[str, NodeFacts] | None:
    return ctx.observed.get("k8s_nodes")


def plan_features(p: Draft, ctx: Context) -> None:
    """``p.set_features`` {node: features}, ``p.nodesets[set]["labelFeatures"]`` and ``p.label_events``."""
    views = [v for v in ctx.views if not v.leaving and modes.of(v).labels
             and v.nodeset["spec"].get("featureLabelPrefix")]
    if not views or ctx.slurm is None:
        return
    k8s_nodes = _nodes(ctx)
    if k8s_nodes is None:
        p.deferred.append("spec.featureLabelPrefix: %s" % (ctx.observed.get("k8s_nodes_error")
                                                           or "Kubernetes nodes not read"))
        return
    nodesets = nodeset_names(ctx)
    for view in views:
        ns = view.nodeset
        recorded = dict(((ns.get("status") or {}).get("labelFeatures") or {}))
        record: dict[str, list[str]] = {}
        hosts = modes.of(view).hosts(ctx, view)
        for pod_name in sorted(set(hosts) | set(recorded)):
            node, host = ctx.slurm.get(pod_name), hosts.get(pod_name)
            before = list(recorded.get(pod_name) or ())
            if node is None:  # no Slurm record: nothing of ours is left on it
                continue
            if host not in k8s_nodes:  # its pod is not on a node we read: as it was
                if before:
                    record[pod_name] = before
                continue
            wanted, problems = features_from_labels(k8s_nodes[host].get("labels"), ns["spec"]["featureLabelPrefix"])
            wanted, taken = other_nodesets(wanted, name(ns), nodesets, ns["spec"]["featureLabelPrefix"])
            if taken:
                p.label_events.append((name(ns), "Node %s, worker %s: %s; it is not given that feature"
                                       % (host, pod_name, "; ".join(taken))))
            if problems:
                p.label_events.append((name(ns), "Node %s, worker %s: %s; its features are left as they are"
                                       % (host, pod_name, "; ".join(problems))))
                # As it was, but never another NodeSet's name (one of ours from before that NodeSet came).
                kept, _taken = other_nodesets([f for f in before if f in node["features"]], name(ns), nodesets)
                dropped = set(before) - set(kept)
                if dropped & set(node["features"]):
                    p.set_features[pod_name] = [f for f in node["features"] if f not in dropped]
                record[pod_name] = kept
                continue
            update, ours = node_features(node["features"], before, wanted)
            if update is not None:
                p.set_features[pod_name] = update
            if ours:
                record[pod_name] = ours
        p.nodesets.setdefault(name(ns), {})["labelFeatures"] = record


placement_of = topo.placement_of  # kept here for its callers


def worker_names(ctx: Context, counts: Dict[str, int]) -> list[str]:
    """Every worker name topology.conf places, NodeSet by NodeSet in name order, each as its mode says
    (``modes.Mode.placed_names``: a StatefulSet's names below the replicas rendered, ``counts``; every name an elastic
    NodeSet has in slurm.conf, since Slurm plans jobs onto powered-down nodes and a node in no switch could never be
    given a job; an every-node set's workers now and those of the nodes that match)."""
    return [n for view in _rendered(ctx) for n in modes.of(view).placed_names(ctx, view, counts)]


def _rendered(ctx: Context) -> list[View]:
    """The views this pass renders (names in slurm.conf), in name order."""
    return sorted((v for v in ctx.views if modes.of(v).rendered(v)), key=lambda v: v.name)


def consistent(placement: Mapping[str, List[str]], previous: Mapping[str, List[str]],
               fresh: Collection[str] = ()) -> tuple[Placement, list[tuple[str, str]]]:
    """Drop the placements that would give a switch a second parent (or a name at two levels): the ``fresh`` ones
    (read from labels now) first, then the kept ones, each in name order; the first wins. A fresh one that clashes
    keeps its ``previous`` place, a kept one that clashes with the labels now is unplaced. Returns (placement,
    [(node, problem)]) of the fresh ones refused."""
    parents: dict[str, str] = {}
    level_of: dict[str, int] = {}
    kept: Placement = {}
    problems: list[tuple[str, str]] = []
    order = sorted(n for n in placement if n in fresh) + sorted(n for n in placement if n not in fresh)
    for node in order:
        path = placement[node]
        clash = None
        for index, switch in enumerate(path):
            if level_of.get(switch, index) != index:
                clash = "%s is a switch at two levels" % switch
            elif index + 1 < len(path) and parents.get(switch, path[index + 1]) != path[index + 1]:
                clash = "switch %s would have two parents (%s, %s)" % (switch, parents[switch], path[index + 1])
        if clash:
            if node in fresh:
                problems.append((node, clash))
                if node in previous:
                    kept[node] = previous[node]
            continue
        for index, switch in enumerate(path):
            level_of[switch] = index
            if index + 1 < len(path):
                parents[switch] = path[index + 1]
        kept[node] = path
    return kept, problems


def plan_topology(p: Draft, ctx: Context, counts: Dict[str, int]) -> str | None:
    """The topology.conf text to render (``p.topology``; None: no spec.topology) and whether Slurm must reread it
    (``p.reconfigure``). ``counts``: {nodeset: replicas} rendered."""
    spec = ctx.spec.get("topology")
    if not spec:
        return None
    plugin, levels = spec.get("plugin", "tree"), spec["levels"]
    mounted = ctx.observed.get("mounted_topology")
    # What was decided last: the live ConfigMap's file (the controller's copy may still be older).
    last = ctx.observed.get("live_topology") or mounted
    previous = topo.parse_topology_conf(last) if last else {}
    all_names = worker_names(ctx, counts)
    placement = dict((n, previous[n]) for n in all_names if n in previous)
    for view in _rendered(ctx):
        if view.leaving:
            continue
        # A mode whose workers can run only where the placement fixes (an elastic set's nodeSelector naming every
        # level): a name whose pod is not on a node is placed there (over a kept place: the selector may have changed
        # since); one on a node by its labels, below.
        path = modes.of(view).fixed_path(ctx, view, levels)
        if path:
            for node_name in modes.of(view).placed_names(ctx, view, counts):
                placement[node_name] = path
    fresh: set[str] = set()
    k8s_nodes = _nodes(ctx)
    if k8s_nodes is None:
        p.deferred.append("spec.topology: %s" % (ctx.observed.get("k8s_nodes_error") or "Kubernetes nodes not read"))
    else:
        for view in _rendered(ctx):
            for pod_name, host in sorted(modes.of(view).hosts(ctx, view).items()):
                if pod_name not in all_names or host not in k8s_nodes:
                    continue
                path, problem = placement_of(k8s_nodes[host].get("labels"), levels)
                if problem:
                    p.label_events.append((view.name, "Node %s, worker %s: %s; its placement is left as it is"
                                           % (host, pod_name, problem)))
                elif path:
                    placement[pod_name] = path
                    fresh.add(pod_name)
                else:
                    placement.pop(pod_name, None)
    placement, problems = consistent(placement, previous, fresh)
    for node, problem in problems:
        p.label_events.append((None, "worker %s: %s; its placement is left as it is" % (node, problem)))
    text = topo.render_topology_conf(plugin, all_names, placement)
    p.topology = text
    _plan_reconfigure(p, ctx, text, mounted, all_names, placement)
    return text


def _plan_reconfigure(p: Draft, ctx: Context, text: str, mounted: str | None, all_names: Sequence[str],
                      placement: Mapping[str, List[str]]) -> None:
    shown = ctx.observed.get("slurm_topology")
    if ctx.slurm is None or shown is None:
        return
    registered = [n for n in all_names if n in ctx.slurm]
    wrong = [n for n in registered if shown.get(n) != (placement[n][0] if n in placement else topo.UNKNOWN)]
    if not wrong:
        return
    if mounted != text:
        p.wait(REQUEUE_PROGRESSING, "topology: waiting for the controller pod to see the new topology.conf "
                                    "(%s placed otherwise)" % ", ".join(wrong[:5]))
        return
    written = ctx.observed.get("live_config_written")
    if written is not None and ctx.now - written < TOPOLOGY_QUIET:
        p.wait(max(1, int(written + TOPOLOGY_QUIET - ctx.now)),
               "topology: written %d s ago, applied once unchanged for %d s (one reconfigure per burst of label "
               "changes)" % (max(0, ctx.now - written), TOPOLOGY_QUIET))
        return
    p.reconfigure = "topology.conf: %s placed otherwise" % ", ".join(wrong[:5]) + (
        " and %d more" % (len(wrong) - 5) if len(wrong) > 5 else "")


UNPLACED_NAMED = 5  # pods a NodeSet's status names


def plan_unplaced(p: Draft, ctx: Context) -> None:
    """The NodeSets' workers the scheduler could not place (PodScheduled False: with onePerNode, more workers than
    nodes), with the scheduler's message: ``p.nodesets[set]["unschedulable"]`` (``modes.Mode.unschedulable``)."""
    for view in ctx.views:
        if view.leaving:
            continue
        found = modes.of(view).unschedulable(ctx, view)
        if found and view.name in p.nodesets:
            more = len(found) - UNPLACED_NAMED
            p.nodesets[view.name]["unschedulable"] = found[:UNPLACED_NAMED] + (
                ["%d more" % more] if more > 0 else [])


def plan_label_events(p: Draft, ctx: Context) -> None:
    """Each refused label once: ``p.nodesets[set]["labelsRefused"]`` lists the NodeSet's refusals now (its status),
    and only those not already there stay in ``p.label_events`` (an Event each)."""
    fresh: list[LabelEvent] = []
    reporting = [v for v in ctx.views if not v.leaving and modes.of(v).labels]
    for view in reporting:
        if view.name not in p.nodesets:
            continue
        now = sorted(set(m for set_name, m in p.label_events if set_name == view.name))
        before = set((view.nodeset.get("status") or {}).get("labelsRefused") or ())
        if now or before:
            p.nodesets[view.name]["labelsRefused"] = now
        fresh += [(view.name, m) for m in now if m not in before]
    known = set(v.name for v in reporting)
    p.label_events = fresh + [(s, m) for s, m in p.label_events if s not in known]
