# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the planners share: the :class:`Draft` they fill, the :class:`Context` they read (what was :class:`Observed`),
and small readers of observed objects. Pure.

Each concern planner (``scale.py``, ``rolls.py``, ``maintenance.py``, ``login.py``, ``components.py``,
``projection.py``) is a function of a Context that writes its own fields of the Draft (its docstring names them);
``converge.plan`` runs them in order and freezes the Draft into the tree the adapters get (``decided.Plan``). The
shapes the plan hands the adapters are named here, beside the fields that hold them, whichever planner makes them
(each planner imports this module: they cannot be defined there).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Collection, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypedDict

from ansible_collections.soperator.slurm.plugins.module_utils import names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations, values
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors
from ansible_collections.soperator.slurm.plugins.module_utils.api.references import Owner
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.version import SLURM
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster, Spec

# The label the StatefulSet controller puts on each pod: the revision of the template it was made from.
REVISION_LABEL = "controller-revision-hash"
# The label the Job controller puts on its pods (older clusters: job-name).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"

# How soon to look again (seconds) while something is under way.
REQUEUE_DRAINING = 15
REQUEUE_PROGRESSING = 5
REQUEUE_SLURM_UNREACHABLE = 30

# The Event on a NodeSet when a node goes with its jobs, its drain older than the NodeSet's timeout.
EVENT_DRAIN_TIMEOUT_EXPIRED = "DrainTimeoutExpired"
_EVENT_JOBS = 50  # job ids an Event names (its message is at most 1024 bytes)

PHASE_READY = "Ready"
PHASE_PROGRESSING = "Progressing"
PHASE_MAINTENANCE = "Maintenance"


class NodeFacts(TypedDict):
    """A Kubernetes Node as the planners read it (``every_node.node_facts`` makes it from the Node)."""

    unschedulable: bool  # cordoned
    labels: Dict[str, str]
    taints: List[KubeObject]  # {key, value, effect}
    conditions: Dict[str, str]  # condition type -> status ("True", "False", "Unknown")
    ready_since: Optional[int]  # epoch seconds of the Ready condition's last transition (None: not reported)


class Observed(TypedDict, total=False):
    """What the adapter observed for one pass (``converge.plan``'s ``observed``, ``Context.observed``): a plain dict,
    every key optional (the operator's cache check gives a few: no Slurm, no Nodes)."""

    statefulsets: Dict[str, KubeObject]  # name -> each StatefulSet of the cluster
    pods: Dict[str, KubeObject]  # name -> each pod of the cluster (the workers only when worker_pods_read)
    worker_pods_read: bool  # False: the worker pods were left out of pods (worker_pods_needed allowed it); absent: True
    slurm: Optional[Dict[str, SlurmNode]]  # Slurm's nodes (scontrol.parse_show_node); None: not answered or not asked
    slurm_error: Optional[str]  # why slurmctld did not answer (the status message says it); None: it was not asked
    # name -> the Kubernetes nodes of the worker pods and pins (every one for every-node sets); None: not read
    k8s_nodes: Optional[Dict[str, NodeFacts]]
    k8s_nodes_error: Optional[str]  # why the Kubernetes nodes (or Slurm's topology) could not be read
    served: Collection[str]  # the optional kinds the cluster serves (kinds.optional_names): rendered only then
    owners: List[Owner]  # every SlurmCluster and NodeSet of the namespace (converge.validate: name collisions)
    # name -> labels of the Secrets taken only when marked (values.marked_secret_refs); absent: not judged
    secrets: Dict[str, Dict[str, str]]
    identity: Optional[str]  # the controller's sssd sidecar's status file (spec.identity: IdentityReady)
    identity_error: Optional[str]  # why identity was not read
    login_sessions: Dict[str, Optional[int]]  # outdated login pod -> its open sessions (None: not known)
    mounted_slurm_conf: Optional[str]  # the controller pod's copy, once Plan.read_mounted_config asked (None: unread)
    mounted_topology: Optional[str]  # the controller pod's mounted topology.conf (spec.topology; None: none)
    live_topology: Optional[str]  # topology.conf of the live slurm-config ConfigMap: what was decided last
    slurm_topology: Optional[Dict[str, str]]  # Slurm node -> its lowest switch as slurmctld places it; None: not read
    live_config_written: Optional[int]  # epoch seconds we last changed the slurm-config ConfigMap (None: not known)


