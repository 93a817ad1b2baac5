# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Teardown (``state: absent``) and the release of every finalizer of ours, carried out. The decisions are pure
(``plan/teardown.py``): this reads what is there and what the API server allows, and deletes what the plan names.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.plan import teardown as teardown_plan
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects

if TYPE_CHECKING:  # the converger does not import this module
    from ansible_collections.soperator.slurm.plugins.module_utils.k8s.converger import Converger


def _prune_kinds(conv: Converger) -> List[Tuple[str, str]]:
    return [objects.parse_kind(k) for k in kinds.prune_kinds() if conv.served(*objects.parse_kind(k))]


def teardown(conv: Converger, params: Mapping[str, Any]) -> Dict[str, Any]:
    """Delete what the cluster runs and serves; keep the jail and the Secrets unless told (or the SlurmCluster's
    deletionPolicy says) otherwise. Data the reconciler may not delete is kept, with a warning."""
    cluster = conv.get_cr(names.CLUSTER_KIND, conv.name)
    asked = dict((field, "Delete" if wanted else "Retain")
                 for field, wanted in teardown_plan.data_to_delete(params, cluster).items())
    selector = "%s=%s" % (names.LABEL_CLUSTER, conv.name)
    nodesets = conv.nodesets()
    prune_kinds = _prune_kinds(conv)
    listed = [item for api_version, kind in prune_kinds for item in conv.list(api_version, kind, selector)]
    plan = teardown_plan.plan_teardown(conv.name, conv.namespace, cluster, params, conv.may_delete(asked), nodesets,
                                       listed, conv.served(kinds.api_version(teardown_plan.MARIADB),
                                                           teardown_plan.MARIADB.kind))
    api, deleted = conv.api, []
    for name in plan.nodesets:
        if not conv.check_mode:
            api.delete(names.API_VERSION, names.NODESET_KIND, name, conv.namespace)
        deleted.append("NodeSet %s" % name)
    for name in plan.finalizers:
        if conv.check_mode:
            continue
        live = conv.get_cr(names.NODESET_KIND, name)
        if live is not None:
            conv.api.remove_finalizer(live, names.FINALIZER)
    for api_version, kind, name in plan.objects:
        if not conv.check_mode and not api.delete(api_version, kind, name, conv.namespace, propagation="Foreground"):
            continue
        deleted.append("%s %s" % (kind, name))
    for api_version, kind, name in plan.data:
        if conv.check_mode:
            gone = api.get(api_version, kind, name, conv.namespace, metadata_only=True) is None
        else:
            gone = not api.delete(api_version, kind, name, conv.namespace)
        if not gone:
            deleted.append("%s %s" % (kind, name))
    if plan.delete_cluster:
        if not conv.check_mode:
            api.delete(names.API_VERSION, names.CLUSTER_KIND, conv.name, conv.namespace)
        deleted.append("SlurmCluster %s" % conv.name)
    deadline = conv.clock() + (params.get("wait_timeout") or 0)
    while deleted and not conv.check_mode and conv.clock() < deadline:
        if not teardown_plan.managed([i for api_version, kind in prune_kinds
                                      for i in conv.list(api_version, kind, selector)]):
            break
        conv.sleep(1.0)
    return {"changed": bool(deleted), "deleted": deleted, "kept": plan.kept,
            "data_kept": plan.warnings, "name": conv.name, "namespace": conv.namespace}


def release_finalizers(client: access.Client, namespaces: Sequence[str] | None,
                       check_mode: bool = False) -> List[Tuple[str, str, str]]:
    """Remove our finalizer from every SlurmCluster and NodeSet in ``namespaces`` (all when empty), so that
    removing the operator strands no resource. Returns ``[(kind, namespace, name)]`` released."""
    api = access.Api(client)
    released = []
    every: List[str | None] = [None]  # every namespace: one list across them
    for kind in (names.CLUSTER_KIND, names.NODESET_KIND):
        for namespace in (list(namespaces) if namespaces else every):
            for item in api.list(names.API_VERSION, kind, namespace, required=True, what="list %s" % kind):
                md = item["metadata"]
                if names.FINALIZER not in (md.get("finalizers") or []):
                    continue
                released.append((kind, md["namespace"], md["name"]))
                if not check_mode:
                    api.remove_finalizer(item, names.FINALIZER)
    return released
