# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From a field of a rendered object back to the field of the SlurmCluster or NodeSet it was rendered from. Pure.

The API server names what it refuses on the object it was given (``spec.template.spec.containers[0].resources
.requests`` of StatefulSet ``demo-cpu``); a user wrote ``nodesets[cpu].spec.resources.requests``. The renderers
decide where each part of an object comes from, so this module mirrors them: when a renderer moves a field, the
table here moves with it (tests/unit/module_utils/api/test_fieldmap.py renders objects and maps their fields back).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Any, Iterable, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster, Spec

_POD = "spec.template.spec."
_CRONJOB_POD = "spec.jobTemplate.spec.template.spec."
_INDEXED = re.compile(r"^(containers|initContainers|volumes|tolerations)\[([0-9]+)\](.*)$")
_KEYED = re.compile(r"^nodeSelector(?:\[([^\]]*)\]|\.([A-Za-z0-9_-]+))?(.*)$")


def _owner(cluster_name: str, obj: KubeObject, nodesets: Sequence[NodeSet]) -> tuple[str | None, NodeSet | None]:
    """(component, nodeset or None) of a rendered object, from its name."""
    name = obj["metadata"]["name"]
    for ns in nodesets:
        if name == names.worker_name(cluster_name, ns["metadata"]["name"]):
            return names.COMPONENT_WORKER, ns
    if name in (names.controller_name(cluster_name), names.spool_claim_name(cluster_name)):
        return names.COMPONENT_CONTROLLER, None
    if name in (names.login_name(cluster_name), names.login_headless_name(cluster_name),
                names.sshd_config_name(cluster_name), names.ssh_host_keys_name(cluster_name)):
        return names.COMPONENT_LOGIN, None
    if name == names.jail_claim_name(cluster_name):
        return names.COMPONENT_JAIL, None
    if obj["kind"] == "Job":
        return names.COMPONENT_POPULATE, None
    by_name = {names.accounting_name(cluster_name): names.COMPONENT_ACCOUNTING,
               names.slurmdbd_config_name(cluster_name): names.COMPONENT_ACCOUNTING,
               names.database_name(cluster_name): names.COMPONENT_DATABASE,
               names.db_password_name(cluster_name): names.COMPONENT_DATABASE,
               names.db_claim_name(cluster_name): names.COMPONENT_DATABASE,
               names.rest_name(cluster_name): names.COMPONENT_REST,
               names.jwt_key_name(cluster_name): names.COMPONENT_REST,
               names.exporter_name(cluster_name): names.COMPONENT_EXPORTER,
               names.nccl_check_name(cluster_name): names.COMPONENT_HEALTH,
               names.health_config_name(cluster_name): names.COMPONENT_HEALTH}
    return by_name.get(name), None


# Where in the SlurmCluster each component is set, and which image of spec.images it runs.
_ROOTS = {names.COMPONENT_CONTROLLER: "spec.controller", names.COMPONENT_LOGIN: "spec.login",
          names.COMPONENT_JAIL: "spec.jail", names.COMPONENT_ACCOUNTING: "spec.accounting.slurmdbd",
          names.COMPONENT_DATABASE: "spec.accounting.database", names.COMPONENT_REST: "spec.restApi",
          names.COMPONENT_EXPORTER: "spec.exporter", names.COMPONENT_HEALTH: "spec.healthChecks"}
_IMAGES = {names.COMPONENT_CONTROLLER: "controller", names.COMPONENT_LOGIN: "login",
           names.COMPONENT_ACCOUNTING: "slurmdbd", names.COMPONENT_DATABASE: "mariadb",
           names.COMPONENT_REST: "slurmrestd", names.COMPONENT_EXPORTER: "exporter",
           names.COMPONENT_HEALTH: "worker"}
# Components with a placement and resources of their own (the others have the cluster-wide placement only).
_OWN_PODS = (names.COMPONENT_CONTROLLER, names.COMPONENT_LOGIN, names.COMPONENT_ACCOUNTING,
             names.COMPONENT_DATABASE, names.COMPONENT_REST, names.COMPONENT_EXPORTER)


def _root(component: str | None, nodeset: NodeSet | None) -> str:
    if nodeset is not None:
        return "nodesets[%s].spec" % nodeset["metadata"]["name"]
    return _ROOTS.get(component or "", "spec")  # None: a part of no component


def _at(spec: Spec, path: str) -> Any:  # JSON: whatever the cluster holds there
    """The value at a dotted ``spec.a.b`` path of the cluster (``{}`` when absent)."""
    value: object = {"spec": spec}
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value or {}


