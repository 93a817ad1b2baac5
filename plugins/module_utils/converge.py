# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reconcile of a SlurmCluster, decided: what to apply, which Slurm nodes to drain, resume or forget,
what status to report, and whether to look again soon.

Pure: the adapter (``_converge.py``) observes the cluster (the live SlurmCluster and NodeSets, the cluster's
StatefulSets and pods, Slurm's node table) and hands it to :func:`plan`; the operator runtime calls the same
function on its watch caches to decide whether a run is needed at all. Time is passed in.

No running job is ever killed by a plan, unless a setting of the NodeSet says after how long (``drainTimeout`` with
``onDrainTimeout: Proceed`` for scale-in, maintenance and removal; ``updateStrategy.proceedAfter`` for a rolling
update, unset by default), and then with an Event (``DrainTimeoutExpired``) naming the node and its jobs:

* a NodeSet that shrinks keeps the pods whose Slurm nodes are not drained and idle yet (StatefulSets remove
  their highest ordinals first); its victims are drained with ``soperator: scale-in``;
* a NodeSet being deleted (our finalizer holds it) shrinks to zero the same way;
* ``maintenance: true`` drains every worker with ``soperator: maintenance`` and scales the cluster to zero
  only once they are idle;
* what a plan cannot decide without Slurm (slurmctld not answering) is left as it is and reported pending,
  while everything else is still applied.

Drains of ours whose purpose is over (a scale-in cancelled, maintenance ended, a Kubernetes node uncordoned) are
resumed; drains with any other reason belong to an administrator (or to the health program on the node, which resumes
its own) and are never touched. Slurm's node states are projected onto the worker pods (``projection.py``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import copy
import re
import time

from ansible_collections.soperator.slurm.plugins.module_utils import (
    durations, identity, names, projection, render, schema,
)
from ansible_collections.soperator.slurm.plugins.module_utils import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils import status as st
from ansible_collections.soperator.slurm.plugins.module_utils import scale_in as nodes_core
from ansible_collections.soperator.slurm.plugins.module_utils.errors import SpecErrors

REASON_SCALE_IN = nodes_core.REASON_SCALE_IN
REASON_MAINTENANCE = names.DRAIN_REASON_PREFIX + " maintenance"
REASON_UPDATE = names.DRAIN_REASON_PREFIX + " update"
# The label the StatefulSet controller puts on each pod: the revision of the template it was made from.
REVISION_LABEL = "controller-revision-hash"
# The label the Job controller puts on its pods (older clusters: job-name).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"

# How soon to look again (seconds) while something is under way.
REQUEUE_DRAINING = 15
REQUEUE_PROGRESSING = 5
REQUEUE_SLURM_UNREACHABLE = 30

# Node states in which a registered node serves jobs (flags such as DRAIN are judged separately).
_SERVING_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")

# The Event on a NodeSet when a node goes with its jobs, its drain older than the NodeSet's timeout.
EVENT_DRAIN_TIMEOUT_EXPIRED = "DrainTimeoutExpired"
_EVENT_JOBS = 50  # job ids an Event names (its message is at most 1024 bytes)

PHASE_READY = "Ready"
PHASE_PROGRESSING = "Progressing"
PHASE_MAINTENANCE = "Maintenance"


def _name(obj):
    return obj["metadata"]["name"]


def _replicas(sts):
    return int(((sts or {}).get("spec") or {}).get("replicas", 1))


def _deleting(obj):
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def split_errors(errors):
    """SpecErrors of a cluster with its NodeSets -> (cluster-level errors, {nodeset name: errors})."""
    cluster_errors, per_nodeset = [], {}
    for err in errors:
        path = err.path or ""
        if path.startswith("nodesets[") and "]" in path:
            name = path[len("nodesets["):path.index("]")]
            per_nodeset.setdefault(name, []).append(err)
        else:
            cluster_errors.append(err)
    return cluster_errors, per_nodeset


def _nodeset_name(nodeset):
    return str(((nodeset or {}).get("metadata") or {}).get("name"))


def validate(cluster, nodesets, collection_version=names.COLLECTION_VERSION, policy=None, refused=None,
             owners=None):
    """(defaulted cluster, defaulted valid NodeSets, {name: [SpecError]} of the invalid ones).

    One invalid NodeSet does not hold back the others: it is left out (its objects stay as they are) and
    reported. An invalid SlurmCluster raises SpecErrors: nothing of the cluster can be rendered then.

    ``policy``: the installer's (``policy.normalize``). ``refused``: ``{nodeset name: [SpecError]}`` NodeSets
    already known to be invalid (the API server refused their objects in a dry run). ``owners``: every SlurmCluster
    and NodeSet of the namespace (``spec.name_collisions``), to refuse objects that would take another's names.
    """
    invalid = dict((name, list(errs)) for name, errs in (refused or {}).items())
    if owners is not None:
        cluster_errors, per_nodeset = split_errors(specs.name_collisions(
            owners, str(((cluster or {}).get("metadata") or {}).get("name"))))
        if cluster_errors:
            raise SpecErrors(cluster_errors)
        for name, errs in per_nodeset.items():
            invalid.setdefault(name, []).extend(errs)
    remaining = [ns for ns in nodesets if _nodeset_name(ns) not in invalid]
    while True:
        try:
            cluster_ok, valid = specs.validate_cluster_with_nodesets(cluster, remaining, collection_version, policy)
            return cluster_ok, valid, invalid
        except SpecErrors as exc:
            cluster_errors, per_nodeset = split_errors(exc.errors)
            if cluster_errors or not per_nodeset:
                raise SpecErrors(exc.errors)
            for name, errs in per_nodeset.items():
                invalid.setdefault(name, []).extend(errs)
            kept = [ns for ns in remaining if _nodeset_name(ns) not in per_nodeset]
            if len(kept) == len(remaining):  # errors named a NodeSet by index: cannot single it out
                raise SpecErrors(exc.errors)
            remaining = kept


class Plan(object):
    """What one reconcile does. Built by :func:`plan`; the adapter carries it out in this order: drain,
    resume, apply (and prune), delete node records; then writes the status."""

    def __init__(self):
        self.manifests = []          # every object to apply, in apply order
        self.keep = []               # (kind, name) of live objects prune must leave alone this time
        self.scale = {}              # StatefulSet name -> replicas, for workers of NodeSets being deleted
        self.drain = {}              # reason -> [node names]
        self.resume = []             # node names whose drain of ours is over
        self.delete_nodes = []       # Slurm node records whose pods are gone for good
        self.delete_pods = []        # (name, uid) of outdated worker pods to replace (their nodes drained, idle)
        self.release = []            # NodeSets (being deleted) whose finalizer may go: nothing of them is left
        self.pending = []            # human-readable: what keeps the cluster from settling
        self.underway = []           # the part of it a later pass completes by itself (drains, removals)
        self.deferred = []           # human-readable: work a later pass does, which keeps nothing from Ready
        self.login_outdated = None   # login pods on an older template (None: not known, no live StatefulSet)
        self.slurm_user_kept = None  # human-readable: why slurmctld keeps an older SlurmUser (None: it does not)
        self.components = {}         # condition type -> (status, reason, message) of optional components
        self.requeue_after = None    # seconds until the next look, None when settled
        self.invalid = {}            # nodeset name -> "path: message; ..."
        self.degraded = []           # human-readable: what failed and needs someone (a refused populate Job)
        self.cluster = None          # the validated, defaulted SlurmCluster the manifests were rendered from
        self.valid_nodesets = []     # ... and its valid NodeSets (defaulted)
        self.secrets_held = []       # Secrets a pod of the cluster mounts (it holds their keys)
        self.nodesets = {}           # nodeset name -> facts for its status (see _nodeset_facts)
        self.pod_conditions = {}     # worker pod name -> its SlurmNodeReady condition (projection.pod_condition)
        self.evict = []              # (pod name, uid, Kubernetes node, why): cordon that node, evict the pod
        self.give_up = []            # dicts (give_up_node): busy nodes whose pods go now, past a drain timeout
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

    def give_up_node(self, nodeset, node, why, setting, value, since, pod_uid=None):
        """Record that ``node`` (a pod of ``nodeset``) goes with its jobs now, its drain older than ``setting``.
        ``pod_uid``: the pod is deleted (a rolling update), else the StatefulSet shrinks (scale-in, maintenance)."""
        self.give_up.append({"nodeset": _name(nodeset), "nodeset_uid": (nodeset.get("metadata") or {}).get("uid"),
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
        return bool(self.drain or self.resume or self.delete_nodes)


def _node_serves(node):
    return (node is not None and node["state"] in _SERVING_STATES and "NOT_RESPONDING" not in node["flags"]
            and not node["down"])


def _victim_plan(slurm, victims, drain_timeout, now):
    return nodes_core.plan_scale_in(slurm, victims, now=now, drain_timeout=drain_timeout)


def _shrink(p, slurm, nodeset, statefulset, current, target, now, reason, label):
    """Replicas to render for a StatefulSet going from ``current`` to ``target`` pods, draining the victims."""
    if target >= current:
        return target
    if slurm is None:
        p.wait(REQUEUE_SLURM_UNREACHABLE, "%s: %d -> %d waits for slurmctld to answer (to drain first)"
               % (label, current, target))
        return current
    victims = nodes_core.scale_in_victims(current, target, statefulset)
    entries = _victim_plan(slurm, victims, _drain_timeout(nodeset), now)
    for entry in entries:
        if entry["action"] == nodes_core.DRAIN:
            p.drain_node(entry["name"], reason)
    removable = nodes_core.removable_replicas(entries)
    _give_up_expired(p, nodeset, entries[:removable], slurm, "removal" if _deleting(nodeset) else "scale-in")
    replicas = current - removable
    if replicas > target:
        busy = [e["name"] for e in entries if not e["removable"]]
        p.wait(REQUEUE_DRAINING, "%s: %d -> %d waits for %s to drain" % (label, current, target, ", ".join(busy)))
    return replicas


def _give_up_expired(p, nodeset, entries, slurm, why):
    """The entries (of plan_scale_in) that go with their jobs because their drain is older than drainTimeout."""
    for entry in entries:
        if entry["expired"]:
            p.give_up_node(nodeset, entry["name"], why, "spec.drainTimeout", nodeset["spec"]["drainTimeout"],
                           slurm[entry["name"]]["reason_time"])


def _resume_ours(p, slurm, node_names, reasons):
    for name in node_names:
        node = (slurm or {}).get(name)
        if node and (node["drain"] or node["down"]) and node["reason"] in reasons:
            p.resume.append(name)


def _beyond(name, kept_ordinals, cluster_name=None):
    """Whether ``name`` (a pod or a Slurm node) is a worker past what its StatefulSet keeps: an ordinal at or above
    the replicas that stay, or (given ``cluster_name``) a worker of a NodeSet this cluster no longer has."""
    sts_name, dummy, ordinal = name.rpartition("-")
    if not re.fullmatch(r"[0-9]+", ordinal) or (ordinal != "0" and ordinal.startswith("0")):
        return False
    if sts_name in kept_ordinals:
        return int(ordinal) >= kept_ordinals[sts_name]
    if cluster_name is None:
        return False
    return sts_name.startswith(cluster_name + "-") and sts_name not in (names.controller_name(cluster_name),
                                                                        names.login_name(cluster_name))


def _drain_timeout(nodeset):
    """Seconds after which a scale-in, maintenance or removal gives up on a drained node's jobs; None: never
    (onDrainTimeout: Wait)."""
    if nodeset["spec"].get("onDrainTimeout") == "Wait":
        return None
    return durations.seconds(nodeset["spec"]["drainTimeout"])


def _update_timeout(nodeset):
    """Seconds after which a rolling update gives up on a drained node's jobs; None (the default): never.

    Not ``drainTimeout``: a collection upgrade rolls every worker, and a timeout meant for a scale-in someone asked for
    would kill every job longer than it, one ``maxUnavailable`` batch at a time."""
    after = (nodeset["spec"].get("updateStrategy") or {}).get("proceedAfter")
    return durations.seconds(after) if after else None


def _drained_since(node, now):
    """Epoch seconds of the drain Slurm recorded (scontrol's Reason time), ``now`` when not known (drained now)."""
    when = (node or {}).get("reason_time")
    return when if isinstance(when, int) else now


def _template_hash(sts):
    return ((sts.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_TEMPLATE_HASH)


def running_slurm_user(controller):
    """The SlurmUser the live controller StatefulSet's slurmctld runs as; None without a live one. A template without
    the annotation is a release's from before it, whose slurmctld ran as root. Only the two users a release ever
    rendered are believed (the value goes into slurm.conf): anything else is read as the current one."""
    if controller is None:
        return None
    template_md = (controller.get("spec") or {}).get("template", {}).get("metadata") or {}
    user = (template_md.get("annotations") or {}).get(names.ANNOTATION_SLURM_USER, names.SLURM_USER_BEFORE_ANNOTATION)
    return user if user in (names.SLURM_USER_BEFORE_ANNOTATION, names.SLURM_USER) else names.SLURM_USER


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def pod_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((pod.get("status") or {}).get("conditions") or []))


def _roll(p, nodeset, sts_name, sts, replicas, pods, slurm, now):
    """The rolling update of one NodeSet's workers (their StatefulSet is OnDelete): an outdated pod (another
    template revision than the StatefulSet's update revision) is replaced only once its Slurm node is drained
    (REASON_UPDATE) and idle, or drained for longer than ``updateStrategy.proceedAfter`` when that is set; at most
    ``maxUnavailable`` nodes of the set are drained or replaced at a time; a replaced node is resumed once its new
    pod is ready (its slurmd registered and answering). The drained nodes with jobs go to the NodeSet's facts
    (``waitingFor``, for its status). Returns (updated, outdated) pod counts."""
    set_name = _name(nodeset)
    status = sts.get("status") or {}
    revision = status.get("updateRevision")
    ordinals = range(min(replicas, _replicas(sts)))
    mine = dict((o, pods.get("%s-%d" % (sts_name, o))) for o in ordinals)
    if not revision or int(status.get("observedGeneration") or 0) < int(sts["metadata"].get("generation") or 0):
        # The StatefulSet controller has not seen the latest template yet; its status update brings the next pass.
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: waiting for the StatefulSet's new revision" % set_name)
        return None, None
    updated = [o for o, pod in mine.items() if pod is not None and _labels(pod).get(REVISION_LABEL) == revision]
    outdated = [o for o, pod in mine.items() if pod is not None and _labels(pod).get(REVISION_LABEL) != revision]
    if slurm is None:
        if outdated:
            p.wait(REQUEUE_SLURM_UNREACHABLE, "NodeSet %s: %d outdated nodes wait for slurmctld to answer (to drain "
                                              "first)" % (set_name, len(outdated)))
        return len(updated), len(outdated)
    in_flight = set()
    for o, pod in mine.items():
        node = slurm.get("%s-%d" % (sts_name, o))
        ours = node is not None and (node["drain"] or node["down"]) and node["reason"] == REASON_UPDATE
        if pod is None or pod["metadata"].get("deletionTimestamp") or ours:
            in_flight.add(o)
        if ours and o in updated and pod_ready(pod) and _node_serves(node):
            p.resume.append("%s-%d" % (sts_name, o))  # replaced: its new pod's slurmd answers
            in_flight.discard(o)
    facts = p.nodesets[set_name]
    facts["waitingFor"] = []
    if not outdated:
        return len(updated), 0
    budget = nodeset["spec"]["updateStrategy"]["maxUnavailable"] - len(in_flight)
    timeout = _update_timeout(nodeset)
    draining, blocked = [], []
    for o in sorted(outdated, reverse=True):  # the StatefulSet's own order: highest ordinal first
        name = "%s-%d" % (sts_name, o)
        pod = mine[o]
        node = slurm.get(name)
        if pod["metadata"].get("deletionTimestamp"):
            continue
        action, removable, expired = nodes_core.plan_node(node, now=now, drain_timeout=timeout)
        if o not in in_flight:
            if budget <= 0:
                continue
            budget -= 1
            if action == nodes_core.DRAIN:
                p.drain_node(name, REASON_UPDATE)
                draining.append(name)
                if node["busy"]:
                    facts["waitingFor"].append(_waiting(name, now, timeout))
                continue
        if removable:
            p.delete_pods.append((name, pod["metadata"].get("uid")))
            if expired:
                p.give_up_node(nodeset, name, "rolling update", "spec.updateStrategy.proceedAfter",
                               nodeset["spec"]["updateStrategy"]["proceedAfter"], node["reason_time"],
                               pod_uid=pod["metadata"].get("uid"))
        elif action == nodes_core.BLOCKED:
            blocked.append(name)  # drained by someone else, with jobs: theirs to finish
        else:
            draining.append(name)
            facts["waitingFor"].append(_waiting(name, _drained_since(node, now), timeout))
    facts["waitingFor"].sort(key=lambda w: w["node"])
    why = "NodeSet %s: rolling update, %d/%d nodes updated" % (set_name, len(updated), len(mine))
    if draining:
        why += "; waiting for %s to drain" % ", ".join(sorted(draining))
    for entry in facts["waitingFor"]:
        why += "; %s runs jobs, drained since %s, %s" % (
            entry["node"], st.iso(entry["since"]), "no time limit" if entry["proceedAt"] is None else
            "replaced with its jobs at %s (spec.updateStrategy.proceedAfter)" % st.iso(entry["proceedAt"]))
    facts["note"] = _legacy_timeout_note(nodeset, facts["waitingFor"], timeout, now)
    if facts["note"]:
        why += "; " + facts["note"]
    if blocked:
        why += "; %s drained by an admin, with jobs" % ", ".join(sorted(blocked))
    requeue = REQUEUE_DRAINING if draining or blocked else REQUEUE_PROGRESSING
    soonest = [w["proceedAt"] - now for w in facts["waitingFor"] if w["proceedAt"] is not None]
    p.wait(max(1, min([requeue] + soonest)), why)
    return len(updated), len(outdated)


def _waiting(node, since, timeout):
    """A node a rolling update waits for: drained ``since`` (epoch seconds), replaced at ``proceedAt`` with its jobs
    (None: never); ``jobs`` are filled in by the adapter (None: not known)."""
    return {"node": node, "since": since, "proceedAt": None if timeout is None else since + int(timeout),
            "jobs": None}


def _legacy_timeout_note(nodeset, waiting, timeout, now):
    """Before rolling updates had their own setting they ended at drainTimeout (onDrainTimeout: Proceed, the
    default). A NodeSet that may count on that, and waits past it, is told why the roll still waits (not silently)."""
    spec = nodeset["spec"]
    if timeout is not None or spec.get("onDrainTimeout") != "Proceed" or not waiting:
        return None
    if all(now - w["since"] < durations.seconds(spec["drainTimeout"]) for w in waiting):
        return None
    return ("waiting past spec.drainTimeout (%s), which no longer ends a rolling update: set "
            "spec.updateStrategy.proceedAfter to replace a node with its jobs after a time" % spec["drainTimeout"])


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
            "%s" % (entry["node"], action, st.iso(entry["since"]), setting, killed))


def _keep_worker_objects(p, sts_name):
    p.keep += [("StatefulSet", sts_name), ("Service", sts_name), ("PodDisruptionBudget", sts_name)]


_SINCE_FORMAT = st.TIME_FORMAT


def _since(sts):
    """Epoch seconds of the StatefulSet's template-since annotation, None when absent or unreadable."""
    value = (((sts or {}).get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_TEMPLATE_SINCE)
    try:
        return calendar.timegm(time.strptime(str(value), _SINCE_FORMAT))
    except (TypeError, ValueError):
        return None


def outdated_login_pods(cluster_name, statefulsets, pods):
    """Names of the login pods on another template revision than their StatefulSet's update revision."""
    sts = statefulsets.get(names.login_name(cluster_name))
    revision = ((sts or {}).get("status") or {}).get("updateRevision")
    if not revision:
        return []
    return sorted(name for name, pod in pods.items()
                  if nodes_core.ordinal(name, names.login_name(cluster_name)) is not None
                  and _labels(pod).get(REVISION_LABEL) != revision)


def _roll_login(p, cluster_name, spec, statefulsets, pods, sessions, now):
    """The login StatefulSet is OnDelete: stamp when its template last changed (the grace period's start), and
    replace one outdated login pod at a time once nobody is logged in to it (``sessions``: {pod: open sessions},
    absent or None when unknown) or once ``spec.login.updateGracePeriod`` has passed since the change."""
    sts_name = names.login_name(cluster_name)
    desired = next((m for m in p.manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == sts_name), None)
    if desired is None:
        return
    live = statefulsets.get(sts_name)
    since = _since(live) if live is not None and _template_hash(live) == _template_hash(desired) else None
    if since is None:
        since = now
    desired["metadata"].setdefault("annotations", {})[names.ANNOTATION_TEMPLATE_SINCE] = time.strftime(
        _SINCE_FORMAT, time.gmtime(since))
    if live is None or spec["maintenance"]:
        return
    if _template_hash(live) != _template_hash(desired):
        p.wait(REQUEUE_PROGRESSING, "login: new pod template; its rolling update follows")
        return
    status = live.get("status") or {}
    if not status.get("updateRevision") or int(status.get("observedGeneration") or 0) < int(
            live["metadata"].get("generation") or 0):
        p.wait(REQUEUE_PROGRESSING, "login: waiting for the StatefulSet's new revision")
        return
    outdated = outdated_login_pods(cluster_name, statefulsets, pods)
    p.login_outdated = len(outdated)
    if not outdated:
        return
    mine = ["%s-%d" % (sts_name, o) for o in range(min(spec["login"]["replicas"], _replicas(live)))]
    if any(name not in pods or (pods[name].get("metadata") or {}).get("deletionTimestamp")
           or (name not in outdated and not pod_ready(pods[name])) for name in mine):
        p.wait(REQUEUE_PROGRESSING, "login: rolling update, waiting for a replaced pod to be ready")
        return
    name = max(outdated, key=lambda n: nodes_core.ordinal(n, sts_name))
    deadline = since + durations.seconds(spec["login"]["updateGracePeriod"])
    open_sessions = sessions.get(name)
    if open_sessions == 0 or now >= deadline:
        p.delete_pods.append((name, (pods[name].get("metadata") or {}).get("uid")))
        p.wait(REQUEUE_PROGRESSING, "login: replacing %s (%s)" % (
            name, "no session" if open_sessions == 0 else "grace period over"))
        return
    p.defer(REQUEUE_DRAINING, "login: %s has %s; replaced when they end or at %s" % (
        name, "%d open session(s)" % open_sessions if open_sessions is not None else "sessions not known yet",
        time.strftime(_SINCE_FORMAT, time.gmtime(deadline))))


def _leave(p, nodeset, sts_name, sts, replicas, pods, slurm):
    """A NodeSet being deleted: scale its live StatefulSet down as drains allow; release it once no pod and
    no Slurm node of it is left (its objects then go with it: they are owned by the NodeSet)."""
    set_name = _name(nodeset)
    left_pods = [n for n in pods if nodes_core.ordinal(n, sts_name) is not None]
    left_nodes = nodes_core.statefulset_nodes(slurm, sts_name) if slurm is not None else None
    if sts is not None:
        if _replicas(sts) != replicas:
            p.scale[sts_name] = replicas
        _keep_worker_objects(p, sts_name)
    if replicas == 0 and not left_pods and left_nodes == []:
        p.release.append(set_name)
    elif replicas == 0 and not left_pods and left_nodes:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: forgetting its Slurm nodes" % set_name)
    elif replicas == 0:
        p.wait(REQUEUE_PROGRESSING, "NodeSet %s: waiting for its pods to go" % set_name)


def _nodeset_facts(nodeset_name, statefulset, replicas, target, sts, pods, slurm):
    """What a NodeSet's status reports: pods, Slurm node states, progress."""
    facts = {"statefulset": statefulset, "replicas": replicas, "desired": target,
             "readyReplicas": int(((sts or {}).get("status") or {}).get("readyReplicas") or 0),
             "currentReplicas": int(((sts or {}).get("status") or {}).get("replicas") or 0)}
    counts, serving = projection.nodeset_counts(statefulset, replicas, slurm or {})
    facts["serving"] = serving
    if slurm is not None:
        facts.update(counts)
    return facts


def mounted_secrets(pod):
    """The names of the Secrets ``pod`` mounts (volumes, projected volumes) or reads into its environment."""
    spec = pod.get("spec") or {}
    found = []
    for volume in spec.get("volumes") or ():
        found.append((volume.get("secret") or {}).get("secretName"))
        found += [(source.get("secret") or {}).get("name")
                  for source in (volume.get("projected") or {}).get("sources") or ()]
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        found += [((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                  for env in container.get("env") or ()]
        found += [(source.get("secretRef") or {}).get("name") for source in container.get("envFrom") or ()]
    return [name for name in found if name]


def _populate_failure(cluster_name, spec, pods):
    """Why the current populate Job failed (its last failed pod's words), or None while it has not failed."""
    job = names.populate_job_name(cluster_name, spec["jail"]["populate"]["repopulateToken"])
    mine = [p for p in pods.values() if _labels(p).get(JOB_NAME_LABEL, _labels(p).get("job-name")) == job]
    if any((p.get("status") or {}).get("phase") == "Succeeded" for p in mine):
        return None
    failed = sorted((p for p in mine if (p.get("status") or {}).get("phase") == "Failed"),
                    key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    if not failed:
        return None
    said = ""
    for status in (failed[-1].get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if status.get("name") == "populate" and terminated.get("message"):
            said = terminated["message"].strip().splitlines()[-1]
    return "populate Job %s failed%s (spec.jail.populate)" % (job, ": " + said if said else "")


def plan(cluster, nodesets, observed, now, collection_version=names.COLLECTION_VERSION, policy=None, refused=None):
    """Decide one reconcile.

    ``cluster``: the live SlurmCluster (with the API server's defaults and its uid); ``nodesets``: the live
    NodeSets that reference it (including ones being deleted). ``observed``:

    * ``statefulsets``: ``{name: object}`` of the cluster's StatefulSets;
    * ``pods``: ``{name: object}`` of the cluster's pods (names are enough);
    * ``slurm``: ``{node name: node}`` as ``scale_in.parse_show_node`` returns it, or ``None`` when
      slurmctld did not answer (or was not asked, as in the operator's cache check);
    * ``slurm_error``: why it did not answer, for the status message;
    * ``k8s_nodes``: ``{node name: {"unschedulable": bool, "conditions": {type: status}}}`` of the Kubernetes nodes of
      the worker pods, when ``spec.healthChecks.kubernetesNodes`` asks for them (None: not read, see
      ``k8s_nodes_error``).
    * ``served``: the optional kinds (``kinds.optional_names``) the cluster serves.
    * ``owners`` (optional): every SlurmCluster and NodeSet of the namespace, see :func:`validate`.
    * ``secrets`` (optional): ``{name: labels}`` of the Secrets an External database or a directory names
      (``spec.database_secret_refs``, ``identity.secret_refs``; a missing one left out): one not marked for this
      cluster makes it invalid. Absent: not judged (the operator's cache check, which never applies anything).
    * ``identity`` (optional): what the controller's sssd sidecar last found about the directory (its status file),
      or None with ``identity_error`` saying why it was not read (``spec.identity``: IdentityReady).

    ``now``: epoch seconds. ``policy``, ``refused``: see :func:`validate`. Raises SpecErrors when the
    SlurmCluster itself is invalid.
    """
    p = Plan()
    statefulsets = observed.get("statefulsets") or {}
    pods = observed.get("pods") or {}
    slurm = observed.get("slurm")
    cluster_name = _name(cluster)

    live_sets = [ns for ns in nodesets if not _deleting(ns)]
    leaving_sets = [ns for ns in nodesets if _deleting(ns)]
    cluster_ok, valid, invalid = validate(cluster, live_sets, collection_version, policy, refused,
                                          observed.get("owners"))
    if observed.get("secrets") is not None:
        # Before anything is rendered: slurmdbd would mount such a Secret and send it to the database host.
        problems = specs.database_secret_errors(cluster_ok, observed["secrets"]) + identity.secret_errors(
            cluster_ok, observed["secrets"])
        if problems:
            raise SpecErrors(problems)
    p.cluster, p.valid_nodesets = cluster_ok, valid
    for name, errs in invalid.items():
        p.invalid[name] = "; ".join(str(e) for e in errs)
    # A NodeSet being deleted is no longer rendered: its live StatefulSet is scaled down to zero (draining
    # first) and its objects are kept from pruning until nothing of it is left. Only its drainTimeout matters.
    leaving = [specs.apply_defaults(ns, schema.nodeset_schema()) for ns in leaving_sets]
    spec = cluster_ok["spec"]
    controller = statefulsets.get(names.controller_name(cluster_name))
    controller_up = controller is not None and _replicas(controller) > 0

    # --- maintenance: drain everything first, then scale the cluster to zero --------------------------------
    maintenance_ready = False
    worker_nodes = []
    for ns in valid + leaving:
        sts_name = names.worker_name(cluster_name, _name(ns))
        worker_nodes += ["%s-%d" % (sts_name, o) for o in range(_replicas(statefulsets.get(sts_name)))
                         if statefulsets.get(sts_name) is not None]
    if spec["maintenance"]:
        if not controller_up:
            maintenance_ready = True  # nothing runs jobs: already down (or never started)
        elif slurm is None:
            p.wait(REQUEUE_SLURM_UNREACHABLE, "maintenance waits for slurmctld to answer (to drain first)")
        else:
            timeouts = dict((names.worker_name(cluster_name, _name(ns)), _drain_timeout(ns)) for ns in valid + leaving)
            entries = []
            for node in worker_nodes:
                sts_name = node.rpartition("-")[0]
                entries += _victim_plan(slurm, [node], timeouts.get(sts_name), now)
            for entry in entries:
                if entry["action"] == nodes_core.DRAIN:
                    p.drain_node(entry["name"], REASON_MAINTENANCE)
            busy = [e["name"] for e in entries if not e["removable"]]
            if busy:
                p.wait(REQUEUE_DRAINING, "maintenance waits for %s to drain" % ", ".join(busy))
            else:
                maintenance_ready = True
                sets = dict((names.worker_name(cluster_name, _name(ns)), ns) for ns in valid + leaving)
                for entry in entries:
                    _give_up_expired(p, sets[entry["name"].rpartition("-")[0]], [entry], slurm, "maintenance")
    elif slurm is not None:
        _resume_ours(p, slurm, worker_nodes, (REASON_MAINTENANCE,))
    if slurm is not None and not specs.health_enabled(spec):
        # The health program no longer runs: nobody else would ever resume the drains it left (NCCL drains are a
        # measurement, and stay for an administrator).
        for name in worker_nodes:
            node = slurm.get(name)
            reason = (node or {}).get("reason") or ""
            if node and node["drain"] and reason.startswith(names.HEALTH_REASON_PREFIX) and not reason.startswith(
                    names.HEALTH_REASON_PREFIX + " nccl:") and name not in p.resume:
                p.resume.append(name)
    # --- SlurmUser: a running slurmd accepts RPCs only from root and the SlurmUser of the configuration it fetched,
    # and re-fetches one only through such an RPC (measured with Slurm 24.11: after slurmctld restarted as another
    # user, every reconfigure, ping and job termination is a "Security violation", and a finished job stays
    # COMPLETING). A cluster whose slurmctld runs as another user (an upgrade from a release before this one: root)
    # keeps it while any worker runs; it changes when none does: maintenance, or every NodeSet at zero.
    slurm_user = names.SLURM_USER
    running = running_slurm_user(controller)
    if running is not None and running != names.SLURM_USER and worker_nodes and not maintenance_ready:
        slurm_user = running
        p.slurm_user_kept = ("slurmctld keeps running as %s, not %s: Slurm cannot change SlurmUser under running "
                             "slurmd without stranding their jobs; it changes at the next maintenance "
                             "(spec.maintenance: true, then false) or when no worker runs"
                             % (running, names.SLURM_USER))
    render_cluster = cluster_ok
    if spec["maintenance"] and not maintenance_ready:
        render_cluster = copy.deepcopy(cluster_ok)
        render_cluster["spec"]["maintenance"] = False

    # --- per NodeSet: replicas to render now -------------------------------------------------------------------
    rendered_sets = []
    rolling = []  # (nodeset, StatefulSet name, live StatefulSet, replicas now) of sets whose pods may be outdated
    kept_ordinals = {}  # worker StatefulSet -> pods that stay (their Slurm nodes are not ghosts)
    for ns in valid + leaving:
        set_name = _name(ns)
        is_leaving = ns in leaving
        sts_name = names.worker_name(cluster_name, set_name)
        sts = statefulsets.get(sts_name)
        target = 0 if is_leaving else ns["spec"]["replicas"]
        if sts is None or maintenance_ready:
            replicas = target
        else:
            current = _replicas(sts)
            replicas = _shrink(p, slurm, ns, sts_name, current, target, now, REASON_SCALE_IN,
                               "NodeSet %s" % set_name)
            if target >= current and slurm is not None:
                _resume_ours(p, slurm, ["%s-%d" % (sts_name, o) for o in range(target)], (REASON_SCALE_IN,))
        kept_ordinals[sts_name] = max(replicas, _replicas(sts)) if maintenance_ready and sts else replicas
        p.nodesets[set_name] = _nodeset_facts(set_name, sts_name, replicas, target, sts, pods, slurm)
        p.nodesets[set_name]["leaving"] = is_leaving
        if sts is not None and not is_leaving and not spec["maintenance"]:
            rolling.append((ns, sts_name, sts, replicas))
        if is_leaving:
            _leave(p, ns, sts_name, sts, replicas, pods, slurm)
        else:
            shown = copy.deepcopy(ns)
            shown["spec"]["replicas"] = replicas
            rendered_sets.append(shown)

    # NodeSets that failed validation keep their live objects untouched: not rendered, not pruned.
    for set_name in invalid:
        _keep_worker_objects(p, names.worker_name(cluster_name, set_name))

    p.manifests = render.render_cluster(render_cluster, rendered_sets, collection_version,
                                        served=observed.get("served") or (), slurm_user=slurm_user)

    # --- rolling updates: outdated workers replaced one drained node at a time --------------------------------
    hashes = dict((m["metadata"]["name"], _template_hash(m)) for m in p.manifests if m["kind"] == "StatefulSet")
    for ns, sts_name, sts, replicas in rolling:
        set_name = _name(ns)
        if hashes.get(sts_name) != _template_hash(sts):
            # This pass applies a new pod template: the StatefulSet's new revision shows in a later pass.
            p.wait(REQUEUE_PROGRESSING, "NodeSet %s: new pod template; its rolling update follows" % set_name)
            continue
        updated, outdated = _roll(p, ns, sts_name, sts, replicas, pods, slurm, now)
        if updated is not None:
            p.nodesets[set_name].update(updatedReplicas=updated, outdatedReplicas=outdated)

    # --- the login pods: OnDelete too; an outdated one goes once nobody is logged in, or after the grace ----------
    _roll_login(p, cluster_name, spec, statefulsets, pods, observed.get("login_sessions") or {}, now)

    # --- Slurm node records of pods that are gone for good (no ghosts in sinfo) ------------------------------
    # Maintenance keeps every record (the same pods come back); a NodeSet that failed validation keeps its own.
    for set_name in invalid:
        sts_name = names.worker_name(cluster_name, set_name)
        kept_ordinals[sts_name] = _replicas(statefulsets.get(sts_name)) if sts_name in statefulsets else 0
    # A removal is done only when the pods are gone AND Slurm has forgotten their nodes: until then it is under
    # way (a pod's end is seen through the pod watch, a node record's only through Slurm).
    going = sorted(n for n in pods if _beyond(n, kept_ordinals))
    if going:
        p.wait(REQUEUE_PROGRESSING, "pods going: %s" % ", ".join(going))
    if slurm is not None:
        for node_name, node in sorted(slurm.items()):
            if node_name in pods or not _beyond(node_name, kept_ordinals, cluster_name):
                continue
            if node["busy"]:
                p.wait(REQUEUE_DRAINING, "%s: its pod is gone but Slurm still counts a job on it" % node_name)
                continue
            p.delete_nodes.append(node_name)
        for name in p.delete_nodes:
            if name in p.resume:
                p.resume.remove(name)
        if p.delete_nodes:
            p.wait(REQUEUE_PROGRESSING, "forgetting removed nodes: %s" % ", ".join(p.delete_nodes))

    # A key Secret (munge, SSH host keys, JWT, database password) a pod of the cluster mounts is held by it: while
    # that pod exists, a missing one must not be generated anew (see _converge's check).
    p.secrets_held = sorted(set(name for pod in pods.values() for name in mounted_secrets(pod)))
    failure = _populate_failure(cluster_name, spec, pods) if not spec["maintenance"] else None
    if failure:
        p.degraded.append(failure)
    if slurm is not None:
        _project(p, cluster_name, spec, valid + leaving, pods, slurm, dict(observed, now=now))
        # What Kubernetes is told is Slurm as this pass leaves it: its own drains and resumes included.
        after = _after_actions(slurm, p)
        for name in p.pod_conditions:
            p.pod_conditions[name] = projection.pod_condition(after.get(name))
        for facts in p.nodesets.values():
            counts, dummy = projection.nodeset_counts(facts["statefulset"], facts["replicas"], after)
            facts.update(counts)
    _readiness(p, spec, maintenance_ready, statefulsets, pods, slurm, observed.get("slurm_error"))
    _components(p, cluster_name, spec, statefulsets, pods)
    found = identity.condition(spec, observed.get("identity"), observed.get("identity_error"))
    if found is not None:
        p.components[identity.CONDITION] = found
    return p


def _after_actions(slurm, p):
    """Slurm's node table once the plan's drains and resumes are done (what `scontrol update` makes of it)."""
    after = dict(slurm)
    for reason, node_names in p.drain.items():
        after = nodes_core.simulate_drain(after, node_names, reason)
    for name in p.resume:
        if name in after:
            after[name] = dict(after[name], drain=False, flags=[f for f in after[name]["flags"] if f != "DRAIN"])
    return after


def _project(p, cluster_name, spec, nodesets, pods, slurm, observed):
    """Slurm node states onto the worker pods (a condition each); cordoned Kubernetes nodes and their listed
    conditions onto the Slurm nodes of their pods (drain, and resume once the cause is gone)."""
    sets = set(names.worker_name(cluster_name, _name(ns)) for ns in nodesets)
    workers = dict((name, pod) for name, pod in pods.items()
                   if name.rpartition("-")[0] in sets and nodes_core.ordinal(name, name.rpartition("-")[0]) is not None
                   and not _deleting(pod))
    for name in workers:
        p.pod_conditions[name] = projection.pod_condition(slurm.get(name))
    settings = spec["healthChecks"]["kubernetesNodes"]
    if settings.get("evictUnhealthyAfter"):
        after = durations.seconds(settings["evictUnhealthyAfter"])
        for name, why in projection.evictions(workers, slurm, after, observed.get("now", 0)):
            pod = workers[name]
            p.evict.append((name, pod["metadata"].get("uid"), (pod.get("spec") or {}).get("nodeName"), why))
            p.wait(REQUEUE_PROGRESSING, "%s: unhealthy since more than %s (%s): moving it to another node"
                   % (name, settings["evictUnhealthyAfter"], why))
    if not settings["drainCordoned"] and not settings.get("drainOnConditions"):
        return
    if observed.get("k8s_nodes") is None:
        why = observed.get("k8s_nodes_error") or "Kubernetes nodes not read"
        p.deferred.append("spec.healthChecks.kubernetesNodes: %s" % why)
        return
    hosts = dict((name, (pod.get("spec") or {}).get("nodeName")) for name, pod in workers.items()
                 if name not in p.delete_nodes)
    drain, resume = projection.kubernetes_node_plan(hosts, observed["k8s_nodes"], slurm, settings)
    decided = set(n for nodes in p.drain.values() for n in nodes)  # a drain of this plan (scale-in, update) wins
    for reason, nodes in sorted(drain.items()):
        for name in nodes:
            if name not in decided:
                p.drain_node(name, reason)
    p.resume += [name for name in resume if name not in decided and name not in p.resume]


_REASON = re.compile(r"^([A-Z][A-Za-z]+): ")


def pod_problem(pod):
    """Why a pod's container keeps failing, from its status: the last termination message (our entrypoints end
    with ``<Reason>: <what to do>``; Slurm's own last log lines otherwise), or the waiting reason. None if fine."""
    statuses = ((pod or {}).get("status") or {})
    for status in (statuses.get("initContainerStatuses") or []) + (statuses.get("containerStatuses") or []):
        if status.get("ready"):
            continue
        waiting = (status.get("state") or {}).get("waiting") or {}
        terminated = (status.get("lastState") or {}).get("terminated") or (status.get("state") or {}).get(
            "terminated") or {}
        message = (terminated.get("message") or "").strip()
        if terminated.get("exitCode") and message:
            return "%s: %s" % (status.get("name"), message.splitlines()[-1])
        if waiting.get("reason") in ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull",
                                     "CreateContainerConfigError", "CreateContainerError"):
            return "%s: %s%s" % (status.get("name"), waiting["reason"],
                                 ": " + waiting["message"] if waiting.get("message") else "")
    return None


def _components(p, cluster_name, spec, statefulsets, pods):
    """A condition per optional component (AccountingReady, RestApiReady, ExporterReady): its pods ready, or why
    not, with the reason its entrypoint gave (DatabaseAccessDenied: ...). IdentityReady is the directory's as the
    controller's sssd sidecar sees it (identity.condition)."""
    parts = [("accounting", "AccountingReady", [names.accounting_name(cluster_name)]
              + ([names.database_name(cluster_name)] if spec["accounting"]["database"]["type"] == "InCluster"
                 else [])),
             ("restApi", "RestApiReady", [names.rest_name(cluster_name)]),
             ("exporter", "ExporterReady", [names.exporter_name(cluster_name)])]
    for field, ctype, sts_names in parts:
        if not spec[field]["enabled"]:
            continue
        if spec["maintenance"]:
            p.components[ctype] = ("False", "Maintenance", "the cluster is in maintenance")
            continue
        problems, reason = [], "Progressing"
        for sts_name in sts_names:
            want = next((m["spec"]["replicas"] for m in p.manifests
                         if m["kind"] == "StatefulSet" and m["metadata"]["name"] == sts_name), 0)
            live = statefulsets.get(sts_name)
            ready = int(((live or {}).get("status") or {}).get("readyReplicas") or 0)
            if live is not None and ready >= want and _replicas(live) == want:
                continue
            why = [pod_problem(pods[n]) for n in sorted(pods) if nodes_core.ordinal(n, sts_name) is not None]
            why = [w for w in why if w]
            for text in why:
                found = _REASON.match(text.split(": ", 1)[-1])
                if found:
                    reason = found.group(1)
                    break
            problems.append("%s: %d/%d pods ready%s" % (sts_name, ready, want, "; " + "; ".join(why) if why else ""))
        if problems:
            p.components[ctype] = ("False", reason, "; ".join(problems))
        else:
            p.components[ctype] = ("True", "Ready", "every pod ready")


def _readiness(p, spec, maintenance_ready, statefulsets, pods, slurm, observed_error):
    """Ready: nothing pending, every StatefulSet's pods ready, every worker a serving Slurm node."""
    if p.invalid:
        p.pending.append("invalid NodeSet(s): %s" % ", ".join(sorted(p.invalid)))
    p.pending.extend(p.degraded)
    if maintenance_ready:
        p.phase = PHASE_MAINTENANCE
        p.ready = not p.pending
        p.message = "maintenance: every StatefulSet scaled to 0" if p.ready else "; ".join(p.pending)
        return
    problems = list(p.pending)
    for obj in p.manifests:
        if obj["kind"] != "StatefulSet":
            continue
        want = obj["spec"]["replicas"]
        live = statefulsets.get(_name(obj))
        ready = int(((live or {}).get("status") or {}).get("readyReplicas") or 0)
        if live is None or ready < want or _replicas(live) != want:
            failing = [pod_problem(pods[n]) for n in sorted(pods) if nodes_core.ordinal(n, _name(obj)) is not None]
            failing = [w for w in failing if w]
            problems.append("%s: %d/%d pods ready%s" % (_name(obj), ready if live else 0, want,
                                                        " (%s)" % "; ".join(failing) if failing else ""))
    if slurm is None:
        why = observed_error or ""
        problems.append("slurmctld does not answer" + (": " + why if why else ""))
    else:
        for set_name, facts in sorted(p.nodesets.items()):
            want = facts["replicas"] if not facts["leaving"] else 0
            if facts["serving"] < want:
                problems.append("NodeSet %s: %d/%d Slurm nodes up" % (set_name, facts["serving"], want))
    # Nothing is requeued for readiness alone: a worker pod turns Ready when its Slurm node is up (its probe),
    # and that pod event is what brings the next look. Only work under way asks for a timed look.
    p.ready = not problems
    p.phase = PHASE_READY if p.ready else PHASE_PROGRESSING
    p.message = "; ".join(["every pod ready and every Slurm node up"] + p.deferred) if p.ready else "; ".join(
        problems + p.deferred)
