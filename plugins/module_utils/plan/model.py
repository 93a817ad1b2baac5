# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the planners share: the :class:`Plan` they fill, the :class:`Context` they read, and small readers of
observed objects. Pure.

Each concern planner (``scale.py``, ``rolls.py``, ``maintenance.py``, ``login.py``, ``components.py``,
``projection.py``) is a function of a Context that writes its own fields of the Plan (its docstring names them);
``converge.plan`` runs them in order.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations, values

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


def name(obj):
    return obj["metadata"]["name"]


def replicas(sts):
    return int(((sts or {}).get("spec") or {}).get("replicas", 1))


def deleting(obj):
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def nodeset_pods(pods, set_name):
    """``{name: pod}`` of a NodeSet's worker pods, by their labels (an every-node NodeSet's have no ordinal)."""
    return dict((pod_name, pod) for pod_name, pod in pods.items()
                if labels(pod).get(names.LABEL_NODESET) == set_name
                and labels(pod).get(names.LABEL_COMPONENT) == names.COMPONENT_WORKER)


def pod_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((pod.get("status") or {}).get("conditions") or []))


def template_hash(sts):
    return ((sts.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_TEMPLATE_HASH)


def revision_seen(sts):
    """Whether the StatefulSet controller has seen the live template (its update revision is the current one)."""
    status = sts.get("status") or {}
    return bool(status.get("updateRevision")) and int(status.get("observedGeneration") or 0) >= int(
        sts["metadata"].get("generation") or 0)


def settled(sts):
    """Whether a StatefulSet's controller has done all it was asked: it saw the live template, and every pod is
    made, ready and from the update revision (by its status: no pod need be read to know it)."""
    status = sts.get("status") or {}
    want = replicas(sts)
    return revision_seen(sts) and all(int(status.get(k) or 0) == want
                                      for k in ("replicas", "readyReplicas", "updatedReplicas"))


def worker_pods_needed(cluster_name, nodesets, statefulsets):
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


def drain_timeout(nodeset):
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

    def __init__(self, nodeset, mode, leaving):
        self.nodeset = nodeset
        self.mode = mode
        self.leaving = leaving

    @property
    def name(self):
        return name(self.nodeset)

    def __repr__(self):
        return "View(%s, %s%s)" % (self.name, self.mode, ", leaving" if self.leaving else "")


class Context(object):
    """What every planner reads: the validated SlurmCluster, its NodeSets as :class:`View` s (``valid``, and
    ``leaving``: being deleted, defaulted), the invalid ones' names (``invalid``: ``{name: [SpecError]}``), what was
    observed (see ``converge.plan``) and the time."""

    def __init__(self, cluster, valid, leaving, invalid, observed, now):
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

    def of(self, mode, leaving=False):
        """The NodeSets of one mode (a mode's own module asks: never a planner that spans the modes), the valid ones
        or (``leaving``) those being deleted."""
        return [v.nodeset for v in self.views if v.mode == mode and v.leaving == leaving]

    def replace(self, nodeset):
        """This pass renders ``nodeset`` (a copy of a valid one, ``elastic.with_max``) in place of its original."""
        for view in self.views:
            if not view.leaving and view.name == name(nodeset):
                view.nodeset = nodeset

    # The fixed NodeSets (a StatefulSet each), for the fixed mode's own planners (scale.py, rolls.py, pins.py).
    @property
    def valid(self):
        return self.of(values.FIXED)

    @property
    def leaving(self):
        return self.of(values.FIXED, leaving=True)

    @property
    def workers(self):
        """The fixed NodeSets whose workers this pass decides about: the valid ones and those being deleted."""
        return self.valid + self.leaving

    def worker_statefulset(self, nodeset):
        return names.worker_name(self.name, name(nodeset))

    def worker_nodes(self):
        """The Slurm node names of every live worker pod slot of the fixed NodeSets (each live StatefulSet's
        replicas)."""
        found = []
        for ns in self.workers:
            sts_name = self.worker_statefulset(ns)
            sts = self.statefulsets.get(sts_name)
            if sts is not None:
                found += [names.pod_name(sts_name, o) for o in range(replicas(sts))]
        return found


class Plan(object):
    """What one reconcile does. Built by ``converge.plan``; the adapter carries it out in this order: drain,
    resume, apply (and prune), delete node records; then writes the status."""

    def __init__(self):
        self.manifests = []          # every object to apply, in apply order
        self.keep = []               # (kind, name) of live objects prune must leave alone this time
        self.scale = {}              # StatefulSet name -> replicas, for workers of NodeSets being deleted
        self.drain = {}              # reason -> [node names]
        self.resume = []             # node names whose drain of ours is over
        self.delete_nodes = []       # Slurm node records whose pods are gone for good
        self.delete_pods = []        # (name, uid) of outdated worker pods to replace (their nodes drained, idle)
        self.down = {}               # reason -> [node names] set DOWN right before their pods go with jobs
        self.release = []            # NodeSets (being deleted) whose finalizer may go: nothing of them is left
        self.pending = []            # human-readable: what keeps the cluster from settling
        self.underway = []           # the part of it a later pass completes by itself (drains, removals)
        self.deferred = []           # human-readable: work a later pass does, which keeps nothing from Ready
        self.login_outdated = None   # login pods on an older template (None: not known, no live StatefulSet)
        self.slurm_user_kept = None  # human-readable: why slurmctld keeps an older SlurmUser (None: it does not)
        self.components = {}         # condition type -> (status, reason, message) of optional components
        self.backup = None           # status.backup (plan/backup.py); None: no backups configured
        self.requeue_after = None    # seconds until the next look, None when settled
        self.invalid = {}            # nodeset name -> "path: message; ..."
        self.degraded = []           # human-readable: what failed and needs someone (a refused populate Job)
        self.cluster = None          # the validated, defaulted SlurmCluster the manifests were rendered from
        self.valid_nodesets = []     # ... and its valid NodeSets (defaulted)
        self.secrets_held = []       # Secrets a pod of the cluster mounts (it holds their keys)
        self.nodesets = {}           # nodeset name -> facts for its status (see scale.nodeset_facts)
        self.pod_conditions = {}     # worker pod name -> its SlurmNodeReady condition (projection.pod_condition)
        self.evict = []              # (pod name, uid, Kubernetes node, why): cordon that node, evict the pod
        self.give_up = []            # dicts (give_up_node): busy nodes whose pods go now, past a drain timeout
        self.create_pods = []        # Pod manifests: elastic nodes Slurm powered up, every-node workers to make
        self.power_up = []           # elastic nodes to power up (minNodes)
        self.power_down = []         # elastic nodes to power down once idle (an older pod template)
        self.power_down_force = []   # elastic nodes handed back after a failed resume
        self.events = []             # (nodeset name, type, reason, message) of elastic power changes
        self.set_features = {}       # Slurm node -> its features (labels under spec.featureLabelPrefix changed)
        self.label_events = []       # (nodeset name or None, message): node labels refused (node_labels.py)
        self.topology = None         # topology.conf text (spec.topology), None without one
        self.reconfigure = None      # why slurmctld must reread its configuration (scontrol reconfigure), or None
        self.slurm_config = None     # status.slurmConfig: the slurm.conf slurmctld was last given (slurm_config.py)
        self.read_mounted_config = False  # the planner needs the controller's mounted slurm.conf (observed)
        self.ungate = {}             # gated pinned worker pod -> (uid, its pin's node or None, patches): plan/pins.py
        self.ready = False
        self.phase = PHASE_PROGRESSING
        self.message = ""

    def wait(self, seconds, why):
        self.pending.append(why)
        self.underway.append(why)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def defer(self, seconds, why):
        """Work that waits on users (a login pod's open sessions): looked at again, but the cluster serves."""
        self.deferred.append(why)
        self.underway.append(why)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def drain_node(self, node, reason):
        self.drain.setdefault(reason, [])
        if node not in self.drain[reason]:
            self.drain[reason].append(node)

    def give_up_node(self, nodeset, node, why, setting, value, since, down_reason=None, pod_uid=None):
        """Record that ``node`` (a pod of ``nodeset``) goes with its jobs now, its drain older than ``setting``.
        ``pod_uid``: the pod is deleted (a rolling update), else the StatefulSet shrinks (scale-in, maintenance).
        ``down_reason``: the node is also set DOWN (with our reason) in the pass its pod goes, so that its jobs end as
        on a node failure: Slurm 24.11 never ends a batch job whose slurmd went, until SlurmdTimeout, nor ever when
        a new slurmd registers under the name (findings D.2). None where slurmctld itself may be going (maintenance:
        it stops in the same pass)."""
        if down_reason is not None:
            self.down.setdefault(down_reason, [])
            if node not in self.down[down_reason]:
                self.down[down_reason].append(node)
        self.give_up.append({"nodeset": name(nodeset), "nodeset_uid": (nodeset.get("metadata") or {}).get("uid"),
                             "node": node, "why": why, "setting": setting, "value": value, "since": since,
                             "pod_uid": pod_uid, "jobs": None})

    def nodes_with_jobs(self):
        """Nodes whose running jobs the status or an Event names: waited for by a rolling update, or given up."""
        found = [w["node"] for facts in self.nodesets.values() for w in facts.get("waitingFor") or ()]
        return sorted(set(found + [g["node"] for g in self.give_up]))

    def set_jobs(self, jobs):
        """Job ids per node (``{node: [ids]}``, a node absent: not known) into the waiting and given-up entries."""
        for entry in [w for facts in self.nodesets.values() for w in facts.get("waitingFor") or ()] + self.give_up:
            if entry["node"] in jobs:
                entry["jobs"] = list(jobs[entry["node"]])

    @property
    def changes_slurm(self):
        return bool(self.drain or self.resume or self.down or self.delete_nodes or self.power_up or self.power_down
                    or self.power_down_force or self.set_features or self.reconfigure)


def give_up_event(entry):
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
