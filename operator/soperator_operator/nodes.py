"""Kubernetes Nodes into the work queue: a cordon, an uncordon, a change of a node condition or of its labels runs the
converge of every SlurmCluster with a worker pod on that node at once (spec.healthChecks.kubernetesNodes: the converge
drains or resumes their Slurm nodes; spec.featureLabelPrefix, spec.topology: features and topology follow the labels);
a node added, deleted, labelled or tainted so that it starts or stops matching an every-node NodeSet
(spec.placement.everyNode) runs that NodeSet's cluster (its worker is made there, or drained and removed).
Opt-in (``--watch-nodes``, the role's ``operator_read_nodes``): Nodes are cluster-scoped.

The converge decides; this only says when to look. Its run is forced (a requeue): the caches carry no Slurm state,
so the drift check could not tell that a drain is due.
"""

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import values
from ansible_collections.soperator.slurm.plugins.module_utils.plan import every_node
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import merge_placement
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

from . import cache, workqueue

if TYPE_CHECKING:
    from .kube import Kube

log = logging.getLogger(__name__)

NODES = cache.Resource("", "v1", "nodes", "Node")

# (cordoned, ((condition type, status), ...), ((label, value), ...)) of a Node (:func:`signature`).
Signature = tuple[bool, tuple[tuple[Any, Any], ...], tuple[tuple[str, Any], ...]]


def signature(node: KubeObject | None) -> Signature | None:
    """What of a Node the converge projects into Slurm: cordoned or not, its conditions' statuses, and its labels
    (features and topology from labels: spec.featureLabelPrefix, spec.topology)."""
    if node is None:
        return None
    conditions = (node.get("status") or {}).get("conditions") or ()
    return (bool((node.get("spec") or {}).get("unschedulable")),
            tuple(sorted((c.get("type"), c.get("status")) for c in conditions)),
            tuple(sorted(((node.get("metadata") or {}).get("labels") or {}).items())))


def clusters_on(node_name: str, pods: Iterable[KubeObject]) -> list[tuple[str, str]]:
    """(namespace, cluster) of the worker pods on ``node_name``."""
    found: set[tuple[str, str]] = set()
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if (pod.get("spec") or {}).get("nodeName") == node_name and \
                labels.get(names.LABEL_COMPONENT) == names.COMPONENT_WORKER and labels.get(names.LABEL_CLUSTER):
            found.add((pod["metadata"].get("namespace"), labels[names.LABEL_CLUSTER]))
    return sorted(found)


def every_node_clusters(old: KubeObject | None, new: KubeObject | None, nodesets: Iterable[KubeObject],
                        clusters: Mapping[tuple[str, str], KubeObject]) -> list[tuple[str, str]]:
    """(namespace, cluster) of the every-node NodeSets whose matching of a Node changed from ``old`` to ``new`` (None:
    not there: added, deleted). ``nodesets``: the NodeSets (any namespace); ``clusters``: ``{(namespace, name):
    SlurmCluster}`` (the cluster-wide placement merges under the NodeSet's). Pure."""
    found: set[tuple[str, str]] = set()
    node = new or old
    if node is None:
        return []
    node_name = node["metadata"]["name"]
    before, after = (None if n is None else every_node.node_facts(n) for n in (old, new))
    for ns in nodesets:
        spec = ns.get("spec") or {}
        if not values.every_node(spec):
            continue
        namespace = ns["metadata"].get("namespace")
        cluster_name = (spec.get("clusterRef") or {}).get("name")
        if not cluster_name:
            continue  # never stored so (the CRD requires clusterRef.name): no cluster to run
        cluster = clusters.get((namespace, cluster_name))
        placement = merge_placement(((cluster or {}).get("spec") or {}).get("placement"), spec.get("placement"))
        was = before is not None and every_node.eligible(node_name, before, placement)
        now = after is not None and every_node.eligible(node_name, after, placement)
        if was != now:
            found.add((namespace, cluster_name))
    return sorted(found)


class NodeWatch:
    def __init__(self, kube: "Kube", controller: cache.Caches) -> None:
        self.controller = controller
        self.informer = cache.Informer(kube, NODES, [None], self._on_node, stopping=controller._stopping)

    def start(self) -> None:
        self.informer.start()

    def _on_node(self, etype: str, old: KubeObject | None, new: KubeObject | None) -> None:
        self._every_node(etype, old, new)
        if etype != cache.MODIFIED or new is None or signature(old) == signature(new):
            return
        pods_informer = self.controller.owned.get("Pod")
        if pods_informer is None:
            return
        node_name = new["metadata"]["name"]
        for namespace, cluster in clusters_on(node_name, pods_informer.store.list()):
            log.info("node %s changed (cordon, conditions or labels): reconciling SlurmCluster %s/%s", node_name,
                     namespace, cluster)
            self.controller.queue.add((names.CLUSTER_KIND, namespace, cluster), reason=workqueue.REQUEUE)

    def _every_node(self, etype: str, old: KubeObject | None, new: KubeObject | None) -> None:
        informers = getattr(self.controller, "informers", None) or {}
        sets, crs = informers.get(names.NODESET_KIND), informers.get(names.CLUSTER_KIND)
        if sets is None:
            return
        clusters = dict(((c["metadata"].get("namespace"), c["metadata"]["name"]), c)
                        for c in (crs.store.list() if crs is not None else ()))
        if etype == cache.DELETED:
            old, new = old or new, None
        elif etype == cache.ADDED:
            old = None
        node = new or old
        if node is None:
            return
        for namespace, cluster in every_node_clusters(old, new, sets.store.list(), clusters):
            log.info("node %s starts or stops matching an every-node NodeSet: reconciling SlurmCluster %s/%s",
                     node["metadata"]["name"], namespace, cluster)
            self.controller.queue.add((names.CLUSTER_KIND, namespace, cluster), reason=workqueue.REQUEUE)
