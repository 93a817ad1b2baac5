"""Does a SlurmCluster need its role run now? Decided from the watch caches with the collection's own pure core. Pure.

The runtime renders the desired state in-process with ``converge.plan`` (the function the ``slurm_cluster``
module runs) and compares every rendered object with its cached live copy by ``objects.plan_object`` (the rule
the apply adapter uses to skip an object). The role runs only when something differs:

* a generation not yet converged (the SlurmCluster's or a NodeSet's), or a NodeSet being deleted;
* the plan has something under way that needs Slurm (a shrink, maintenance, a NodeSet leaving);
* a rendered object is missing or differs from what was applied (edited, deleted); the data kinds (Secrets,
  the jail claim: never listed, so not cached) are looked up by name when the caller gives ``lookup``;
* a live object of the cluster is no longer rendered (prune);
* the pods or the StatefulSets' status (or the installer's policy) differ from what the last settled run started
  from (:func:`observed_digest`): what a run reports (readiness, counts) and what Slurm sees come from them.
  A run that failed, or left work for later (a drain, a login pod waiting for its sessions to end: its
  ``requeue_after``), records no digest, so nothing here can take the place of its requeue or retry.

Status is never an input: what the runtime, the converge and the Slurm status loop write (conditions, counts,
``reconciledDigest``, a worker pod's SlurmNodeReady condition) changes neither a generation nor the digest.

Optional kinds (another project's CRD, ``kinds.optional_applied``: the ServiceMonitor) are neither cached nor
rendered here (the plan is made with no optional kind served): they are reconciled by the runs other causes start
and by the periodic full run. An optional data kind (the MariaDB) is looked up like the other create-only objects;
the caller's ``lookup`` answers True for a kind the cluster does not serve (the role could not create it either).

A cluster that never becomes Ready (no Slurm answers: kwok nodes, an image that never pulls) is therefore not
rerun on every event or operator restart: readiness arrives as pod events, which change the digest; the same
inputs again would give the same plan and the same status. The digest of the last run is kept in the
SlurmCluster's status (``names.STATUS_RECONCILED_DIGEST``), so a restarted operator finds it too.

Exact: an object in sync by the apply adapter's rule is skipped by the apply too, so a run would change
nothing. Safe: anything the adapter would send a request for is a difference here.

A check that finds nothing to do remembers what it read (:class:`InSync`, in the cluster's :class:`Memo`): the
resourceVersion of the SlurmCluster, of its NodeSets and of every cached object of the cluster, the policy and the
digest it compared with. The next check with all of these unchanged reaches the same verdict without rendering
again: any write to any of those objects (an edit, a deletion, a pod's event, a status write) gives it a new
resourceVersion, and an object created or deleted changes the set. Only the create-only objects, which are not
cached, are looked up again. Without Slurm's view, a plan that finds nothing to do does not depend on the clock: what
a clock decides (a login pod's grace period, an every-node pod's retry, a backup overdue) is either work under way,
which is never remembered, or status, which is no input here. Objects without a resourceVersion (not from an API
server) are never remembered.

:func:`scale_outs` answers a narrower question from the same plan: which worker StatefulSets may be given more
replicas right away, before the run (``plan/scale.scale_outs`` decides: a growth that is the only difference).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.soperator.slurm.plugins.module_utils import digests, kinds, names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.policy import Policy
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, decided, model, scale
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

# Kinds a converge applies and prunes: the runtime caches them (by the managed-by label).
CACHED_KINDS = tuple(k.kind for k in kinds.applied())
# Created once, never listed (Secrets, the jail claim, a MariaDB): looked up by name on the timer's check.
LOOKED_UP_KINDS = tuple(k.kind for k in kinds.data())

# A cluster's objects in the caches: ``{(kind, name): object}``, all in the cluster's namespace.
Live = Mapping[tuple[str, str], KubeObject]
# ``lookup(kind, name)``: whether a create-only object (never cached) exists.
Lookup = Callable[[str, str], bool]


# What a check read, by version: see InSync.
Inputs = tuple[Any, ...]


@dataclass(frozen=True)
class InSync:
    """The last check of a cluster found nothing to do: ``inputs`` (:func:`inputs`) says what it read, ``uncached``
    the create-only objects it rendered (not cached: looked up again by every check given a ``lookup``)."""
    inputs: Inputs
    uncached: tuple[tuple[str, str], ...]


@dataclass
class Memo:
    """What the runtime remembers of a cluster's last run (the cache may lag behind its writes)."""
    generations: dict[str, int] = field(default_factory=dict)  # "SlurmCluster" / "NodeSet/<name>" -> generation
    ready: bool | None = None
    invalid_generation: int | None = None  # the SlurmCluster generation judged invalid
    digest: str | None = None  # observed_digest() the last settled run started from (None: run again)
    in_sync: InSync | None = None  # the last check found nothing to do, from these inputs (needs_run)


def _version(obj: KubeObject) -> tuple[str, str] | None:
    md = obj.get("metadata") or {}
    rv = md.get("resourceVersion")
    return (str(md.get("uid") or ""), str(rv)) if rv else None


