# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""What a converge pass reads before the planner decides: the SlurmCluster's NodeSets, its StatefulSets and pods
(label-selected lists; the worker pods, one per Slurm node, only when ``model.worker_pods_needed`` or Slurm's view
asks for them), Slurm's node table (one ``scontrol show node`` in the controller pod, when it is ready),
the outdated login pods' sessions, the optional kinds served, the owners of the namespace, the labels of an External
database's Secrets and, when asked for, the Kubernetes nodes of the workers. Reads only; the converger
(``converger.py``) mixes this in.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, cast

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api import identity, values
from ansible_collections.soperator.slurm.plugins.module_utils.api.references import Owner
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import PodTransport, Slurm, SlurmError
from ansible_collections.soperator.slurm.plugins.module_utils.plan import every_node
from ansible_collections.soperator.slurm.plugins.module_utils.plan import login as login_plan
from ansible_collections.soperator.slurm.plugins.module_utils.plan import model
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import NodeFacts, Observed
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import login_check
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster


def marked_secrets(api: access.Api, namespace: str, cluster: SlurmCluster) -> Dict[str, Dict[str, str]]:
    """``{name: labels}`` of the Secrets an External database, the backups and a directory name
    (``values.marked_secret_refs``), read by name as metadata only (PartialObjectMetadata: their values never
    reach this process); a missing one is left out. The converge's and a restore's (``restore.py``)."""
    found: Dict[str, Dict[str, str]] = {}
    for name in sorted(set(ref[1] for ref in values.marked_secret_refs(cluster.get("spec")))):
        meta = api.get("v1", "Secret", name, namespace, metadata_only=True,
                       what="read the labels of Secret %s/%s" % (namespace, name))
        if meta is not None:
            found[name] = dict((meta.get("metadata") or {}).get("labels") or {})
    return found


