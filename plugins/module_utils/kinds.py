# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every kind of object a Slurm cluster owns, and what the reconciler may do with it: the one table that
pruning, teardown, the operator's watch caches and the operator's RBAC are all derived from. Pure.

A test checks that the renderer produces no kind missing here, so a new kind cannot escape pruning,
teardown or the RBAC.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Dict, List, NamedTuple

from ansible_collections.soperator.slurm.plugins.module_utils import names


# group "" is the core API. applied: server-side applied, pruned when no longer rendered, watched by the
# operator. data: created once, never pruned; read by name only (never listed: Secrets), deleted only when the
# deletion policy says so. optional: a kind of another project's CRD, used only where the cluster serves it (the
# apply adapter and teardown skip kinds not served); the operator does not cache it (a watch on a kind not served
# would fail), so it reconciles them on its runs only.
class Kind(NamedTuple):
    group: str
    version: str
    kind: str
    plural: str
    data: bool
    optional: bool


# A rule of a Role (rbac.authorization.k8s.io/v1 PolicyRule): apiGroups, resources, verbs.
Rule = Dict[str, List[str]]

OWNED = (
    Kind("apps", "v1", "StatefulSet", "statefulsets", False, False),
    Kind("", "v1", "Service", "services", False, False),
    Kind("", "v1", "ConfigMap", "configmaps", False, False),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", False, False),
    Kind("batch", "v1", "Job", "jobs", False, False),
    Kind("batch", "v1", "CronJob", "cronjobs", False, False),
    Kind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", False, False),
    Kind("", "v1", "Secret", "secrets", True, False),
    Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, False),
    # prometheus-operator: the exporter's ServiceMonitor, rendered only when the cluster serves the kind.
    Kind("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", False, True),
    # mariadb-operator: the accounting database of spec.accounting.database.type MariaDBOperator (data: it holds
    # the accounting history, like the jail claim).
    Kind("k8s.mariadb.com", "v1alpha1", "MariaDB", "mariadbs", True, True),
)
# Observed, never written (readiness, and the pod whose slurmctld the reconciler asks).
POD = Kind("", "v1", "Pod", "pods", False, False)


def api_version(kind: Kind) -> str:
    return "%s/%s" % (kind.group, kind.version) if kind.group else kind.version


def applied() -> tuple[Kind, ...]:
    """Kinds a converge applies and prunes, and the operator caches: every cluster has them."""
    return tuple(k for k in OWNED if not k.data and not k.optional)


def optional_applied() -> tuple[Kind, ...]:
    """Applied kinds of other projects' CRDs: applied and pruned where the cluster serves them."""
    return tuple(k for k in OWNED if not k.data and k.optional)


def data() -> tuple[Kind, ...]:
    """Kinds that hold data: never pruned."""
    return tuple(k for k in OWNED if k.data)


def optional_names() -> tuple[str, ...]:
    """Names of the optional kinds (those the adapter checks the cluster serves before rendering them)."""
    return tuple(k.kind for k in OWNED if k.optional)


def prune_kinds() -> list[str]:
    """``apiVersion/Kind`` strings, as the apply adapter takes them (it skips kinds the cluster does not serve)."""
    return ["%s/%s" % (api_version(k), k.kind) for k in applied() + optional_applied()]


def by_name(kind_name: str) -> Kind:
    for kind in OWNED + (POD,):
        if kind.kind == kind_name:
            return kind
    raise KeyError(kind_name)


# Cluster-scoped and opt-in (operator_read_nodes): Kubernetes node state projected into Slurm
# (spec.healthChecks.kubernetesNodes), and the runtime's watch of Nodes that brings a cordon to the converge at once.
NODE_RULES: list[Rule] = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
# ... and, opt-in on its own (operator_cordon_nodes), cordoning the node of a worker that stays unhealthy.
NODE_CORDON_RULES: list[Rule] = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]


def operator_rules(allow_data_deletion: bool = False) -> list[Rule]:
    """The RBAC rules the operator needs in a namespace it watches: exactly what the roles and the runtime call."""
    cr_plurals = [names.CLUSTER_PLURAL, names.NODESET_PLURAL]
    rules: list[Rule] = [
        {"apiGroups": [names.GROUP], "resources": cr_plurals, "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [names.GROUP], "resources": [p + "/status" for p in cr_plurals],
         "verbs": ["get", "patch", "update"]},
        {"apiGroups": [names.GROUP], "resources": [p + "/finalizers" for p in cr_plurals], "verbs": ["update"]},
    ]
    grouped: dict[tuple[str, bool], list[str]] = {}
    for kind in applied() + optional_applied():
        grouped.setdefault((kind.group, kind.optional), []).append(kind.plural)
    for group, optional in sorted(grouped):
        # Optional kinds are not cached by the operator: no watch.
        verbs = ["get", "list", "create", "patch", "delete"] if optional else [
            "get", "list", "watch", "create", "patch", "delete"]
        rules.append({"apiGroups": [group], "resources": sorted(grouped[(group, optional)]), "verbs": verbs})
    data_verbs = ["get", "create"] + (["delete"] if allow_data_deletion else [])
    data_grouped: dict[str, list[str]] = {}
    for kind in data():
        data_grouped.setdefault(kind.group, []).append(kind.plural)
    for group in sorted(data_grouped):
        rules.append({"apiGroups": [group], "resources": sorted(data_grouped[group]), "verbs": list(data_verbs)})
    # The runtime caches pods (readiness); the reconciler execs fixed commands in the controller pod (scontrol)
    # and in outdated login pods (session count, sshd -t), and deletes an outdated worker pod (OnDelete rolling
    # update) once its Slurm node is drained and idle, a login pod once nobody is logged in to it; creates the pod of
    # each node of an elastic NodeSet that Slurm powered up, and deletes it once Slurm powered the node down; patches a
    # pinned worker's gated pod: its pin's node affinity, then the gate off (plan/pins.py; no more than the
    # StatefulSets it already writes could do).
    rules.append({"apiGroups": [""], "resources": [POD.plural],
                  "verbs": ["get", "list", "watch", "create", "patch", "delete"]})
    # Each worker pod's SlurmNodeReady condition (its Slurm node state); moving an unhealthy worker to another node
    # (spec.healthChecks.kubernetesNodes.evictUnhealthyAfter) through the Eviction API, which honours its budget.
    rules.append({"apiGroups": [""], "resources": [POD.plural + "/status"], "verbs": ["patch"]})
    rules.append({"apiGroups": [""], "resources": [POD.plural + "/eviction"], "verbs": ["create"]})
    # exec over a WebSocket is an upgraded GET: it needs `get` besides `create`.
    rules.append({"apiGroups": [""], "resources": [POD.plural + "/exec"], "verbs": ["get", "create"]})
    rules.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]})
    return rules