# What a plan hands the adapters.
ObjectRef = Tuple[str, str]  # (kind, name) of a live object
PodRef = Tuple[str, Optional[str]]  # (pod name, its uid: the delete's precondition)
Eviction = Tuple[str, Optional[str], Optional[str], str]  # (pod name, uid, its Kubernetes node, the drain reason)
Event = Tuple[str, str, str, str]  # (nodeset name, type, reason, message): an Event on the NodeSet
LabelEvent = Tuple[Optional[str], str]  # (nodeset name or None: the SlurmCluster, message): a LabelRefused Event
ComponentCondition = Tuple[str, str, str]  # (status, reason, message) of a condition of the SlurmCluster
# A worker pod deleted at once, its Kubernetes node lost (lost.plan_lost): uid the delete's precondition (never the
# replacement), host its Kubernetes node, nodeset the NodeSet whose Event says why.
LostPod = NamedTuple("LostPod", [("pod", str), ("uid", Optional[str]), ("host", str), ("nodeset", str), ("why", str)])
Ungate = Tuple[Optional[str], Optional[str], List[KubeObject]]  # (pod uid, its pin's node or None: released, patches)


class Waiting(TypedDict):
    """A drained node with jobs a rolling update waits for (``rolls.roll_pods``; a NodeSet's ``waitingFor``)."""

    node: str
    since: int  # epoch seconds of its drain
    proceedAt: Optional[int]  # epoch seconds it is replaced with its jobs (updateStrategy.proceedAfter); None: never
    jobs: Optional[List[str]]  # its running job ids, filled in by the adapter (decided.Plan.with_jobs); None: not known


class GiveUp(TypedDict):
    """A busy node whose pod goes now, its drain older than a setting allows (``Draft.give_up_node``); the adapter
    fills in ``jobs`` and says it in an Event (:func:`give_up_event`)."""

    nodeset: str
    nodeset_uid: Optional[str]
    node: str
    why: str  # what removes it: "scale-in", "removal", "maintenance", "rolling update", ...
    setting: str  # the field whose time passed (spec.drainTimeout, spec.updateStrategy.proceedAfter)
    value: str  # its value
    since: int  # epoch seconds of the drain
    pod_uid: Optional[str]  # the pod is deleted (a rolling update); None: its StatefulSet shrinks
    jobs: Optional[List[str]]  # its running job ids (None: not known)


class PodCondition(TypedDict):
    """A worker pod's ``SlurmNodeReady`` condition, without lastTransitionTime (``projection.pod_condition``)."""

    type: str
    status: str  # "True" while its Slurm node serves jobs
    reason: str  # the node's state in CamelCase: Idle, Allocated, Drained, NotRegistered, ...
    message: str  # the state and the drain reason


class NodeSetFacts(TypedDict, total=False):
    """What a NodeSet's status reports (``status.nodeset_status``), each key written by the planner that knows it."""

    statefulset: Optional[str]  # its workers' StatefulSet; None: elastic and every-node sets have none
    replicas: int  # its pods now (a shrink keeps the victims until they are drained)
    desired: int  # the pods it wants
    readyReplicas: int
    currentReplicas: int  # the pods its StatefulSet (or the planner) counts
    serving: int  # its Slurm nodes up
    leaving: bool  # being deleted
    idle: int  # Slurm's node counts (projection.COUNT_KEYS), with Slurm's view only
    allocated: int
    mixed: int
    drained: int
    down: int
    updatedReplicas: int  # rolls.py: pods on the current template,
    outdatedReplicas: int  # ... and on an older one
    waitingFor: List[Waiting]  # rolls.py
    note: Optional[str]  # rolls.py: why a roll waits past drainTimeout
    nodes: List[str]  # elastic and every-node sets: their Slurm node names
    elastic: bool  # elastic.py, with its power states:
    poweredUp: int
    poweringUp: int
    poweredDown: int
    failed: int
    everyNode: bool  # every_node.py, with:
    workerNodes: Dict[str, Optional[str]]  # worker -> its Kubernetes node
    problem: str  # what keeps it from Ready (the Nodes not read, maxNodeCount reached)
    podBackoff: Dict[str, KubeObject]  # worker -> {failures, retryAt, uid} (every_node.backoff)
    unschedulable: List[str]  # "<pod>: <the scheduler's message>" (node_labels.plan_unplaced; every-node failures)
    labelFeatures: Dict[str, List[str]]  # node_labels.py: Slurm node -> the features we added
    labelsRefused: List[str]  # node_labels.py: the node labels refused now
    pins: Dict[str, str]  # pins.py: worker -> the Kubernetes node it is pinned to


