"""Does a SlurmCluster need its role run now? Decided from the watch caches with the collection's own pure core. Pure.

The runtime renders the desired state in-process with ``converge.plan`` (the function the ``slurm_cluster``
module runs) and compares every rendered object with its cached live copy by ``objects.plan_object`` (the rule
the apply adapter uses to skip an object). The role runs only when something differs:

* a generation not yet converged (the SlurmCluster's or a NodeSet's), or a NodeSet being deleted;
* the last converge was not Ready (progress is only seen by the role: Slurm nodes registering);
* the plan has something under way that needs Slurm (a shrink, maintenance, a NodeSet leaving);
* a rendered object is missing or differs from what was applied (edited, deleted);
* a live object of the cluster is no longer rendered (prune).

Exact: an object in sync by the apply adapter's rule is skipped by the apply too, so a run would change
nothing. Safe: anything the adapter would send a request for is a difference here.
"""

from dataclasses import dataclass, field
from typing import Dict, Optional

from ansible_collections.soperator.slurm.plugins.module_utils import converge, kinds, names, objects
from ansible_collections.soperator.slurm.plugins.module_utils.errors import SpecErrors

# Kinds a converge applies and prunes: the runtime caches them (by the managed-by label).
CACHED_KINDS = tuple(k.kind for k in kinds.applied())


@dataclass
class Memo:
    """What the runtime remembers of a cluster's last run (the cache may lag behind its writes)."""
    generations: Dict[str, int] = field(default_factory=dict)  # "SlurmCluster" / "NodeSet/<name>" -> generation
    ready: Optional[bool] = None
    invalid_generation: Optional[int] = None  # the SlurmCluster generation judged invalid


def generations(cluster, nodesets):
    gens = {names.CLUSTER_KIND: int(cluster["metadata"].get("generation") or 0)}
    for ns in nodesets:
        gens["%s/%s" % (names.NODESET_KIND, ns["metadata"]["name"])] = int(ns["metadata"].get("generation") or 0)
    return gens


def _observed(obj):
    return int((obj.get("status") or {}).get("observedGeneration") or -1)


def _ready_in_status(obj):
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def needs_run(cluster, nodesets, live, memo: Memo, now, periodic=False) -> Optional[str]:
    """Why the role must run (a short reason), or None when a run would change nothing.

    ``live``: ``{(kind, name): object}`` of the cluster's objects in the caches (kinds of CACHED_KINDS and
    Pods), all in the cluster's namespace. ``periodic``: the check comes from the timer, not from an event. A
    cluster that is only not Ready yet is then left alone: what makes it Ready arrives as events (a worker pod
    turns Ready when its Slurm node is up, the controller's when slurmctld answers), and polling every cluster
    that cannot become Ready (no Slurm on fake nodes, an image that never pulls) would cost a run each period.
    """
    gens = generations(cluster, nodesets)
    if memo.invalid_generation is not None and memo.generations == gens:
        return None  # judged invalid, and nothing was edited since: only a new generation can help
    if _observed(cluster) != gens[names.CLUSTER_KIND] and memo.generations.get(names.CLUSTER_KIND) != \
            gens[names.CLUSTER_KIND]:
        return "generation %d of the SlurmCluster" % gens[names.CLUSTER_KIND]
    for ns in nodesets:
        key = "%s/%s" % (names.NODESET_KIND, ns["metadata"]["name"])
        if ns["metadata"].get("deletionTimestamp"):
            return "NodeSet %s is being deleted" % ns["metadata"]["name"]
        if _observed(ns) != gens[key] and memo.generations.get(key) != gens[key]:
            return "generation %d of NodeSet %s" % (gens[key], ns["metadata"]["name"])
    ready = memo.ready if memo.ready is not None else _ready_in_status(cluster)
    if not ready and not periodic:
        return "not ready yet"
    statefulsets = dict((name, obj) for (kind, name), obj in live.items() if kind == "StatefulSet")
    pods = dict((name, obj) for (kind, name), obj in live.items() if kind == "Pod")
    try:
        plan = converge.plan(cluster, nodesets, {"statefulsets": statefulsets, "pods": pods, "slurm": None}, now)
    except SpecErrors:
        return None if memo.invalid_generation == gens[names.CLUSTER_KIND] else "invalid spec"
    # Without Slurm's view the plan is never "ready": only work under way counts (a shrink, maintenance, a
    # NodeSet leaving), which the role completes with Slurm's view.
    if plan.drain or plan.scale or plan.release or plan.underway:
        return "under way: %s" % "; ".join(plan.underway)
    rendered = set()
    for desired in plan.manifests:
        ident = (desired["kind"], desired["metadata"]["name"])
        rendered.add(ident)
        if objects.is_create_only(desired) or desired["kind"] not in CACHED_KINDS:
            continue  # created once and never touched again; not cached (Secrets are not ours to list)
        if objects.plan_object(desired, live.get(ident)) != objects.SKIP:
            return "%s %s differs" % ident if ident in live else "%s %s is missing" % ident
    keep = set(plan.keep)
    for (kind, name), obj in sorted(live.items()):
        if kind not in CACHED_KINDS or (kind, name) in rendered or (kind, name) in keep:
            continue
        labels = obj["metadata"].get("labels") or {}
        if labels.get(names.LABEL_MANAGED_BY) != names.MANAGED_BY or obj["metadata"].get("deletionTimestamp"):
            continue
        return "%s %s is no longer rendered" % (kind, name)
    return None