def inputs(cluster: KubeObject, nodesets: Sequence[KubeObject], live: Live, policy: Policy | None,
           digest: str | None) -> Inputs | None:
    """What :func:`needs_run` reads, by version: the uid and resourceVersion of the SlurmCluster, of each NodeSet
    and of each cached object of the cluster, the ``policy`` and the ``digest`` the observation is compared with.
    None when an object has no resourceVersion (not read from an API server): such a check is never reused."""
    versions: list[Any] = [policy, digest]
    for obj in [cluster, *nodesets]:
        version = _version(obj)
        if version is None:
            return None
        versions.append(version)
    for ident, obj in sorted(live.items()):
        version = _version(obj)
        if version is None:
            return None
        versions.append((ident, version))
    return tuple(versions)


def generations(cluster: KubeObject, nodesets: Sequence[KubeObject]) -> dict[str, int]:
    gens = {names.CLUSTER_KIND: int(cluster["metadata"].get("generation") or 0)}
    for ns in nodesets:
        gens["%s/%s" % (names.NODESET_KIND, ns["metadata"]["name"])] = int(ns["metadata"].get("generation") or 0)
    return gens


def _observed(obj: KubeObject) -> int:
    return int((obj.get("status") or {}).get("observedGeneration") or -1)


def _pod_fact(pod: KubeObject) -> list[Any]:
    md = pod.get("metadata") or {}
    status = pod.get("status") or {}
    ready = readiness.status(pod)
    # The Ready condition's status in a list, as the digests recorded in the clusters' status have it.
    return [md.get("uid"), status.get("phase"), [] if ready is None else [ready], bool(md.get("deletionTimestamp")),
            (md.get("labels") or {}).get(model.REVISION_LABEL)]


_STS_STATUS = ("replicas", "readyReplicas", "currentRevision", "updateRevision", "observedGeneration")


def observed_digest(live: Live, policy: Policy | None = None) -> str:
    """Digest of what a run observes beyond the objects it applies: each pod's identity, phase, readiness, deletion
    and template revision, and the StatefulSets' status (what the converge's plan and status are computed from),
    and the installer's ``policy`` (a restarted operator with another policy judges every cluster again)."""
    facts: list[list[Any]] = [["policy", policy]]
    for (kind, name), obj in sorted(live.items()):
        if kind == "Pod":
            facts.append([kind, name] + _pod_fact(obj))
        elif kind == "StatefulSet":
            status = obj.get("status") or {}
            facts.append([kind, name] + [status.get(k) for k in _STS_STATUS])
    return digests.of_value(facts)


def last_digest(cluster: KubeObject, memo: Memo) -> str | None:
    """The digest the last settled run started from: this runtime's memory, else the status it wrote."""
    if memo.digest is not None:
        return memo.digest
    return (cluster.get("status") or {}).get(names.STATUS_RECONCILED_DIGEST)


def _plan(cluster: KubeObject, nodesets: Sequence[KubeObject], live: Live, now: int,
          policy: Policy | None) -> decided.Plan:
    """``converge.plan`` from the caches, without Slurm's view (SpecErrors when the cluster is invalid)."""
    statefulsets = dict((name, obj) for (kind, name), obj in live.items() if kind == "StatefulSet")
    pods = dict((name, obj) for (kind, name), obj in live.items() if kind == "Pod")
    config = live.get(("ConfigMap", names.slurm_config_name(cluster["metadata"]["name"]))) or {}
    # The topology last decided (spec.topology): without the Nodes here, every worker keeps its place.
    return converge.plan(cluster, nodesets, {"statefulsets": statefulsets, "pods": pods, "slurm": None,
                                             "live_topology": (config.get("data") or {}).get("topology.conf")},
                         now, policy=policy)


def _grows(cluster: KubeObject, nodeset: KubeObject, live: Live) -> bool:
    """Whether a NodeSet asks for more workers than its live StatefulSet has (a cheap look before any plan)."""
    if model.deleting(nodeset) or (nodeset.get("spec") or {}).get("elastic"):
        return False
    sts = live.get(("StatefulSet", names.worker_name(cluster["metadata"]["name"], nodeset["metadata"]["name"])))
    wanted = (nodeset.get("spec") or {}).get("replicas")
    return sts is not None and isinstance(wanted, int) and wanted > model.replicas(sts)


def scale_outs(cluster: KubeObject, nodesets: Sequence[KubeObject], live: Live, now: int,
               policy: Policy | None = None) -> list[scale.ScaleOut]:
    """The worker StatefulSets to apply before the role runs (``scale.scale_outs``: growths that are the only
    difference between the render and the caches), ``[]`` when none. A cluster with no NodeSet asking for more
    workers than its StatefulSet has costs no plan."""
    if cluster["metadata"].get("deletionTimestamp") or not any(_grows(cluster, ns, live) for ns in nodesets):
        return []
    try:
        plan = _plan(cluster, nodesets, live, now, policy)
    except SpecErrors:
        return []
    return scale.scale_outs(plan, live)


