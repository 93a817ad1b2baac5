# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SlurmCluster and NodeSet API, defined once as OpenAPI v3 structural schemas (plain dicts).

``hack/gen-crds.py`` turns these into the CRDs; ``spec.py`` validates and defaults objects by walking the very
same dicts, and runs a Python twin of every ``x-kubernetes-validations`` CEL rule (matched by its message).
Every field has a ``description``: ``kubectl explain`` is the reference documentation.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.quantity import QUANTITY_PATTERN

# A value of a raw Slurm key (slurm.conf, cgroup.conf, a partition line): one token, so it can never end the
# line (newline), continue it (backslash), comment it out (#) or start another Key=Value (whitespace).
SLURM_VALUE_PATTERN = r"^[^\s\\#\x00]*$"
# A value of an sshd_config keyword: spaces are fine (AllowUsers a b), line breaks and NUL are not.
SSHD_VALUE_PATTERN = r"^[^\r\n\x00]*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
CLUSTER_NAME_PATTERN = r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$"
PARTITION_NAME_PATTERN = r"^[A-Za-z0-9_-]+$"
FEATURE_PATTERN = r"^[A-Za-z0-9_.-]+$"
GPU_TYPE_PATTERN = r"^[a-z0-9_]+$"
# A path inside the jail: absolute, components of safe characters not starting with a dot (so no `.`/`..`).
JAIL_PATH_PATTERN = r"^(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)+$"
HOST_PATH_PATTERN = r"^(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)+$"
PROGRAM_PATH_PATTERN = r"^(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)+$"
IMAGE_PATTERN = r"^[^\s]+$"
SLURM_TIME_PATTERN = (r"^(UNLIMITED|INFINITE|[0-9]+|[0-9]+:[0-9]{1,2}|[0-9]+:[0-9]{1,2}:[0-9]{1,2}"
                      r"|[0-9]+-[0-9]+(:[0-9]{1,2}(:[0-9]{1,2})?)?)$")
GO_DURATION_PATTERN = r"^([0-9]+(ns|us|ms|s|m|h))+$"
CIDR_PATTERN = r"^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}/[0-9]{1,2}|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*/[0-9]{1,3})$"
SELECT_TYPE_PARAMETERS_PATTERN = r"^[A-Za-z_]+(,[A-Za-z_]+)*$"
# Kubernetes label values and keys (qualified names: an optional DNS subdomain prefix, then a name).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                     r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_KEYS_RULE_MESSAGE = "label keys must be qualified names ([prefix/]name, name at most 63 characters)"

# Human explanations of patterns, appended to "should match" errors by the Python validator.
PATTERN_HINTS = {
    SLURM_VALUE_PATTERN: "one token: no whitespace, line break, backslash, '#' or NUL",
    SSHD_VALUE_PATTERN: "no line break or NUL",
    DNS_LABEL_PATTERN: "a DNS label: lowercase letters, digits and '-'",
    CLUSTER_NAME_PATTERN: "lowercase letters, digits and '-', starting with a letter",
    PARTITION_NAME_PATTERN: "letters, digits, '_' and '-'",
    FEATURE_PATTERN: "letters, digits, '_', '.' and '-'",
    JAIL_PATH_PATTERN: "an absolute path, no component starting with '.'",
    SLURM_TIME_PATTERN: "a Slurm time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED",
    GO_DURATION_PATTERN: "a duration such as 30m, 1h30m, 90s",
    QUANTITY_PATTERN: "a quantity such as 500m, 2, 4Gi",
    CIDR_PATTERN: "a CIDR such as 203.0.113.0/24",
    LABEL_VALUE_PATTERN: "a label value: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
}

MAX_SHORT = 63
MAX_PATH = 512


def _s(description, **kw):
    node = {"type": "string", "description": description}
    node.update(kw)
    return node


def _i(description, **kw):
    node = {"type": "integer", "description": description}
    node.update(kw)
    return node


def _b(description, **kw):
    node = {"type": "boolean", "description": description}
    node.update(kw)
    return node


def _o(description, properties, required=None, **kw):
    node = {"type": "object", "description": description, "properties": properties}
    if required:
        node["required"] = list(required)
    node.update(kw)
    return node


def _a(description, items, max_items, **kw):
    node = {"type": "array", "description": description, "items": items, "maxItems": max_items}
    node.update(kw)
    return node


