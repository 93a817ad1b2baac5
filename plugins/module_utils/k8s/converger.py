# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Converge one SlurmCluster in one process: observe, plan (``plan/converge.py``), act, report.

A pass reads the live SlurmCluster and what it runs (``observe.py``), asks the pure planner what to do, has the
running daemons judge a changed configuration (``checks.py``), sends every write of the plan as a server-side dry run
(``apply.Applier.preflight``), then does it in this order: drain and resume Slurm nodes, apply and prune the rendered
objects (``apply.py``), scale the workers of NodeSets being deleted, replace outdated pods, delete the Slurm records
of pods that are gone, release NodeSets whose nodes are all gone, and write the status. Every request goes through
the access layer (``access.py``); nothing here decides.

``converge()`` repeats passes while something is under way and ``wait_timeout`` allows (``ansible-playbook``
waits for its drains); with ``wait_timeout=0`` it returns after one pass with ``requeue_after`` (the operator
requeues instead of blocking a worker).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import time
from typing import Any, Callable, Collection, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names
from ansible_collections.soperator.slurm.plugins.module_utils.api import fieldmap
from ansible_collections.soperator.slurm.plugins.module_utils.api.durations import iso
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.policy import Policy
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import Applier
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.checks import ConfigChecks
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.observe import Observation
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import PodTransport, Slurm, SlurmError
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge as core
from ansible_collections.soperator.slurm.plugins.module_utils.plan import lost, model, node_labels, projection
from ansible_collections.soperator.slurm.plugins.module_utils.plan import status as st
from ansible_collections.soperator.slurm.plugins.module_utils.plan import teardown as teardown_plan
from ansible_collections.soperator.slurm.plugins.module_utils.plan.decided import Plan
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import GiveUp, LostPod, Observed, Ungate
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster

# What a pass did (``Converger.act``), and what a converge returns.
Done = Dict[str, Any]
Result = Dict[str, Any]


class SecretMissing(Exception):
    """A key Secret of the cluster is gone while its pods hold the keys: generating a new one would split the
    cluster (munge refuses every credential between old and new pods). Nothing was applied."""

    def __init__(self, message: str) -> None:
        super(SecretMissing, self).__init__(message)
        self.message = message


class InvalidDefinition(Exception):
    """The SlurmCluster itself is invalid: nothing of it can be rendered. ``field`` names the first problem."""

    def __init__(self, errors: SpecErrors) -> None:
        super(InvalidDefinition, self).__init__(str(errors))
        self.errors = errors
        self.field = errors.errors[0].path if getattr(errors, "errors", None) else None


