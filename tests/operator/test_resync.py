"""When the runtime runs the role, and when it does not: generative drift, the full-run clock, create-only objects.

No cluster, no Ansible: the controller's decisions with its caches filled by hand, a recording runner and a clock
the test moves. The same decisions against the real apiserver, with the real runner, are
tests/operator/test_resync_cluster.py.
"""

import copy
import glob
import os

import pytest
from resources import ROOT, load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, model, projection
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from soperator_operator import controller, drift, workqueue
from soperator_operator.controller import Controller
from soperator_operator.runner import RunResult
from soperator_operator.watches import load_watches

NOW = 1_700_000_000
RESYNC = frozenset({workqueue.RESYNC})
DRIFT = frozenset({workqueue.DRIFT})


EXAMPLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
# What the gpu example asks its installer for (its node-local scratch is a host path).
POLICY = policy.normalize({"allowed_host_path_prefixes": ["/mnt/local-nvme"]})


def converged(replicas=2, example=None):
    """A SlurmCluster and its NodeSets as stored once converged, and the cache of their objects, as the API has
    them: the test's own cluster with one NodeSet, or an example (``examples/<example>``) with its NodeSets."""
    if example is None:
        cluster, nodesets = make_cluster(uid="c-uid"), [make_nodeset("cpu", {"replicas": replicas}, uid="n-uid")]
    else:
        cluster, nodesets = load_example(example)
    cluster["metadata"].update(generation=1, resourceVersion="5", finalizers=["slurm.soperator.dev/finalizer"])
    for nodeset in nodesets:
        nodeset["metadata"].update(generation=1, resourceVersion="6")
        nodeset["status"] = {"observedGeneration": 1}
    namespace = cluster["metadata"]["namespace"]
    plan = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": None}, NOW, policy=POLICY)
    live, data = {}, {}
    for desired in plan.objects.manifests:
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
                labels[model.REVISION_LABEL] = desired["metadata"]["name"] + "-r1"
                live[("Pod", name)] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": name, "namespace": namespace, "uid": "p-" + name, "labels": labels},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}}
        live[ident] = obj
    # Never Ready (no Slurm): what the converge module writes on kwok nodes.
    cluster["status"] = {"observedGeneration": 1, "phase": "Progressing",
                         "conditions": [{"type": "Ready", "status": "False", "reason": "Progressing"}],
                         names.STATUS_RECONCILED_DIGEST: drift.observed_digest(live, POLICY)}
    if example is None:
        return cluster, nodesets[0], live, data
    return cluster, nodesets, live, data


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


def _cases(example):
    cluster, nodesets, live, dummy = converged(example=example)
    plan = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": None}, NOW, policy=POLICY)
    cases = []
    for desired in plan.objects.manifests:
        ident = (desired["kind"], desired["metadata"]["name"])
        if ident not in live or objects.is_create_only(desired):
            continue  # create-only (the populate Job): created once, never updated; only its absence matters
        for path in leaves(objects.with_applied_hash(desired)):
            cases.append((ident, path))
    return cases


CASES = dict((example, _cases(example)) for example in EXAMPLES)


def test_the_generative_cases_cover_every_example_and_every_cached_kind():
    """Every example (accounting, REST API, exporter, GPU health checks, ...) and, over them, every kind the
    runtime caches (kinds.py): only the populate Job is create-only (its absence is what counts, below)."""
    assert set(EXAMPLES) >= {"accounting-cluster-local.yaml", "cpu-cluster.yaml", "gpu-cluster.yaml"}
    covered = {ident[0] for cases in CASES.values() for ident, _ in cases}
    assert covered == set(drift.CACHED_KINDS) - {"Job"}
    assert {ident[0] for ident, _ in CASES["gpu-cluster.yaml"]} >= {"CronJob"}   # the NCCL check
    for example, cases in CASES.items():
        assert len(cases) > 300, example  # every leaf of every rendered object, not a sample


