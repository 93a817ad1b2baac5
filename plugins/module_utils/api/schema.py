# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SlurmCluster and NodeSet API, defined once as OpenAPI v3 structural schemas (plain dicts).

``hack/gen-crds.py`` turns these into the CRDs; the validator (``spec.py``) defaults and validates objects by walking
the very same dicts (``walk.py``), and runs a Python twin of every ``x-kubernetes-validations`` CEL rule (``cel.py``,
matched by its message).
Every field has a ``description``: ``kubectl explain`` is the reference documentation.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import copy
from typing import Any, Dict, Iterable, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps
from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import QUANTITY_MAX_LENGTH, QUANTITY_PATTERN
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.version import SLURM
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

# An OpenAPI v3 schema node (type, description, properties, items, pattern, x-kubernetes-*, ...): JSON, as the CRD
# holds it.
Schema = Dict[str, Any]
# A CEL rule of x-kubernetes-validations: rule, message and maybe fieldPath.
CelRule = Dict[str, str]

# Patterns are read by two engines: the API server's (Go RE2) and the validator (Python re, always with fullmatch, so
# "$" never accepts a trailing newline). Classes are spelled out (no \s, \d, \w): the engines disagree on them.
#
# A value of a raw Slurm key (slurm.conf, cgroup.conf, a partition line): one token, so it can never end the
# line (newline), continue it (backslash), comment it out (#) or start another Key=Value (whitespace: Slurm's
# parser splits on C isspace). No control character at all.
SLURM_VALUE_PATTERN = r"^[^\x00-\x20\x7f\\#]*$"
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
# An image reference: registry[:port]/path[:tag][@digest], the characters references are made of.
IMAGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$"
SLURM_TIME_PATTERN = (r"^(UNLIMITED|INFINITE|[0-9]+|[0-9]+:[0-9]{1,2}|[0-9]+:[0-9]{1,2}:[0-9]{1,2}"
                      r"|[0-9]+-[0-9]+(:[0-9]{1,2}(:[0-9]{1,2})?)?)$")
GO_DURATION_PATTERN = r"^([0-9]+(ns|us|ms|s|m|h))+$"
CIDR_PATTERN = r"^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}/[0-9]{1,2}|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*/[0-9]{1,3})$"
SELECT_TYPE_PARAMETERS_PATTERN = r"^[A-Za-z_]+(,[A-Za-z_]+)*$"
# Kubernetes label values and keys (qualified names: an optional DNS subdomain prefix, then a name).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                     r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# The prefix of a qualified name is a DNS subdomain of at most 253 characters (the pattern cannot count it).
LABEL_KEY_LONG_PREFIX_PATTERN = r"^[^/]{254,}/"
LABEL_KEYS_RULE_MESSAGE = ("label keys must be qualified names ([prefix/]name, name at most 63 characters, prefix "
                           "at most 253)")
# Kubernetes' default --service-node-port-range: the API server refuses a node port outside it at creation, which
# a dry run does not reveal. A cluster with another range is not supported by this field.
NODE_PORT_MIN = 30000
NODE_PORT_MAX = 32767
# A MariaDB/MySQL identifier we put into SQL and slurmdbd.conf (database and user names): no quoting needed.
DB_IDENTIFIER_PATTERN = r"^[A-Za-z0-9_]+$"
DB_HOST_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$"
# The mode of an emptyDir sub-mount's directory: octal, with or without the special bits digit.
DIRECTORY_MODE_PATTERN = r"^[0-7]?[0-7]{3}$"
SUB_MOUNT_MODE_EMPTY_DIR = "mode is only for an emptyDir (a claim's or host path's files keep their modes)"
SUB_MOUNT_MODE_STICKY = ("a world-writable mode needs the sticky bit, e.g. 1777 as /tmp (else any user may remove or "
                         "replace every other user's files)")
# A Secret key (also a file name in the volume it is mounted from): not '.', '..' nor starting with '..'.
SECRET_KEY_PATTERN = r"^(\.[-_a-zA-Z0-9]|[-_a-zA-Z0-9])[-._a-zA-Z0-9]*$"
# A Prometheus duration as prometheus-operator's CRDs want it: units in this order, each at most once (not empty).
_PROMETHEUS_UNITS = ("y", "w", "d", "h", "m", "s", "ms")
PROMETHEUS_DURATION_PATTERN = "^(0|%s)$" % "|".join(
    "[0-9]+%s%s" % (unit, "".join("([0-9]+%s)?" % later for later in _PROMETHEUS_UNITS[index + 1:]))
    for index, unit in enumerate(_PROMETHEUS_UNITS))

# Human explanations of patterns, appended to "should match" errors by the Python validator.
PATTERN_HINTS = {
    SLURM_VALUE_PATTERN: "one token: no whitespace, control character, backslash or '#'",
    SSHD_VALUE_PATTERN: "no line break or NUL",
    DNS_LABEL_PATTERN: "a DNS label: lowercase letters, digits and '-'",
    CLUSTER_NAME_PATTERN: "lowercase letters, digits and '-', starting with a letter",
    PARTITION_NAME_PATTERN: "letters, digits, '_' and '-'",
    FEATURE_PATTERN: "letters, digits, '_', '.' and '-'",
    JAIL_PATH_PATTERN: "an absolute path, no component starting with '.'",
    SLURM_TIME_PATTERN: "a Slurm time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED",
    GO_DURATION_PATTERN: "a duration such as 30m, 1h30m, 90s",
    QUANTITY_PATTERN: "a quantity such as 500m, 2, 4Gi (at most 30 digits each side of the point, a 2-digit "
                      "exponent)",
    IMAGE_PATTERN: "an image reference: letters, digits and . _ / : @ + -",
    DB_IDENTIFIER_PATTERN: "letters, digits and '_'",
    DB_HOST_PATTERN: "a host name or IP address",
    SECRET_KEY_PATTERN: "a Secret key: letters, digits, '-', '_' and '.', not starting with '..'",
    PROMETHEUS_DURATION_PATTERN: "a Prometheus duration such as 30s, 1m30s (units y w d h m s ms, in that order)",
    CIDR_PATTERN: "a CIDR such as 203.0.113.0/24",
    DIRECTORY_MODE_PATTERN: "an octal mode such as 0755 or 1777",
    LABEL_VALUE_PATTERN: "a label value: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
}

MAX_SHORT = 63
MAX_PATH = 512


def _s(description: str, **kw: Any) -> Schema:
    node = {"type": "string", "description": description}
    node.update(kw)
    return node


def _i(description: str, **kw: Any) -> Schema:
    node = {"type": "integer", "description": description}
    node.update(kw)
    return node


def _b(description: str, **kw: Any) -> Schema:
    node = {"type": "boolean", "description": description}
    node.update(kw)
    return node


def _o(description: str, properties: dict[str, Schema], required: Iterable[str] | None = None,
       **kw: Any) -> Schema:
    node = {"type": "object", "description": description, "properties": properties}
    if required:
        node["required"] = list(required)
    node.update(kw)
    return node


def _a(description: str, items: Schema, max_items: int, **kw: Any) -> Schema:
    node = {"type": "array", "description": description, "items": items, "maxItems": max_items}
    node.update(kw)
    return node


def _m(description: str, values: Schema, max_properties: int, **kw: Any) -> Schema:
    node = {"type": "object", "description": description, "additionalProperties": values,
            "maxProperties": max_properties}
    node.update(kw)
    return node


def _validations(rules: list[CelRule]) -> Schema:
    """``x-kubernetes-validations`` of a node, for a builder's keywords: ``_o(..., **_validations([_rule(...)]))``."""
    return {"x-kubernetes-validations": rules}


def _rule(rule: str, message: str, field_path: str | None = None) -> CelRule:
    node = {"rule": rule, "message": message}
    if field_path:
        node["fieldPath"] = field_path
    return node


def quantity_schema(description: str, **kw: Any) -> Schema:
    """An int-or-string Kubernetes quantity: non-negative, bounded digits (see quantity.py)."""
    node = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN, "maxLength": QUANTITY_MAX_LENGTH, "minimum": 0, "description": description}
    node.update(kw)
    return node


def _quantity_map(description: str) -> Schema:
    return _m(description, quantity_schema("A Kubernetes quantity (e.g. 500m, 2, 4Gi)."), 16)


def resources_schema(description: str) -> Schema:
    return _o(description, {
        "requests": _quantity_map("Minimum resources the pod is scheduled with (cpu, memory, ephemeral-storage, "
                                  "hugepages-<size>, or a domain-qualified extended resource)."),
        "limits": _quantity_map("Maximum resources of the container; also sizes the Slurm node (CPUs, RealMemory). "
                                "A request may not exceed its limit; extended resources and hugepages are whole "
                                "numbers, their request equal to their limit."),
    })


def _label_map(description: str, max_properties: int) -> Schema:
    """Kubernetes labels: qualified-name keys (a CEL rule; its Python twin is in cel.py), label values."""
    return _m(description, _s("Label value.", maxLength=MAX_SHORT, pattern=LABEL_VALUE_PATTERN), max_properties,
              **_validations([_rule(
                  "self.all(k, size(k) <= 317 && k.matches('%s') && !k.matches('%s'))" % (
                      LABEL_KEY_PATTERN.replace("\\", "\\\\"), LABEL_KEY_LONG_PREFIX_PATTERN),
                  LABEL_KEYS_RULE_MESSAGE)]))


def _label_key(description: str) -> Schema:
    return _s(description, maxLength=317, pattern=LABEL_KEY_PATTERN)