class BackupStatus(TypedDict, total=False):
    """``status.backup`` (``backup.plan_backup``): times are RFC 3339."""

    watchedSince: str  # the overdue clock's start while no backup succeeded
    lastSuccessTime: str
    snapshot: str  # the last success's report (images/backup/soperator-backup):
    sizeBytes: int
    addedBytes: int
    files: int
    durationSeconds: float
    lastFailureTime: str
    lastFailure: str  # the last failure's message


class SlurmConfigStatus(TypedDict):
    """``status.slurmConfig`` (``slurm_config.plan_slurm_config``): the slurm.conf slurmctld was last given."""

    digest: str
    restartDigest: str  # of the part that needs a restart (render/controller.restart_digest)
    appliedBy: str  # Reconfigured or Restarted
    lastAppliedTime: str  # RFC 3339


def name(obj: KubeObject) -> str:
    return obj["metadata"]["name"]


def replicas(sts: KubeObject | None) -> int:
    return int(((sts or {}).get("spec") or {}).get("replicas", 1))


def deleting(obj: KubeObject) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def labels(obj: KubeObject) -> Dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def nodeset_pods(pods: Mapping[str, KubeObject], set_name: str) -> dict[str, KubeObject]:
    """``{name: pod}`` of a NodeSet's worker pods, by their labels (an every-node NodeSet's have no ordinal)."""
    return dict((pod_name, pod) for pod_name, pod in pods.items()
                if labels(pod).get(names.LABEL_NODESET) == set_name
                and labels(pod).get(names.LABEL_COMPONENT) == names.COMPONENT_WORKER)


def pod_ready(pod: KubeObject) -> bool:
    return readiness.ready(pod)