def test_every_rendered_kind_is_cached_or_looked_up():
    """Drift of any object the role renders is seen: a cached kind by its watch, a create-only data kind (never
    listed) by the timer's lookup by name. Both lists come from kinds.py."""
    for example in EXAMPLES:
        cluster, nodesets = load_example(example)
        plan = converge.plan(cluster, nodesets, {"statefulsets": {}, "pods": {}, "slurm": None}, NOW, policy=POLICY)
        for desired in plan.objects.manifests:
            assert desired["kind"] in drift.CACHED_KINDS + drift.LOOKED_UP_KINDS, (example, desired["kind"])
    assert set(drift.CACHED_KINDS) == {k.kind for k in kinds.applied()}
    assert set(drift.LOOKED_UP_KINDS) == {k.kind for k in kinds.data()}
    # Optional kinds (another project's CRD) are never watched: a watch of a kind not served would fail.
    from soperator_operator.controller import OWNED
    assert {r.kind for r in OWNED} == set(drift.CACHED_KINDS) | {"Pod"}
    assert not {k.kind for k in kinds.optional_applied()} & {r.kind for r in OWNED}


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_leaf_of_every_rendered_object_when_changed_runs_the_role(example):
    """Edit any field we render, anywhere, in the cache: the check must say why it runs, never None (the apply
    adapter would send a request for each of these: the same rule, objects.plan_object)."""
    cluster, nodesets, live, dummy = converged(example=example)
    memo = drift.Memo(digest=drift.observed_digest(live, POLICY))
    assert drift.needs_run(cluster, nodesets, live, memo, NOW, policy=POLICY) is None
    missed = []
    for ident, path in CASES[example]:
        edited = dict(live)
        edited[ident] = copy.deepcopy(live[ident])
        _set(edited[ident], path, mutated(_get(edited[ident], path)))
        if drift.needs_run(cluster, nodesets, edited, memo, NOW, policy=POLICY) is None:
            missed.append("%s %s: %s" % (ident[0], ident[1], ".".join(str(p) for p in path)))
    assert missed == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_object_when_deleted_runs_the_role(example):
    cluster, nodesets, live, data = converged(example=example)
    memo = drift.Memo(digest=drift.observed_digest(live, POLICY))
    for ident in [i for i in live if i[0] != "Pod"]:
        edited = dict(live)
        del edited[ident]
        assert drift.needs_run(cluster, nodesets, edited, memo, NOW, policy=POLICY) is not None, ident
    assert data
    for ident in data:  # not cached: found by the timer's lookups
        why = drift.needs_run(cluster, nodesets, live, memo, NOW, policy=POLICY,
                              lookup=lambda kind, name, i=ident: (kind, name) != i)
        assert why == "%s %s is missing" % ident
    # a pod gone, or one more (what the digest of the last run does not know)
    for ident in [i for i in live if i[0] == "Pod"]:
        edited = dict(live)
        del edited[ident]
        assert drift.needs_run(cluster, nodesets, edited, memo, NOW, policy=POLICY) is not None, ident


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
        self.result = RunResult(ok=True, status="successful", rc=0, ready=False)  # what the next runs report

    def run(self, extravars, role=None, playbook=None, ident="run", should_stop=lambda: False, tasks_from=None):
        self.runs.append(role or playbook)
        return self.result


class ApiObjects:
    """The API calls the controller makes besides its caches, kept in memory (the caches are filled by the test)."""

    def __init__(self, cluster, existing):
        self.cluster = cluster
        self.existing = set(existing)
        self.lookups = []
        self.events = []
        self.not_served = set()

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

    def serves(self, resource):
        return resource.kind not in self.not_served


@pytest.fixture
def world():
    cluster, nodeset, live, data = converged()
    watches = load_watches(drift_watches_file())
    api = ApiObjects(cluster, [ident[1] for ident in data])
    runner, clock = RecordingRunner(), Clock()
    ctl = Controller(api, runner, watches, namespaces=["hpc"], clock=clock, wall=lambda: NOW, policy=POLICY)
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
        ctl.live_children("hpc", "demo"), POLICY)
    ctl.reconcile(KEY, DRIFT)
    ctl.reconcile(KEY, RESYNC)
    assert len(runner.runs) == 1
    ctl._forget(KEY)  # a new operator: nothing in memory, the digest is in the status
    ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
    assert len(runner.runs) == 1


def _digest_in_status(api):
    return (api.cluster.get("status") or {}).get(names.STATUS_RECONCILED_DIGEST)


def _ready_pod(ctl, live):
    pod = copy.deepcopy(live[("Pod", "demo-cpu-0")])
    pod["status"]["conditions"][0]["status"] = "True"
    ctl.owned["Pod"].store.put(pod)