def _label_selector(description: str) -> Schema:
    requirement = _o("A label selector requirement.", {
        "key": _label_key("The label key."),
        "operator": _s("In, NotIn, Exists or DoesNotExist.", enum=["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": _a("Values: at least one for In and NotIn, none for Exists and DoesNotExist.",
                     _s("A label value.", maxLength=MAX_SHORT, pattern=LABEL_VALUE_PATTERN), 64),
    }, required=["key", "operator"])
    return _o(description, {
        "matchLabels": _m("Labels the pods must have.",
                          _s("Label value.", maxLength=MAX_SHORT, pattern=LABEL_VALUE_PATTERN), 32),
        "matchExpressions": _a("Requirements the pods' labels must meet.", requirement, 32),
    })


def _node_selector_term(description: str) -> Schema:
    requirement = _o("A node selector requirement.", {
        "key": _s("The label key (matchFields: metadata.name).", maxLength=317),
        "operator": _s("In, NotIn, Exists, DoesNotExist, Gt or Lt.",
                       enum=["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
        "values": _a("Values: at least one for In and NotIn, none for Exists and DoesNotExist, one integer for Gt "
                     "and Lt.", _s("A value.", maxLength=MAX_SHORT), 64),
    }, required=["key", "operator"])
    return _o(description, {
        "matchExpressions": _a("Requirements on the node's labels.", requirement, 32),
        "matchFields": _a("Requirements on the node's fields (metadata.name only).", requirement, 32),
    })


def _pod_affinity_term(description: str) -> Schema:
    return _o(description, {
        "labelSelector": _label_selector("The pods this term is about."),
        "namespaceSelector": _label_selector("Namespaces of those pods, by label."),
        "namespaces": _a("Namespaces of those pods, by name.",
                         _s("A namespace.", maxLength=MAX_SHORT, pattern=DNS_LABEL_PATTERN), 32),
        "topologyKey": _label_key("Node label whose equal values make one topology domain (e.g. "
                                  "kubernetes.io/hostname)."),
        "matchLabelKeys": _a("Pod label keys whose values are added to labelSelector (In).",
                             _label_key("A label key."), 32),
        "mismatchLabelKeys": _a("Pod label keys whose values are added to labelSelector (NotIn).",
                                _label_key("A label key."), 32),
    }, required=["topologyKey"])


def _weighted(description: str, term_key: str, term: Schema) -> Schema:
    return _o(description, {
        "weight": _i("Weight 1..100 added to a node's score when the term matches.", minimum=1, maximum=100),
        term_key: term,
    }, required=["weight", term_key])


def _pod_affinity(description: str) -> Schema:
    return _o(description, {
        "requiredDuringSchedulingIgnoredDuringExecution": _a(
            "Terms every pod must meet.", _pod_affinity_term("A pod affinity term."), 32),
        "preferredDuringSchedulingIgnoredDuringExecution": _a(
            "Terms the scheduler prefers.", _weighted("A weighted pod affinity term.", "podAffinityTerm",
                                                      _pod_affinity_term("A pod affinity term.")), 32),
    })


def affinity_schema(description: str) -> Schema:
    """Kubernetes' Affinity (core/v1), typed: the API server refuses a malformed one on the rendered pods."""
    return _o(description, {
        "nodeAffinity": _o("Which nodes the pods may run on.", {
            "requiredDuringSchedulingIgnoredDuringExecution": _o("A node selector: the terms are ORed.", {
                "nodeSelectorTerms": _a("At least one term.", _node_selector_term("A node selector term."), 32),
            }, required=["nodeSelectorTerms"]),
            "preferredDuringSchedulingIgnoredDuringExecution": _a(
                "Terms the scheduler prefers.", _weighted("A weighted node selector term.", "preference",
                                                          _node_selector_term("A node selector term.")), 32),
        }),
        "podAffinity": _pod_affinity("Run the pods near pods matching these terms."),
        "podAntiAffinity": _pod_affinity("Run the pods away from pods matching these terms."),
    })


TOLERATION_EXISTS_VALUE = "a toleration with operator Exists has no value"
TOLERATION_EMPTY_KEY = "a toleration with an empty key needs operator Exists"
TOLERATION_SECONDS = "tolerationSeconds requires effect NoExecute"


def placement_schema(description: str) -> Schema:
    toleration = _o("A Kubernetes toleration.", {
        "key": _s("Taint key the toleration applies to; empty with operator Exists matches every taint.",
                  maxLength=317, pattern="^(%s)?$" % LABEL_KEY_PATTERN[1:-1]),
        "operator": _s("Exists or Equal (default Equal).", enum=["Exists", "Equal"]),
        "value": _s("Taint value to match with operator Equal.", maxLength=MAX_SHORT, pattern=LABEL_VALUE_PATTERN),
        "effect": _s("Taint effect to match; empty matches all effects.",
                     enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "tolerationSeconds": _i("How long a NoExecute taint is tolerated before eviction.", format="int64"),
    }, **_validations([
        _rule("!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
              TOLERATION_EXISTS_VALUE, ".value"),
        _rule("(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
              TOLERATION_EMPTY_KEY, ".operator"),
        _rule("!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
              TOLERATION_SECONDS, ".tolerationSeconds"),
    ]))
    return _o(description, {
        "nodeSelector": _label_map("Node labels the pods must match (merged over the cluster-wide ones; these win).",
                                   32),
        "tolerations": _a("Tolerations (added to the cluster-wide ones).", toleration, 32),
        "affinity": affinity_schema("A Kubernetes Affinity (nodeAffinity, podAffinity, podAntiAffinity); each part "
                                    "set here replaces the cluster-wide one."),
    })


def _conditions_schema() -> Schema:
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


def _root(kind_description: str, spec: Schema, status: Schema, rules: list[CelRule]) -> Schema:
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


def _name_rules(kind: str, max_length: int) -> list[CelRule]:
    return [
        _rule("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
              "metadata.name of a %s must be a DNS label starting with a letter" % kind),
        _rule("size(self.metadata.name) <= %d" % max_length,
              "metadata.name of a %s must be at most %d characters (it prefixes the names of its objects)"
              % (kind, max_length)),
    ]


CLUSTER_NAME_MAX = 24
NODESET_NAME_MAX = 24
# Messages of CEL rules (cel.py registers a Python twin under each).
PARTITION_DEFAULT_NAME = "a partition may not be named 'default' (any case): it is Slurm's defaults record"
SPOOL_IMMUTABLE = ("the controller's spool is immutable (the StatefulSet's claim template cannot change): delete the "
                   "controller StatefulSet first, its claim is kept")
CLUSTER_REF_IMMUTABLE = "clusterRef is immutable: a NodeSet cannot move to another cluster (create a new NodeSet)"
GPU_TYPE_WITHOUT_COUNT = "gpu.type needs gpu.count > 0 (without a count the nodes have no GPU)"
NODESET_NAME_ORDINAL = ("metadata.name of a NodeSet may not end in -<digits> (it would look like a pod of another "
                        "NodeSet)")
ELASTIC_MIN_ABOVE_MAX = "elastic.minNodes may not exceed elastic.maxNodes"
ELASTIC_SWITCH = ("a NodeSet cannot switch between fixed replicas and elastic (spec.elastic): its running jobs would "
                  "lose their nodes; create a new NodeSet and delete this one (its nodes are drained first)")
# The most nodes of one elastic NodeSet: every name is a NodeName record of slurm.conf from the start.
ELASTIC_MAX_NODES = 1024


def _image(component: str) -> Schema:
    return _s("Image of the %s. Default: %s:<collection version>." % (component, names.IMAGE_REPOSITORIES[component]),
              maxLength=MAX_PATH, pattern=IMAGE_PATTERN)


def _spool() -> Schema:
    return _o("The controller's state volume (StateSaveLocation); immutable once set: the StatefulSet's claim "
              "template cannot change.", {
                  "storageClassName": _s("Storage class (default: the cluster's default class).", maxLength=253,
                                         pattern=DNS_SUBDOMAIN_PATTERN),
                  "size": quantity_schema("Size of the spool volume (more than zero).", default="10Gi"),
              }, default={}, **_validations([_rule("self == oldSelf", SPOOL_IMMUTABLE)]))


# --- node health (spec.healthChecks of a SlurmCluster and of a NodeSet) ----------------------------------------------
TOPOLOGY_PLUGINS = ("tree", "block")
TOPOLOGY_BLOCK_LEVELS = "topology block has exactly one level: the label whose value names a node's block"
TOPOLOGY_LEVELS_MAX = 8
# A label key prefix ([dns-subdomain/][name characters]): the start of the keys whose labels become features.
FEATURE_LABEL_PREFIX_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                                r"[A-Za-z0-9._-]*$")
PINNED_ONE_PER_NODE = "placement.pinned needs placement.onePerNode: a pin is one worker's claim on one node"
EVERY_NODE_ALONE = ("placement.everyNode puts one worker on every matching node by itself: onePerNode and pinned "
                    "do not apply with it (leave them false)")
EVERY_NODE_ELASTIC = ("placement.everyNode and elastic exclude each other: Kubernetes nodes decide which workers of an "
                      "every-node NodeSet run, Slurm's power saving those of an elastic one")
FEATURE_LABELS_ELASTIC = ("featureLabelPrefix does not apply to an elastic NodeSet: its Slurm nodes exist while "
                          "powered down, on no Kubernetes node, and a feature from one node's labels would stay on a "
                          "name Slurm powers up elsewhere (use spec.features)")
EVERY_NODE_SWITCH = ("a NodeSet cannot switch placement.everyNode on or off: its running jobs would lose their nodes; "
                     "create a new NodeSet and delete this one (its nodes are drained first)")


def topology_schema() -> Schema:
    return _o("Network topology from Kubernetes node labels (issue 25): the cluster's topology.conf, applied by "
              "scontrol reconfigure. It lists every possible worker name of every NodeSet; a worker not (yet) on a "
              "labelled node is under the switch 'unknown'. Needs the opt-in to read Nodes (operator_read_nodes).", {
                  "plugin": _s("tree: SwitchName lines (jobs use --switches); block: BlockName lines (--segment), "
                               "only when every NodeSet of the cluster is elastic (fixed node names; Slurm %s "
                               "cannot start with a block of dynamic workers not registered yet)." % SLURM.name,
                               enum=list(TOPOLOGY_PLUGINS), default="tree"),
                  "levels": _a("Node label keys, lowest level first: tree: the leaf switch's label, then the "
                               "spine's ...; block: the one label naming the node's block (e.g. an NVLink domain).",
                               _label_key("A node label key."), TOPOLOGY_LEVELS_MAX, minItems=1,
                               **{"x-kubernetes-list-type": "set"}),
              }, required=["levels"], **_validations([
                  _rule("!has(self.plugin) || self.plugin != 'block' || size(self.levels) == 1",
                        TOPOLOGY_BLOCK_LEVELS, ".levels")]))


HEALTH_NODE_STATES = ["ANY", "IDLE", "ALLOC", "MIXED", "CYCLE"]
DEFAULT_XIDS = [48, 63, 64, 74, 79, 92, 94, 95]
NCCL_SIZE_PATTERN = r"^[0-9]+[KMG]?$"
CRON_PATTERN = r"^(@(hourly|daily|weekly|monthly|yearly|annually)|[0-9*/,-]+( [0-9*/,A-Za-z-]+){4})$"
CONDITION_TYPE_PATTERN = r"^[A-Za-z][A-Za-z0-9]*$"
HEALTH_EXCLUSIVE_RULE = ("spec.healthChecks.enabled and spec.slurm.healthCheckProgram exclude each other: slurmd runs "
                         "one HealthCheckProgram, the shipped one or yours")
PATTERN_HINTS.update({NCCL_SIZE_PATTERN: "a size such as 512M or 8G", CRON_PATTERN: "a cron schedule such as 0 3 * * 0",
                      CONDITION_TYPE_PATTERN: "a condition type such as KernelDeadlock"})


def gpu_health_schema(description: str, defaults: bool = True) -> Schema:
    """Thresholds of the GPU checks. The NodeSet's copy has no defaults: what it sets overrides the cluster's."""
    def d(value: object) -> Schema:
        return {"default": value} if defaults else {}
    return _o(description, {
        "persistenceMode": _b("Fail a GPU whose persistence mode is off.", **d(True)),
        "maxUncorrectedEccErrors": _i("Volatile uncorrected ECC errors a GPU may have.", minimum=0, **d(0)),
        "maxRetiredPages": _i("Retired pages (single- and double-bit) a GPU may have; a pending retirement always "
                              "fails (it needs a reset).", minimum=0, **d(60)),
        "maxRemappedRows": _i("Rows remapped for uncorrectable errors a GPU may have; a pending or failed remapping "
                              "always fails.", minimum=0, **d(512)),
        "xids": _a("NVIDIA Xid codes that fail a node once seen in the kernel log (read when the container may: "
                   "kernel.dmesg_restrict=0).", _i("An Xid code.", minimum=1, maximum=1024), 64,
                   **dict(d(list(DEFAULT_XIDS)), **{"x-kubernetes-list-type": "set"})),
        "maxXidEvents": _i("Events of those codes tolerated.", minimum=0, **d(0)),
        "dcgmDiagLevel": _i("Run `dcgmi diag -r <level>` when dcgmi is in the worker image (0: never).", minimum=0,
                            maximum=2, **d(1)),
    }, **d({}))


def health_checks_schema() -> Schema:
    nccl = _o("The NCCL check: a CronJob that runs all_reduce_perf as Slurm jobs on each idle node of the NodeSets "
              "with spec.healthChecks.ncclMinBusBandwidthGBps, then across pairs of them, and drains a node under "
              "that bus bandwidth (reason 'soperator: health: nccl: busbw <figure> ...'). Off unless scheduled.", {
                  "schedule": _s("Cron schedule of the check (e.g. '0 3 * * 0'). Absent: no check.", maxLength=64,
                                 pattern=CRON_PATTERN),
                  "command": _s("all_reduce_perf inside the jail (nccl-tests).", maxLength=MAX_PATH,
                                pattern=PROGRAM_PATH_PATTERN, default="/usr/bin/all_reduce_perf"),
                  "minBytes": _s("all_reduce_perf -b.", maxLength=16, pattern=NCCL_SIZE_PATTERN, default="512M"),
                  "maxBytes": _s("all_reduce_perf -e; the bus bandwidth judged is the one at this size.",
                                 maxLength=16, pattern=NCCL_SIZE_PATTERN, default="8G"),
                  "pairs": _b("Also test pairs of nodes (one job across both); a node failing with two partners is "
                              "drained.", default=True),
                  "mpi": _s("srun --mpi of the pair tests (all_reduce_perf built with MPI).",
                            enum=["pmix", "pmi2", "none"], default="pmix"),
                  "partition": _s("Partition of the test jobs (default: the cluster's default partition).",
                                  maxLength=MAX_SHORT, pattern=PARTITION_NAME_PATTERN),
                  "timeLimitMinutes": _i("Time limit of each test job.", minimum=1, maximum=1440, default=10),
              }, default={})
    nodes = _o("Kubernetes node state projected into Slurm (reading Nodes needs the operator's opt-in cluster-scoped "
               "RBAC, operator_read_nodes: true).", {
                   "drainCordoned": _b("Drain the Slurm nodes of the pods on a cordoned Kubernetes node (reason "
                                       "'soperator: node cordoned'); resume them when it is uncordoned.",
                                       default=False),
                   "drainOnConditions": _a("Kubernetes node condition types (e.g. Node Problem Detector's) that drain "
                                           "the Slurm nodes of its pods while True (reason 'soperator: node condition "
                                           "<type>').", _s("A condition type.", maxLength=MAX_SHORT,
                                                           pattern=CONDITION_TYPE_PATTERN), 16,
                                           **{"x-kubernetes-list-type": "set"}),
                   "evictUnhealthyAfter": _s("A worker drained by the health program this long, and idle, has its "
                                             "Kubernetes node cordoned and its pod evicted (the StatefulSet makes it "
                                             "again elsewhere; its jobs are never killed). Absent: never. Cordoning "
                                             "needs operator_cordon_nodes: true.", maxLength=32,
                                             pattern=GO_DURATION_PATTERN),
                   "replaceLostAfter": _s("A worker whose Kubernetes node has not been Ready this long (its kubelet "
                                          "silent or failing) while slurmctld gets no answer from its slurmd (Slurm "
                                          "flags the node NOT_RESPONDING) has its pod deleted at once, without "
                                          "waiting for the lost kubelet to confirm, so that its StatefulSet makes it "
                                          "again on a Ready node, where it joins under the same Slurm name. Both "
                                          "must hold: a node whose slurmd still answers keeps its pod, so one Slurm "
                                          "name never runs twice. Jobs on it end as Slurm's policy says (requeued "
                                          "where allowed). Pinned and every-node workers belong to their node and "
                                          "wait for it. Absent: never (Kubernetes leaves the pod Terminating until "
                                          "the kubelet returns).", maxLength=32, pattern=GO_DURATION_PATTERN),
               }, default={})
    return _o("Node health: the worker image's health program run by slurmd (HealthCheckProgram), the NCCL check, and "
              "Kubernetes node state projected into Slurm.", {
                  "enabled": _b("Run the shipped health program on every node. Default: on, unless "
                                "spec.slurm.healthCheckProgram names a program of your own."),
                  "interval": _i("Slurm HealthCheckInterval, seconds.", minimum=10, maximum=86400, default=120),
                  "nodeStates": _a("Slurm HealthCheckNodeState: which nodes are checked. NONDRAINED_IDLE is not "
                                   "offered: a node drained by a check must be checked again to be resumed.",
                                   _s("A node state.", enum=HEALTH_NODE_STATES), 5, default=["ANY"],
                                   **{"x-kubernetes-list-type": "set"}),
                  "minFreeSpoolMiB": _i("Free space the slurmd spool must keep.", minimum=0, default=1024),
                  "minFreeTmpMiB": _i("Free space /tmp must keep.", minimum=0, default=1024),
                  "minAvailableMemoryMiB": _i("MemAvailable a node must keep (0: not checked).", minimum=0, default=0),
                  "gpu": gpu_health_schema("GPU checks of the NodeSets with GPUs (nvidia-smi; DCGM when present)."),
                  "nccl": nccl,
                  "kubernetesNodes": nodes,
              }, default={})


def nodeset_health_checks_schema() -> Schema:
    return _o("Node health of this NodeSet (see the SlurmCluster's spec.healthChecks).", {
        "enabled": _b("Run the health program on these nodes (when the cluster runs it).", default=True),
        "gpu": gpu_health_schema("GPU thresholds of this NodeSet, over the cluster's.", defaults=False),
        "ncclMinBusBandwidthGBps": _i("Bus bandwidth (GB/s, all_reduce_perf at maxBytes) a node of this set must "
                                      "reach in the NCCL check. Absent: the check leaves this set alone.",
                                      minimum=1, maximum=100000),
    }, default={})


def _secret_key_ref(description: str) -> Schema:
    return _o(description, {
        "name": _s("Name of the Secret (in the cluster's namespace).", maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
        "key": _s("Key of the value in the Secret.", maxLength=253, pattern=SECRET_KEY_PATTERN),
    }, required=["name", "key"])


def _storage(description: str) -> Schema:
    return _o(description, {
        "storageClassName": _s("Storage class (default: the cluster's default class).", maxLength=253,
                               pattern=DNS_SUBDOMAIN_PATTERN),
        "size": quantity_schema("Size of the volume (more than zero).", default="10Gi"),
    }, default={})


DB_TYPES = ["InCluster", "External", "MariaDBOperator"]
ACCOUNTING_RULES = {
    "external": "type External requires host and passwordSecretRef",
    "external_only": "host, passwordSecretRef and tls apply to type External only",
    # A transition rule (cel.py's twin takes the stored value too).
    "storage_immutable": ("spec.accounting.database.storage cannot change while the database exists (the MariaDB "
                          "StatefulSet's claim template, the mariadb-operator MariaDB's storage): switch accounting "
                          "off, or to another database type, first"),
}


def _accounting_schema() -> Schema:
    database = _o("The database slurmdbd stores accounting in (MariaDB or MySQL).", {
        "type": _s("InCluster: a MariaDB StatefulSet of the cluster (Debian's MariaDB), its volume and a generated "
                   "password. MariaDBOperator: a mariadb-operator MariaDB resource (k8s.mariadb.com/v1alpha1; the "
                   "operator must be installed). External: a database you run (host, user, passwordSecretRef).",
                   enum=DB_TYPES, default="InCluster"),
        "host": _s("Host name or address of the external database.", maxLength=253, pattern=DB_HOST_PATTERN),
        "port": _i("Port of the database.", minimum=1, maximum=65535, default=names.MARIADB_PORT),
        "name": _s("Database (schema) name: slurmdbd's StorageLoc.", maxLength=64, pattern=DB_IDENTIFIER_PATTERN,
                   default="slurm_acct_db"),
        "user": _s("Database user slurmdbd connects as.", maxLength=80, pattern=DB_IDENTIFIER_PATTERN,
                   default="slurm"),
        "passwordSecretRef": _secret_key_ref("External: the Secret key holding the user's password (one token: no "
                                             "whitespace, '#', quote or backslash). Other types generate "
                                             "<cluster>-accounting-db-password once and never rotate it."),
        "tls": _o("External: verify the database server's certificate.", {
            "caSecretRef": _secret_key_ref("The Secret key holding the CA certificate (PEM) that signed the server's "
                                           "certificate; slurmdbd then connects with TLS (StorageParameters=SSL_CA)."),
        }, required=["caSecretRef"]),
        "storage": _storage("InCluster and MariaDBOperator: the database's volume (ReadWriteOnce); immutable once "
                            "created."),
        "resources": resources_schema("InCluster: resources of MariaDB."),
        "placement": placement_schema("InCluster: where MariaDB runs."),
    }, default={}, **_validations([
        # has(self.type) first: the API server checks the rules on the default ({}) too, without nested defaults.
        _rule("!has(self.type) || self.type != 'External' || (has(self.host) && has(self.passwordSecretRef))",
              ACCOUNTING_RULES["external"]),
        _rule("(has(self.type) && self.type == 'External') || "
              "(!has(self.host) && !has(self.passwordSecretRef) && !has(self.tls))",
              ACCOUNTING_RULES["external_only"]),
    ]))
    slurmdbd = _o("slurmdbd, the accounting daemon (one pod).", {
        "resources": resources_schema("Resources of slurmdbd."),
        "placement": placement_schema("Where slurmdbd runs."),
        "config": _m("Other slurmdbd.conf keys (an allowlist, e.g. PurgeJobAfter, PrivateData); each value one "
                     "token.", _s("Value of the key.", maxLength=1024, pattern=SLURM_VALUE_PATTERN), 32),
    }, default={})
    return _o("Accounting: slurmdbd and its database. Jobs' history (sacct), fairshare (sshare), limits and QOS "
              "(sacctmgr). The cluster registers itself in the database when slurmctld first connects.", {
                  "enabled": _b("Run slurmdbd and store accounting.", default=False),
                  "database": database,
                  "slurmdbd": slurmdbd,
              }, default={}, **_validations([
                  # Only while accounting was and stays on with the same database: until then the default storage
                  # is nobody's yet.
                  _rule("!has(oldSelf.enabled) || !oldSelf.enabled || !has(self.enabled) || !self.enabled"
                        " || !has(self.database) || !has(oldSelf.database)"
                        " || !has(self.database.type) || !has(oldSelf.database.type)"
                        " || self.database.type != oldSelf.database.type || self.database.type == 'External'"
                        " || !has(self.database.storage) || !has(oldSelf.database.storage)"
                        " || self.database.storage == oldSelf.database.storage",
                        ACCOUNTING_RULES["storage_immutable"], ".database.storage"),
              ]))


def _rest_api_schema() -> Schema:
    service = _o("How clients reach slurmrestd.", {
        "type": _s("Kubernetes Service type.", enum=["ClusterIP", "NodePort", "LoadBalancer"], default="ClusterIP"),
        "port": _i("Port of the Service.", minimum=1, maximum=65535, default=names.SLURMRESTD_PORT),
    }, default={})
    return _o("slurmrestd, Slurm's REST API, with JSON Web Token authentication only (auth/jwt: no anonymous "
              "access). Users get a token with `scontrol token` (on a login node) and send it as "
              "X-SLURM-USER-TOKEN. Enabling it adds AuthAltTypes=auth/jwt to slurmctld and slurmdbd, with a key "
              "generated once in the Secret <cluster>-jwt-key.", {
                  "enabled": _b("Run slurmrestd.", default=False),
                  "replicas": _i("Number of slurmrestd pods.", minimum=1, maximum=16, default=1),
                  "service": service,
                  "resources": resources_schema("Resources of slurmrestd."),
                  "placement": placement_schema("Where slurmrestd runs."),
              }, default={})


# --- a directory of users and groups (spec.identity) ----------------------------------------------------------------
# An LDAP URI: ldap:// or ldaps://, a host name, an IPv4 or a bracketed IPv6 address, an optional port, nothing
# after it (no DN, attributes or filter: the search bases are fields of their own).
LDAP_URI_PATTERN = r"^ldaps?://([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?$"
# A distinguished name (RFC 4514), on one line: it goes into sssd.conf, which is line based; no '?' either (sssd reads
# a search base as base?scope?filter: hex-escape a '?' of a DN as \3f). api/identity.py checks RFC 4514 itself.
DN_PATTERN = r"^[A-Za-z0-9][^\x00-\x1f\x7f?]*$"
LDAP_ATTRIBUTE_PATTERN = r"^[A-Za-z][A-Za-z0-9-]*$"
IDENTITY_SCHEMAS = ["rfc2307", "rfc2307bis", "ad"]
IDENTITY_RULES = {
    "bind_pair": "bindDN and bindPasswordSecretRef go together (neither: an anonymous bind)",
    "bind_tls": ("a bind password is sent over TLS only: every URI ldaps://, or ldap:// URIs with tls.startTLS "
                 "(without TLS anyone on the path reads it)"),
    "starttls": "tls.startTLS is for ldap:// URIs (an ldaps:// URI is TLS from the start)",
    "id_range": "idRange.min must not exceed idRange.max",
}
# Users and groups a directory may give: ids in this range (Debian's UID_MIN..UID_MAX for people). The images' own
# accounts (slurm/accounts.py: 0..999, slurm 64030, the image cache's owner 64031, nobody 65534) are outside it, and
# no idRange may hold them.
DIRECTORY_ID_MIN = 1000
DIRECTORY_ID_MAX = 60000
DIRECTORY_ID_LIMIT = 2147483647  # the highest uid Linux and Slurm both take as a user's (2^31 - 1)
PATTERN_HINTS.update({
    LDAP_URI_PATTERN: "an LDAP URI: ldap:// or ldaps://, a host or address, an optional port, nothing else",
    DN_PATTERN: "a distinguished name such as ou=people,dc=example,dc=org, on one line, no '?' (write \3f)",
    LDAP_ATTRIBUTE_PATTERN: "an LDAP attribute name: a letter, then letters, digits and '-'",
})


def _identity_schema() -> Schema:
    tls = _o("TLS to the directory: its certificate is always verified (against caSecretRef's CA, else the CAs of "
             "the sssd image, Debian's ca-certificates).", {
                 "caSecretRef": _secret_key_ref("The Secret key holding the CA certificate (PEM) the directory's "
                                                "certificate must chain to. The Secret must be labelled "
                                                "%s=<cluster name>." % names.LABEL_IDENTITY_SECRET),
                 "startTLS": _b("ldap:// URIs: upgrade each connection with StartTLS before anything is sent "
                                "(ldaps:// URIs are TLS from the start).", default=False),
             }, default={})
    ldap = _o("An LDAP directory (OpenLDAP, 389 Directory Server, FreeIPA's, Active Directory) that holds the "
              "cluster's users and groups: POSIX accounts (uidNumber, gidNumber) and their SSH public keys. Every pod "
              "of the cluster resolves them through an sssd sidecar (login sessions, jobs on every worker, slurmctld, "
              "slurmdbd, slurmrestd), read-only, keys only: no password of a user ever reaches the cluster. Local "
              "users of the jail keep working; a name or id in both is the local one.", {
                  "uris": _a("LDAP URIs, tried in order (ldaps://ldap.example.org, ldap://10.0.0.5:389 with "
                             "tls.startTLS).", _s("An LDAP URI.", maxLength=256, pattern=LDAP_URI_PATTERN), 8,
                             minItems=1, **{"x-kubernetes-list-type": "set"}),
                  "baseDN": _s("Search base of users and groups (e.g. dc=example,dc=org).", maxLength=1024,
                               pattern=DN_PATTERN),
                  "userBaseDN": _s("Search base of users (default: baseDN).", maxLength=1024, pattern=DN_PATTERN),
                  "groupBaseDN": _s("Search base of groups (default: baseDN).", maxLength=1024, pattern=DN_PATTERN),
                  "bindDN": _s("The account sssd binds as (read access is all it needs). Absent: anonymous.",
                               maxLength=1024, pattern=DN_PATTERN),
                  "bindPasswordSecretRef": _secret_key_ref(
                      "The Secret key holding bindDN's password (mounted in the sssd sidecars alone, never in a "
                      "ConfigMap, an environment variable or a log; sent over TLS only). The Secret must be labelled "
                      "%s=<cluster name>. A new value reaches every pod within about a minute, no restart."
                      % names.LABEL_IDENTITY_SECRET),
                  "tls": tls,
                  "schema": _s("How the directory lays out groups: rfc2307 (posixGroup with memberUid), rfc2307bis "
                               "(groups with member DNs), ad (Active Directory with POSIX attributes: uidNumber, "
                               "gidNumber).", enum=IDENTITY_SCHEMAS, default="rfc2307"),
                  "sshPublicKeyAttribute": _s("The attribute of a user's SSH public keys (openssh-lpk's sshPublicKey).",
                                              maxLength=MAX_SHORT, pattern=LDAP_ATTRIBUTE_PATTERN,
                                              default="sshPublicKey"),
                  "idRange": _o("The uids and gids taken from the directory; users and groups outside are ignored. "
                                "It may not hold the images' own accounts' ids (0-999, SlurmUser's 64030, the image "
                                "cache owner's 64031, nobody's 65534), and the installer's policy may set its lowest "
                                "id.", {
                                    "min": _i("Lowest id.", minimum=1, maximum=DIRECTORY_ID_LIMIT,
                                              default=DIRECTORY_ID_MIN),
                                    "max": _i("Highest id.", minimum=1, maximum=DIRECTORY_ID_LIMIT,
                                              default=DIRECTORY_ID_MAX),
                                    # The default names both ends: the API server judges a default by the rules
                                    # as it is written (a rule over {} has no min to read: the CRD is refused).
                                }, default={"min": DIRECTORY_ID_MIN, "max": DIRECTORY_ID_MAX},
                                **_validations([
                                    _rule("self.min <= self.max", IDENTITY_RULES["id_range"])])),
              }, required=["uris", "baseDN"], **_validations([
                  _rule("has(self.bindDN) == has(self.bindPasswordSecretRef)", IDENTITY_RULES["bind_pair"]),
                  _rule("!has(self.bindPasswordSecretRef) || self.uris.all(u, u.startsWith('ldaps://'))"
                        " || (has(self.tls) && has(self.tls.startTLS) && self.tls.startTLS)",
                        IDENTITY_RULES["bind_tls"], ".bindPasswordSecretRef"),
                  _rule("!has(self.tls) || !has(self.tls.startTLS) || !self.tls.startTLS"
                        " || self.uris.all(u, u.startsWith('ldap://'))", IDENTITY_RULES["starttls"], ".tls.startTLS"),
              ]))
    return _o("Users and groups from a directory, beside the jail's own (/etc/passwd of the jail): they log in with "
              "their keys from the directory, get a home in the jail at their first login, and run jobs as "
              "themselves.", {
                  "ldap": ldap,
                  "sssd": _o("The sssd sidecar of every pod.", {
                      "resources": resources_schema("Resources of each sssd sidecar."),
                  }, default={}),
              }, default={})


NETWORK_PEER_RULE = "a peer is an ipBlock, or a podSelector and/or a namespaceSelector"
# The shortest exporter collection interval: each collection is a set of Slurm RPCs (sinfo, squeue, sshare, sdiag).
EXPORTER_MIN_INTERVAL_SECONDS = 5


def _network_peers(description: str) -> Schema:
    cidr = _s("A CIDR, e.g. 203.0.113.0/24.", maxLength=64, pattern=CIDR_PATTERN)
    peer = _o("Where clients may connect from (a NetworkPolicyPeer).", {
        "podSelector": _label_selector("Pods by label, in the cluster's namespace unless namespaceSelector is set "
                                       "too ({}: every pod)."),
        "namespaceSelector": _label_selector("Namespaces by label ({}: every namespace), all their pods unless "
                                             "podSelector is set too."),
        "ipBlock": _o("Addresses outside the pod network (hosts, a load balancer's clients).", {
            "cidr": cidr,
            "except": _a("Parts of cidr left out.", cidr, 16),
        }, required=["cidr"]),
    }, **_validations([_rule(
        "has(self.ipBlock) != (has(self.podSelector) || has(self.namespaceSelector))", NETWORK_PEER_RULE)]))
    return _a(description, peer, 16)


def _network_policies_schema() -> Schema:
    return _o("NetworkPolicies of the services that hold or reach the accounting data and of the exporter: each "
              "accepts connections only from the clients that need it. The in-cluster MariaDB: slurmdbd. slurmdbd: "
              "slurmctld, and the login, worker and slurmrestd pods (sacct, sacctmgr and the REST API ask it "
              "directly). slurmrestd: the login and worker pods, and restApiFrom. The exporter: exporterFrom. "
              "Enforced by the cluster's network plugin, where it implements NetworkPolicy.", {
                  "enabled": _b("Render the NetworkPolicies.", default=True),
                  "restApiFrom": _network_peers(
                      "Further clients of slurmrestd (a Service of type NodePort or LoadBalancer reaches it from "
                      "outside the pod network: name those clients' addresses with an ipBlock)."),
                  "exporterFrom": _network_peers(
                      "Who may scrape the exporter. Empty: the pods of the cluster's namespace. A Prometheus in "
                      "another namespace: e.g. namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "
                      "monitoring}}."),
              }, default={})


def _exporter_schema() -> Schema:
    return _o("A Prometheus exporter of Slurm's state (nodes, jobs, partitions, drains, fairshare, scheduler), "
              "with a Service and, when the cluster serves monitoring.coreos.com/v1, a ServiceMonitor.", {
                  "enabled": _b("Run the exporter.", default=False),
                  "collectInterval": _s("How often the exporter asks Slurm (one set of sinfo, squeue, sshare and "
                                        "sdiag calls per interval, however many scrapes come); every scrape is "
                                        "answered with the last result. A duration of at least %ds (30s, 1m)."
                                        % EXPORTER_MIN_INTERVAL_SECONDS, maxLength=32,
                                        pattern=GO_DURATION_PATTERN, default="30s"),
                  "resources": resources_schema("Resources of the exporter."),
                  "placement": placement_schema("Where the exporter runs."),
                  "serviceMonitor": _o("The ServiceMonitor, made only when the cluster serves the CRD.", {
                      "enabled": _b("Make it.", default=True),
                      "interval": _s("Scrape interval (a Prometheus duration: 30s, 1m30s).", maxLength=32,
                                     pattern=PROMETHEUS_DURATION_PATTERN, default="30s"),
                      "labels": _label_map("Labels your Prometheus selects ServiceMonitors by.", 16),
                  }, default={}),
              }, default={})


# --- container steps (spec.containers) -----------------------------------------------------------------------------
# A registry or repository prefix jobs may pull from: host[:port][/path], as the jail plugin's container_registries=
# takes it: the host has a '.' or a port or is localhost (else it would name a Docker Hub repository), a
# repository's path components are lowercase.
JOB_REGISTRY_PATTERN = (r"^((localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+)(:[0-9]{1,5})?|[A-Za-z0-9-]+:[0-9]{1,5})"
                        r"(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$")
PATTERN_HINTS.update({JOB_REGISTRY_PATTERN: "a registry or repository prefix, e.g. registry.example.com:5000/team"})


def containers_schema() -> Schema:
    """spec.containers: srun/sbatch/salloc --container-image (docs/containers.md)."""
    return _o("Container steps: srun, sbatch and salloc --container-image=<image> run a step's tasks in an OCI image, "
              "as the job's user, with the jail's homes and sub-mounts in it (Pyxis's options; docs/containers.md). "
              "Each worker pulls an image once into a cache of its own.", {
                  "enabled": _b("Offer the --container-* options.", default=False),
                  "cacheSize": quantity_schema("Each worker's image cache (an emptyDir): above it the least recently "
                                               "used images no step holds are evicted. A pull needs room for the "
                                               "image's layers and its unpacked tree besides.", default="50Gi"),
                  "registries": _a("Registries, or repository prefixes, jobs may pull from (registry.example.com, "
                                   "registry.example.com:5000/team). Empty: any registry the installer's policy "
                                   "allows (allowed_job_registries), which must then allow any.",
                                   _s("A registry or repository prefix.", maxLength=250, pattern=JOB_REGISTRY_PATTERN),
                                   32, default=[]),
                  "pullSecretRef": _o("A kubernetes.io/dockerconfigjson Secret with the registries' credentials: "
                                      "root on each worker reads it and hands it to the unprivileged puller only. "
                                      "Its owner marks it for the cluster: label %s=<cluster name>."
                                      % container_steps.LABEL_REGISTRY_SECRET, {
                                          "name": _s("Name of the Secret (in the cluster's namespace).",
                                                     maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
                                      }, required=["name"]),
              }, default={})


# --- the jail's backups (spec.jail.backup) -------------------------------------------------------------------------
# An S3 endpoint or a REST server's URL: http(s), a host, an optional port and path; no credentials in it (they come
# from the credentials Secret), no whitespace or control character (restic takes it as one argument).
BACKUP_URL_PATTERN = r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+-]+)*/?$"
S3_BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
# A path below the repository root (S3 prefix, claim sub-directory): relative, safe components, no '.' or '..'.
BACKUP_SUBPATH_PATTERN = r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$"
# A restic exclude pattern: one argument, no line break, NUL or other control character.
BACKUP_EXCLUDE_PATTERN = r"^[^\x00-\x1f\x7f]+$"
BACKUP_REPOSITORY_RULE = "set exactly one of s3, rest or claim"
BACKUP_RETENTION_RULE = "keep at least one snapshot: one of daily, weekly or monthly must be more than 0"
PATTERN_HINTS.update({BACKUP_URL_PATTERN: "an http(s) URL without credentials, e.g. https://s3.example.com:9000",
                      S3_BUCKET_PATTERN: "an S3 bucket name: lowercase letters, digits, '.' and '-'",
                      BACKUP_SUBPATH_PATTERN: "a relative path, no component starting with '.'",
                      BACKUP_EXCLUDE_PATTERN: "no control character"})


def _secret_name_ref(description: str, keys: Sequence[str]) -> Schema:
    return _o(description + " Its owner marks it for the cluster: label %s=<cluster name>." % names.LABEL_BACKUP_SECRET
              + (" Keys: %s." % ", ".join(keys) if keys else ""), {
                  "name": _s("Name of the Secret (in the cluster's namespace).", maxLength=253,
                             pattern=DNS_SUBDOMAIN_PATTERN),
              }, required=["name"])


def backup_schema() -> Schema:
    """spec.jail.backup: restic backups of the jail on a schedule, retention as a separate step."""
    repository = _o("Where the snapshots go (a restic repository, made at the first backup): exactly one of s3, rest "
                    "or claim.", {
                        "s3": _o("An S3-compatible object store.", {
                            "endpoint": _s("The endpoint URL, e.g. https://s3.example.com (http only for a server "
                                           "inside the cluster's network).", maxLength=MAX_PATH,
                                           pattern=BACKUP_URL_PATTERN),
                            "bucket": _s("The bucket (made at the first backup if the credentials may).", maxLength=63,
                                         pattern=S3_BUCKET_PATTERN),
                            "prefix": _s("A prefix inside the bucket (default: the cluster's name).",
                                         maxLength=MAX_PATH, pattern=BACKUP_SUBPATH_PATTERN),
                            "region": _s("The region, when the store wants one.", maxLength=MAX_SHORT,
                                         pattern=r"^[a-z0-9-]+$"),
                            "credentialsSecretRef": _secret_name_ref("The Secret holding the access key.",
                                                                     names.BACKUP_S3_KEYS),
                        }, required=["endpoint", "bucket", "credentialsSecretRef"]),
                        "rest": _o("A restic REST server (rest-server).", {
                            "url": _s("The server's URL, with the repository's path, e.g. https://backup:8000/demo.",
                                      maxLength=MAX_PATH, pattern=BACKUP_URL_PATTERN),
                            "credentialsSecretRef": _secret_name_ref("The Secret holding the HTTP user and password "
                                                                     "(absent: no authentication).",
                                                                     names.BACKUP_REST_KEYS),
                        }, required=["url"]),
                        "claim": _o("A PersistentVolumeClaim of the cluster's namespace (not the jail's).", {
                            "claimName": _s("The claim.", maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
                            "path": _s("A directory inside it (default: the cluster's name).", maxLength=MAX_PATH,
                                       pattern=BACKUP_SUBPATH_PATTERN),
                        }, required=["claimName"]),
                    }, **_validations([
                        _rule("(has(self.s3) ? 1 : 0) + (has(self.rest) ? 1 : 0) + (has(self.claim) ? 1 : 0) == 1",
                              BACKUP_REPOSITORY_RULE)]))
    keep = "Snapshots kept: the last one of each of this many %s (0: none by this rule)."
    return _o("Backups of the jail with restic: a CronJob reads the jail read-only (never two at once) and sends a "
              "snapshot to the repository; a second CronJob applies the retention (restic forget --prune). The "
              "status shows the last successful backup (status.backup) and a condition BackupReady. Restores: "
              "playbooks/jail-restore.yml. The jail's sub-mounts are not included.", {
                  "schedule": _s("Cron schedule of the backups (e.g. '0 2 * * *').", maxLength=64,
                                 pattern=CRON_PATTERN),
                  "repository": repository,
                  "passwordSecretRef": _o("The repository's password (restic encrypts the snapshots with it; losing "
                                          "it loses the backups). Its owner marks the Secret for the cluster: label "
                                          "%s=<cluster name>." % names.LABEL_BACKUP_SECRET, {
                                              "name": _s("Name of the Secret (in the cluster's namespace).",
                                                         maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
                                              "key": _s("Key of the password in the Secret.", maxLength=253,
                                                        pattern=SECRET_KEY_PATTERN, default="password"),
                                          }, required=["name"]),
                  "retention": _o("Which snapshots the retention step keeps (restic forget --keep-*); the others are "
                                  "removed and their data pruned.", {
                                      "schedule": _s("Cron schedule of the retention step.", maxLength=64,
                                                     pattern=CRON_PATTERN, default="30 4 * * *"),
                                      "daily": _i(keep % "days", minimum=0, maximum=3660, default=7),
                                      "weekly": _i(keep % "weeks", minimum=0, maximum=520, default=4),
                                      "monthly": _i(keep % "months", minimum=0, maximum=1200, default=6),
                                  }, default={}, **_validations([
                                      _rule("!has(self.daily) || !has(self.weekly) || !has(self.monthly)"
                                            " || self.daily + self.weekly + self.monthly > 0",
                                            BACKUP_RETENTION_RULE)])),
                  "excludes": _a("restic exclude patterns: a pattern starting with '/' is a path of the jail "
                                 "(/var/cache/apt), others match anywhere (*.tmp, .cache).",
                                 _s("A pattern.", maxLength=MAX_PATH, pattern=BACKUP_EXCLUDE_PATTERN), 64,
                                 **{"x-kubernetes-list-type": "set"}),
                  "overdueAfter": _s("BackupReady turns False (reason Overdue) when the last successful backup is "
                                     "older than this.", maxLength=32, pattern=GO_DURATION_PATTERN, default="26h"),
                  "resources": resources_schema("Resources of the backup and retention containers."),
              }, required=["schedule", "repository", "passwordSecretRef"])


def slurm_cluster_schema() -> Schema:
    service = _o("How users reach the login nodes over SSH.", {
        "type": _s("Kubernetes Service type of the login Service.", enum=["ClusterIP", "NodePort", "LoadBalancer"],
                   default="ClusterIP"),
        "port": _i("SSH port of the Service.", minimum=1, maximum=65535, default=names.SSH_PORT),
        "nodePort": _i("Fixed node port (type NodePort or LoadBalancer only), in Kubernetes' default node port "
                       "range.", minimum=NODE_PORT_MIN, maximum=NODE_PORT_MAX),
        "loadBalancerSourceRanges": _a(
            "Client CIDRs allowed through the load balancer (type LoadBalancer only).",
            _s("A CIDR, e.g. 203.0.113.0/24.", maxLength=64, pattern=CIDR_PATTERN), 64,
            **{"x-kubernetes-list-type": "set"}),
    }, default={}, **_validations([
        _rule("!has(self.nodePort) || self.type == 'NodePort' || self.type == 'LoadBalancer'",
              "nodePort requires type NodePort or LoadBalancer", ".nodePort"),
        _rule("!has(self.loadBalancerSourceRanges) || size(self.loadBalancerSourceRanges) == 0"
              " || self.type == 'LoadBalancer'",
              "loadBalancerSourceRanges requires type LoadBalancer", ".loadBalancerSourceRanges"),
    ]))

    sub_mount = _o("A volume mounted inside the jail on login and worker nodes.", {
        "name": _s("Name of the mount (a DNS label, unique).", maxLength=40, pattern=DNS_LABEL_PATTERN),
        "mountPath": _s("Absolute path inside the jail (not '/', no '.' or '..' components) of a data directory "
                        "(/home, /scratch, /data, /mnt/<name>, ...): never in, above or below a system tree (/usr, "
                        "/etc, /var, /opt, /lib*, /root, ...), inside another sub-mount or inside a user's home.",
                        maxLength=MAX_PATH, pattern=JAIL_PATH_PATTERN),
        "readOnly": _b("Mount read-only. Default: true for hostPath, false for the other sources."),
        "hostPath": _s("Source: a directory of the Kubernetes node (must exist), under a prefix the installer "
                       "allows (the cluster role's cluster_policy.allowed_host_path_prefixes; none by default).",
                       maxLength=MAX_PATH, pattern=HOST_PATH_PATTERN),
        "claimName": _s("Source: a PersistentVolumeClaim in the cluster's namespace.", maxLength=253,
                        pattern=DNS_SUBDOMAIN_PATTERN),
        "emptyDir": _b("Source: an empty directory private to the pod (e.g. node-local scratch)."),
        "mode": _s("emptyDir only: the mode of its directory, which is root's (octal). Default 0755: users read, "
                   "only root writes. 1777, as /tmp: every user may write, nobody may remove another's files. A "
                   "world-writable mode needs the sticky bit.", maxLength=4, pattern=DIRECTORY_MODE_PATTERN),
    }, required=["name", "mountPath"], **_validations([
        _rule("(has(self.hostPath) ? 1 : 0) + (has(self.claimName) ? 1 : 0)"
              " + ((has(self.emptyDir) && self.emptyDir) ? 1 : 0) == 1",
              "set exactly one of hostPath, claimName or emptyDir"),
        _rule("!has(self.mode) || (has(self.emptyDir) && self.emptyDir)", SUB_MOUNT_MODE_EMPTY_DIR, ".mode"),
        _rule("!has(self.mode) || !self.mode.matches('[2367]$') || self.mode.matches('^[1357][0-7]{3}$')",
              SUB_MOUNT_MODE_STICKY, ".mode"),
    ]))

    jail = _o("The jail: a shared root filesystem (RWX volume) that every user session and job runs in.", {
        "existingClaim": _s("Use this existing ReadWriteMany PersistentVolumeClaim as the jail.", maxLength=253,
                            pattern=DNS_SUBDOMAIN_PATTERN),
        "storageClassName": _s("Create the claim <cluster>-jail with this (ReadWriteMany) storage class.",
                               maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
        "size": quantity_schema("Size of the created claim, e.g. 100Gi (more than zero)."),
        "populate": _o("Filling the jail from the jail image.", {
            "repopulateToken": _s("Change to a new non-empty value to run a new populate Job that overwrites the "
                                  "jail's files with the jail image (its users and groups are kept). Empty: "
                                  "populate once, never overwrite; a non-empty volume not populated by soperator "
                                  "is then refused (set a token to populate it anyway).",
                                  maxLength=MAX_SHORT, default=""),
        }, default={}),
        "subMounts": _a("Volumes mounted inside the jail.", sub_mount, 32, **_validations([
            _rule("self.all(m, self.exists_one(n, n.name == m.name))", "subMount names must be unique"),
            _rule("self.all(m, self.exists_one(n, n.mountPath == m.mountPath))",
                  "subMount mountPaths must be unique"),
        ])),
        "backup": backup_schema(),
    }, **_validations([
        _rule("(has(self.existingClaim) && !has(self.storageClassName) && !has(self.size))"
              " || (!has(self.existingClaim) && has(self.storageClassName) && has(self.size))",
              "set exactly one of existingClaim, or storageClassName and size"),
    ]))

    partition = _o("A Slurm partition.", {
        "name": _s("Slurm partition name (not 'default', in any case: Slurm's defaults record).", maxLength=MAX_SHORT,
                   pattern=PARTITION_NAME_PATTERN),
        "default": _b("The default partition (at most one). NodeSets that list no partition join it.",
                      default=False),
        "maxTime": _s("Slurm MaxTime (e.g. 60, 1-00:00:00, UNLIMITED).", maxLength=32,
                      pattern=SLURM_TIME_PATTERN, default="UNLIMITED"),
        "state": _s("Slurm partition State.", enum=["UP", "DOWN", "DRAIN", "INACTIVE"], default="UP"),
        "hidden": _b("Hide the partition from users by default (Hidden=YES).", default=False),
        "config": _m("Other PartitionName keys (an allowlist, e.g. DefMemPerCPU, AllowGroups); each value one "
                     "token.", _s("Value of the key.", maxLength=1024, pattern=SLURM_VALUE_PATTERN), 32),
    }, required=["name"], **_validations([
        _rule("!self.name.matches('^[Dd][Ee][Ff][Aa][Uu][Ll][Tt]$')", PARTITION_DEFAULT_NAME, ".name"),
    ]))

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
        "maxNodeCount": _i("Slurm MaxNodeCount: the most nodes (the replicas of fixed NodeSets and the maxNodes "
                           "of elastic ones, all sets together). Changing it restarts slurmctld.", minimum=1,
                           maximum=65000, default=1024),
        "powerSaving": _o("Slurm's power saving, which powers the nodes of elastic NodeSets (spec.elastic of a "
                          "NodeSet) up for the jobs Slurm schedules on them and down when idle. Used only when a "
                          "NodeSet is elastic; fixed NodeSets are never powered down.", {
                              "suspendTime": _i("Slurm SuspendTime: seconds a node of an elastic NodeSet stays idle "
                                                "before Slurm powers it down (its pod goes away).",
                                                minimum=1, maximum=65533, default=300),
                              "suspendTimeout": _i("Slurm SuspendTimeout: seconds for a node's pod to go after its "
                                                   "power-down; only then may the node be powered up again.",
                                                   minimum=1, maximum=65533, default=30),
                              "resumeTimeout": _i("Slurm ResumeTimeout: seconds for a powered-up node's pod to "
                                                  "start and its slurmd to register; past it the node is DOWN, its "
                                                  "pod removed and its job requeued.",
                                                  minimum=1, maximum=65533, default=300),
                          }, default={}),
        "slurmctldTimeout": _i("Slurm SlurmctldTimeout, seconds.", minimum=1, maximum=65533, default=120),
        "slurmdTimeout": _i("Slurm SlurmdTimeout, seconds (0 = never mark nodes DOWN for not responding).",
                            minimum=0, maximum=65533, default=300),
        "killWait": _i("Slurm KillWait, seconds between SIGTERM and SIGKILL of a job at its time limit.",
                       minimum=0, maximum=65533, default=30),
        "healthCheckInterval": _i("Slurm HealthCheckInterval, seconds (0 = no health check).", minimum=0,
                                  maximum=86400),
        "healthCheckProgram": _s("Slurm HealthCheckProgram: absolute path inside the worker image (by default "
                                 "below /usr, /bin, /sbin, /lib, /etc or /opt). Runs as root on every node: an "
                                 "administrator's setting (the installer may refuse it or move those prefixes: "
                                 "cluster_policy.allow_privileged_programs, allowed_program_prefixes).",
                                 maxLength=MAX_PATH, pattern=PROGRAM_PATH_PATTERN),
        "maxJobCount": _i("Slurm MaxJobCount.", minimum=1, maximum=2500000, default=10000),
        "disableRootJobs": _b("Slurm DisableRootJobs: root may not run jobs (set false to allow them; a root "
                              "job is still jailed, without CAP_SYS_ADMIN).", default=True),
        "slurmConf": _m("Other slurm.conf keys (an allowlist of known keys; keys the operator owns or that have a "
                        "typed field are refused). Written last. Programs Slurm runs as root or as SlurmUser "
                        "(Prolog, Epilog, RebootProgram, ...) are an administrator's settings, refused when the "
                        "installer's policy says so.", raw_slurm, 64),
        "cgroupConf": _m("cgroup.conf keys merged over the defaults (an allowlist of known keys).", raw_slurm, 32),
    }, default={}, **_validations([
        _rule("!has(self.healthCheckInterval) || self.healthCheckInterval == 0 || has(self.healthCheckProgram)",
              "healthCheckInterval requires healthCheckProgram", ".healthCheckInterval"),
    ]))

    accounting, rest_api, exporter = _accounting_schema(), _rest_api_schema(), _exporter_schema()
    identity = _identity_schema()

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
                      "slurmdbd": _image("slurmdbd"),
                      "slurmrestd": _image("slurmrestd"),
                      "exporter": _image("exporter"),
                      "mariadb": _image("mariadb"),
                      "backup": _image("backup"),
                      "sssd": _image("sssd"),
                      "pullPolicy": _s("imagePullPolicy of every container.", enum=["Always", "IfNotPresent", "Never"],
                                       default="IfNotPresent"),
                  }, default={}),
                  "controller": _o("The Slurm controller (slurmctld, one pod).", {
                      "resources": resources_schema("Resources of slurmctld."),
                      "spool": _spool(),
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
                                   **_validations([
                                       _rule("self.filter(p, p.default).size() <= 1",
                                             "at most one partition can be the default"),
                                       _rule("self.all(p, self.exists_one(q, q.name == p.name))",
                                             "partition names must be unique"),
                                   ])),
                  "slurm": slurm,
                  "placement": placement_schema("Cluster-wide placement of every pod; component placements are "
                                                "merged over it."),
                  "accounting": accounting,
                  "restApi": rest_api,
                  "exporter": exporter,
                  "networkPolicies": _network_policies_schema(),
                  "identity": identity,
                  "containers": containers_schema(),
                  "maintenance": _b("Scale every StatefulSet to 0 and do not run the populate Job. The jail and the "
                                    "Secrets are untouched.", default=False),
                  "healthChecks": health_checks_schema(),
                  "topology": topology_schema(),
                  "deletionPolicy": _o("What deleting the cluster does to its data.", {
                      "jail": _s("The jail claim and the controller's spool claim: Retain or Delete.",
                                 enum=["Retain", "Delete"], default="Retain"),
                      "secrets": _s("The munge key, SSH host keys and JWT key: Retain or Delete.",
                                    enum=["Retain", "Delete"], default="Retain"),
                      "database": _s("The accounting database the cluster made (the in-cluster MariaDB's volume, "
                                     "or the mariadb-operator MariaDB) and its generated password: Retain or "
                                     "Delete. An external database is never touched.", enum=["Retain", "Delete"],
                                     default="Retain"),
                  }, default={}),
              }, required=["jail"], **_validations([
                  _rule("!has(self.healthChecks) || !has(self.healthChecks.enabled) || !self.healthChecks.enabled"
                        " || !has(self.slurm) || !has(self.slurm.healthCheckProgram)", HEALTH_EXCLUSIVE_RULE,
                        ".healthChecks.enabled"),
              ]))

    status = {
        "type": "object",
        "description": "Observed state, written by the operator.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": _i("The .metadata.generation last reconciled.", format="int64", minimum=0),
            "phase": _s("Summary: Pending, Provisioning, Ready, Maintenance or Failed.", maxLength=64),
            "conditions": _conditions_schema(),
            "backup": _o("The jail's backups (spec.jail.backup), from the backup pods' reports.", {
                "lastSuccessTime": _s("When the last successful backup ended (RFC 3339).", format="date-time"),
                "snapshot": _s("Its restic snapshot id.", maxLength=64),
                "sizeBytes": _i("The bytes of the jail it read.", format="int64", minimum=0),
                "addedBytes": _i("The bytes it added to the repository (after deduplication and compression).",
                                 format="int64", minimum=0),
                "files": _i("The files it read.", format="int64", minimum=0),
                "durationSeconds": _i("How long it took.", format="int64", minimum=0),
                "lastFailureTime": _s("When the last failed backup ended (RFC 3339).", format="date-time"),
                "lastFailure": _s("What the last failed backup said.", maxLength=1024),
                "watchedSince": _s("When backups were first seen configured (the start of the overdue clock).",
                                   format="date-time"),
            }),
            "slurmConfig": _o("The slurm.conf slurmctld was last given, and how: Reconfigured (in place, by scontrol "
                              "reconfigure: same pod, same process) or Restarted (a key that needs a restart changed: "
                              "the controller pod was replaced, the queue kept on its spool).", {
                                  "digest": _s("Digest of that slurm.conf.", maxLength=64),
                                  "restartDigest": _s("Digest of its lines that need a restart to change.",
                                                      maxLength=64),
                                  "appliedBy": _s("Reconfigured or Restarted.", maxLength=32),
                                  "lastAppliedTime": _s("When the converge saw slurmctld given it (RFC 3339).",
                                                        format="date-time"),
                              }),
            names.STATUS_RECONCILED_DIGEST: _s(
                "Written by the operator runtime: digest of the pod and StatefulSet states (and the installer's "
                "policy) its last settled run started from; absent after a failed run or one that left work for "
                "later. While they are the same and nothing else differs, no run is started.",
                maxLength=128),
        },
    }
    return _root("A Slurm cluster in Kubernetes.", spec, status, _name_rules("SlurmCluster", CLUSTER_NAME_MAX))


def nodeset_placement_schema() -> Schema:
    placement = placement_schema("Where the nodes' pods run (merged over the cluster-wide placement).")
    placement["properties"]["onePerNode"] = _b(
        "Never two workers of this NodeSet on one Kubernetes node (a required pod anti-affinity on the node's "
        "hostname); a worker with no node left stays Pending, and the NodeSet's status says why.", default=False)
    placement["properties"]["pinned"] = _b(
        "Each worker comes back to the Kubernetes node it last ran on (a required node affinity, recorded in "
        "status.pins), until that node is gone or no longer matches the NodeSet's placement. Needs onePerNode.",
        default=False)
    placement["properties"]["everyNode"] = _b(
        "One worker on every Kubernetes node that matches the placement (nodeSelector, required node affinity, "
        "tolerated taints), as a DaemonSet would; spec.replicas is not used. Each worker is named for its node "
        "(<cluster>-<nodeset>-<node>-<5 letters>), runs there even while the node is cordoned (a cordon drains it "
        "with spec.healthChecks.kubernetesNodes.drainCordoned), and is drained before its pod goes when the node stops "
        "matching or is deleted. Needs the permission to list Nodes (the operator's operator_read_nodes). Cannot be "
        "switched on or off on an existing NodeSet.", default=False)
    placement["x-kubernetes-validations"] = [
        _rule("!has(self.pinned) || !self.pinned || (has(self.onePerNode) && self.onePerNode)",
              PINNED_ONE_PER_NODE, ".pinned"),
        _rule("!has(self.everyNode) || !self.everyNode || ((!has(self.onePerNode) || !self.onePerNode) && "
              "(!has(self.pinned) || !self.pinned))", EVERY_NODE_ALONE, ".everyNode")]
    return placement


def nodeset_schema() -> Schema:
    spec = _o("Desired state of a group of identical Slurm worker nodes (one pod each).", {
        "clusterRef": _o("The SlurmCluster (same namespace) the nodes join; immutable.", {
            "name": _s("Name of the SlurmCluster.", maxLength=CLUSTER_NAME_MAX, pattern=DNS_LABEL_PATTERN),
        }, required=["name"], **_validations([_rule("self == oldSelf", CLUSTER_REF_IMMUTABLE)])),
        "replicas": _i("Number of nodes (fixed NodeSets; not used by an elastic or every-node one).", minimum=0,
                       maximum=65000, default=1),
        "elastic": _o("Elastic NodeSet: Slurm decides which nodes run. Every node name <cluster>-<nodeset>-<i> "
                      "(i < maxNodes) is in Slurm from the start, powered down; Slurm's power saving powers up "
                      "exactly the nodes a job was given and powers idle ones down after "
                      "SlurmCluster spec.slurm.powerSaving.suspendTime; the operator creates and removes their "
                      "pods. Cannot be added to or removed from an existing NodeSet.", {
                          "maxNodes": _i("The most nodes of the set (node names <cluster>-<nodeset>-0 ... -<maxNodes-1>"
                                         "). A job asking for more is refused by Slurm at submission.",
                                         minimum=1, maximum=ELASTIC_MAX_NODES),
                          "minNodes": _i("Nodes kept powered up even when idle.", minimum=0,
                                         maximum=ELASTIC_MAX_NODES, default=0),
                      }, required=["maxNodes"], **_validations([
                          _rule("self.minNodes <= self.maxNodes", ELASTIC_MIN_ABOVE_MAX, ".minNodes")])),
        "resources": resources_schema("Resources of each node's slurmd container."),
        "gpu": _o("GPUs of each node.", {
            "count": _i("GPUs per node (0 = CPU-only nodes).", minimum=0, maximum=64, default=0),
            "type": _s("GPU type as Slurm sees it (Gres=gpu:<type>:<count>), e.g. h100; needs count > 0.",
                       maxLength=MAX_SHORT, pattern=GPU_TYPE_PATTERN),
            "resourceName": _s("Kubernetes extended resource of the GPUs.", maxLength=253,
                               pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9._]*[a-z0-9])?$",
                               default="nvidia.com/gpu"),
        }, default={}, **_validations([
            _rule("!has(self.type) || self.count > 0", GPU_TYPE_WITHOUT_COUNT, ".type")])),
        "features": _a("Slurm features of the nodes (the NodeSet name is always one; another NodeSet's name is "
                       "refused: it would move these nodes into that NodeSet).",
                       _s("A feature name.", maxLength=MAX_SHORT, pattern=FEATURE_PATTERN), 32,
                       **{"x-kubernetes-list-type": "set"}),
        "partitions": _a("Partitions the nodes join (empty: the cluster's default partition).",
                         _s("A partition name of the cluster.", maxLength=MAX_SHORT, pattern=PARTITION_NAME_PATTERN),
                         64, **{"x-kubernetes-list-type": "set"}),
        "placement": nodeset_placement_schema(),
        "featureLabelPrefix": _s("Labels of a worker's Kubernetes node whose key starts with this prefix become "
                                 "Slurm features of the worker: the rest of the key, when the value is 'true' or "
                                 "empty, else <rest>_<value> ('false' gives none). Kept up to date while the "
                                 "labels change, without a slurmctld restart; features of the NodeSet and an "
                                 "administrator's are never touched. Needs the opt-in to read Nodes "
                                 "(operator_read_nodes). Not for an elastic NodeSet. Example: "
                                 "feature.node.kubernetes.io/",
                                 minLength=1, maxLength=253, pattern=FEATURE_LABEL_PREFIX_PATTERN),
        "drainTimeout": _s("How long a scale-in, maintenance or the NodeSet's removal waits for a draining node's "
                           "jobs; then onDrainTimeout applies. Not rolling updates: see "
                           "updateStrategy.proceedAfter.",
                           maxLength=32, pattern=GO_DURATION_PATTERN, default="30m"),
        "onDrainTimeout": _s("Proceed: once drainTimeout has passed, the node's pod is removed even with jobs on it "
                             "(they are killed; an Event DrainTimeoutExpired names them). Wait: never; the node "
                             "waits for its jobs.",
                             enum=["Proceed", "Wait"], default="Proceed"),
        "updateStrategy": _o("How a changed pod template (image, resources, settings) reaches the running nodes: "
                             "each outdated node is drained (reason 'soperator: update'), its pod replaced once "
                             "the node is idle, and the new node resumed. A node's running jobs are waited for "
                             "as long as they run, unless proceedAfter says otherwise.", {
                                 "maxUnavailable": _i("Nodes of this set drained or being replaced at the same "
                                                      "time.", minimum=1, maximum=65000, default=1),
                                 "proceedAfter": _s(
                                     "Replace an outdated node's pod this long after its drain even with jobs on "
                                     "it: they are killed, and an Event DrainTimeoutExpired names the node and its "
                                     "jobs. Unset (the default): a rolling update waits as long as the jobs run.",
                                     maxLength=32, pattern=GO_DURATION_PATTERN),
                             }, default={}),
        "image": _s("Worker image of this NodeSet (default: the cluster's spec.images.worker).", maxLength=MAX_PATH,
                    pattern=IMAGE_PATTERN),
        "healthChecks": nodeset_health_checks_schema(),
    }, required=["clusterRef"], **_validations([
        _rule("has(self.elastic) == has(oldSelf.elastic)", ELASTIC_SWITCH),
        _rule("!has(self.elastic) || !has(self.placement) || !has(self.placement.everyNode) || "
              "!self.placement.everyNode", EVERY_NODE_ELASTIC, ".placement.everyNode"),
        _rule("!has(self.elastic) || !has(self.featureLabelPrefix)", FEATURE_LABELS_ELASTIC, ".featureLabelPrefix"),
        _rule("(has(self.placement) && has(self.placement.everyNode) && self.placement.everyNode) == "
              "(has(oldSelf.placement) && has(oldSelf.placement.everyNode) && oldSelf.placement.everyNode)",
              EVERY_NODE_SWITCH, ".placement.everyNode")]))

    status = {
        "type": "object",
        "description": "Observed state, written by the operator.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": _i("The .metadata.generation last reconciled.", format="int64", minimum=0),
            "replicas": _i("Pods that exist.", minimum=0),
            "readyReplicas": _i("Pods that are ready.", minimum=0),
            "selector": _s("Label selector of the pods (for the scale subresource and autoscalers).", maxLength=1024),
            "idle": _i("Slurm nodes IDLE (not drained).", minimum=0),
            "allocated": _i("Slurm nodes ALLOCATED: every CPU in use (not drained).", minimum=0),
            "mixed": _i("Slurm nodes MIXED: some CPUs in use (not drained).", minimum=0),
            "drained": _i("Slurm nodes DRAINING or DRAINED.", minimum=0),
            "down": _i("Slurm nodes DOWN or not responding.", minimum=0),
            "updatedReplicas": _i("Pods on the current template.", minimum=0),
            "poweredUp": _i("Elastic: nodes Slurm has powered up whose slurmd registered.", minimum=0),
            "poweringUp": _i("Elastic: nodes Slurm is powering up (their pods starting).", minimum=0),
            "poweredDown": _i("Elastic: nodes powered down or powering down (no pod).", minimum=0),
            "failed": _i("Elastic: nodes that did not come up within the resume timeout (DOWN, no pod).",
                         minimum=0),
            "outdatedReplicas": _i("Pods on an older template, waiting to be replaced by the rolling update.",
                                   minimum=0),
            "rollingUpdate": _o("Present while a rolling update waits for jobs: the nodes it drained that still run "
                                "jobs.", {
                                    "waitingFor": _a("One entry per drained outdated node with jobs.", _o(
                                        "A node the rolling update waits for.", {
                                            "node": _s("The Slurm node (= pod) name.", maxLength=253),
                                            "jobs": _a("Slurm job ids running on it (absent: not known; the "
                                                       "first 1024).", _s("A job id.", maxLength=64), 1024),
                                            "since": _s("When it was drained (RFC 3339).", format="date-time"),
                                            "proceedAt": _s("When its pod is replaced even with jobs (only with "
                                                            "spec.updateStrategy.proceedAfter).",
                                                            format="date-time"),
                                        }), 65000),
                                    "summary": _s("The same in one line (kubectl get nodeset).", maxLength=1024),
                                }),
            "labelFeatures": _m("The Slurm features each worker has from its Kubernetes node's labels "
                                "(spec.featureLabelPrefix), as last applied: the operator removes exactly these "
                                "when a label goes, never a feature it did not add.",
                                _a("Features from labels.", _s("A feature.", maxLength=253), 64), 65000),
            "labelsRefused": _a("Node labels refused now (spec.featureLabelPrefix, the cluster's spec.topology): "
                                "each also an Event LabelRefused when first seen.",
                                _s("What and why.", maxLength=1024), 1024),
            "pins": _m("spec.placement.pinned: the Kubernetes node each worker is pinned to (where it last ran).",
                       _s("A Kubernetes node name.", maxLength=253), 65000),
            "workerNodes": _m("spec.placement.everyNode: each worker (Slurm node = pod name) and the Kubernetes "
                              "node it is for.", _s("A Kubernetes node name.", maxLength=253), 65000),
            "podBackoff": _m("spec.placement.everyNode: each worker whose pods failed in a row (the kubelet refused "
                             "them): made again at once after the first failure, then after 10 s, 20 s, ... at most "
                             "5 min. Forgotten once a pod of it is ready.", _o("A worker's failures.", {
                                 "failures": _i("Pods failed in a row.", minimum=1),
                                 "retryAt": _s("When its next pod is made; the failed pod is kept until then "
                                               "(RFC 3339).", format="date-time"),
                                 "uid": _s("The failed pod counted last.", maxLength=128),
                             }), 65000),
            "conditions": _conditions_schema(),
        },
    }
    return _root("A group of identical Slurm worker nodes of a SlurmCluster.", spec, status,
                 _name_rules("NodeSet", NODESET_NAME_MAX) + [_rule("!self.metadata.name.matches('-[0-9]+$')",
                                                                   NODESET_NAME_ORDINAL)])