def _placement(cluster: SlurmCluster, component: str | None,
               nodeset: NodeSet | None) -> tuple[tuple[str | None, Spec], tuple[str, Spec]]:
    """(path, placement) of the component's own placement, and of the cluster-wide one."""
    spec = cluster["spec"]
    own: tuple[str | None, Spec]
    if nodeset is not None:
        own = ("nodesets[%s].spec.placement" % nodeset["metadata"]["name"], nodeset["spec"].get("placement") or {})
    elif component in _OWN_PODS:
        own = (_ROOTS[component] + ".placement", _at(spec, _ROOTS[component] + ".placement"))
    else:
        own = (None, {})  # the populate Job and the NCCL check have the cluster-wide placement only
    return own, ("spec.placement", spec.get("placement") or {})


def _placement_field(cluster: SlurmCluster, component: str | None, nodeset: NodeSet | None,
                     field: str) -> str | None:
    (own_path, own), (wide_path, wide) = _placement(cluster, component, nodeset)
    keyed = _KEYED.match(field)
    if keyed:
        key = keyed.group(1) or keyed.group(2)
        if own_path and (key in (own.get("nodeSelector") or {}) if key else own.get("nodeSelector")):
            return "%s.%s" % (own_path, field)
        return "%s.%s" % (wide_path, field)
    indexed = _INDEXED.match(field)
    if indexed and indexed.group(1) == "tolerations":
        index, rest = int(indexed.group(2)), indexed.group(3)
        cluster_wide = wide.get("tolerations") or []
        if index < len(cluster_wide):
            return "%s.tolerations[%d]%s" % (wide_path, index, rest)
        added = [i for i, t in enumerate(own.get("tolerations") or []) if t not in cluster_wide]
        if own_path and index - len(cluster_wide) < len(added):
            return "%s.tolerations[%d]%s" % (own_path, added[index - len(cluster_wide)], rest)
        return "%s.tolerations" % (own_path or wide_path)
    if field.startswith("affinity"):
        part = field.split(".")[1] if "." in field else None
        if own_path and (part in (own.get("affinity") or {}) if part else own.get("affinity")):
            return "%s.%s" % (own_path, field)
        return "%s.%s" % (wide_path, field)
    return None


def _container_field(cluster: SlurmCluster, component: str | None, nodeset: NodeSet | None, pod: KubeObject,
                     kind: str, index: int, rest: str) -> str | None:
    containers = pod.get(kind) or []
    name = containers[index].get("name") if index < len(containers) else None
    images = "spec.images."
    if rest.startswith(".image"):
        if component == names.COMPONENT_POPULATE:
            return images + ("jail" if name == "populate" else "populateJail")
        if nodeset is not None:
            return "nodesets[%s].spec.image" % nodeset["metadata"]["name"] if nodeset["spec"].get(
                "image") else images + "worker"
        return images + _IMAGES[component] if component in _IMAGES else "spec.images"
    if rest.startswith(".imagePullPolicy"):
        return images + "pullPolicy"
    if rest.startswith(".resources") and name != "munge":
        if nodeset is not None:
            gpu = nodeset["spec"]["gpu"]
            if gpu.get("count") and gpu["resourceName"] in rest:
                return "nodesets[%s].spec.gpu.count" % nodeset["metadata"]["name"]
        if component in _OWN_PODS or nodeset is not None:
            return _root(component, nodeset) + rest
    if rest.startswith(".volumeMounts["):
        mounts = containers[index].get("volumeMounts") or [] if index < len(containers) else []
        mount = re.match(r"^\.volumeMounts\[([0-9]+)\]", rest)
        position = int(mount.group(1)) if mount else len(mounts)
        if position < len(mounts):
            return _volume(cluster, mounts[position]["name"])
    return None


def _volume(cluster: SlurmCluster, volume_name: str) -> str | None:
    if volume_name == "jail":
        return "spec.jail"
    for index, sub in enumerate(cluster["spec"]["jail"].get("subMounts") or ()):
        if volume_name == "submount-" + sub["name"]:
            return "spec.jail.subMounts[%d]" % index
    return None


def _pod_field(cluster: SlurmCluster, component: str | None, nodeset: NodeSet | None, pod: KubeObject,
               field: str) -> str | None:
    found = _placement_field(cluster, component, nodeset, field)
    if found:
        return found
    indexed = _INDEXED.match(field)
    if indexed and indexed.group(1) in ("containers", "initContainers"):
        return _container_field(cluster, component, nodeset, pod, indexed.group(1), int(indexed.group(2)),
                                indexed.group(3))
    if indexed and indexed.group(1) == "volumes":
        volumes = pod.get("volumes") or []
        index = int(indexed.group(2))
        return _volume(cluster, volumes[index]["name"]) if index < len(volumes) else None
    if field.startswith("terminationGracePeriodSeconds"):
        return "spec.slurm.killWait"
    return None


