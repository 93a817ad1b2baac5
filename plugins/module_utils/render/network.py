# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NetworkPolicies (``spec.networkPolicies``, on by default): the pods that hold or reach the accounting data, and
the exporter, accept connections on their port only from the clients that need them.

* the in-cluster MariaDB: slurmdbd only;
* slurmdbd: slurmctld (it sends the accounting records), the login and worker pods (``sacct``, ``sacctmgr``: Slurm's
  accounting commands ask slurmdbd directly, from a login node or from a job) and slurmrestd (its
  ``openapi/slurmdbd`` plugin);
* slurmrestd: the login and worker pods (a user's ``curl`` with ``scontrol token``), and ``restApiFrom``;
* the exporter: ``exporterFrom``, by default the pods of the cluster's namespace.

Each policy selects one component's pods and lists only Ingress: everything else those pods do is left as it is,
and the other components are selected by none (slurmctld, slurmd and sshd serve every node and user of the cluster).
A pod's labels are what the peers are selected by: whoever may create pods with them in the namespace may pass.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy
from typing import Iterable

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

NETWORK_POLICY_API_VERSION = "networking.k8s.io/v1"


def _pods(c: ClusterContext, components: Iterable[str]) -> KubeObject:
    """A peer: the cluster's pods of ``components`` (in the cluster's namespace)."""
    return {"podSelector": {
        "matchLabels": {names.LABEL_NAME: "slurm", names.LABEL_INSTANCE: c.name},
        "matchExpressions": [{"key": names.LABEL_COMPONENT, "operator": "In", "values": sorted(components)}]}}


def _policy(c: ClusterContext, name: str, component: str, port: int, peers: list[KubeObject]) -> KubeObject:
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION, "kind": "NetworkPolicy",
        "metadata": c.owned(name, component),
        "spec": {"podSelector": {"matchLabels": names.selector_labels(c.name, component)},
                 "policyTypes": ["Ingress"],
                 "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": port}]}]},
    }


def network_policies(c: ClusterContext) -> list[KubeObject]:
    """The NetworkPolicies of the cluster's enabled components; none when ``spec.networkPolicies.enabled`` is off."""
    spec = c.spec
    settings = spec["networkPolicies"]
    if not settings["enabled"]:
        return []
    found = []
    if spec["accounting"]["enabled"]:
        clients = [names.COMPONENT_CONTROLLER, names.COMPONENT_LOGIN, names.COMPONENT_WORKER]
        if spec["restApi"]["enabled"]:
            clients.append(names.COMPONENT_REST)
        found.append(_policy(c, names.accounting_name(c.name), names.COMPONENT_ACCOUNTING, names.SLURMDBD_PORT,
                             [_pods(c, clients)]))
        database = spec["accounting"]["database"]
        if database["type"] == "InCluster":
            found.append(_policy(c, names.database_name(c.name), names.COMPONENT_DATABASE, database["port"],
                                 [_pods(c, [names.COMPONENT_ACCOUNTING])]))
    if spec["restApi"]["enabled"]:
        peers = [_pods(c, [names.COMPONENT_LOGIN, names.COMPONENT_WORKER])]
        peers += copy.deepcopy(settings.get("restApiFrom") or [])
        found.append(_policy(c, names.rest_name(c.name), names.COMPONENT_REST, names.SLURMRESTD_PORT, peers))
    if spec["exporter"]["enabled"]:
        peers = copy.deepcopy(settings.get("exporterFrom") or []) or [{"podSelector": {}}]
        found.append(_policy(c, names.exporter_name(c.name), names.COMPONENT_EXPORTER, names.EXPORTER_PORT, peers))
    return found
