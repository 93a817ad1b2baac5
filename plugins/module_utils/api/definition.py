# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A definition as ``site.yml`` gives it (a list of documents): its one SlurmCluster and the NodeSets, the documents
applied of it, and what a server-side dry run of those documents says in the user's own terms. Pure.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster


def split_definition(docs: Iterable[object] | None,
                     namespace: str | None = None) -> tuple[SlurmCluster, list[NodeSet]]:
    """The one SlurmCluster of a definition and its NodeSets; any other document is an error that names it."""
    clusters: list[SlurmCluster] = []
    nodesets: list[NodeSet] = []
    problems: Errors = []
    for index, doc in enumerate(docs or ()):
        if not isinstance(doc, dict):
            problems.append(SpecError("definition[%d]" % index, "not a mapping"))
            continue
        kind, api = doc.get("kind"), doc.get("apiVersion")
        where = "definition[%d] (%s %s)" % (index, kind, (doc.get("metadata") or {}).get("name"))
        if api != names.API_VERSION or kind not in (names.CLUSTER_KIND, names.NODESET_KIND):
            problems.append(SpecError(where, "not a %s SlurmCluster or NodeSet: this playbook does not know what "
                                             "to do with it" % names.API_VERSION))
            continue
        doc = dict(doc, metadata=dict(doc.get("metadata") or {}))
        if namespace and not doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = namespace
        (clusters if kind == names.CLUSTER_KIND else nodesets).append(doc)
    if len(clusters) != 1:
        problems.append(SpecError("definition", "must hold exactly one SlurmCluster (found %d)" % len(clusters)))
    else:
        name = clusters[0]["metadata"].get("name")
        for ns in nodesets:
            ref = ((ns.get("spec") or {}).get("clusterRef") or {}).get("name")
            if ref != name:
                problems.append(SpecError("nodesets[%s].spec.clusterRef.name" % ns["metadata"].get("name"),
                                          "names SlurmCluster %r, which this definition does not hold (it holds %r)"
                                          % (ref, name)))
    if problems:
        raise SpecErrors(problems)
    return clusters[0], nodesets


def direct_converge_errors(nodesets: Iterable[NodeSet]) -> Errors:
    """What ``site.yml`` cannot serve when it converges a definition itself (``soperator_converge: direct``): an
    elastic NodeSet, whose pods follow Slurm's power-ups long after the play ended. Errors naming the field."""
    return [SpecError("nodesets[%s].spec.elastic" % (ns.get("metadata") or {}).get("name"),
                      "an elastic NodeSet needs the operator (Slurm powers its nodes up and down at any time, and "
                      "the operator makes their pods): run site.yml with soperator_converge: operator, or give the "
                      "NodeSet a fixed spec.replicas")
            for ns in nodesets if (ns.get("spec") or {}).get("elastic")]


def definition_docs(name: str, namespace: str, cluster: SlurmCluster, nodesets: list[NodeSet]) -> list[KubeObject]:
    """What ``site.yml`` applies of a definition: the namespace, the SlurmCluster and its NodeSets, labelled as the
    cluster's (their status left out)."""
    label = {names.LABEL_CLUSTER: name}
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    for doc in [cluster] + nodesets:
        doc = dict(doc, metadata=dict(doc["metadata"], namespace=namespace,
                                      labels=dict(doc["metadata"].get("labels") or {}, **label)))
        doc.pop("status", None)
        docs.append(doc)
    return docs


def definition_refusals(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                        refusals: Iterable[KubeObject]) -> Errors:
    """Errors of a dry run of the definition's own documents: the API server's paths are the user's already."""
    errors = []
    for refusal in refusals:
        obj = refusal["object"]
        prefix = "nodesets[%s]." % obj["metadata"]["name"] if obj["kind"] == names.NODESET_KIND else ""
        for cause in refusal.get("causes") or [{"field": "", "message": refusal["message"]}]:
            errors.append(SpecError(prefix + (cause.get("field") or "spec"), "refused by the API server (dry run, "
                                    "nothing was applied): %s" % (cause.get("message") or refusal["message"])))
    return errors