def template_hash(sts: KubeObject) -> str | None:
    return ((sts.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_TEMPLATE_HASH)


def revision_seen(sts: KubeObject) -> bool:
    """Whether the StatefulSet controller has seen the live template (its update revision is the current one)."""
    status = sts.get("status") or {}
    return bool(status.get("updateRevision")) and int(status.get("observedGeneration") or 0) >= int(
        sts["metadata"].get("generation") or 0)


def settled(sts: KubeObject) -> bool:
    """Whether a StatefulSet's controller has done all it was asked: it saw the live template, and every pod is
    made, ready and from the update revision (by its status: no pod need be read to know it)."""
    status = sts.get("status") or {}
    want = replicas(sts)
    return revision_seen(sts) and all(int(status.get(k) or 0) == want
                                      for k in ("replicas", "readyReplicas", "updatedReplicas"))


def worker_pods_needed(cluster_name: str, nodesets: Sequence[NodeSet],
                       statefulsets: Mapping[str, KubeObject]) -> bool:
    """Whether a pass without Slurm's view must read the worker pods: unless every worker StatefulSet of the cluster
    belongs to a NodeSet that stays and is :func:`settled`, the planners need them (rolls, leaving NodeSets, pods
    going, readiness problems). With Slurm's view they always do (its states go onto every worker pod); a pass that
    would generate a key Secret reads them too (which pods hold the keys). Pure."""
    staying = set(names.worker_name(cluster_name, name(ns)) for ns in nodesets if not deleting(ns))
    if len(staying) != len(nodesets) or any(values.every_node(ns.get("spec") or {}) for ns in nodesets):
        return True  # a NodeSet leaves, or an every-node set's workers (no StatefulSet to say they are settled)
    for sts_name, sts in statefulsets.items():
        if labels(sts).get(names.LABEL_COMPONENT) != names.COMPONENT_WORKER:
            continue
        if sts_name not in staying or not settled(sts):
            return True
    return False


def drain_timeout(nodeset: NodeSet) -> float | None:
    """Seconds after which a scale-in, maintenance or removal gives up on a drained node's jobs; None: never
    (onDrainTimeout: Wait)."""
    if nodeset["spec"].get("onDrainTimeout") == "Wait":
        return None
    return durations.seconds(nodeset["spec"]["drainTimeout"])


class View(object):
    """One NodeSet as this pass sees it: the (defaulted) object, its mode (``values.mode``: which implementation in
    ``plan/modes.py`` decides its workers) and whether it is being deleted. Planners that span every NodeSet
    (maintenance, labels, topology, projection, health) iterate views and ask their mode; only a mode's own module
    filters views by mode."""

    __slots__ = ("nodeset", "mode", "leaving")
    nodeset: NodeSet  # validated and defaulted (one being deleted: defaulted)
    mode: str  # values.FIXED, values.ELASTIC or values.EVERY_NODE
    leaving: bool  # being deleted

    def __init__(self, nodeset: NodeSet, mode: str, leaving: bool) -> None:
        self.nodeset = nodeset
        self.mode = mode
        self.leaving = leaving

    @property
    def name(self) -> str:
        return name(self.nodeset)

    def __repr__(self) -> str:
        return "View(%s, %s%s)" % (self.name, self.mode, ", leaving" if self.leaving else "")


class Context(object):
    """What every planner reads: the validated SlurmCluster, its NodeSets as :class:`View` s (``valid``, and
    ``leaving``: being deleted, defaulted), the invalid ones' names (``invalid``: ``{name: [SpecError]}``), what was
    observed (:class:`Observed`) and the time."""

    cluster: SlurmCluster  # validated and defaulted
    name: str  # the SlurmCluster's
    spec: Spec  # its spec
    views: List[View]  # the valid NodeSets, then those being deleted
    invalid: Mapping[str, Errors]  # nodeset name -> why it is invalid (left alone this pass)
    observed: Observed  # what the adapter observed, as given
    statefulsets: Dict[str, KubeObject]  # observed["statefulsets"] ({} when absent)
    pods: Dict[str, KubeObject]  # observed["pods"] ({} when absent)
    slurm: Optional[Dict[str, SlurmNode]]  # observed["slurm"]: None without Slurm's view
    now: int  # epoch seconds

    def __init__(self, cluster: SlurmCluster, valid: Sequence[NodeSet], leaving: Sequence[NodeSet],
                 invalid: Mapping[str, Errors], observed: Observed, now: int) -> None:
        self.cluster = cluster
        self.name = name(cluster)
        self.spec = cluster["spec"]
        self.views = ([View(ns, values.mode(ns["spec"]), False) for ns in valid]
                      + [View(ns, values.mode(ns["spec"]), True) for ns in leaving])
        self.invalid = invalid
        self.observed = observed
        self.statefulsets = observed.get("statefulsets") or {}
        self.pods = observed.get("pods") or {}
        self.slurm = observed.get("slurm")
        self.now = now

    def of(self, mode: str, leaving: bool = False) -> list[NodeSet]:
        """The NodeSets of one mode (a mode's own module asks: never a planner that spans the modes), the valid ones
        or (``leaving``) those being deleted."""
        return [v.nodeset for v in self.views if v.mode == mode and v.leaving == leaving]

    def replace(self, nodeset: NodeSet) -> None:
        """This pass renders ``nodeset`` (a copy of a valid one, ``elastic.with_max``) in place of its original."""
        for view in self.views:
            if not view.leaving and view.name == name(nodeset):
                view.nodeset = nodeset

    # The fixed NodeSets (a StatefulSet each), for the fixed mode's own planners (scale.py, rolls.py, pins.py).
    @property
    def valid(self) -> list[NodeSet]:
        return self.of(values.FIXED)

    @property
    def leaving(self) -> list[NodeSet]:
        return self.of(values.FIXED, leaving=True)

    @property
    def workers(self) -> list[NodeSet]:
        """The fixed NodeSets whose workers this pass decides about: the valid ones and those being deleted."""
        return self.valid + self.leaving

    def worker_statefulset(self, nodeset: NodeSet) -> str:
        return names.worker_name(self.name, name(nodeset))

    def worker_nodes(self) -> list[str]:
        """The Slurm node names of every live worker pod slot of the fixed NodeSets (each live StatefulSet's
        replicas)."""
        found: list[str] = []
        for ns in self.workers:
            sts_name = self.worker_statefulset(ns)
            sts = self.statefulsets.get(sts_name)
            if sts is not None:
                found += [names.pod_name(sts_name, o) for o in range(replicas(sts))]
        return found


class Draft(object):
    """What one reconcile does, while the planners decide it (``converge.plan``, which then freezes it into a
    ``decided.Plan``: the adapters never see a Draft)."""

    manifests: List[KubeObject]  # every object to apply, in apply order
    keep: List[ObjectRef]  # live objects prune must leave alone this time
    scale: Dict[str, int]  # StatefulSet name -> replicas, for workers of NodeSets being deleted
    drain: Dict[str, List[str]]  # reason -> node names
    resume: List[str]  # node names whose drain of ours is over
    delete_nodes: List[str]  # Slurm node records whose pods are gone for good
    delete_pods: List[PodRef]  # outdated or going worker pods to delete (their nodes drained, idle)
    down: Dict[str, List[str]]  # reason -> node names set DOWN right before their pods go with jobs
    release: List[str]  # NodeSets (being deleted) whose finalizer may go: nothing of them is left
    pending: List[str]  # human-readable: what keeps the cluster from settling
    underway: List[str]  # the part of it a later pass completes by itself (drains, removals)
    deferred: List[str]  # human-readable: work a later pass does, which keeps nothing from Ready
    login_outdated: Optional[int]  # login pods on an older template (None: not known, no live StatefulSet)
    slurm_user_kept: Optional[str]  # human-readable: why slurmctld keeps an older SlurmUser (None: it does not)
    components: Dict[str, ComponentCondition]  # condition type -> of an optional component
    backup: Optional[BackupStatus]  # status.backup; None: no backups configured
    requeue_after: Optional[int]  # seconds until the next look, None when settled
    invalid: Dict[str, str]  # nodeset name -> "path: message; ..."
    degraded: List[str]  # human-readable: what failed and needs someone (a refused populate Job)
    cluster: Optional[SlurmCluster]  # the validated, defaulted SlurmCluster the manifests were rendered from
    valid_nodesets: List[NodeSet]  # ... and its valid NodeSets (defaulted)
    secrets_held: List[str]  # Secrets a pod of the cluster mounts (it holds their keys)
    nodesets: Dict[str, NodeSetFacts]  # nodeset name -> facts for its status
    pod_conditions: Dict[str, PodCondition]  # worker pod name -> its SlurmNodeReady condition
    evict: List[Eviction]  # cordon the pod's Kubernetes node, evict the pod
    replace_lost: List[LostPod]  # delete the pod now, no grace period (its kubelet is lost)
    give_up: List[GiveUp]  # busy nodes whose pods go now, past a drain timeout
    create_pods: List[KubeObject]  # Pod manifests: elastic nodes Slurm powered up, every-node workers to make
    power_up: List[str]  # elastic nodes to power up (minNodes)
    power_down: List[str]  # elastic nodes to power down once idle (an older pod template)
    power_down_force: List[str]  # elastic nodes handed back after a failed resume
    events: List[Event]  # of elastic power changes
    set_features: Dict[str, List[str]]  # Slurm node -> its features (labels under spec.featureLabelPrefix changed)
    label_events: List[LabelEvent]  # node labels refused (node_labels.py)
    topology: Optional[str]  # topology.conf text (spec.topology), None without one
    reconfigure: Optional[str]  # why slurmctld must reread its configuration (scontrol reconfigure), or None
    slurm_config: Optional[SlurmConfigStatus]  # status.slurmConfig (slurm_config.py); None: not recorded yet
    read_mounted_config: bool  # the planner needs the controller's mounted slurm.conf (observed)
    ungate: Dict[str, Ungate]  # gated pinned worker pod -> how to let it go (pins.py)
    ready: bool  # the Ready condition (components.plan_readiness)
    phase: str  # PHASE_READY, PHASE_PROGRESSING or PHASE_MAINTENANCE
    message: str  # status: what is ready, or what is not

    def __init__(self) -> None:
        self.manifests = []
        self.keep = []
        self.scale = {}
        self.drain = {}
        self.resume = []
        self.delete_nodes = []
        self.delete_pods = []
        self.down = {}
        self.release = []
        self.pending = []
        self.underway = []
        self.deferred = []
        self.login_outdated = self.slurm_user_kept = self.backup = self.requeue_after = None
        self.components = {}
        self.invalid = {}
        self.degraded = []
        self.cluster = None
        self.valid_nodesets = []
        self.secrets_held = []
        self.nodesets = {}
        self.pod_conditions = {}
        self.evict = []
        self.replace_lost = []
        self.give_up = []
        self.create_pods = []
        self.power_up = []
        self.power_down = []
        self.power_down_force = []
        self.events = []
        self.set_features = {}
        self.label_events = []
        self.topology = self.reconfigure = self.slurm_config = None
        self.read_mounted_config = False
        self.ungate = {}
        self.ready = False
        self.phase = PHASE_PROGRESSING
        self.message = ""

    def wait(self, seconds: int, why: str) -> None:
        self.pending.append(why)
        self.underway.append(why)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def defer(self, seconds: int, why: str) -> None:
        """Work that waits on users (a login pod's open sessions): looked at again, but the cluster serves."""
        self.deferred.append(why)
        self.underway.append(why)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def drain_node(self, node: str, reason: str) -> None:
        self.drain.setdefault(reason, [])
        if node not in self.drain[reason]:
            self.drain[reason].append(node)

    def give_up_node(self, nodeset: NodeSet, node: str, why: str, setting: str, value: str, since: int,
                     down_reason: str | None = None, pod_uid: str | None = None) -> None:
        """Record that ``node`` (a pod of ``nodeset``) goes with its jobs now, its drain older than ``setting``.
        ``pod_uid``: the pod is deleted (a rolling update), else the StatefulSet shrinks (scale-in, maintenance).
        ``down_reason``: the node is also set DOWN (with our reason) in the pass its pod goes, so that its jobs end as
        on a node failure where the release lets them outlive their slurmd (``SLURM.jobs_outlive_their_slurmd``,
        slurm/version.py). None where slurmctld itself may be going (maintenance: it stops in the same pass)."""
        if down_reason is not None and SLURM.jobs_outlive_their_slurmd:
            self.down.setdefault(down_reason, [])
            if node not in self.down[down_reason]:
                self.down[down_reason].append(node)
        self.give_up.append({"nodeset": name(nodeset), "nodeset_uid": (nodeset.get("metadata") or {}).get("uid"),
                             "node": node, "why": why, "setting": setting, "value": value, "since": since,
                             "pod_uid": pod_uid, "jobs": None})


def give_up_event(entry: GiveUp) -> tuple[str, str, str]:
    """(type, reason, message) of the Event that says a node went with its jobs (an entry of ``Plan.give_up``, its
    ``jobs`` filled in by the adapter when Slurm named them)."""
    jobs = entry["jobs"]
    named = ", ".join((jobs or [])[:_EVENT_JOBS]) + (
        " and %d more" % (len(jobs) - _EVENT_JOBS) if jobs and len(jobs) > _EVENT_JOBS else "")
    killed = ("job(s) %s still running on it are killed" % named if jobs else
              "its jobs still running are killed" if jobs is None else "no job was left on it")
    action = "replaced by the rolling update" if entry["pod_uid"] else "removed by the %s" % entry["why"]
    setting = "%s: %s" % (entry["setting"], entry["value"])
    if entry["setting"] == "spec.drainTimeout":
        setting += ", spec.onDrainTimeout: Proceed"
    return ("Warning", EVENT_DRAIN_TIMEOUT_EXPIRED, "Pod %s %s: its Slurm node was drained at %s, longer ago than %s; "
            "%s" % (entry["node"], action, durations.iso(entry["since"]), setting, killed))
