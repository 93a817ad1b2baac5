# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render every Kubernetes object of a Slurm cluster from its SlurmCluster and NodeSets (pure: dicts in, dicts out).

:func:`render_cluster` validates and defaults its input, then returns the manifests in apply order. Secrets are
rendered without data (the apply adapter generates them once, at creation); the jail claim and the populate Job
are create-only. Owner references are set only when the owner's UID is known. Each component's objects are built
in its own file: ``controller``, ``login``, ``worker``, ``jail``; what they share is in
``common``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Callable, Collection, Mapping, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import identity
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    ClusterContext,
    config_map,
    headless_service,
    pdb,
    secret,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.accounting import Accounting, accounting_objects
from ansible_collections.soperator.slurm.plugins.module_utils.render.backup import backup_cronjob, retention_cronjob
from ansible_collections.soperator.slurm.plugins.module_utils.render.controller import controller
from ansible_collections.soperator.slurm.plugins.module_utils.render.exporter import (
    exporter,
    exporter_service,
    service_monitor,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.health import (
    health_config,
    nccl_cronjob,
    nccl_service,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.identity import sssd_config_map
from ansible_collections.soperator.slurm.plugins.module_utils.render.jail import jail_claim, populate_job
from ansible_collections.soperator.slurm.plugins.module_utils.render.login import login, login_service
from ansible_collections.soperator.slurm.plugins.module_utils.render.network import network_policies
from ansible_collections.soperator.slurm.plugins.module_utils.render.rest import rest_service, slurmrestd
from ansible_collections.soperator.slurm.plugins.module_utils.render.worker import (
    elastic_pod, elastic_template, every_node_pod, every_node_template, worker,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.slurm_conf import (
    render_config_files,
    render_slurmdbd_conf,
)
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster_with_nodesets
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import every_node
from ansible_collections.soperator.slurm.plugins.module_utils.render.sshd_conf import render_sshd_config
from ansible_collections.soperator.slurm.plugins.module_utils.render.topology import render_topology_conf
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster

# render(nodeset, name) -> the Pod of one worker of an elastic NodeSet (name: the Slurm node's) or of an every-node
# NodeSet (name: the Kubernetes node's), as :func:`elastic_pods` and :func:`every_node_pods` return it.
PodRenderer = Callable[[NodeSet, str], KubeObject]


def worker_names(c: ClusterContext) -> list[str]:
    """Every worker name of every NodeSet, at the replicas rendered; every name of an elastic one (its NodeName
    records: Slurm plans jobs onto powered-down nodes)."""
    return [names.pod_name(names.worker_name(c.name, ns["metadata"]["name"]), o)
            for ns in sorted(c.nodesets, key=lambda ns: ns["metadata"]["name"])
            for o in range(ns["spec"]["elastic"]["maxNodes"] if ns["spec"].get("elastic") else c.workers(ns))]


def render_cluster(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                   collection_version: str = names.COLLECTION_VERSION, served: Collection[str] = (),
                   slurm_user: str = names.SLURM_USER,
                   replicas: Mapping[str, int] | None = None, maintenance: bool | None = None,
                   topology: str | None = None, validated: bool = False) -> list[KubeObject]:
    """Every Kubernetes object of the cluster, in apply order.

    ``cluster`` is a SlurmCluster object and ``nodesets`` its NodeSet objects (apiVersion, kind, metadata with
    name/namespace and optionally uid, spec). Both are validated and defaulted first: a SpecErrors lists every
    problem. ``served``: optional kinds the cluster serves (``ServiceMonitor``): rendered only then. Apply order:
    Secrets, jail claim (and a mariadb-operator MariaDB), ConfigMaps, Services, NetworkPolicies, populate Job, NCCL
    check CronJob, the jail backup's CronJobs, StatefulSets, PDBs, ServiceMonitor.

    What the planner decided is given as values: ``replicas`` ``{nodeset name: workers}`` (a scale-in waits for
    its drains; a NodeSet absent renders its ``spec.replicas``), ``maintenance`` whether every StatefulSet is at
    zero now (None: ``spec.maintenance``; False while the maintenance drains: every pod runs until its node is idle),
    ``topology`` the topology.conf text (``plan/node_labels.py``; None with spec.topology: every worker unplaced).
    ``validated``: the caller validated and defaulted both (``converge.plan`` does, once per pass): trusted as given.
    """
    if not validated:
        cluster, nodesets = validate_cluster_with_nodesets(cluster, nodesets, collection_version)
    c = ClusterContext(cluster, nodesets, replicas=replicas, maintenance=maintenance)
    spec = c.spec
    slurm_config = render_config_files(cluster, nodesets, slurm_user)
    if spec.get("topology"):
        slurm_config["topology.conf"] = topology if topology is not None else render_topology_conf(
            spec["topology"]["plugin"], worker_names(c), {})
    sshd_config = {"sshd_config": render_sshd_config(cluster)}
    objects = [secret(c, names.munge_key_name(c.name), names.GENERATE_MUNGE_KEY),
               secret(c, names.ssh_host_keys_name(c.name), names.GENERATE_SSH_HOST_KEYS)]
    if spec["restApi"]["enabled"]:
        objects.append(secret(c, names.jwt_key_name(c.name), names.GENERATE_JWT_KEY))
    accounting = Accounting()
    slurmdbd_config: dict[str, str] | None = None
    if spec["accounting"]["enabled"]:
        slurmdbd_config = {"slurmdbd.conf": render_slurmdbd_conf(cluster)}
        accounting = accounting_objects(c, slurmdbd_config)
    objects += accounting.secrets
    if "existingClaim" not in spec["jail"]:
        objects.append(jail_claim(c))
    objects += accounting.data
    objects += [config_map(c, names.slurm_config_name(c.name), slurm_config),
                config_map(c, names.sshd_config_name(c.name), sshd_config), health_config(c)]
    if slurmdbd_config is not None:
        objects.append(config_map(c, names.slurmdbd_config_name(c.name), slurmdbd_config))
    if identity.enabled(spec):
        objects.append(sssd_config_map(c))
    objects.append(headless_service(c, names.controller_name(c.name), names.COMPONENT_CONTROLLER, "slurmctld",
                                    names.SLURMCTLD_PORT))
    objects.append(login_service(c))
    objects.append(headless_service(c, names.login_headless_name(c.name), names.COMPONENT_LOGIN, "ssh",
                                    names.SSH_PORT))
    objects += [headless_service(c, names.worker_name(c.name, ns["metadata"]["name"]), names.COMPONENT_WORKER,
                                 "slurmd", names.SLURMD_PORT, nodeset=ns) for ns in c.nodesets]
    objects += accounting.services
    if spec["restApi"]["enabled"]:
        objects.append(rest_service(c))
    if spec["exporter"]["enabled"]:
        objects.append(exporter_service(c))
    service = nccl_service(c)
    if service is not None:
        objects.append(service)
    # Before the pods they protect start.
    objects += network_policies(c)
    if not c.maintenance:
        objects.append(populate_job(c))
    for cronjob in (nccl_cronjob(c), backup_cronjob(c), retention_cronjob(c)):
        if cronjob is not None:
            objects.append(cronjob)
    # The database and slurmdbd first: slurmctld registers with slurmdbd when it starts.
    objects += accounting.workloads
    objects.append(controller(c, slurm_config, slurm_user))
    objects.append(login(c, sshd_config, slurm_user))
    # Elastic and every-node NodeSets have no StatefulSet: their pods are made one by one (plan/elastic.py,
    # plan/every_node.py; elastic_pods, every_node_pods).
    objects += [worker(c, ns) for ns in c.nodesets if not ns["spec"].get("elastic") and not every_node(ns["spec"])]
    if spec["restApi"]["enabled"]:
        objects.append(slurmrestd(c, slurm_config["slurm.conf"]))
    if spec["exporter"]["enabled"]:
        objects.append(exporter(c, slurm_config["slurm.conf"]))
    objects.append(pdb(c, names.login_name(c.name), names.COMPONENT_LOGIN))
    objects += [pdb(c, names.worker_name(c.name, ns["metadata"]["name"]), names.COMPONENT_WORKER, nodeset=ns)
                for ns in c.nodesets]
    if spec["exporter"]["enabled"] and spec["exporter"]["serviceMonitor"]["enabled"] and "ServiceMonitor" in served:
        objects.append(service_monitor(c))
    return objects


def every_node_pods(cluster: SlurmCluster, nodesets: Sequence[NodeSet],
                    collection_version: str = names.COLLECTION_VERSION,
                    validated: bool = False) -> tuple[dict[str, str], PodRenderer]:
    """(``{nodeset name: template hash}``, ``render(nodeset, Kubernetes node) -> Pod``) of the every-node NodeSets:
    what plan/every_node.py needs to make the worker of a matching node. ``validated``: see :func:`render_cluster`."""
    if not validated:
        cluster, nodesets = validate_cluster_with_nodesets(cluster, nodesets, collection_version)
    c = ClusterContext(cluster, nodesets)
    hashes = dict((ns["metadata"]["name"], every_node_template(c, ns)[1]) for ns in nodesets
                  if every_node(ns["spec"]))
    return hashes, lambda nodeset, node: every_node_pod(c, nodeset, node)


def elastic_pods(cluster: SlurmCluster, nodesets: Sequence[NodeSet], collection_version: str = names.COLLECTION_VERSION,
                 validated: bool = False) -> tuple[dict[str, str], PodRenderer]:
    """(``{nodeset name: template hash}``, ``render(nodeset, node name) -> Pod``) of the elastic NodeSets: what
    plan/elastic.py needs to create the pod of a node Slurm powered up. ``validated``: see :func:`render_cluster`."""
    if not validated:
        cluster, nodesets = validate_cluster_with_nodesets(cluster, nodesets, collection_version)
    c = ClusterContext(cluster, nodesets)
    hashes = dict((ns["metadata"]["name"], elastic_template(c, ns)[1]) for ns in nodesets
                  if ns["spec"].get("elastic"))
    return hashes, lambda nodeset, node_name: elastic_pod(c, nodeset, node_name)
