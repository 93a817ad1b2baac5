"""Kubernetes Nodes into the work queue: a cordon, an uncordon, a change of a node condition or of its labels runs the
converge of every SlurmCluster with a worker pod on that node at once (spec.healthChecks.kubernetesNodes: the converge
drains or resumes their Slurm nodes; spec.featureLabelPrefix, spec.topology: features and topology follow the labels).
Opt-in (``--watch-nodes``, the role's ``operator_read_nodes``): Nodes are cluster-scoped.

The converge decides; this only says when to look. Its run is forced (a requeue): the caches carry no Slurm state,
so the drift check could not tell that a drain is due.
"""

import logging

from ansible_collections.soperator.slurm.plugins.module_utils import names

from . import cache, workqueue

log = logging.getLogger(__name__)

NODES = cache.Resource("", "v1", "nodes", "Node")


def signature(node):
    """What of a Node the converge projects into Slurm: cordoned or not, its conditions' statuses, and its labels
    (features and topology from labels: spec.featureLabelPrefix, spec.topology)."""
    if node is None:
        return None
    conditions = (node.get("status") or {}).get("conditions") or ()
    return (bool((node.get("spec") or {}).get("unschedulable")),
            tuple(sorted((c.get("type"), c.get("status")) for c in conditions)),
            tuple(sorted(((node.get("metadata") or {}).get("labels") or {}).items())))


def clusters_on(node_name, pods):
    """(namespace, cluster) of the worker pods on ``node_name``."""
    found = set()
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if (pod.get("spec") or {}).get("nodeName") == node_name and \
                labels.get(names.LABEL_COMPONENT) == names.COMPONENT_WORKER and labels.get(names.LABEL_CLUSTER):
            found.add((pod["metadata"].get("namespace"), labels[names.LABEL_CLUSTER]))
    return sorted(found)


class NodeWatch:
    def __init__(self, kube, controller):
        self.controller = controller
        self.informer = cache.Informer(kube, NODES, [None], self._on_node, stopping=controller._stopping)

    def start(self):
        self.informer.start()

    def _on_node(self, etype, old, new):
        if etype != cache.MODIFIED or signature(old) == signature(new):
            return
        pods_informer = self.controller.owned.get("Pod")
        if pods_informer is None:
            return
        node_name = new["metadata"]["name"]
        for namespace, cluster in clusters_on(node_name, pods_informer.store.list()):
            log.info("node %s changed (cordon, conditions or labels): reconciling SlurmCluster %s/%s", node_name,
                     namespace, cluster)
            self.controller.queue.add((names.CLUSTER_KIND, namespace, cluster), reason=workqueue.REQUEUE)
