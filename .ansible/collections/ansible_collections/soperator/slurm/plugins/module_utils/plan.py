# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure planners: what to prune, what teardown deletes, which nodes leave on scale-in, whose drains are ours.

The adapters list live objects and run ``scontrol``; these functions only decide.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names

# Kinds the renderer produces: the only kinds pruning and teardown ever consider.
MANAGED_KINDS = ("ConfigMap", "Secret", "PersistentVolumeClaim", "Service", "StatefulSet", "PodDisruptionBudget",
                 "Job")
DEFAULT_DELETION_POLICY = {"jail": "Retain", "secrets": "Retain"}


def _identity(obj):
    md = obj.get("metadata") or {}
    group = obj.get("apiVersion", "").rpartition("/")[0] if "/" in obj.get("apiVersion", "") else ""
    return (group, obj.get("kind"), md.get("namespace"), md.get("name"))


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def _ours(obj, cluster_name):
    labels = _labels(obj)
    return (obj.get("kind") in MANAGED_KINDS and labels.get(names.LABEL_MANAGED_BY) == names.MANAGED_BY
            and labels.get(names.LABEL_CLUSTER) == cluster_name)


def _deletable(obj, policy):
    """Whether the deletion policy lets an object of ours go (Secrets and claims hold data)."""
    kind = obj.get("kind")
    if kind == "Secret":
        return policy.get("secrets") == "Delete"
    if kind == "PersistentVolumeClaim":
        # The jail claim and the controller's spool claims (from the StatefulSet's volumeClaimTemplate).
        return policy.get("jail") == "Delete"
    return True


def _policy(deletion_policy):
    policy = dict(DEFAULT_DELETION_POLICY)
    policy.update(deletion_policy or {})
    return policy


def prune_candidates(rendered, live, cluster_name=None, deletion_policy=None):
    """Live objects of the cluster that are no longer rendered and may be deleted, sorted for stable output.

    ``cluster_name`` defaults to the cluster label of the rendered objects. Only kinds the renderer produces,
    labelled as this cluster's and managed by us, are considered; Secrets and PersistentVolumeClaims only when
    ``deletion_policy`` (the SlurmCluster's spec.deletionPolicy) says Delete.
    """
    if cluster_name is None:
        found = set(_labels(obj).get(names.LABEL_CLUSTER) for obj in rendered) - set([None])
        if len(found) != 1:
            return []
        cluster_name = found.pop()
    policy = _policy(deletion_policy)
    wanted = set(_identity(obj) for obj in rendered)
    result = [obj for obj in live
              if _ours(obj, cluster_name) and _identity(obj) not in wanted and _deletable(obj, policy)]
    return sorted(result, key=lambda obj: tuple(str(part) for part in _identity(obj)))


def teardown_candidates(live, cluster_name, deletion_policy=None):
    """What deleting the cluster removes: every live object of ours the deletion policy lets go."""
    return prune_candidates([], live, cluster_name, deletion_policy)


def scale_in_victims(current_replicas, desired, statefulset_name):
    """Pod (= Slurm node) names a StatefulSet removes going from ``current_replicas`` to ``desired``: the
    highest ordinals first, in the order they should be drained."""
    desired = max(0, desired)
    return ["%s-%d" % (statefulset_name, ordinal) for ordinal in range(current_replicas - 1, desired - 1, -1)]


def drain_reason(action="scale-in"):
    """The Slurm drain reason the operator writes, e.g. ``soperator: scale-in``."""
    return "%s %s" % (names.DRAIN_REASON_PREFIX, action)


def is_operator_reason(reason):
    """Whether a node's drain reason was set by the operator (anything else belongs to an administrator)."""
    return bool(reason) and reason.strip().startswith(names.DRAIN_REASON_PREFIX)