def _m(description, values, max_properties, **kw):
    node = {"type": "object", "description": description, "additionalProperties": values,
            "maxProperties": max_properties}
    node.update(kw)
    return node


def _rule(rule, message, field_path=None):
    node = {"rule": rule, "message": message}
    if field_path:
        node["fieldPath"] = field_path
    return node


def _quantity_map(description):
    return _m(description, {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "description": "A Kubernetes quantity (e.g. 500m, 2, 4Gi).",
    }, 16)


def resources_schema(description):
    return _o(description, {
        "requests": _quantity_map("Minimum resources the pod is scheduled with (cpu, memory, ...)."),
        "limits": _quantity_map("Maximum resources of the container; also sizes the Slurm node (CPUs, RealMemory)."),
    })


def placement_schema(description):
    toleration = _o("A Kubernetes toleration.", {
        "key": _s("Taint key the toleration applies to; empty with operator Exists matches every taint.",
                  maxLength=316),
        "operator": _s("Exists or Equal.", enum=["Exists", "Equal"]),
        "value": _s("Taint value to match with operator Equal.", maxLength=MAX_SHORT),
        "effect": _s("Taint effect to match; empty matches all effects.",
                     enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "tolerationSeconds": _i("How long a NoExecute taint is tolerated before eviction.", format="int64"),
    })
    return _o(description, {
        "nodeSelector": _m("Node labels the pods must match (merged over the cluster-wide ones; these win).",
                           _s("Label value.", maxLength=MAX_SHORT, pattern=LABEL_VALUE_PATTERN), 32,
                           **{"x-kubernetes-validations": [_rule(
                               "self.all(k, size(k) <= 317 && k.matches('%s'))" % LABEL_KEY_PATTERN.replace(
                                   "\\", "\\\\"), LABEL_KEYS_RULE_MESSAGE)]}),
        "tolerations": _a("Tolerations (added to the cluster-wide ones).", toleration, 32),
        "affinity": {
            "type": "object",
            "description": "A Kubernetes Affinity (nodeAffinity, podAffinity, podAntiAffinity); each part set here "
                           "replaces the cluster-wide one.",
            "x-kubernetes-preserve-unknown-fields": True,
        },
    })


def _conditions_schema():
    condition = _o("A standard Kubernetes condition.", {
        "type": _s("Condition type, e.g. Ready, Running, Successful, Failure.", maxLength=316),
        "status": _s("True, False or Unknown.", enum=["True", "False", "Unknown"]),
        "observedGeneration": _i("The .metadata.generation the condition was computed from.", format="int64",
                                 minimum=0),
        "lastTransitionTime": _s("When the status last changed.", format="date-time"),
        "reason": _s("Machine-readable CamelCase reason.", maxLength=1024),
        "message": _s("Human-readable detail.", maxLength=32768),
    }, required=["type", "status"])
    # The Ansible operator adds its own fields (ansibleResult) to its conditions: keep them.
    condition["x-kubernetes-preserve-unknown-fields"] = True
    return _a("Conditions of the object (Ready, and the operator's Running/Successful/Failure).", condition, 32,
              **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


def _root(kind_description, spec, status, rules):
    return {
        "type": "object",
        "description": kind_description,
        "required": ["spec"],
        "properties": {
            "apiVersion": _s("Versioned schema of this representation of an object."),
            "kind": _s("REST resource this object represents."),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "x-kubernetes-validations": rules,
    }


def _name_rules(kind, max_length):
    return [
        _rule("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
              "metadata.name of a %s must be a DNS label starting with a letter" % kind),
        _rule("size(self.metadata.name) <= %d" % max_length,
              "metadata.name of a %s must be at most %d characters (it prefixes the names of its objects)"
              % (kind, max_length)),
    ]


CLUSTER_NAME_MAX = 24
NODESET_NAME_MAX = 24


def _image(component):
    return _s("Image of the %s. Default: %s:<collection version>." % (component, names.IMAGE_REPOSITORIES[component]),
              maxLength=MAX_PATH, pattern=IMAGE_PATTERN)


def slurm_cluster_schema():
    service = _o("How users reach the login nodes over SSH.", {
        "type": _s("Kubernetes Service type of the login Service.", enum=["ClusterIP", "NodePort", "LoadBalancer"],
                   default="ClusterIP"),
        "port": _i("SSH port of the Service.", minimum=1, maximum=65535, default=names.SSH_PORT),
        "nodePort": _i("Fixed node port (type NodePort or LoadBalancer only).", minimum=1, maximum=65535),
        "loadBalancerSourceRanges": _a(
            "Client CIDRs allowed through the load balancer (type LoadBalancer only).",
            _s("A CIDR, e.g. 203.0.113.0/24.", maxLength=64, pattern=CIDR_PATTERN), 64,
            **{"x-kubernetes-list-type": "set"}),
    }, default={}, **{"x-kubernetes-validations": [
        _rule("!has(self.nodePort) || self.type == 'NodePort' || self.type == 'LoadBalancer'",
              "nodePort requires type NodePort or LoadBalancer", ".nodePort"),
        _rule("!has(self.loadBalancerSourceRanges) || size(self.loadBalancerSourceRanges) == 0"
              " || self.type == 'LoadBalancer'",
              "loadBalancerSourceRanges requires type LoadBalancer", ".loadBalancerSourceRanges"),
    ]})

    sub_mount = _o("A volume mounted inside the jail on login and worker nodes.", {
        "name": _s("Name of the mount (a DNS label, unique).", maxLength=40, pattern=DNS_LABEL_PATTERN),
        "mountPath": _s("Absolute path inside the jail (not '/', no '.' or '..' components).",
                        maxLength=MAX_PATH, pattern=JAIL_PATH_PATTERN),
        "readOnly": _b("Mount read-only.", default=False),
        "hostPath": _s("Source: a directory of the Kubernetes node (must exist).", maxLength=MAX_PATH,
                       pattern=HOST_PATH_PATTERN),
        "claimName": _s("Source: a PersistentVolumeClaim in the cluster's namespace.", maxLength=253,
                        pattern=DNS_SUBDOMAIN_PATTERN),
        "emptyDir": _b("Source: an empty directory private to the pod (e.g. node-local scratch)."),
    }, required=["name", "mountPath"], **{"x-kubernetes-validations": [
        _rule("(has(self.hostPath) ? 1 : 0) + (has(self.claimName) ? 1 : 0)"
              " + ((has(self.emptyDir) && self.emptyDir) ? 1 : 0) == 1",
              "set exactly one of hostPath, claimName or emptyDir"),
    ]})

    jail = _o("The jail: a shared root filesystem (RWX volume) that every user session and job runs in.", {
        "existingClaim": _s("Use this existing ReadWriteMany PersistentVolumeClaim as the jail.", maxLength=253,
                            pattern=DNS_SUBDOMAIN_PATTERN),
        "storageClassName": _s("Create the claim <cluster>-jail with this (ReadWriteMany) storage class.",
                               maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
        "size": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
                 "pattern": QUANTITY_PATTERN, "description": "Size of the created claim, e.g. 100Gi."},
        "populate": _o("Filling the jail from the jail image.", {
            "repopulateToken": _s("Change to a new non-empty value to run a new populate Job that overwrites the "
                                  "jail's files with the jail image. Empty: populate once, never overwrite.",
                                  maxLength=MAX_SHORT, default=""),
        }, default={}),
        "subMounts": _a("Volumes mounted inside the jail.", sub_mount, 32, **{"x-kubernetes-validations": [
            _rule("self.all(m, self.exists_one(n, n.name == m.name))", "subMount names must be unique"),
            _rule("self.all(m, self.exists_one(n, n.mountPath == m.mountPath))",
                  "subMount mountPaths must be unique"),
        ]}),
    }, **{"x-kubernetes-validations": [
        _rule("(has(self.existingClaim) && !has(self.storageClassName) && !has(self.size))"
              " || (!has(self.existingClaim) && has(self.storageClassName) && has(self.size))",
              "set exactly one of existingClaim, or storageClassName and size"),
    ]})

    partition = _o("A Slurm partition.", {
        "name": _s("Slurm partition name.", maxLength=MAX_SHORT, pattern=PARTITION_NAME_PATTERN),
        "default": _b("The default partition (at most one). NodeSets that list no partition join it.",
                      default=False),
        "maxTime": _s("Slurm MaxTime (e.g. 60, 1-00:00:00, UNLIMITED).", maxLength=32,
                      pattern=SLURM_TIME_PATTERN, default="UNLIMITED"),
        "state": _s("Slurm partition State.", enum=["UP", "DOWN", "DRAIN", "INACTIVE"], default="UP"),
        "hidden": _b("Hide the partition from users by default (Hidden=YES).", default=False),
        "config": _m("Other PartitionName keys (an allowlist, e.g. DefMemPerCPU, AllowGroups); each value one "
                     "token.", _s("Value of the key.", maxLength=1024, pattern=SLURM_VALUE_PATTERN), 32),
    }, required=["name"])

    raw_slurm = _s("Raw value.", maxLength=1024, pattern=SLURM_VALUE_PATTERN)
    slurm = _o("Slurm settings: common keys typed, others as validated raw overrides.", {
        "selectType": _s("Slurm SelectType.", enum=["select/cons_tres", "select/linear"], default="select/cons_tres"),
        "selectTypeParameters": _s("Slurm SelectTypeParameters.", maxLength=128,
                                   pattern=SELECT_TYPE_PARAMETERS_PATTERN, default="CR_Core_Memory"),
        "schedulerType": _s("Slurm SchedulerType.", enum=["sched/backfill", "sched/builtin"],
                            default="sched/backfill"),
        "priorityType": _s("Slurm PriorityType.", enum=["priority/multifactor", "priority/basic"],
                           default="priority/multifactor"),
        "returnToService": _i("Slurm ReturnToService: 2 = a DOWN node with a valid configuration becomes usable "
                              "when it registers.", minimum=0, maximum=2, default=2),
        "maxNodeCount": _i("Slurm MaxNodeCount: the most dynamic nodes (NodeSet replicas, all sets together). "
                           "Changing it restarts slurmctld.", minimum=1, maximum=65000, default=1024),
        "slurmctldTimeout": _i("Slurm SlurmctldTimeout, seconds.", minimum=1, maximum=65533, default=120),
        "slurmdTimeout": _i("Slurm SlurmdTimeout, seconds (0 = never mark nodes DOWN for not responding).",
                            minimum=0, maximum=65533, default=300),
        "killWait": _i("Slurm KillWait, seconds between SIGTERM and SIGKILL of a job at its time limit.",
                       minimum=0, maximum=65533, default=30),
        "healthCheckInterval": _i("Slurm HealthCheckInterval, seconds (0 = no health check).", minimum=0,
                                  maximum=86400),
        "healthCheckProgram": _s("Slurm HealthCheckProgram: absolute path inside the worker image.",
                                 maxLength=MAX_PATH, pattern=PROGRAM_PATH_PATTERN),
        "maxJobCount": _i("Slurm MaxJobCount.", minimum=1, maximum=2500000, default=10000),
        "slurmConf": _m("Other slurm.conf keys (an allowlist of known keys; keys the operator owns or that have a "
                        "typed field are refused). Written last.", raw_slurm, 64),
        "cgroupConf": _m("cgroup.conf keys merged over the defaults (an allowlist of known keys).", raw_slurm, 32),
    }, default={}, **{"x-kubernetes-validations": [
        _rule("!has(self.healthCheckInterval) || self.healthCheckInterval == 0 || has(self.healthCheckProgram)",
              "healthCheckInterval requires healthCheckProgram", ".healthCheckInterval"),
    ]})

    spec = _o("Desired state of a Slurm cluster: controller, login nodes, jail, partitions, Slurm settings. "
              "Workers are NodeSet objects that reference this cluster.", {
                  "clusterName": _s("Slurm ClusterName. Default: metadata.name.", maxLength=40,
                                    pattern=CLUSTER_NAME_PATTERN),
                  "images": _o("Container images (default: the soperator images of the collection version).", {
                      "controller": _image("controller"),
                      "worker": _image("worker"),
                      "login": _image("login"),
                      "populateJail": _image("populateJail"),
                      "jail": _image("jail"),
                      "pullPolicy": _s("imagePullPolicy of every container.", enum=["Always", "IfNotPresent", "Never"],
                                       default="IfNotPresent"),
                  }, default={}),
                  "controller": _o("The Slurm controller (slurmctld, one pod).", {
                      "resources": resources_schema("Resources of slurmctld."),
                      "spool": _o("The controller's state volume (StateSaveLocation); immutable once created.", {
                          "storageClassName": _s("Storage class (default: the cluster's default class).",
                                                 maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
                          "size": {"x-kubernetes-int-or-string": True,
                                   "anyOf": [{"type": "integer"}, {"type": "string"}],
                                   "pattern": QUANTITY_PATTERN, "default": "10Gi",
                                   "description": "Size of the spool volume."},
                      }, default={}),
                      "placement": placement_schema("Where the controller pod runs."),
                  }, default={}),
                  "login": _o("Login nodes: sshd jailed into the shared root, Slurm client commands.", {
                      "replicas": _i("Number of login pods.", minimum=0, maximum=16, default=1),
                      "service": service,
                      "resources": resources_schema("Resources of the login container."),
                      "placement": placement_schema("Where login pods run."),
                      "sshdConfig": _m("sshd_config keywords (an allowlist, e.g. ClientAliveInterval, AllowGroups)",
                                       _s("Value of the keyword.", maxLength=1024, pattern=SSHD_VALUE_PATTERN), 32),
                      "updateGracePeriod": _s("A changed login pod template (image, sshd settings, resources) "
                                              "replaces a login pod once nobody is logged in to it, or this long "
                                              "after the change (open sessions then end).",
                                              maxLength=32, pattern=GO_DURATION_PATTERN, default="30m"),
                  }, default={}),
                  "jail": jail,
                  "partitions": _a("Slurm partitions. Default: one default partition 'main'.", partition, 64,
                                   default=[{"name": "main", "default": True}],
                                   **{"x-kubernetes-validations": [
                                       _rule("self.filter(p, p.default).size() <= 1",
                                             "at most one partition can be the default"),
                                       _rule("self.all(p, self.exists_one(q, q.name == p.name))",
                                             "partition names must be unique"),
                                   ]}),
                  "slurm": slurm,
                  "placement": placement_schema("Cluster-wide placement of every pod; component placements are "
                                                "merged over it."),
                  "maintenance": _b("Scale every StatefulSet to 0 and do not run the populate Job. The jail and the "
                                    "Secrets are untouched.", default=False),
                  "deletionPolicy": _o("What deleting the cluster does to its data.", {
                      "jail": _s("The jail claim and the controller's spool claim: Retain or Delete.",
                                 enum=["Retain", "Delete"], default="Retain"),
                      "secrets": _s("The munge key and SSH host keys: Retain or Delete.", enum=["Retain", "Delete"],
                                    default="Retain"),
                  }, default={}),
              }, required=["jail"])

    status = {
        "type": "object",
        "description": "Observed state, written by the operator.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": _i("The .metadata.generation last reconciled.", format="int64", minimum=0),
            "phase": _s("Summary: Pending, Provisioning, Ready, Maintenance or Failed.", maxLength=64),
            "conditions": _conditions_schema(),
            names.STATUS_RECONCILED_DIGEST: _s(
                "Written by the operator runtime: digest of the pod and StatefulSet states its last successful run "
                "started from. While they are the same and nothing else differs, no run is started.",
                maxLength=128),
        },
    }
    return _root("A Slurm cluster in Kubernetes.", spec, status, _name_rules("SlurmCluster", CLUSTER_NAME_MAX))


def nodeset_schema():
    spec = _o("Desired state of a group of identical Slurm worker nodes (one pod each).", {
        "clusterRef": _o("The SlurmCluster (same namespace) the nodes join.", {
            "name": _s("Name of the SlurmCluster.", maxLength=CLUSTER_NAME_MAX, pattern=DNS_LABEL_PATTERN),
        }, required=["name"]),
        "replicas": _i("Number of nodes.", minimum=0, maximum=65000, default=1),
        "resources": resources_schema("Resources of each node's slurmd container."),
        "gpu": _o("GPUs of each node.", {
            "count": _i("GPUs per node (0 = CPU-only nodes).", minimum=0, maximum=64, default=0),
            "type": _s("GPU type as Slurm sees it (Gres=gpu:<type>:<count>), e.g. h100.", maxLength=MAX_SHORT,
                       pattern=GPU_TYPE_PATTERN),
            "resourceName": _s("Kubernetes extended resource of the GPUs.", maxLength=253,
                               pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9._]*[a-z0-9])?$",
                               default="nvidia.com/gpu"),
        }, default={}),
        "features": _a("Slurm features of the nodes (the NodeSet name is always one).",
                       _s("A feature name.", maxLength=MAX_SHORT, pattern=FEATURE_PATTERN), 32,
                       **{"x-kubernetes-list-type": "set"}),
        "partitions": _a("Partitions the nodes join (empty: the cluster's default partition).",
                         _s("A partition name of the cluster.", maxLength=MAX_SHORT, pattern=PARTITION_NAME_PATTERN),
                         64, **{"x-kubernetes-list-type": "set"}),
        "placement": placement_schema("Where the nodes' pods run (merged over the cluster-wide placement)."),
        "drainTimeout": _s("How long a scale-in, a rolling update or the NodeSet's removal waits for a draining "
                           "node's jobs; then onDrainTimeout applies.",
                           maxLength=32, pattern=GO_DURATION_PATTERN, default="30m"),
        "onDrainTimeout": _s("Proceed: once drainTimeout has passed, the node's pod is removed or replaced even with "
                             "jobs on it (they are killed). Wait: never; the node waits for its jobs.",
                             enum=["Proceed", "Wait"], default="Proceed"),
        "updateStrategy": _o("How a changed pod template (image, resources, settings) reaches the running nodes: "
                             "each outdated node is drained (reason 'soperator: update'), its pod replaced once "
                             "the node is idle, and the new node resumed.", {
                                 "maxUnavailable": _i("Nodes of this set drained or being replaced at the same "
                                                      "time.", minimum=1, maximum=65000, default=1),
                             }, default={}),
        "image": _s("Worker image of this NodeSet (default: the cluster's spec.images.worker).", maxLength=MAX_PATH,
                    pattern=IMAGE_PATTERN),
    }, required=["clusterRef"])

    status = {
        "type": "object",
        "description": "Observed state, written by the operator.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": _i("The .metadata.generation last reconciled.", format="int64", minimum=0),
            "replicas": _i("Pods that exist.", minimum=0),
            "readyReplicas": _i("Pods that are ready.", minimum=0),
            "selector": _s("Label selector of the pods (for the scale subresource and autoscalers).", maxLength=1024),
            "idle": _i("Slurm nodes IDLE.", minimum=0),
            "allocated": _i("Slurm nodes ALLOCATED or MIXED.", minimum=0),
            "drained": _i("Slurm nodes DRAINING or DRAINED.", minimum=0),
            "down": _i("Slurm nodes DOWN.", minimum=0),
            "updatedReplicas": _i("Pods on the current template.", minimum=0),
            "outdatedReplicas": _i("Pods on an older template, waiting to be replaced by the rolling update.",
                                   minimum=0),
            "conditions": _conditions_schema(),
        },
    }
    return _root("A group of identical Slurm worker nodes of a SlurmCluster.", spec, status,
                 _name_rules("NodeSet", NODESET_NAME_MAX))


