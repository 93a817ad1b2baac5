# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pinned workers (``spec.placement.pinned``): each worker comes back to the Kubernetes node it last ran on. Pure.

A StatefulSet has one pod template, so a pin per worker cannot be in it. The pinned NodeSet's pods are created with a
scheduling gate (``names.PIN_GATE``): the scheduler leaves them alone until the converge has added a required node
affinity to the pin's node (Kubernetes allows adding node affinity to a gated pod) and removed the gate. The pins are
in the NodeSet's ``status.pins`` ({worker: node}): a worker running somewhere is pinned there. A pin is released, and
its worker placed anywhere the NodeSet allows, when its node is gone or no longer matches the NodeSet's placement
(its nodeSelector and required node affinity; taints are the scheduler's to judge).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import Context, Draft, deleting, name
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import merge_placement
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


def gated(pod: KubeObject) -> bool:
    return any(g.get("name") == names.PIN_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def _requirement(labels: Mapping[str, str], req: KubeObject) -> bool:
    # No key: as a label no node has (a label's key is never empty).
    key, op, values = req.get("key") or "", req.get("operator"), req.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def matches(node_name: str, labels: Mapping[str, str] | None, placement: KubeObject) -> bool:
    """Whether a node (its name and labels) matches a pod's merged placement: nodeSelector and the required node
    affinity's terms (one term of all requirements: ORed terms, ANDed requirements, as the scheduler reads them)."""
    labels = labels or {}
    for key, value in (placement.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((placement.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms") or []
    if not terms:
        return True
    fields = {"metadata.name": node_name}
    return any(all(_requirement(labels, r) for r in term.get("matchExpressions") or ())
               and all(_requirement(fields, r) for r in term.get("matchFields") or ()) for term in terms)


def plan_pins(p: Draft, ctx: Context) -> None:
    """``p.ungate`` {pod: (uid, node or None, patches)}: gated workers to let go, with their pin's node (None:
    released) and the patches that do it (:func:`pin_patches`),
    ``p.nodesets[set]["pins"]`` the pins now, and a deferral when the Nodes cannot be read."""
    for ns in ctx.valid:
        placement = ns["spec"].get("placement") or {}
        if not placement.get("pinned"):
            continue
        recorded = dict((ns.get("status") or {}).get("pins") or {})
        k8s_nodes = ctx.observed.get("k8s_nodes")
        merged = merge_placement(ctx.spec.get("placement"), placement)
        sts_name = ctx.worker_statefulset(ns)
        pins: dict[str, str] = {}
        for pod_name, pod in sorted(ctx.pods.items()):
            if names.statefulset_of(pod_name) != sts_name or names.ordinal(pod_name, sts_name) is None:
                continue
            host = (pod.get("spec") or {}).get("nodeName")
            if host:
                pins[pod_name] = host
            elif gated(pod) and not deleting(pod):
                pin = recorded.get(pod_name)
                if pin and k8s_nodes is None:
                    p.deferred.append("%s: pinned to %s, Kubernetes nodes not read (%s): placed anywhere"
                                      % (pod_name, pin, ctx.observed.get("k8s_nodes_error") or "not asked"))
                    pin = None
                elif pin and k8s_nodes is not None and (pin not in k8s_nodes
                                                        or not matches(pin, k8s_nodes[pin].get("labels"), merged)):
                    pin = None  # released: its node is gone or no longer matches the NodeSet
                p.ungate[pod_name] = ((pod.get("metadata") or {}).get("uid"), pin, pin_patches(pod, pin))
                if pin:
                    pins[pod_name] = pin
        # A worker between its pods (deleted, not yet made again) keeps its pin.
        for pod_name, pin in recorded.items():
            if pod_name not in ctx.pods and pod_name not in pins:
                pins[pod_name] = pin
        p.nodesets.setdefault(name(ns), {})["pins"] = pins


def pin_patches(pod: KubeObject, node: str | None) -> list[KubeObject]:
    """The two patches of a gated pod (JSON merge patches of spec): first the pin's node affinity added to every
    required term (or as the only term), then the gate removed; ``node`` None: only the gate removed."""
    spec = pod.get("spec") or {}
    patches: list[KubeObject] = []
    if node:
        pin = {"key": "metadata.name", "operator": "In", "values": [node]}
        affinity = dict(spec.get("affinity") or {})
        node_affinity = dict(affinity.get("nodeAffinity") or {})
        required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = [dict(t) for t in required.get("nodeSelectorTerms") or ()] or [{}]
        for term in terms:
            term["matchFields"] = list(term.get("matchFields") or ()) + [pin]
        required["nodeSelectorTerms"] = terms
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
        affinity["nodeAffinity"] = node_affinity
        patches.append({"spec": {"affinity": affinity}})
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != names.PIN_GATE]
    patches.append({"spec": {"schedulingGates": gates}})
    return patches