def test_a_run_that_left_work_for_later_runs_again_at_its_requeue_with_the_same_inputs(world):
    """Issue 12's deferral: a login pod waits for its sessions (the module's deferred, Ready stays True). The run
    reports requeue_after; it records no digest, so neither the requeue nor any later check, nor a restarted
    operator, can take the unchanged inputs for converged."""
    ctl, runner, dummy, api, live = world
    runner.result = RunResult(ok=True, status="successful", rc=0, ready=True, requeue_after=15)
    _ready_pod(ctl, live)
    requeue, why = ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"] and why == workqueue.REQUEUE and requeue == 15
    assert _digest_in_status(api) is None and ctl._memo[KEY].digest is None
    ctl.reconcile(KEY, frozenset({workqueue.REQUEUE}))   # its requeue: the same inputs, run
    assert len(runner.runs) == 2
    ctl.reconcile(KEY, RESYNC)                           # any later check too
    assert len(runner.runs) == 3
    ctl._forget(KEY)                                     # and a restarted operator
    ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
    assert len(runner.runs) == 4
    # The sessions ended, the pod was replaced: a settled run records its inputs, and the same ones run nothing.
    runner.result = RunResult(ok=True, status="successful", rc=0, ready=True)
    assert ctl.reconcile(KEY, frozenset({workqueue.REQUEUE}))[1] == workqueue.RESYNC
    assert len(runner.runs) == 5 and _digest_in_status(api) == drift.observed_digest(
        ctl.live_children("hpc", "demo"), POLICY)
    ctl.reconcile(KEY, DRIFT)
    ctl.reconcile(KEY, RESYNC)
    assert len(runner.runs) == 5


def test_status_writes_enqueue_nothing_and_run_nothing(world):
    """The runtime's own status writes, the converge's, and the Slurm status loop's (a NodeSet's counts, worker
    pods' SlurmNodeReady condition) come back as watch events: none of them may start a run (no feedback loop)."""
    ctl, runner, clock, dummy, live = world
    cluster_watch, nodeset_watch = ctl.by_kind["SlurmCluster"], ctl.by_kind["NodeSet"]
    cluster = ctl.cached("SlurmCluster", "hpc", "demo")
    nodeset = ctl.cached("NodeSet", "hpc", "cpu")
    ctl._on_cr(cluster_watch, "ADDED", None, cluster)       # seen at start: one run is due
    ctl._on_cr(nodeset_watch, "ADDED", None, nodeset)
    clock.now += 1
    assert ctl.queue.get(timeout=0) == (KEY, frozenset({workqueue.EVENT}))
    ctl.queue.done(KEY)
    assert ctl.reconcile(KEY, frozenset({workqueue.EVENT}))[1] == workqueue.RESYNC and runner.runs == []

    new_cluster = copy.deepcopy(cluster)
    new_cluster["metadata"]["resourceVersion"] = "50"
    new_cluster["status"].update(phase="Ready", **{names.STATUS_RECONCILED_DIGEST: "written-by-us"})
    new_cluster["status"]["conditions"].append({"type": "Successful", "status": "True"})
    ctl._on_cr(cluster_watch, "MODIFIED", cluster, new_cluster)
    new_nodeset = copy.deepcopy(nodeset)
    new_nodeset["metadata"]["resourceVersion"] = "51"
    new_nodeset["status"].update(replicas=2, readyReplicas=2, nodesIdle=2)
    ctl._on_cr(nodeset_watch, "MODIFIED", nodeset, new_nodeset)
    ctl.informers["NodeSet"].store.put(new_nodeset)
    for ident in [i for i in live if i[0] == "Pod" and i[1].startswith("demo-cpu-")]:
        old = ctl.owned["Pod"].store.get("hpc", ident[1])
        pod = copy.deepcopy(old)
        pod["status"]["conditions"].append(dict(projection.pod_condition(None),
                                                lastTransitionTime="2026-01-01T00:00:00Z"))
        ctl.owned["Pod"].store.put(pod)
        ctl._on_owned("MODIFIED", old, pod)
    clock.now += 10
    assert ctl.queue.get(timeout=0) is None
    ctl.reconcile(KEY, RESYNC)   # the timer's check on the same inputs
    assert runner.runs == []


@pytest.mark.parametrize("reason,retryable", [("Unavailable", True), ("DataMissing", True),
                                              ("InvalidSpec", False)])
def test_a_failed_run_records_no_digest_and_forgets_the_last_one(world, reason, retryable):
    """A run that failed (transient, a key Secret missing, an invalid definition) leaves no digest behind, in
    memory or in the status, that a later check or a restarted operator could take for converged."""
    ctl, runner, dummy, api, live = world
    assert _digest_in_status(api) is not None
    runner.result = RunResult(ok=False, status="failed", rc=2, message="no", reason=reason, retryable=retryable)
    _ready_pod(ctl, live)
    requeue, why = ctl.reconcile(KEY, DRIFT)
    assert len(runner.runs) == 1 and why == (workqueue.RETRY if retryable else workqueue.RESYNC)
    assert _digest_in_status(api) is None and ctl._memo[KEY].digest is None
    ctl.reconcile(KEY, RESYNC)
    if retryable:  # the next check runs, as the retry does
        assert len(runner.runs) == 2
    else:          # the same invalid generation is not run again by this operator ...
        assert len(runner.runs) == 1
        ctl._forget(KEY)   # ... but a restarted one (maybe with another policy) looks again
        ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
        assert len(runner.runs) == 2
    cluster = copy.deepcopy(ctl.cached("SlurmCluster", "hpc", "demo"))
    cluster["metadata"]["generation"] = 2   # the fix: a new generation always runs
    ctl.informers["SlurmCluster"].store.put(cluster)
    runner.result = RunResult(ok=True, status="successful", rc=0, ready=False)
    ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
    assert runner.runs[-1] == "soperator.slurm.cluster" and _digest_in_status(api) is not None