def _crd(plural: str, kind: str, short_names: Iterable[str], schema: Schema, columns: list[KubeObject],
         scale: dict[str, str] | None = None) -> KubeObject:
    subresources: KubeObject = {"status": {}}
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


def crds() -> list[KubeObject]:
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
        {"name": "Allocated", "type": "integer", "jsonPath": ".status.allocated"},
        {"name": "Mixed", "type": "integer", "jsonPath": ".status.mixed"},
        {"name": "Drained", "type": "integer", "jsonPath": ".status.drained"},
        {"name": "Down", "type": "integer", "jsonPath": ".status.down", "priority": 1},
        {"name": "Max", "type": "integer", "jsonPath": ".spec.elastic.maxNodes", "priority": 1},
        {"name": "Up", "type": "integer", "jsonPath": ".status.poweredUp"},
        {"name": "Powering", "type": "integer", "jsonPath": ".status.poweringUp"},
        {"name": "Off", "type": "integer", "jsonPath": ".status.poweredDown"},
        {"name": "Failed", "type": "integer", "jsonPath": ".status.failed", "priority": 1},
        {"name": "Roll Waits For", "type": "string", "jsonPath": ".status.rollingUpdate.summary"},
        copy.deepcopy(age),
    ], scale={"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
              "labelSelectorPath": ".status.selector"})
    return [cluster, nodeset]