class Converger(Observation, ConfigChecks):
    """One SlurmCluster's reconcile against a live cluster. ``client``: a DynamicClient; ``slurm_transport(pod)``
    returns the argv runner for ``scontrol`` in that controller pod (tests pass a local one)."""

    def __init__(self, client: access.Client, namespace: str, name: str, field_manager: str,
                 slurm_transport: PodTransport, check_mode: bool = False, diff: bool = False,
                 on_secret: Optional[Callable[[str], None]] = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, write_status: bool = True,
                 nodeset_finalizer: bool = False, policy: Policy | None = None) -> None:
        self.client = client
        self.api = access.Api(client, field_manager=field_manager)
        self.namespace = namespace
        self.name = name
        self.field_manager = field_manager
        self.slurm_transport = slurm_transport
        self.check_mode = check_mode
        self.diff = diff
        self.on_secret = on_secret
        self.clock = clock
        self.sleep = sleep
        self.write_status = write_status and not check_mode
        self.nodeset_finalizer = nodeset_finalizer
        self.policy = policy  # the installer's (policy.normalize); None: not judged
        self.warnings: List[str] = []  # what went wrong without failing the run (an Event not written)

    # --- writes of our own resources ------------------------------------------------------------------------
    def patch_status(self, kind: str, name: str, compute: access.StatusCompute, attempts: int = 5) -> None:
        """Read, compute the new status from the old, write it to the status subresource if it differs."""
        if not self.write_status:
            return
        self.api.update_status(names.API_VERSION, kind, name, self.namespace, compute, st.same_status, attempts)

    def may_delete(self, deletion_policy: Mapping[str, object] | None) -> Dict[str, bool]:
        """``{resource: allowed}`` for what ``deletion_policy`` asks to delete (SelfSubjectAccessReviews)."""
        return dict((resource, self.api.may(self.namespace, "delete", resource))
                    for resource in teardown_plan.reviews(deletion_policy))

    # --- one pass -------------------------------------------------------------------------------------------
    def applier(self, manifests: Sequence[KubeObject], keep: Iterable[Tuple[str, str]] = ()) -> Applier:
        """The apply of the cluster's ``manifests``, observed (live copies listed) but not run."""
        return Applier(
            self.client, manifests, self.field_manager, prune_selector="%s=%s" % (names.LABEL_CLUSTER, self.name),
            prune_kinds=kinds.prune_kinds(), prune_namespaces=[self.namespace], check_mode=self.check_mode,
            diff=self.diff, on_secret=self.on_secret, keep=set(keep)).observe()

    def preflight(self, cluster: SlurmCluster, nodesets: Sequence[NodeSet], observed: Observed,
                  now: int) -> Tuple[Plan, Applier]:
        """The plan, and its apply once the API server accepted every write of it in a dry run.

        Objects of a NodeSet the API server refuses make that NodeSet invalid (Degraded, its objects left as they
        are) and the plan is made again without it; a refusal of anything else raises SpecErrors naming the user's
        field. A key Secret that is missing while the cluster's pods run raises SecretMissing. Nothing is written
        here."""
        refused: Dict[str, List[SpecError]] = {}
        while True:
            plan = core.plan(cluster, nodesets, observed, now, policy=self.policy, refused=refused)
            applier = self.applier(plan.objects.manifests, plan.objects.keep)
            self.check_slurm_config(cluster, plan, observed, applier)
            self.check_sshd_config(cluster, plan, observed, applier)
            if plan.read_mounted_config and "mounted_slurm_conf" not in observed:
                # slurm.conf changed since slurmctld was last given it: is the controller pod's copy the new one yet?
                try:
                    observed["mounted_slurm_conf"] = self.slurm().config_file("slurm.conf")
                except SlurmError as e:
                    observed["mounted_slurm_conf"] = None
                    self.warnings.append("cannot read the controller's slurm.conf: %s" % e.msg)
                continue
            if not observed.get("worker_pods_read", True) and any(objects.generator(o) for o in applier.absent()):
                # A key Secret would be generated: which pods hold its keys is a question for every pod.
                observed["pods"].update(self.worker_pods())
                observed["worker_pods_read"] = True
                continue
            refusals = applier.preflight()
            if not refusals:
                break
            errors = fieldmap.refusal_errors(plan.definition.cluster or cluster, plan.definition.valid_nodesets,
                                             refusals)  # (cluster: always set)
            cluster_errors, per_nodeset = core.split_errors(errors)
            if cluster_errors or not per_nodeset or set(per_nodeset) & set(refused):
                raise SpecErrors(errors)
            refused.update(per_nodeset)
        missing = [o["metadata"]["name"] for o in applier.absent()
                   if objects.generator(o) and o["metadata"]["name"] in plan.objects.secrets_held]
        if missing:
            raise SecretMissing(
                "Secret(s) %s of SlurmCluster %s/%s are missing while its pods run with the keys they held: a new "
                "key would lock the running daemons out of each other, so none is generated and nothing was "
                "applied. Restore the Secret(s) from a backup, or set spec.maintenance: true (every pod stops; the "
                "next run generates new keys) and then false again" % (", ".join(missing), self.namespace, self.name))
        return plan, applier

    def act(self, plan: Plan, applier: Applier | None = None) -> Tuple[Dict[str, Any], Done]:
        """Carry ``plan`` out (its ``applier`` from :meth:`preflight`); returns what was done."""
        done: Dict[str, Any] = {"drained": [], "resumed": [], "deleted_nodes": [], "scaled": {}, "released": [],
                                "replaced_pods": []}
        slurm = self.slurm()  # only called upon when the plan changes Slurm
        for reason, nodes in sorted(plan.slurm.drain.items()):
            if not self.check_mode:
                slurm.drain(nodes, reason)
            done["drained"] += nodes
        if plan.slurm.resume:
            done["resumed"] = plan.slurm.resume if self.check_mode else slurm.resume(plan.slurm.resume)
        applied = (applier or self.applier(plan.objects.manifests, plan.objects.keep)).run()
        for sts_name, replicas in sorted(plan.pods.scale.items()):
            if not self.check_mode:
                self.api.patch("apps/v1", "StatefulSet", sts_name, self.namespace, {"spec": {"replicas": replicas}},
                               what="scale StatefulSet %s/%s" % (self.namespace, sts_name))
            done["scaled"][sts_name] = replicas
        for reason, nodes in sorted(plan.slurm.down.items()):
            if not self.check_mode:
                slurm.down(nodes, reason)
            done["downed"] = done.get("downed", []) + nodes
        for pod_name, uid in plan.pods.delete_pods:
            if not self.check_mode:
                # The uid precondition: never the replacement the StatefulSet may already have made.
                try:
                    if not self.api.delete("v1", "Pod", pod_name, self.namespace, uid=uid,
                                           what="replace pod %s/%s" % (self.namespace, pod_name)):
                        continue
                except access.Conflict:
                    continue
            done["replaced_pods"].append(pod_name)
        for lost_pod in plan.pods.replace_lost:
            if self.check_mode or self.replace_lost(lost_pod):
                done["replaced_pods"].append(lost_pod.pod)
        for node_name, features in sorted(plan.slurm.set_features.items()):
            if not self.check_mode:
                slurm.set_features(node_name, features)
            done.setdefault("features", []).append(node_name)
        if plan.slurm.reconfigure:
            if not self.check_mode:
                slurm.reconfigure()
            done["reconfigured"] = plan.slurm.reconfigure
        done["ungated"] = self.ungate(plan.pods.ungate)
        for set_name, message in plan.events.labels:
            self.label_event(set_name, message)
        if plan.slurm.delete_nodes:
            if not self.check_mode:
                slurm.delete(plan.slurm.delete_nodes)
            done["deleted_nodes"] = list(plan.slurm.delete_nodes)
        for pod_name, uid, host, why in plan.pods.evict:
            if not self.check_mode and not self.move_pod(pod_name, uid, host, why):
                continue
            done["replaced_pods"].append(pod_name)
        # Said once a pod went with its jobs: a replaced pod only when this pass deleted it; a removed one when the
        # smaller StatefulSet was applied (or scaled) above.
        done["events"] = []
        for entry in plan.pods.give_up:
            if entry["pod_uid"] and entry["node"] not in done["replaced_pods"]:
                continue
            done["events"].append(self.record_event(entry))
        self.act_elastic(plan, slurm, done)
        return applied, done

    def act_elastic(self, plan: Plan, slurm: Slurm, done: Done) -> None:
        """Elastic NodeSets (plan/elastic.py): the pods of the nodes Slurm powered up (a pod left from before was
        deleted above and is made on a later pass), the nodes to power up, down or hand back, and the Events."""
        done["created_pods"], done["powered"] = [], {}
        events = list(plan.events.power)  # and the refusals below: the plan is not the adapter's to change
        for manifest in plan.pods.create_pods:
            pod_name = manifest["metadata"]["name"]
            if not self.check_mode:
                try:
                    self.api.create(manifest, what="create pod %s/%s" % (self.namespace, pod_name))
                except access.Conflict:
                    continue  # it exists (an older one still terminating): a later pass looks again
                except (access.Invalid, access.Forbidden) as e:
                    # Refused (a quota, an admission policy): the node does not come up, Slurm hands it back after
                    # ResumeTimeout and requeues its job; said here and on the NodeSet, the other nodes go on.
                    self.warnings.append(e.msg)
                    events.append((manifest["metadata"]["labels"].get(names.LABEL_NODESET), "Warning",
                                   "PodRefused", "the pod of worker %s was refused: %s" % (pod_name, e.msg[:500])))
                    continue
            done["created_pods"].append(pod_name)
        for how, nodes in (("up", plan.slurm.power_up), ("down asap", plan.slurm.power_down),
                           ("down force", plan.slurm.power_down_force)):
            if nodes:
                if not self.check_mode:
                    slurm.power(nodes, how)
                done["powered"][how] = list(nodes)
        uids = dict((ns["metadata"]["name"], ns["metadata"].get("uid")) for ns in plan.definition.valid_nodesets)
        for set_name, event_type, reason, message in events:
            if set_name in uids:
                self.owner_event(names.NODESET_KIND, set_name, event_type, reason, message, uid=uids[set_name])
        done["events"] = done.get("events", []) + [e[3] for e in events]

    def jobs_on(self, node_names: Sequence[str]) -> Dict[str, List[str]]:
        """``{node: [job ids]}`` from slurmctld, ``{}`` when it cannot tell (the ids only inform status and Events)."""
        try:
            return self.slurm().jobs_on(node_names)
        except SlurmError:
            return {}

    def record_event(self, entry: GiveUp) -> str:
        """The DrainTimeoutExpired Event on the NodeSet of ``entry`` (``Plan.pods.give_up``); returns its message. An
        Event that cannot be written is reported (a warning), never a reason to fail the pass."""
        event_type, reason, message = model.give_up_event(entry)
        self.owner_event(names.NODESET_KIND, entry["nodeset"], event_type, reason, message, entry["nodeset_uid"])
        return message

    def owner_event(self, kind: str, name: str, event_type: str, reason: str, message: str,
                    uid: str | None = None) -> None:
        """An Event on our SlurmCluster or NodeSet ``name`` (none in check mode). One that cannot be written is
        reported (a warning), never a reason to fail the pass."""
        if self.check_mode:
            return
        metadata = {"name": name, "namespace": self.namespace}
        if uid:
            metadata["uid"] = uid
        try:
            self.api.event({"apiVersion": names.API_VERSION, "kind": kind, "metadata": metadata}, event_type, reason,
                           message, self.field_manager, self.clock())
        except KubernetesError as e:
            self.warnings.append("%s (%s)" % (e.msg, message))

    def ungate(self, ungate: Mapping[str, Ungate]) -> List[str]:
        """Let the gated pods of pinned workers be scheduled (``Plan.pods.ungate``): their pin's node affinity, then the
        gate off. Returns "<pod> -> <node>" of each."""
        done: List[str] = []
        for pod_name, (uid, node, patches) in sorted(ungate.items()):
            if not self.check_mode:
                try:
                    for body in patches:  # the uid: never a newer pod of the same name
                        self.api.patch("v1", "Pod", pod_name, self.namespace, dict(body, metadata={"uid": uid}),
                                       what="place pinned pod %s/%s" % (self.namespace, pod_name))
                except (access.Conflict, access.NotFound, access.Invalid) as e:
                    self.warnings.append(e.msg)
                    continue
            done.append("%s -> %s" % (pod_name, node or "(released)"))
        return done

    def label_event(self, set_name: str | None, message: str) -> None:
        """A Warning LabelRefused on the NodeSet (or the SlurmCluster): a node label Slurm's configuration refuses."""
        if set_name is None:
            self.owner_event(names.CLUSTER_KIND, self.name, "Warning", node_labels.EVENT_LABEL_REFUSED, message)
        else:
            self.owner_event(names.NODESET_KIND, set_name, "Warning", node_labels.EVENT_LABEL_REFUSED, message)

    def replace_lost(self, lost_pod: LostPod) -> bool:
        """Delete the pod of a worker whose node is lost, with no grace period (the kubelet that would confirm a
        graceful delete is gone; lost.py says why this is safe) and only that incarnation (never the replacement),
        then say so in a Warning Event on its NodeSet. True when this call deleted it."""
        try:
            if not self.api.delete("v1", "Pod", lost_pod.pod, self.namespace, uid=lost_pod.uid, grace_period=0,
                                   what="delete pod %s/%s of a lost node" % (self.namespace, lost_pod.pod)):
                return False
        except access.Conflict:
            return False
        self.owner_event(names.NODESET_KIND, lost_pod.nodeset, "Warning", lost.EVENT_LOST_WORKER_REPLACED,
                         "pod %s deleted to be made again on a Ready node: %s" % (lost_pod.pod, lost_pod.why))
        return True

    def move_pod(self, pod_name: str, uid: str | None, host: str | None, why: str) -> bool:
        """Cordon the Kubernetes node of an unhealthy worker (annotated with why), then evict its pod (the Eviction
        API: a PodDisruptionBudget may refuse, the next pass asks again). True when the pod was evicted."""
        if host:
            self.api.patch("v1", "Node", host, None, {"metadata": {"annotations": {
                names.ANNOTATION_CORDONED: "%s/%s: %s" % (self.namespace, pod_name, why)}},
                "spec": {"unschedulable": True}}, what="cordon Node %s" % host)
        return self.api.evict(self.namespace, pod_name, uid)

    # --- the whole converge ---------------------------------------------------------------------------------
    def converge(self, wait_timeout: float = 0, wait_for_ready: bool = False, retire: Collection[str] = (),
                 poll: float = 2.0) -> Result:
        """Passes until settled (nothing pending; Ready too with ``wait_for_ready``) or ``wait_timeout``."""
        deadline = self.clock() + wait_timeout
        totals: Dict[str, Any] = {"drained": [], "resumed": [], "deleted_nodes": [], "scaled": {}, "released": [],
                                  "replaced_pods": [], "events": [], "created_pods": []}
        objects_seen: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        counts: Dict[str, int] = {}
        diffs: List[Dict[str, Any]] = []
        changed = False
        passes = 0
        timings = dict.fromkeys(("observe", "render", "apply", "status"), 0.0)
        mark = [time.monotonic()]

        def lap(phase: str) -> None:
            now = time.monotonic()
            timings[phase] += now - mark[0]
            mark[0] = now

        while True:
            passes += 1
            mark[0] = time.monotonic()
            cluster = self.get_cr(names.CLUSTER_KIND, self.name)
            if cluster is None:
                raise KubernetesError("SlurmCluster %s/%s not found" % (self.namespace, self.name), status=404)
            nodesets, observed = self.observe(cluster, retire)
            lap("observe")
            try:
                # A deletion policy this reconciler could not honour is refused now, not at deletion time.
                deletion = (cluster.get("spec") or {}).get("deletionPolicy")
                problems = teardown_plan.deletion_problems(deletion, self.may_delete(deletion), self.namespace)
                if problems:
                    raise SpecErrors(problems)
                plan, applier = self.preflight(cluster, nodesets, observed, int(self.clock()))
            except SpecErrors as e:
                message = str(e)

                def invalid(old: KubeObject, obj: KubeObject, m: str = message) -> KubeObject:
                    return st.invalid_cluster_status(old, obj, m, iso(self.clock()))
                self.patch_status(names.CLUSTER_KIND, self.name, invalid)
                raise InvalidDefinition(e)
            except SecretMissing as e:
                def failed(old: KubeObject, obj: KubeObject, m: str = e.message) -> KubeObject:
                    return st.invalid_cluster_status(old, obj, m, iso(self.clock()), reason=st.REASON_SECRET_MISSING,
                                                     phase="Failed")
                self.patch_status(names.CLUSTER_KIND, self.name, failed)
                raise
            if observed["slurm"] is not None and plan.nodes_with_jobs():
                plan = plan.with_jobs(self.jobs_on(plan.nodes_with_jobs()))
            lap("render")
            applied, done = self.act(plan, applier)
            lap("apply")
            for entry in applied["objects"]:
                ident = (entry["kind"], entry["namespace"], entry["name"])
                if entry["action"] != "unchanged" or ident not in objects_seen:
                    objects_seen[ident] = entry
            diffs += applied.get("diff") or []
            changed = changed or applied["changed"] or bool(done["drained"] or done["resumed"] or done["scaled"]
                                                            or done["deleted_nodes"] or done["replaced_pods"]
                                                            or done["created_pods"] or done["powered"]
                                                            or done.get("features") or done.get("reconfigured")
                                                            or done.get("ungated"))
            for key in ("drained", "resumed", "deleted_nodes", "replaced_pods", "events", "created_pods"):
                totals[key] += [n for n in done[key] if n not in totals[key]]
            totals["scaled"].update(done["scaled"])
            released = self.release(nodesets, plan, retire)
            totals["released"] += released
            changed = changed or bool(released)
            self.report(cluster, nodesets, observed, plan)
            lap("status")
            settled = not plan.report.pending and (plan.report.ready or not wait_for_ready)
            if settled or self.check_mode or self.clock() + poll > deadline:
                break
            pause = poll if changed else max(poll, plan.report.requeue_after or poll)
            self.sleep(min(pause, max(0.0, deadline - self.clock())))
        for entry in objects_seen.values():
            counts[entry["action"]] = counts.get(entry["action"], 0) + 1
        result = {
            "changed": changed, "ready": plan.report.ready, "phase": plan.report.phase,
            "message": plan.report.message, "pending": list(plan.report.pending),
            "deferred": list(plan.report.deferred), "requeue_after": plan.report.requeue_after,
            "invalid": dict(plan.definition.invalid), "objects": list(objects_seen.values()), "counts": counts,
            "slurm": totals, "nodesets": dict(plan.report.nodesets), "passes": passes, "timings": timings,
        }
        if self.diff:
            result["diff"] = diffs
        if self.warnings:
            result["warnings"] = list(dict.fromkeys(self.warnings))
        return result

    def release(self, nodesets: Sequence[NodeSet], plan: Plan, retire: Collection[str]) -> List[str]:
        """NodeSets whose nodes are all gone: drop our finalizer (being deleted) or delete them (retired by
        the definition, ``site.yml``)."""
        released: List[str] = []
        for ns in nodesets:
            name = ns["metadata"]["name"]
            if name not in plan.objects.release:
                continue
            released.append(name)
            if self.check_mode:
                continue
            if name in retire and ns["metadata"].get("deletionTimestamp") == "retiring":
                self.api.delete(names.API_VERSION, names.NODESET_KIND, name, self.namespace)
            finalizers = ns["metadata"].get("finalizers") or []
            if names.FINALIZER in finalizers:
                live = self.get_cr(names.NODESET_KIND, name)
                if live is not None:
                    self.api.remove_finalizer(live, names.FINALIZER)
        if self.nodeset_finalizer and not self.check_mode:
            for ns in nodesets:
                md = ns["metadata"]
                if md.get("deletionTimestamp") or names.FINALIZER in (md.get("finalizers") or []):
                    continue
                self.api.add_finalizer(ns, names.FINALIZER)
        return released

    def report_pods(self, observed: Observed, plan: Plan, now: str) -> None:
        """Each worker pod's SlurmNodeReady condition, written (pods/status) only when it changed."""
        for name, desired in sorted(plan.report.pod_conditions.items()):
            pod = observed["pods"].get(name)
            live = projection.live_condition(pod)
            if pod is None or projection.same_condition(live, desired):
                continue
            cond = dict(desired, lastTransitionTime=now if live is None or live.get("status") != desired["status"]
                        else live.get("lastTransitionTime") or now)
            try:
                self.api.patch("v1", "Pod", name, self.namespace, {"status": {"conditions": [cond]}},
                               content_type=access.STRATEGIC_MERGE_PATCH, subresource="status",
                               what="write the %s condition of pod %s/%s" % (desired["type"], self.namespace, name))
            except access.NotFound:
                continue

    def report(self, cluster: SlurmCluster, nodesets: Sequence[NodeSet], observed: Observed, plan: Plan) -> None:
        now = iso(self.clock())
        if self.write_status:
            self.report_pods(observed, plan, now)
        self.patch_status(names.CLUSTER_KIND, self.name, lambda old, obj: st.cluster_status(old, obj, plan, now))
        for ns in nodesets:
            name = ns["metadata"]["name"]
            if name in plan.objects.release:
                continue
            facts = plan.report.nodesets.get(name)
            sts = observed["statefulsets"].get(names.worker_name(self.name, name))
            selector = st.label_selector(((sts or {}).get("spec") or {}).get("selector", {}).get("matchLabels")) \
                if sts else st.label_selector(names.selector_labels(self.name, names.COMPONENT_WORKER, name))

            def nodeset_status(old: KubeObject, obj: KubeObject, f: model.NodeSetFacts | None = facts,
                               s: str = selector) -> KubeObject:
                return st.nodeset_status(old, obj, plan, f, s, now)
            self.patch_status(names.NODESET_KIND, name, nodeset_status)