def _crd(plural, kind, short_names, schema, columns, scale=None):
    subresources = {"status": {}}
    if scale:
        subresources["scale"] = scale
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "%s.%s" % (plural, names.GROUP),
            "labels": {names.LABEL_PART_OF: "soperator", names.LABEL_MANAGED_BY: names.MANAGED_BY},
        },
        "spec": {
            "group": names.GROUP,
            "names": {"kind": kind, "listKind": kind + "List", "plural": plural, "singular": kind.lower(),
                      "shortNames": list(short_names), "categories": ["soperator"]},
            "scope": "Namespaced",
            "versions": [{
                "name": names.VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": subresources,
                "additionalPrinterColumns": columns,
            }],
        },
    }


def crds():
    """Both CustomResourceDefinitions as dicts (fresh copies)."""
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    cluster = _crd(names.CLUSTER_PLURAL, names.CLUSTER_KIND, ["slurmc"], slurm_cluster_schema(), [
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        age,
    ])
    nodeset = _crd(names.NODESET_PLURAL, names.NODESET_KIND, ["nss"], nodeset_schema(), [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef.name"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Idle", "type": "integer", "jsonPath": ".status.idle"},
        copy.deepcopy(age),
    ], scale={"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
              "labelSelectorPath": ".status.selector"})
    return [cluster, nodeset]