def test_an_operator_restarted_with_another_policy_looks_at_every_cluster_again(world):
    ctl, runner, dummy, api, dummy2 = world
    ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
    assert runner.runs == []
    ctl._forget(KEY)
    ctl.policy = policy.normalize({"allowed_registries": ["registry.example.com"]})
    ctl.reconcile(KEY, frozenset({workqueue.EVENT}))
    assert runner.runs == ["soperator.slurm.cluster"]


def test_an_optional_data_kind_not_served_is_no_reason_to_run(world):
    """A mariadb-operator MariaDB (kinds.py: data, optional) is looked up like the other create-only objects; on a
    cluster that does not serve the kind the role cannot create it either, so its absence runs nothing."""
    ctl, dummy, dummy2, api, dummy3 = world
    exists = ctl._lookup("hpc")
    assert exists("MariaDB", "demo-mariadb") is False
    api.not_served.add("MariaDB")
    assert exists("MariaDB", "demo-mariadb") is True
    api.not_served.add("Secret")   # never true of a core kind, and a non-optional kind is never excused
    assert exists("Secret", "demo-munge-key") is True and exists("Secret", "gone") is False


def _pod_event(ctl, name, ready, etype="MODIFIED", deleting=False):
    old = ctl.owned["Pod"].store.get("hpc", name)
    pod = copy.deepcopy(old)
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"].get("resourceVersion") or 0) + 1)
    pod["status"]["conditions"][0]["status"] = "True" if ready else "False"
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ctl.owned["Pod"].store.put(pod)
    ctl._on_owned(etype, old, pod)


def _up_but(ctl, *names_coming_up):
    """Every pod of the world Ready (no event: as found at start) but ``names_coming_up`` (Running, not Ready)."""
    for pod in ctl.owned["Pod"].store.list("hpc"):
        pod = copy.deepcopy(pod)
        pod["status"]["conditions"][0]["status"] = "False" if pod["metadata"]["name"] in names_coming_up else "True"
        ctl.owned["Pod"].store.put(pod)


def test_pods_coming_up_one_by_one_start_one_run_once_they_are_up(world):
    """Pods turning Ready one after another (a StatefulSet coming up) hold the check while one of the cluster is
    still on its way, and until none has come for SETTLE_QUIET: one run for all of them, not one per run."""
    ctl, runner, clock, dummy, dummy2 = world
    _up_but(ctl, "demo-cpu-0", "demo-cpu-1")
    _pod_event(ctl, "demo-cpu-0", ready=True)
    clock.now += controller.SETTLE_QUIET + 0.5
    # past the quiet, but demo-cpu-1 is still coming up: held until the cap at most
    assert ctl.reconcile(KEY, DRIFT) == (pytest.approx(controller.SETTLE_CAP - controller.SETTLE_QUIET - 0.5),
                                         workqueue.DRIFT)
    _pod_event(ctl, "demo-cpu-1", ready=True)
    clock.now += 0.6
    assert ctl.reconcile(KEY, DRIFT) == (pytest.approx(controller.SETTLE_QUIET - 0.6), workqueue.DRIFT)
    assert runner.runs == []
    clock.now += controller.SETTLE_QUIET - 0.6
    ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"]  # both pods' readiness in one run
    assert ctl.reconcile(KEY, DRIFT)[1] == workqueue.RESYNC and len(runner.runs) == 1  # nothing held any more


def test_a_pod_that_never_comes_up_is_checked_after_the_cap(world):
    """A pod that stays Pending (unschedulable, an image that never pulls) holds nothing beyond SETTLE_CAP."""
    ctl, runner, clock, dummy, dummy2 = world
    _up_but(ctl, "demo-cpu-1")
    _pod_event(ctl, "demo-cpu-0", ready=False)
    _pod_event(ctl, "demo-cpu-0", ready=True)
    clock.now += controller.SETTLE_CAP - 0.1
    assert ctl.reconcile(KEY, DRIFT) == (pytest.approx(0.1), workqueue.DRIFT) and runner.runs == []
    clock.now += 0.1
    ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"]