class Observation(object):
    """Reads of one SlurmCluster (``self.api``, ``self.namespace``, ``self.name``, ``self.slurm_transport``)."""

    api: access.Api
    namespace: str
    name: str
    slurm_transport: PodTransport
    field_manager: str

    def get_namespace(self) -> KubeObject | None:
        return self.api.get("v1", "Namespace", self.namespace, what="get Namespace %s" % self.namespace)

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the cluster serves a kind (another project's CRD); remembered for this Converger."""
        return self.api.served(api_version, kind)

    def served_kinds(self) -> Tuple[str, ...]:
        """The optional kinds (kinds.OWNED) the cluster serves: only those are rendered."""
        return tuple(k.kind for k in kinds.OWNED if k.optional and self.served(kinds.api_version(k), k.kind))

    def get_cr(self, kind: str, name: str) -> KubeObject | None:
        return self.api.get(names.API_VERSION, kind, name, self.namespace,
                            what="get %s %s/%s" % (kind, self.namespace, name))

    def list(self, api_version: str, kind: str, selector: str | None = None) -> List[KubeObject]:
        return self.api.list(api_version, kind, self.namespace, selector, required=True,
                             what="list %s in %s" % (kind, self.namespace))

    def nodesets(self, every: Sequence[NodeSet] | None = None) -> List[NodeSet]:
        """This cluster's NodeSets (of ``every`` NodeSet of the namespace, listed when not given)."""
        if every is None:
            every = self.list(names.API_VERSION, names.NODESET_KIND)
        return [ns for ns in every if ((ns.get("spec") or {}).get("clusterRef") or {}).get("name") == self.name]

    def owners(self, nodesets: Sequence[NodeSet] | None = None,
               clusters: Sequence[SlurmCluster] | None = None) -> List[Owner]:
        """Every SlurmCluster and NodeSet of the namespace as ``references.name_collisions`` wants them."""
        if clusters is None:
            clusters = self.list(names.API_VERSION, names.CLUSTER_KIND)
        if nodesets is None:
            nodesets = self.list(names.API_VERSION, names.NODESET_KIND)
        found: List[Owner] = [{"cluster": c["metadata"]["name"], "nodeset": None,
                               "created": c["metadata"].get("creationTimestamp")} for c in clusters]
        # A NodeSet's clusterRef.name: the CRD requires it (None only for an object the API server never checked).
        return found + [{"cluster": cast(str, ((ns.get("spec") or {}).get("clusterRef") or {}).get("name")),
                         "nodeset": ns["metadata"]["name"], "created": ns["metadata"].get("creationTimestamp")}
                        for ns in nodesets]

    def controller_ready(self, pods: Mapping[str, KubeObject]) -> bool:
        pod = pods.get(names.controller_pod(self.name))
        return pod is not None and not (pod.get("metadata") or {}).get("deletionTimestamp") and readiness.ready(pod)

    def slurm(self) -> Slurm:
        return Slurm(self.slurm_transport(names.controller_pod(self.name)))

    def observe(self, cluster: SlurmCluster,
                extra_leaving: Iterable[str] = ()) -> Tuple[List[NodeSet], Observed]:
        """(NodeSets, observed) for ``converge.plan`` (why Slurm did not answer: ``observed["slurm_error"]``);
        NodeSets named in ``extra_leaving`` (retired by a definition) are seen as being deleted."""
        every = self.list(names.API_VERSION, names.NODESET_KIND)
        nodesets = self.nodesets(every)
        leaving = set(extra_leaving)
        marked: List[NodeSet] = []
        for ns in nodesets:
            if ns["metadata"]["name"] in leaving and not ns["metadata"].get("deletionTimestamp"):
                ns = dict(ns, metadata=dict(ns["metadata"], deletionTimestamp="retiring"))
            marked.append(ns)
        selector = "%s=%s" % (names.LABEL_CLUSTER, self.name)
        statefulsets = dict((s["metadata"]["name"], s) for s in self.list("apps/v1", "StatefulSet", selector))
        # The worker pods (one per Slurm node: thousands) only when the plan needs them (model.worker_pods_needed).
        pods = dict((p["metadata"]["name"], p) for p in self.list("v1", "Pod", "%s,%s!=%s" % (
            selector, names.LABEL_COMPONENT, names.COMPONENT_WORKER)))
        slurm_nodes: Optional[Dict[str, SlurmNode]] = None
        slurm_error: Optional[str] = None
        if self.controller_ready(pods):
            try:
                slurm_nodes = self.slurm().show_nodes()
            except SlurmError as e:
                slurm_error = e.msg
        else:
            slurm_error = "pod %s is not ready" % names.controller_pod(self.name)
        workers_read = slurm_nodes is not None or model.worker_pods_needed(self.name, marked, statefulsets)
        if workers_read:
            pods.update(self.worker_pods())
        observed: Observed = {
            "statefulsets": statefulsets, "pods": pods, "slurm": slurm_nodes, "slurm_error": slurm_error,
            "login_sessions": self.login_sessions(statefulsets, pods), "served": self.served_kinds(),
            "owners": self.owners(every), "secrets": self.marked_secrets(cluster), "worker_pods_read": workers_read}
        observed["identity"], observed["identity_error"] = self.identity_status(cluster, pods)
        settings = ((cluster.get("spec") or {}).get("healthChecks") or {}).get("kubernetesNodes") or {}
        topology = (cluster.get("spec") or {}).get("topology")
        labels = topology or any((ns.get("spec") or {}).get("featureLabelPrefix") for ns in nodesets)
        pinned = sorted(set(host for ns in nodesets if ((ns.get("spec") or {}).get("placement") or {}).get("pinned")
                            for host in ((ns.get("status") or {}).get("pins") or {}).values()))
        every_node = any(values.every_node(ns.get("spec") or {}) for ns in nodesets)
        if every_node or pinned or (slurm_nodes is not None and (
                settings.get("drainCordoned") or settings.get("drainOnConditions")
                or settings.get("replaceLostAfter") or labels)):
            observed["k8s_nodes"], observed["k8s_nodes_error"] = self.kubernetes_nodes(pods, pinned, every_node)
        if slurm_nodes is not None and topology:
            live = self.api.get("v1", "ConfigMap", names.slurm_config_name(self.name), self.namespace,
                                what="read ConfigMap %s" % names.slurm_config_name(self.name))
            observed["live_topology"] = ((live or {}).get("data") or {}).get("topology.conf")
            observed["live_config_written"] = objects.last_written(live, self.field_manager)
            try:  # what Slurm placed, and the file the controller has now (node_labels.plan_topology)
                observed["slurm_topology"] = self.slurm().show_topology()
                observed["mounted_topology"] = self.slurm().config_file("topology.conf")
            except SlurmError as e:
                observed["slurm_topology"] = None
                observed["k8s_nodes_error"] = e.msg
        return marked, observed

    def worker_pods(self) -> Dict[str, KubeObject]:
        """``{name: pod}`` of the cluster's worker pods."""
        return dict((p["metadata"]["name"], p) for p in self.list("v1", "Pod", "%s=%s,%s=%s" % (
            names.LABEL_CLUSTER, self.name, names.LABEL_COMPONENT, names.COMPONENT_WORKER)))

    def marked_secrets(self, cluster: SlurmCluster) -> Dict[str, Dict[str, str]]:
        return marked_secrets(self.api, self.namespace, cluster)

    def identity_status(self, cluster: SlurmCluster,
                        pods: Mapping[str, KubeObject]) -> Tuple[Optional[str], Optional[str]]:
        """(what the controller's sssd sidecar last found about the directory, None) or (None, why it was not read);
        (None, None) without spec.identity. One fixed command in that container: it reads its status file."""
        if not identity.enabled(cluster.get("spec")):
            return None, None
        name = names.controller_pod(self.name)
        statuses = ((pods.get(name) or {}).get("status") or {}).get("initContainerStatuses") or []
        if not any(s.get("name") == identity.CONTAINER and (s.get("state") or {}).get("running") for s in statuses):
            return None, "the sssd sidecar of %s is not running" % name
        try:
            rc, out, dummy = self.slurm_transport(name, identity.CONTAINER)(identity.STATUS_COMMAND)
        except SlurmError as e:
            return None, "cannot ask the sssd sidecar of %s: %s" % (name, e.msg)
        if rc:
            return None, "the sssd sidecar of %s has not looked at the directory yet" % name
        return out, None

    def kubernetes_nodes(self, pods: Mapping[str, KubeObject], more: Iterable[str] = (),
                         every: bool = False) -> Tuple[Optional[Dict[str, NodeFacts]], Optional[str]]:
        """({name: {"unschedulable", "labels", "taints", "conditions"}} of the Kubernetes nodes the pods run on (and
        ``more``; ``every``: all of them, one list, for the every-node NodeSets), error); (None, why) when Nodes may
        not be read (cluster-scoped: the operator's opt-in ClusterRole, operator_read_nodes)."""
        try:
            if every:
                return dict((n["metadata"]["name"], every_node.node_facts(n)) for n in self.api.list(
                    "v1", "Node", what="list Nodes")), None
            found: Dict[str, NodeFacts] = {}
            hosts = set(str((p.get("spec") or {}).get("nodeName")) for p in pods.values()
                        if (p.get("spec") or {}).get("nodeName")) | set(more)
            for host in sorted(hosts):
                node = self.api.get("v1", "Node", host, what="get Node %s" % host)
                if node is not None:
                    found[host] = every_node.node_facts(node)
            return found, None
        except KubernetesError as e:
            return None, "cannot read Kubernetes nodes: %s" % e.msg

    def login_sessions(self, statefulsets: Mapping[str, KubeObject],
                       pods: Mapping[str, KubeObject]) -> Dict[str, Optional[int]]:
        """{pod: open sessions} of the outdated login pods (only they are asked); None when one cannot tell."""
        sessions: Dict[str, Optional[int]] = {}
        for name in login_plan.outdated_login_pods(self.name, statefulsets, pods):
            try:
                rc, out, dummy = self.slurm_transport(name, login_check.CONTAINER)(login_check.sessions_command())
            except SlurmError:
                # No sshd container to ask: a pod that is not ready holds no session (its sshd is not running).
                sessions[name] = None if readiness.ready(pods[name]) else 0
                continue
            sessions[name] = login_check.parse_sessions(rc, out)
        return sessions
