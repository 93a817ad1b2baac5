# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""``site.yml``'s definition intake: judge a whole definition before any of it is written, then apply its documents.
What a definition is and what its dry run means are pure (``api/definition.py``); this reads what is stored and
sends the dry runs and the writes (``apply.py``).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import definition as definitions
from ansible_collections.soperator.slurm.plugins.module_utils.api import fieldmap, references
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import Applier, apply_manifests
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.types import NodeSet, SlurmCluster

if TYPE_CHECKING:  # the converger imports this module's callers, not this module
    from ansible_collections.soperator.slurm.plugins.module_utils.k8s.converger import Converger


def apply_definition(conv: Converger, cluster: SlurmCluster, nodesets: Sequence[NodeSet], check_mode: bool,
                     diff: bool, on_secret: Optional[Callable[[str], None]]) -> Dict[str, Any]:
    """Apply the namespace, the SlurmCluster and its NodeSets (labelled as the cluster's)."""
    return apply_manifests(conv.api, definitions.definition_docs(conv.name, conv.namespace, cluster, list(nodesets)),
                           conv.field_manager,
                           check_mode=check_mode, diff=diff, on_secret=on_secret)


def check_definition(conv: Converger, cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                     collection_version: str = names.COLLECTION_VERSION) -> None:
    """Everything ``site.yml`` can know about a definition before it writes any of it, or SpecErrors:

    the pure validation with the installer's policy and the stored objects (immutable fields); NodeSet names taken
    by another cluster's NodeSets; names the cluster's objects would share with another owner's in the namespace;
    then a server-side dry run of the documents themselves and, when they change anything, of every object rendered
    from them."""
    every_cluster = conv.list(names.API_VERSION, names.CLUSTER_KIND)
    every_nodeset = conv.list(names.API_VERSION, names.NODESET_KIND)
    live_cluster = next((c for c in every_cluster if c["metadata"]["name"] == conv.name), None)
    live_nodesets = dict((ns["metadata"]["name"], ns) for ns in every_nodeset)
    errors: List[SpecError] = []
    for ns in nodesets:
        name = ns["metadata"].get("name")
        live = live_nodesets.get(name)
        owner = ((live or {}).get("spec") or {}).get("clusterRef", {}).get("name")
        if live is not None and owner != conv.name:
            errors.append(SpecError("nodesets[%s].metadata.name" % name, "NodeSet %s/%s belongs to SlurmCluster %s: "
                                    "a NodeSet cannot move between clusters (name this one differently)"
                                    % (conv.namespace, name, owner)))
    mine = dict((n, o) for n, o in live_nodesets.items() if (o.get("spec") or {}).get("clusterRef", {}).get(
        "name") == conv.name)
    try:
        checked_cluster, checked = specs.validate_cluster_with_nodesets(
            cluster, nodesets, collection_version, conv.policy, old_cluster=live_cluster, old_nodesets=mine)
    except SpecErrors as e:
        errors.extend(e.errors)
    created = dict((n, o["metadata"].get("creationTimestamp")) for n, o in live_nodesets.items())
    owners = conv.owners([o for o in every_nodeset if o["metadata"]["name"] not in
                          set(ns["metadata"].get("name") for ns in nodesets) and
                          (o.get("spec") or {}).get("clusterRef", {}).get("name") != conv.name],
                         [c for c in every_cluster if c["metadata"]["name"] != conv.name])
    owners.append({"cluster": conv.name, "nodeset": None,
                   "created": ((live_cluster or {}).get("metadata") or {}).get("creationTimestamp")})
    owners += [{"cluster": conv.name, "nodeset": ns["metadata"].get("name"),
                "created": created.get(ns["metadata"].get("name"))} for ns in nodesets]
    errors.extend(references.name_collisions(owners, conv.name))
    if not errors:
        errors.extend(references.marked_secret_errors(checked_cluster, conv.marked_secrets(checked_cluster)))
    if errors:
        raise SpecErrors(errors)
    # The dry runs need the namespace: an empty one is the only thing created before the definition is judged
    # (in check mode nothing is: the check-mode apply then predicts what it cannot ask).
    if conv.get_namespace() is None:
        if conv.check_mode:
            return
        apply_manifests(conv.api, definitions.definition_docs(conv.name, conv.namespace, cluster, [])[:1],
                        conv.field_manager)
    documents = Applier(conv.api, definitions.definition_docs(conv.name, conv.namespace, cluster, list(nodesets)),
                        conv.field_manager, check_mode=conv.check_mode).observe()
    refusals = documents.preflight()
    if refusals:
        raise SpecErrors(definitions.definition_refusals(cluster, nodesets, refusals))
    if not documents.changes():
        # The definition is what is stored: its objects are judged by the converge's own dry run of what its plan
        # changes, as for any stored SlurmCluster (a render without the plan's decisions, the replicas a drain
        # holds, the login template's age, would differ from the live objects and cost a dry run each time).
        return
    uid = ((live_cluster or {}).get("metadata") or {}).get("uid")
    shown = dict(checked_cluster, metadata=dict(checked_cluster["metadata"], uid=uid)) if uid else checked_cluster
    manifests = render.render_cluster(shown, [dict(ns, metadata=dict(
        ns["metadata"], uid=((live_nodesets.get(ns["metadata"]["name"]) or {}).get("metadata") or {}).get("uid")))
        for ns in checked], collection_version, served=conv.served_kinds())
    # Seen as the converge sees them (its label selector): an object of that name someone else made is a conflict.
    refusals = conv.applier(manifests).preflight()
    if refusals:
        raise SpecErrors(fieldmap.refusal_errors(checked_cluster, checked, refusals))