def generation_change(cluster: KubeObject, nodesets: Sequence[KubeObject], memo: Memo) -> str | None:
    """Why a run is due whatever the caches say (a generation not converged, a NodeSet being deleted), or None."""
    gens = generations(cluster, nodesets)
    if _observed(cluster) != gens[names.CLUSTER_KIND] and memo.generations.get(names.CLUSTER_KIND) != \
            gens[names.CLUSTER_KIND]:
        return "generation %d of the SlurmCluster" % gens[names.CLUSTER_KIND]
    for ns in nodesets:
        key = "%s/%s" % (names.NODESET_KIND, ns["metadata"]["name"])
        if ns["metadata"].get("deletionTimestamp"):
            return "NodeSet %s is being deleted" % ns["metadata"]["name"]
        if _observed(ns) != gens[key] and memo.generations.get(key) != gens[key]:
            return "generation %d of NodeSet %s" % (gens[key], ns["metadata"]["name"])
    return None


def needs_run(cluster: KubeObject, nodesets: Sequence[KubeObject], live: Live, memo: Memo, now: int,
              lookup: Lookup | None = None, policy: Policy | None = None) -> str | None:
    """Why the role must run (a short reason), or None when a run would change nothing.

    ``live``: ``{(kind, name): object}`` of the cluster's objects in the caches (kinds of CACHED_KINDS and
    Pods), all in the cluster's namespace. ``lookup(kind, name) -> bool``: whether a create-only object exists
    (they are not cached); without it they are not checked. ``policy``: the installer's (``policy.normalize``),
    the one the role's runs judge with.
    """
    gens = generations(cluster, nodesets)
    if memo.invalid_generation is not None and memo.generations == gens:
        return None  # judged invalid, and nothing was edited since: only a new generation can help
    why = generation_change(cluster, nodesets, memo)
    if why is not None:
        return why
    read = inputs(cluster, nodesets, live, policy, last_digest(cluster, memo))
    if read is not None and memo.in_sync is not None and memo.in_sync.inputs == read:
        return _missing(memo.in_sync.uncached, lookup)  # the same verdict: nothing read has changed
    memo.in_sync = None
    why, uncached = _compare(cluster, nodesets, live, memo, now, policy)
    if why is None:
        why = _missing(uncached, lookup)
        if read is not None:
            memo.in_sync = InSync(read, tuple(uncached))
    return why


def _missing(uncached: Sequence[tuple[str, str]], lookup: Lookup | None) -> str | None:
    """The first create-only object ``lookup`` does not find (not looked up without one)."""
    if lookup is not None:
        for kind, name in uncached:
            if not lookup(kind, name):
                return "%s %s is missing" % (kind, name)
    return None


def _compare(cluster: KubeObject, nodesets: Sequence[KubeObject], live: Live, memo: Memo, now: int,
             policy: Policy | None) -> tuple[str | None, list[tuple[str, str]]]:
    """The render against the caches: (why a run is needed or None, the create-only objects it rendered)."""
    gens = generations(cluster, nodesets)
    try:
        plan = _plan(cluster, nodesets, live, now, policy)
    except SpecErrors:
        # Not remembered as in sync (the uncached objects are not known): judged again by the next check.
        return (None if memo.invalid_generation == gens[names.CLUSTER_KIND] else "invalid spec"), []
    # Without Slurm's view the plan is never "ready": only work under way counts (a shrink, maintenance, a
    # NodeSet leaving), which the role completes with Slurm's view.
    if plan.slurm.drain or plan.pods.scale or plan.objects.release or plan.report.underway:
        return "under way: %s" % "; ".join(plan.report.underway), []
    rendered: set[tuple[str, str]] = set()
    uncached: list[tuple[str, str]] = []
    for desired in plan.objects.manifests:
        ident = (desired["kind"], desired["metadata"]["name"])
        rendered.add(ident)
        if desired["kind"] not in CACHED_KINDS:
            uncached.append(ident)  # created once and never touched again; not cached (never listed)
            continue
        if objects.is_create_only(desired):
            if ident not in live:  # a cached create-only object (the populate Job): the apply would create it
                return "%s %s is missing" % ident, []
            continue
        if objects.plan_object(desired, live.get(ident)) != objects.SKIP:
            return ("%s %s differs" % ident if ident in live else "%s %s is missing" % ident), []
    keep = set(plan.objects.keep)
    for (kind, name), obj in sorted(live.items()):
        if kind not in CACHED_KINDS or (kind, name) in rendered or (kind, name) in keep:
            continue
        labels = obj["metadata"].get("labels") or {}
        if labels.get(names.LABEL_MANAGED_BY) != names.MANAGED_BY or obj["metadata"].get("deletionTimestamp"):
            continue
        return "%s %s is no longer rendered" % (kind, name), []
    if observed_digest(live, policy) != last_digest(cluster, memo):
        return "pods or StatefulSets changed since the last run", []
    return None, uncached