def user_field(cluster: SlurmCluster, nodesets: Sequence[NodeSet], obj: KubeObject, field: str | None) -> str:
    """The user's field that made ``field`` of the rendered ``obj`` (validated, defaulted ``cluster`` and
    ``nodesets``): e.g. ``nodesets[cpu].spec.resources.requests``; the part of the spec the object comes from when
    the field itself cannot be told (``nodesets[cpu].spec``, ``spec.login``), ``spec`` at worst."""
    cluster_name = cluster["metadata"]["name"]
    component, nodeset = _owner(cluster_name, obj, nodesets)
    field = field or ""
    found = None
    kind = obj["kind"]
    if field.startswith(_POD) or (kind == "CronJob" and field.startswith(_CRONJOB_POD)):
        template = (obj.get("spec") or {}) if kind != "CronJob" else \
            (((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {})
        pod = (template.get("template") or {}).get("spec") or {}
        found = _pod_field(cluster, component, nodeset, pod, field[len(_POD if kind != "CronJob" else _CRONJOB_POD):])
    elif kind == "StatefulSet" and field.startswith("spec.volumeClaimTemplates"):
        found = _storage(component, field)
    elif kind == "StatefulSet" and field == "spec.replicas":
        found = _root(component, nodeset) + ".replicas"
    elif kind == "Service" and component in (names.COMPONENT_LOGIN, names.COMPONENT_REST) and \
            obj["metadata"]["name"] in (names.login_name(cluster_name), names.rest_name(cluster_name)):
        service = re.match(r"^spec\.(?:ports\[[0-9]+\]\.)?(nodePort|port|type|loadBalancerSourceRanges)(.*)$", field)
        found = _root(component, None) + ".service" + (".%s%s" % service.groups() if service else "")
    elif kind == "PersistentVolumeClaim" and component == names.COMPONENT_JAIL:
        found = "spec.jail" + (".size" if "resources" in field else ".storageClassName"
                               if "storageClassName" in field else "")
    elif kind in ("PersistentVolumeClaim", "MariaDB") and component == names.COMPONENT_DATABASE:
        found = _storage(component, field) if "storage" in field or kind == "PersistentVolumeClaim" else None
    elif kind == "CronJob" and field.startswith("spec.schedule"):
        found = "spec.healthChecks.nccl.schedule"
    elif kind in ("CronJob", "Service") and component == names.COMPONENT_HEALTH:
        found = "spec.healthChecks.nccl"
    elif kind == "ServiceMonitor":
        monitor = "spec.exporter.serviceMonitor"
        found = monitor + (".labels" if field.startswith("metadata.labels") else ".interval" if "interval" in field
                           else "")
    elif kind == "NetworkPolicy":
        found = _network_field(cluster, component, field)
    elif kind == "ConfigMap":
        fields = {names.sshd_config_name(cluster_name): "spec.login.sshdConfig",
                  names.slurmdbd_config_name(cluster_name): "spec.accounting.slurmdbd.config",
                  names.health_config_name(cluster_name): "spec.healthChecks"}
        found = fields.get(obj["metadata"]["name"], "spec.slurm")
    return found or _root(component, nodeset)


def _network_field(cluster: SlurmCluster, component: str | None, field: str) -> str:
    """A NetworkPolicy's peers after the cluster's own pods (slurmrestd: the login and worker pods, first) are
    restApiFrom's, the exporter's are exporterFrom's; the rest is spec.networkPolicies."""
    peer = re.match(r"^spec\.ingress\[0\]\.from\[([0-9]+)\](.*)$", field)
    if peer and component == names.COMPONENT_REST and int(peer.group(1)) >= 1:
        return "spec.networkPolicies.restApiFrom[%d]%s" % (int(peer.group(1)) - 1, peer.group(2))
    if peer and component == names.COMPONENT_EXPORTER and cluster["spec"]["networkPolicies"].get("exporterFrom"):
        return "spec.networkPolicies.exporterFrom[%s]%s" % peer.groups()
    return "spec.networkPolicies"


def _storage(component: str | None, field: str) -> str:
    """The volume a claim (template) comes from: the controller's spool, the database's storage."""
    base = "spec.accounting.database.storage" if component == names.COMPONENT_DATABASE else "spec.controller.spool"
    return base + (".size" if "resources" in field or field.endswith(".size") else ".storageClassName"
                   if "storageClassName" in field else "")


def refusal_errors(cluster: SlurmCluster, nodesets: Sequence[NodeSet], refusals: Iterable[KubeObject]) -> Errors:
    """SpecErrors-ready problems of the objects the API server refused in a dry run (``k8s/apply.py``'s refusals),
    each naming the user's field, the object and the API server's words."""
    errors = []
    for refusal in refusals:
        obj = refusal["object"]
        what = "%s %s" % (obj["kind"], obj["metadata"]["name"])
        said: dict[str, list[str]] = {}  # user field -> what the API server said about it (in its order)
        for cause in refusal.get("causes") or [{"field": "", "message": refusal["message"]}]:
            where = " (%s)" % cause["field"] if cause.get("field") else ""
            said.setdefault(user_field(cluster, nodesets, obj, cause.get("field")), []).append(
                "%s%s" % (cause.get("message") or refusal["message"], where))
        for path, messages in said.items():
            errors.append(SpecError(path, "refused by the API server on %s: %s; nothing was applied"
                                    % (what, "; ".join(messages))))
    return errors
