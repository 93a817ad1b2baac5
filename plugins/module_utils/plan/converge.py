# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reconcile of a SlurmCluster, decided: what to apply, which Slurm nodes to drain, resume or forget,
what status to report, and whether to look again soon.

Pure: the adapter (``k8s/converger.py``) observes the cluster (the live SlurmCluster and NodeSets, the cluster's
StatefulSets and pods, Slurm's node table) and hands it to :func:`plan`; the operator runtime calls the same
function on its watch caches to decide whether a run is needed at all. Time is passed in.

No running job is ever killed by a plan, unless a setting of the NodeSet says after how long (``drainTimeout`` with
``onDrainTimeout: Proceed`` for scale-in, maintenance and removal; ``updateStrategy.proceedAfter`` for a rolling
update, unset by default), and then with an Event (``DrainTimeoutExpired``) naming the node and its jobs:

* a NodeSet that shrinks keeps the pods whose Slurm nodes are not drained and idle yet (StatefulSets remove
  their highest ordinals first); its victims are drained with ``soperator: scale-in``;
* a NodeSet being deleted (our finalizer holds it) shrinks to zero the same way;
* ``maintenance: true`` drains every worker with ``soperator: maintenance`` and scales the cluster to zero
  only once they are idle;
* what a plan cannot decide without Slurm (slurmctld not answering) is left as it is and reported pending,
  while everything else is still applied.

Drains of ours whose purpose is over (a scale-in cancelled, maintenance ended, a Kubernetes node uncordoned) are
resumed; drains with any other reason belong to an administrator (or to the health program on the node, which resumes
its own) and are never touched. Slurm's node states are projected onto the worker pods (``projection.py``).

:func:`plan` validates once (the renderers it calls trust it: ``validated=True``), then runs one planner per concern,
each a pure function of the same :class:`model.Context` that fills its part of a :class:`model.Draft`: maintenance and
SlurmUser (``maintenance.py``), scale and drains (``scale.py``), the rendered objects (``render``, given the replicas
and the maintenance decided), the workers' rolling updates (``rolls.py``), the login pods' (``login.py``), the Slurm
records of pods gone for good (``scale.py``), what the pods hold and what failed (``components.py``), Slurm's view onto
Kubernetes and back (``projection.py``), readiness and the components' conditions (``components.py``). The filled
Draft is frozen into the tree of :class:`decided.Plan` the adapters carry out.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Mapping, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import references, values, walk
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.policy import Policy
from ansible_collections.soperator.slurm.plugins.module_utils.api.references import Owner
from ansible_collections.soperator.slurm.plugins.module_utils.plan import (
    backup, components, elastic, every_node, login, lost, maintenance, modes, node_labels, pins, projection, rolls,
    scale, slurm_config,
)
from ansible_collections.soperator.slurm.plugins.module_utils.plan.decided import Plan, freeze
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import Context, Draft, Observed, deleting
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.types import NodeSet, SlurmCluster


def split_errors(errors: Iterable[SpecError]) -> tuple[Errors, dict[str, Errors]]:
    """SpecErrors of a cluster with its NodeSets -> (cluster-level errors, {nodeset name: errors})."""
    cluster_errors: Errors = []
    per_nodeset: dict[str, Errors] = {}
    for err in errors:
        path = err.path or ""
        if path.startswith("nodesets[") and "]" in path:
            name = path[len("nodesets["):path.index("]")]
            per_nodeset.setdefault(name, []).append(err)
        else:
            cluster_errors.append(err)
    return cluster_errors, per_nodeset


def _nodeset_name(nodeset: NodeSet | None) -> str:
    return str(((nodeset or {}).get("metadata") or {}).get("name"))


def validate(cluster: SlurmCluster, nodesets: Sequence[NodeSet], collection_version: str = names.COLLECTION_VERSION,
             policy: Policy | None = None, refused: Mapping[str, Iterable[SpecError]] | None = None,
             owners: Sequence[Owner] | None = None, secrets: Mapping[str, Mapping[str, str]] | None = None,
             ) -> tuple[SlurmCluster, list[NodeSet], dict[str, Errors]]:
    """(defaulted cluster, defaulted valid NodeSets, {name: [SpecError]} of the invalid ones).

    One invalid NodeSet does not hold back the others: it is left out (its objects stay as they are) and
    reported. An invalid SlurmCluster raises SpecErrors: nothing of the cluster can be rendered then.

    ``policy``: the installer's (``policy.normalize``). ``refused``: ``{nodeset name: [SpecError]}`` NodeSets
    already known to be invalid (the API server refused their objects in a dry run). ``owners``: every SlurmCluster
    and NodeSet of the namespace (``references.name_collisions``), to refuse objects that would take another's names.
    ``secrets``: ``{name: labels}`` of the Secrets the cluster takes only when marked for it (``plan``'s
    ``observed["secrets"]``); one missing or unmarked makes the cluster invalid. None: not judged. The restore of a
    jail (``restore.py``) judges a stored cluster with this same function.
    """
    invalid = dict((name, list(errs)) for name, errs in (refused or {}).items())
    if owners is not None:
        cluster_errors, per_nodeset = split_errors(references.name_collisions(
            owners, str(((cluster or {}).get("metadata") or {}).get("name"))))
        if cluster_errors:
            raise SpecErrors(cluster_errors)
        for name, errs in per_nodeset.items():
            invalid.setdefault(name, []).extend(errs)
    remaining = [ns for ns in nodesets if _nodeset_name(ns) not in invalid]
    while True:
        try:
            cluster_ok, valid = specs.validate_cluster_with_nodesets(cluster, remaining, collection_version, policy)
            break
        except SpecErrors as exc:
            cluster_errors, per_nodeset = split_errors(exc.errors)
            if cluster_errors or not per_nodeset:
                raise SpecErrors(exc.errors)
            for name, errs in per_nodeset.items():
                invalid.setdefault(name, []).extend(errs)
            kept = [ns for ns in remaining if _nodeset_name(ns) not in per_nodeset]
            if len(kept) == len(remaining):  # errors named a NodeSet by index: cannot single it out
                raise SpecErrors(exc.errors)
            remaining = kept
    if secrets is not None:
        # Before anything is rendered: slurmdbd (the backup pods, sssd) would mount such a Secret and send it to the
        # database host (the repository, the directory).
        problems = references.marked_secret_errors(cluster_ok, secrets)
        if problems:
            raise SpecErrors(problems)
    return cluster_ok, valid, invalid


def plan(cluster: SlurmCluster, nodesets: Sequence[NodeSet], observed: Observed, now: int,
         collection_version: str = names.COLLECTION_VERSION, policy: Policy | None = None,
         refused: Mapping[str, Iterable[SpecError]] | None = None) -> Plan:
    """Decide one reconcile.

    ``cluster``: the live SlurmCluster (with the API server's defaults and its uid); ``nodesets``: the live
    NodeSets that reference it (including ones being deleted). ``observed``: what the adapter observed, a dict of
    the keys :class:`model.Observed` lists and says (StatefulSets and pods by name, Slurm's nodes or why slurmctld did
    not answer, the Kubernetes nodes, the optional kinds served, the namespace's owners, the marked Secrets, the
    directory's status, login sessions, the controller's mounted files, ...); any may be absent. A key Secret an
    External database, the backups or a directory name that is not marked for this cluster makes it invalid
    (``secrets`` absent: not judged, as in the operator's cache check, which never applies anything).

    ``now``: epoch seconds. ``policy``, ``refused``: see :func:`validate`. Raises SpecErrors when the
    SlurmCluster itself is invalid.
    """
    p = Draft()
    live_sets = [ns for ns in nodesets if not deleting(ns)]
    cluster_ok, valid, invalid = validate(cluster, live_sets, collection_version, policy, refused,
                                          observed.get("owners"), observed.get("secrets"))
    p.cluster, p.valid_nodesets = cluster_ok, valid
    for set_name, errs in invalid.items():
        p.invalid[set_name] = "; ".join(str(e) for e in errs)
    # A NodeSet being deleted is no longer rendered: its live StatefulSet is scaled down to zero (draining
    # first) and its objects are kept from pruning until nothing of it is left. Only its drainTimeout matters.
    leaving = [walk.apply_defaults(ns, specs.shared_schema(names.NODESET_KIND)) for ns in nodesets if deleting(ns)]
    ctx = Context(cluster_ok, valid, leaving, invalid, observed, now)

    maintenance_ready = maintenance.plan_maintenance(p, ctx)
    slurm_user = maintenance.plan_slurm_user(p, ctx, maintenance_ready)
    replicas = scale.plan_replicas(p, ctx, maintenance_ready)
    # While maintenance drains, every pod runs on: the cluster is rendered as out of maintenance until then.
    # An elastic NodeSet being deleted stays in slurm.conf until its nodes are powered down (plan/elastic.leave), and
    # one whose maxNodes was lowered keeps the names still up (plan/elastic.plan_shrink).
    wider = elastic.plan_shrink(p, ctx)
    for set_name, max_nodes in wider.items():
        ctx.replace(elastic.with_max(next(v.nodeset for v in ctx.views if v.name == set_name and not v.leaving),
                                     max_nodes))
    rendered = [v.nodeset for v in ctx.views if modes.of(v).rendered(v)]
    topology = node_labels.plan_topology(p, ctx, replicas.render)
    p.manifests = render.render_cluster(cluster_ok, rendered,
                                        collection_version, served=observed.get("served") or (),
                                        slurm_user=slurm_user, replicas=replicas.render,
                                        maintenance=ctx.spec["maintenance"] and maintenance_ready,
                                        topology=topology, validated=True)
    if any(v.mode == values.ELASTIC for v in ctx.views):
        hashes, render_pod = render.elastic_pods(cluster_ok, rendered, collection_version, validated=True)
        elastic.plan_elastic(p, ctx, hashes, render_pod)
    if any(v.mode == values.EVERY_NODE for v in ctx.views):
        hashes, render_pod = render.every_node_pods(cluster_ok, rendered, collection_version, validated=True)
        every_node.plan_every_node(p, ctx, hashes, render_pod)
    rolls.plan_rolls(p, ctx, replicas.rolling)
    login.plan_login(p, ctx)
    scale.plan_node_records(p, ctx, dict(replicas.kept, **elastic.kept(ctx)))
    components.plan_guards(p, ctx)
    projection.plan_projection(p, ctx, *modes.projected_pods(ctx))
    lost.plan_lost(p, ctx, modes.replaceable_pods(ctx))
    slurm_config.plan_slurm_config(p, ctx)
    node_labels.plan_features(p, ctx)
    node_labels.plan_unplaced(p, ctx)
    node_labels.plan_label_events(p, ctx)
    pins.plan_pins(p, ctx)
    components.plan_readiness(p, ctx, maintenance_ready)
    components.plan_components(p, ctx)
    backup.plan_backup(p, ctx)
    if observed.get("slurm_error") and p.pending:  # asked and silent: said beside what waits on it
        p.pending.append("slurm: %s" % observed["slurm_error"])
    return freeze(p)
