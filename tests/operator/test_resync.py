"""When the runtime runs the role, and when it does not: generative drift, the full-run clock, create-only objects.

No cluster, no Ansible: the controller's decisions with its caches filled by hand, a recording runner and a clock
the test moves. The same decisions against the real apiserver, with the real runner, are
tests/operator/test_resync_cluster.py.
"""

import copy
import os

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import converge, names, objects
from soperator_operator import drift, workqueue
from soperator_operator.controller import Controller
from soperator_operator.runner import RunResult
from soperator_operator.watches import load_watches

NOW = 1_700_000_000
RESYNC = frozenset({workqueue.RESYNC})
DRIFT = frozenset({workqueue.DRIFT})


def converged(replicas=2):
    """A SlurmCluster and NodeSet as stored once converged, and the cache of their objects, as the API has them."""
    cluster = make_cluster(uid="c-uid")
    cluster["metadata"].update(generation=1, resourceVersion="5", finalizers=["slurm.soperator.dev/finalizer"])
    nodeset = make_nodeset("cpu", {"replicas": replicas}, uid="n-uid")
    nodeset["metadata"].update(generation=1, resourceVersion="6")
    plan = converge.plan(cluster, [nodeset], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    live, data = {}, {}
    for desired in plan.manifests:
        obj = objects.with_applied_hash(desired)
        obj["apiVersion"], obj["kind"] = desired["apiVersion"], desired["kind"]
        obj["metadata"].update(resourceVersion="11", uid="u-" + desired["metadata"]["name"])
        ident = (desired["kind"], desired["metadata"]["name"])
        if desired["kind"] not in drift.CACHED_KINDS:
            data[ident] = obj
            continue
        if desired["kind"] == "StatefulSet":
            obj["status"] = {"replicas": obj["spec"]["replicas"], "readyReplicas": 0, "observedGeneration": 1,
                             "updateRevision": desired["metadata"]["name"] + "-r1"}
            for ordinal in range(obj["spec"]["replicas"]):
                name = "%s-%d" % (desired["metadata"]["name"], ordinal)
                labels = dict(obj["spec"]["template"]["metadata"]["labels"])
                labels[converge.REVISION_LABEL] = desired["metadata"]["name"] + "-r1"
                live[("Pod", name)] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": name, "namespace": "hpc", "uid": "p-" + name, "labels": labels},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}}
        live[ident] = obj
    # Never Ready (no Slurm): what the converge module writes on kwok nodes.
    cluster["status"] = {"observedGeneration": 1, "phase": "Progressing",
                         "conditions": [{"type": "Ready", "status": "False", "reason": "Progressing"}],
                         names.STATUS_RECONCILED_DIGEST: drift.observed_digest(live)}
    nodeset["status"] = {"observedGeneration": 1}
    return cluster, nodeset, live, data


# --- generative: any difference runs the role ------------------------------------------------------------------
def leaves(value, path=()):
    """Paths of every scalar in ``value`` (dict keys and list indexes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, path + (index,))
    else:
        yield path


def mutated(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if value is None:
        return "x"
    return str(value) + "-x"


def _set(obj, path, value):
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def _get(obj, path):
    for part in path:
        obj = obj[part]
    return obj


def _cases():
    cluster, nodeset, live, dummy = converged()
    plan = converge.plan(cluster, [nodeset], {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    cases = []
    for desired in plan.manifests:
        ident = (desired["kind"], desired["metadata"]["name"])
        if ident not in live or objects.is_create_only(desired):
            continue  # create-only (the populate Job): created once, never updated; only its absence matters
        for path in leaves(objects.with_applied_hash(desired)):
            cases.append((ident, path))
    return cases


CASES = _cases()


def test_the_generative_cases_cover_every_cached_object():
    kinds = {ident[0] for ident, _ in CASES}
    assert kinds == {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"}
    assert len(CASES) > 300  # every leaf of every rendered object, not a sample


def test_every_leaf_of_every_rendered_object_when_changed_runs_the_role():
    """Edit any field we render, anywhere, in the cache: the check must say why it runs, never None (the apply
    adapter would send a request for each of these: the same rule, objects.plan_object)."""
    cluster, nodeset, live, dummy = converged()
    memo = drift.Memo(digest=drift.observed_digest(live))
    assert drift.needs_run(cluster, [nodeset], live, memo, NOW) is None
    missed = []
    for ident, path in CASES:
        edited = dict(live)
        edited[ident] = copy.deepcopy(live[ident])
        _set(edited[ident], path, mutated(_get(edited[ident], path)))
        if drift.needs_run(cluster, [nodeset], edited, memo, NOW) is None:
            missed.append("%s %s: %s" % (ident[0], ident[1], ".".join(str(p) for p in path)))
    assert missed == []


def test_every_object_when_deleted_runs_the_role():
    cluster, nodeset, live, data = converged()
    memo = drift.Memo(digest=drift.observed_digest(live))
    for ident in [i for i in live if i[0] != "Pod"]:
        edited = dict(live)
        del edited[ident]
        assert drift.needs_run(cluster, [nodeset], edited, memo, NOW) is not None, ident
    for ident in data:  # not cached: found by the timer's lookups
        why = drift.needs_run(cluster, [nodeset], live, memo, NOW, lookup=lambda kind, name, i=ident: (kind, name) != i)
        assert why == "%s %s is missing" % ident
    # a pod gone, or one more (what the digest of the last run does not know)
    for ident in [i for i in live if i[0] == "Pod"]:
        edited = dict(live)
        del edited[ident]
        assert drift.needs_run(cluster, [nodeset], edited, memo, NOW) is not None, ident


# --- the controller with a fake clock ----------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class RecordingRunner:
    """Records what the controller asks to run; every run succeeds and changes nothing."""
    stop_grace = 1

    def __init__(self):
        self.runs = []

    def run(self, extravars, role=None, playbook=None, ident="run", should_stop=lambda: False):
        self.runs.append(role or playbook)
        return RunResult(ok=True, status="successful", rc=0, ready=False)


class ApiObjects:
    """The API calls the controller makes besides its caches, kept in memory (the caches are filled by the test)."""

    def __init__(self, cluster, existing):
        self.cluster = cluster
        self.existing = set(existing)
        self.lookups = []
        self.events = []

    def add_finalizer(self, w, obj, finalizer):
        return obj

    def event(self, obj, event_type, reason, message):
        self.events.append(reason)

    def update_status(self, w, namespace, name, compute, current=None):
        self.cluster["status"] = compute(self.cluster.get("status") or {}, self.cluster)
        return self.cluster

    def exists(self, path):
        self.lookups.append(path)
        return path.rsplit("/", 1)[1] in self.existing


@pytest.fixture
def world():
    cluster, nodeset, live, data = converged()
    watches = load_watches(drift_watches_file())
    api = ApiObjects(cluster, [ident[1] for ident in data])
    runner, clock = RecordingRunner(), Clock()
    ctl = Controller(api, runner, watches, namespaces=["hpc"], clock=clock, wall=lambda: NOW)
    ctl.informers["SlurmCluster"].store.put(cluster)
    ctl.informers["NodeSet"].store.put(nodeset)
    for obj in live.values():
        ctl.owned[obj["kind"]].store.put(obj)
    return ctl, runner, clock, api, live


def drift_watches_file():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "operator",
                        "watches.yaml")


KEY = ("SlurmCluster", "hpc", "demo")


def test_a_cluster_found_in_sync_at_start_gets_its_full_run_one_period_later(world):
    ctl, runner, clock, dummy, dummy2 = world
    period = ctl.by_kind["SlurmCluster"].full_run_period
    assert ctl.reconcile(KEY, frozenset({workqueue.EVENT})) == (600.0, workqueue.RESYNC)  # seen at start: in sync
    assert runner.runs == []
    clock.now += period - 1
    ctl.reconcile(KEY, RESYNC)
    assert runner.runs == []
    clock.now += 1
    ctl.reconcile(KEY, RESYNC)
    assert runner.runs == ["soperator.slurm.cluster"]
    clock.now += period - 1  # the clock restarts at that run
    ctl.reconcile(KEY, RESYNC)
    assert runner.runs == ["soperator.slurm.cluster"]
    clock.now += 1
    ctl.reconcile(KEY, RESYNC)
    assert len(runner.runs) == 2


def test_a_deleted_munge_key_secret_runs_the_role_at_the_next_timer_check(world):
    """The runtime does not recreate anything itself: it runs the role, which decides (never regenerating a key
    under running pods)."""
    ctl, runner, dummy, api, dummy2 = world
    ctl.reconcile(KEY, RESYNC)
    assert runner.runs == [] and len(api.lookups) == 3  # munge key, ssh host keys, jail claim: GETs by name
    assert all("/secrets/" in p or "/persistentvolumeclaims/" in p for p in api.lookups)
    api.existing.discard("demo-munge-key")
    api.lookups.clear()
    ctl.reconcile(KEY, DRIFT)  # an event's check does not look them up (a timer's does)
    assert runner.runs == [] and api.lookups == []
    ctl.reconcile(KEY, RESYNC)
    assert runner.runs == ["soperator.slurm.cluster"]
    assert api.lookups[-1] == "/api/v1/namespaces/hpc/secrets/demo-munge-key"


def test_a_run_records_its_inputs_and_the_same_inputs_run_nothing_again(world):
    """A never-ready cluster: a pod event runs the role once; the same pods again (another event, a restarted
    operator reading the digest back from the status) run nothing."""
    ctl, runner, dummy, api, live = world
    pod = copy.deepcopy(live[("Pod", "demo-cpu-0")])
    pod["status"]["conditions"][0]["status"] = "True"
    ctl.owned["Pod"].store.put(pod)
    ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"]
    assert api.cluster["status"][names.STATUS_RECONCILED_DIGEST] == drift.observed_digest(
        ctl.live_children("hpc", "demo"))
    ctl.reconcile(KEY, DRIFT)
    ctl.reconcile(KEY, RESYNC)
    assert len(runner.runs) == 1
    ctl._forget(KEY)  # a new operator: nothing in memory, the digest is in the status
    ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
    assert len(runner.runs) == 1