def test_pods_that_never_stop_changing_are_checked_after_the_cap(world):
    ctl, runner, clock, dummy, dummy2 = world
    _up_but(ctl)
    start = clock.now
    # a pod flapping, an event every half second, then another pod turning Ready: never SETTLE_QUIET without one
    events = [("demo-cpu-0", i % 2 == 1) for i in range(9)] + [("demo-cpu-1", False)]
    for name, ready in events:
        _pod_event(ctl, name, ready=ready)
        assert ctl.reconcile(KEY, DRIFT)[1] == workqueue.DRIFT and runner.runs == []
        clock.now += 0.5
    assert clock.now - start == pytest.approx(controller.SETTLE_CAP)
    ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"]


@pytest.mark.parametrize("other", ["a pod deleted", "a pod being deleted", "a ConfigMap edited",
                                   "a StatefulSet's spec edited"])
def test_other_events_are_checked_with_the_pods_coming_up_and_do_not_extend_their_wait(world, other):
    ctl, runner, clock, dummy, live = world
    _up_but(ctl, "demo-controller-0")
    _pod_event(ctl, "demo-controller-0", ready=True)
    clock.now += 0.5
    if other == "a pod deleted":
        ctl.owned["Pod"].store.remove("hpc", "demo-cpu-1")
        ctl._on_owned("DELETED", live[("Pod", "demo-cpu-1")], None)
    elif other == "a pod being deleted":
        _pod_event(ctl, "demo-cpu-1", ready=False, deleting=True)
    else:
        kind, name = ("ConfigMap", names.slurm_config_name("demo")) if "ConfigMap" in other else (
            "StatefulSet", "demo-cpu")
        old = ctl.owned[kind].store.get("hpc", name)
        obj = copy.deepcopy(old)
        if kind == "ConfigMap":
            obj["data"]["slurm.conf"] += "\n# edited\n"
        else:
            obj["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
            obj["spec"]["template"]["metadata"]["labels"]["edited"] = "yes"
        ctl.owned[kind].store.put(obj)
        ctl._on_owned("MODIFIED", old, obj)
    assert ctl.reconcile(KEY, DRIFT) == (pytest.approx(controller.SETTLE_QUIET - 0.5), workqueue.DRIFT)
    clock.now += controller.SETTLE_QUIET - 0.5  # not extended by the other event
    ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"]


def test_a_statefulset_status_following_its_pods_is_held_with_them(world):
    ctl, runner, clock, dummy, dummy2 = world
    _up_but(ctl, "demo-cpu-0")
    _pod_event(ctl, "demo-cpu-0", ready=True)
    clock.now += 0.8
    old = ctl.owned["StatefulSet"].store.get("hpc", "demo-cpu")
    sts = copy.deepcopy(old)
    sts["status"]["readyReplicas"] = 1
    ctl.owned["StatefulSet"].store.put(sts)
    ctl._on_owned("MODIFIED", old, sts)
    clock.now += 0.5
    assert ctl.reconcile(KEY, DRIFT) == (pytest.approx(controller.SETTLE_QUIET - 0.5), workqueue.DRIFT)
    clock.now += controller.SETTLE_QUIET - 0.5
    ctl.reconcile(KEY, DRIFT)
    assert runner.runs == ["soperator.slurm.cluster"]


def test_a_new_generation_is_never_held_by_pods_coming_up(world):
    ctl, runner, clock, dummy, dummy2 = world
    _pod_event(ctl, "demo-cpu-0", ready=True)
    nodeset = copy.deepcopy(ctl.cached("NodeSet", "hpc", "cpu"))
    nodeset["metadata"]["generation"] += 1
    ctl.informers["NodeSet"].store.put(nodeset)
    ctl.reconcile(KEY, frozenset({workqueue.EVENT, workqueue.DRIFT}))
    assert runner.runs == ["soperator.slurm.cluster"]


def test_an_event_without_a_new_generation_is_held_with_the_pods(world):
    """A NodeSet first seen by the watch after the run that converged it (an event, its generation already run)
    waits with the pods coming up: only a generation not yet run goes ahead of them."""
    ctl, runner, clock, dummy, dummy2 = world
    _up_but(ctl, "demo-cpu-0")
    _pod_event(ctl, "demo-cpu-0", ready=True)
    assert ctl.reconcile(KEY, frozenset({workqueue.EVENT, workqueue.DRIFT})) == (
        pytest.approx(controller.SETTLE_QUIET), workqueue.DRIFT) and runner.runs == []
