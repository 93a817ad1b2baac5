# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Converge one SlurmCluster in one process: observe, plan (``converge.py``), act, report.

A pass reads the live SlurmCluster and its NodeSets, the cluster's StatefulSets and pods (two label-selected
lists) and Slurm's node table (one ``scontrol show node`` through the controller pod, when it runs), asks the
pure planner what to do, then does it in this order: drain and resume Slurm nodes, apply and prune the
rendered objects (``_k8s_apply``), scale the workers of NodeSets being deleted, delete the Slurm records of
pods that are gone, release NodeSets whose nodes are all gone, and write the status.

``converge()`` repeats passes while something is under way and ``wait_timeout`` allows (``ansible-playbook``
waits for its drains); with ``wait_timeout=0`` it returns after one pass with ``requeue_after`` (the operator
requeues instead of blocking a worker).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
import uuid
from typing import Any, Dict

from ansible_collections.soperator.slurm.plugins.module_utils import converge as core
from ansible_collections.soperator.slurm.plugins.module_utils import errors as failures
from ansible_collections.soperator.slurm.plugins.module_utils import (
    fieldmap, identity, kinds, login_check, names, objects, projection, render, slurm_check,
)
from ansible_collections.soperator.slurm.plugins.module_utils import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils import status as st
from ansible_collections.soperator.slurm.plugins.module_utils.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils._k8s_apply import (
    Applier, DryRunRefused, _api_message, _body, apply_manifests,
)
from ansible_collections.soperator.slurm.plugins.module_utils._k8s_client import KubernetesError, clients
from ansible_collections.soperator.slurm.plugins.module_utils._slurm import KubernetesExecTransport, Slurm, SlurmError

try:
    from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError, NotFoundError
except ImportError:  # the module reports the missing library first

    class DynamicApiError(Exception):  # type: ignore[no-redef]
        pass

    class ConflictError(DynamicApiError):  # type: ignore[no-redef]
        pass

    class NotFoundError(DynamicApiError):  # type: ignore[no-redef]
        pass

FINALIZER = names.GROUP + "/finalizer"
# The API server answers a get with the object's metadata only (no Secret value is ever transferred).
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


class SecretMissing(Exception):
    """A key Secret of the cluster is gone while its pods hold the keys: generating a new one would split the
    cluster (munge refuses every credential between old and new pods). Nothing was applied."""

    def __init__(self, message):
        super(SecretMissing, self).__init__(message)
        self.message = message


class InvalidDefinition(Exception):
    """The SlurmCluster itself is invalid: nothing of it can be rendered. ``field`` names the first problem."""

    def __init__(self, errors):
        super(InvalidDefinition, self).__init__(str(errors))
        self.errors = errors
        self.field = errors.errors[0].path if getattr(errors, "errors", None) else None


def _now_iso(now):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


class Converger(object):
    """One SlurmCluster's reconcile against a live cluster. ``slurm_transport(pod)`` returns the argv runner
    for ``scontrol`` in that controller pod (tests pass a local one)."""

    def __init__(self, client, namespace, name, field_manager, slurm_transport, check_mode=False, diff=False,
                 on_secret=None, clock=time.time, sleep=time.sleep, write_status=True, nodeset_finalizer=False,
                 policy=None):
        self.client = client
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
        self.warnings = []    # what went wrong without failing the run (an Event not written)
        self._res = {}

    # --- API plumbing ---------------------------------------------------------------------------------------
    def resource(self, api_version, kind):
        key = (api_version, kind)
        if key not in self._res:
            try:
                self._res[key] = self.client.resources.get(api_version=api_version, kind=kind)
            except Exception as e:  # ResourceNotFoundError and discovery failures
                raise KubernetesError("the cluster serves no %s %s (are the CRDs installed?): %s"
                                      % (api_version, kind, e))
        return self._res[key]

    def _call(self, what, fn, *args, **kwargs):
        expect = kwargs.pop("expect", ())
        try:
            return fn(*args, **kwargs)
        except expect:
            raise
        except DynamicApiError as e:
            raise KubernetesError("%s: %s" % (what, _api_message(e)), status=e.status)
        except Exception as e:  # transport errors
            if isinstance(e, KubernetesError):
                raise
            raise KubernetesError("%s: cannot reach the Kubernetes API: %s" % (what, e))

    def get_namespace(self):
        res = self.resource("v1", "Namespace")
        try:
            return _body(self._call("get Namespace %s" % self.namespace, res.get, name=self.namespace,
                                    serialize=False, expect=NotFoundError))
        except NotFoundError:
            return None

    def served(self, api_version, kind):
        """Whether the cluster serves a kind (another project's CRD); remembered for this Converger."""
        key = (api_version, kind)
        if key not in self._res:
            try:
                res = self.client.resources.get(api_version=api_version, kind=kind)
            except Exception:  # ResourceNotFoundError: not served; discovery failures count as not served too
                return False
            # Another project's kind is confirmed with the server: the library's discovery cache, a file every
            # process on the host shares, still lists a kind whose CRD was removed since it was written.
            if kind in kinds.optional_names() and not self._listed(api_version, kind):
                self.client.resources.invalidate_cache()
                return False
            self._res[key] = res
        return True

    def _listed(self, api_version, kind):
        """The server's own resource list of a group version names ``kind``."""
        try:
            body = _body(self._call("discovery of %s" % api_version, self.client.request, "GET",
                                    "/apis/%s" % api_version, serialize=False, expect=NotFoundError))
        except NotFoundError:
            return False
        return any(r.get("kind") == kind for r in body.get("resources") or [])

    def served_kinds(self):
        """The optional kinds (kinds.OWNED) the cluster serves: only those are rendered."""
        return tuple(k.kind for k in kinds.OWNED if k.optional and self.served(kinds.api_version(k), k.kind))

    def get_cr(self, kind, name):
        res = self.resource(names.API_VERSION, kind)
        try:
            return _body(self._call("get %s %s/%s" % (kind, self.namespace, name), res.get, name=name,
                                    namespace=self.namespace, serialize=False, expect=NotFoundError))
        except NotFoundError:
            return None

    def list(self, api_version, kind, selector=None):
        res = self.resource(api_version, kind)
        body = _body(self._call("list %s in %s" % (kind, self.namespace), res.get, namespace=self.namespace,
                                label_selector=selector, serialize=False))
        items = body.get("items") or []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def nodesets(self, every=None):
        """This cluster's NodeSets (of ``every`` NodeSet of the namespace, listed when not given)."""
        if every is None:
            every = self.list(names.API_VERSION, names.NODESET_KIND)
        return [ns for ns in every if ((ns.get("spec") or {}).get("clusterRef") or {}).get("name") == self.name]

    def owners(self, nodesets=None, clusters=None):
        """Every SlurmCluster and NodeSet of the namespace as ``spec.name_collisions`` wants them."""
        if clusters is None:
            clusters = self.list(names.API_VERSION, names.CLUSTER_KIND)
        if nodesets is None:
            nodesets = self.list(names.API_VERSION, names.NODESET_KIND)
        return ([{"cluster": c["metadata"]["name"], "nodeset": None,
                  "created": c["metadata"].get("creationTimestamp")} for c in clusters]
                + [{"cluster": ((ns.get("spec") or {}).get("clusterRef") or {}).get("name"),
                    "nodeset": ns["metadata"]["name"], "created": ns["metadata"].get("creationTimestamp")}
                   for ns in nodesets])

    def patch_status(self, kind, name, compute, attempts=5):
        """Read, compute the new status from the old, write it to the status subresource if it differs."""
        if not self.write_status:
            return
        res = self.resource(names.API_VERSION, kind)
        for attempt in range(attempts):
            obj = self.get_cr(kind, name)
            if obj is None:
                return
            old = obj.get("status") or {}
            new = compute(old, obj)
            if new is None or st.same_status(old, new):
                return
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": new}
            try:
                self._call("write the status of %s %s/%s" % (kind, self.namespace, name), self.client.patch,
                           res.status, body=body, name=name, namespace=self.namespace,
                           content_type="application/merge-patch+json", expect=(ConflictError, NotFoundError))
                return
            except ConflictError:
                if attempt + 1 == attempts:
                    raise KubernetesError("status of %s %s/%s: kept losing the update race"
                                          % (kind, self.namespace, name), status=409)
            except NotFoundError:
                return

    def patch_finalizers(self, obj, finalizers):
        kind, name = obj["kind"], obj["metadata"]["name"]
        res = self.resource(names.API_VERSION, kind)
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": obj["metadata"]["resourceVersion"]}}
        try:
            self._call("update the finalizers of %s %s/%s" % (kind, self.namespace, name), self.client.patch, res,
                       body=body, name=name, namespace=self.namespace, content_type="application/merge-patch+json",
                       expect=NotFoundError)
        except NotFoundError:
            pass

    # --- Slurm ----------------------------------------------------------------------------------------------
    def controller_ready(self, pods):
        pod = pods.get(names.controller_name(self.name) + "-0")
        if not pod or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        for cond in (pod.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "Ready":
                return cond.get("status") == "True"
        return False

    def slurm(self):
        return Slurm(self.slurm_transport(names.controller_name(self.name) + "-0"))

    # --- one pass -------------------------------------------------------------------------------------------
    def observe(self, cluster, extra_leaving=()):
        every = self.list(names.API_VERSION, names.NODESET_KIND)
        nodesets = self.nodesets(every)
        leaving = set(extra_leaving)
        marked = []
        for ns in nodesets:
            if ns["metadata"]["name"] in leaving and not ns["metadata"].get("deletionTimestamp"):
                ns = dict(ns, metadata=dict(ns["metadata"], deletionTimestamp="retiring"))
            marked.append(ns)
        selector = "%s=%s" % (names.LABEL_CLUSTER, self.name)
        statefulsets = dict((s["metadata"]["name"], s) for s in self.list("apps/v1", "StatefulSet", selector))
        pods = dict((p["metadata"]["name"], p) for p in self.list("v1", "Pod", selector))
        slurm_nodes, slurm_error = None, None
        if self.controller_ready(pods):
            try:
                slurm_nodes = self.slurm().show_nodes()
            except SlurmError as e:
                slurm_error = e.msg
        else:
            slurm_error = "pod %s-0 is not ready" % names.controller_name(self.name)
        observed = {"statefulsets": statefulsets, "pods": pods, "slurm": slurm_nodes, "slurm_error": slurm_error,
                    "login_sessions": self.login_sessions(statefulsets, pods), "served": self.served_kinds(),
                    "owners": self.owners(every), "secrets": self.database_secrets(cluster)}
        observed["identity"], observed["identity_error"] = self.identity_status(cluster, pods)
        settings = ((cluster.get("spec") or {}).get("healthChecks") or {}).get("kubernetesNodes") or {}
        if slurm_nodes is not None and (settings.get("drainCordoned") or settings.get("drainOnConditions")):
            observed["k8s_nodes"], observed["k8s_nodes_error"] = self.kubernetes_nodes(pods)
        return marked, observed, slurm_error

    def database_secrets(self, cluster):
        """``{name: labels}`` of the Secrets an External database or a directory names (``spec.database_secret_refs``,
        ``identity.secret_refs``), read by name as metadata only (PartialObjectMetadata: their values never reach this
        process); a missing one is left out."""
        found = {}
        res = self.resource("v1", "Secret")
        refs = specs.database_secret_refs(cluster.get("spec")) + identity.secret_refs(cluster.get("spec"))
        for name in sorted(set(ref[1] for ref in refs)):
            try:
                meta = _body(self._call("read the labels of Secret %s/%s" % (self.namespace, name), res.get, name=name,
                                        namespace=self.namespace, serialize=False, expect=NotFoundError,
                                        header_params={"Accept": METADATA_ONLY}))
            except NotFoundError:
                continue
            found[name] = dict((meta.get("metadata") or {}).get("labels") or {})
        return found

    def kubernetes_nodes(self, pods):
        """({name: {"unschedulable", "conditions"}} of the Kubernetes nodes the pods run on, error); (None, why)
        when Nodes may not be read (cluster-scoped: the operator's opt-in ClusterRole, operator_read_nodes)."""
        res = self.resource("v1", "Node")
        found = {}
        hosts = set(str((p.get("spec") or {}).get("nodeName")) for p in pods.values()
                    if (p.get("spec") or {}).get("nodeName"))
        for host in sorted(hosts):
            try:
                node = _body(self._call("get Node %s" % host, res.get, name=host, serialize=False,
                                        expect=NotFoundError))
            except NotFoundError:
                continue
            except KubernetesError as e:
                return None, "cannot read Kubernetes nodes: %s" % e.msg
            found[host] = {"unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
                           "conditions": dict((c.get("type"), c.get("status"))
                                              for c in (node.get("status") or {}).get("conditions") or ())}
        return found, None

    def identity_status(self, cluster, pods):
        """(what the controller's sssd sidecar last found about the directory, None) or (None, why it was not read);
        (None, None) without spec.identity. One fixed command in that container: it reads its status file."""
        if not identity.enabled(cluster.get("spec")):
            return None, None
        name = names.controller_name(self.name) + "-0"
        statuses = ((pods.get(name) or {}).get("status") or {}).get("initContainerStatuses") or []
        if not any(s.get("name") == identity.CONTAINER and (s.get("state") or {}).get("running") for s in statuses):
            return None, "the sssd sidecar of %s is not running" % name
        try:
            rc, out, err = self.slurm_transport(name, identity.CONTAINER)(identity.STATUS_COMMAND)
        except SlurmError as e:
            return None, "cannot ask the sssd sidecar of %s: %s" % (name, e.msg)
        if rc:
            return None, "the sssd sidecar of %s has not looked at the directory yet" % name
        return out, None

    def login_sessions(self, statefulsets, pods):
        """{pod: open sessions} of the outdated login pods (only they are asked); None when one cannot tell."""
        sessions = {}
        for name in core.outdated_login_pods(self.name, statefulsets, pods):
            try:
                rc, out, dummy = self.slurm_transport(name, login_check.CONTAINER)(login_check.sessions_command())
            except SlurmError:
                # No sshd container to ask: a pod that is not ready holds no session (its sshd is not running).
                sessions[name] = None if core.pod_ready(pods[name]) else 0
                continue
            sessions[name] = login_check.parse_sessions(rc, out)
        return sessions

    def check_slurm_config(self, cluster, plan, observed):
        """A slurm.conf that differs from the live one is parsed by the running controller's own Slurm first: one
        it refuses raises SpecErrors naming the field, before anything is written (the live config, and slurmctld
        on it, stay). Without a running controller there is nothing to restart: the typed values are the check."""
        name = names.slurm_config_name(self.name)
        desired = next((m for m in plan.manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"] == name), None)
        if desired is None or not self.controller_ready(observed["pods"]):
            return
        res = self.resource("v1", "ConfigMap")
        try:
            live = _body(self._call("get ConfigMap %s/%s" % (self.namespace, name), res.get, name=name,
                                    namespace=self.namespace, serialize=False, expect=NotFoundError))
        except NotFoundError:
            live = None
        if live is not None and (live.get("data") or {}) == desired["data"]:
            return
        transport = self.slurm_transport(names.controller_name(self.name) + "-0")
        argv, stdin = slurm_check.command(desired["data"])
        try:
            rc, dummy, err = transport(argv, stdin)
        except SlurmError:
            return  # the controller went away meanwhile: the next pass checks again
        found = slurm_check.problem(rc, err, desired["data"], cluster.get("spec"))
        if found:
            raise SpecErrors([SpecError(found[0], found[1])])

    def check_sshd_config(self, cluster, plan, observed):
        """A changed sshd_config is tested by a ready login pod's own sshd (``sshd -t``) before it is written: one it
        refuses raises SpecErrors naming the field; the live config and the login pods stay."""
        name = names.sshd_config_name(self.name)
        desired = next((m for m in plan.manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"] == name), None)
        prefix = names.login_name(self.name) + "-"
        ready = sorted(n for n, pod in observed["pods"].items() if n.startswith(prefix)
                       and not pod["metadata"].get("deletionTimestamp") and core.pod_ready(pod))
        if desired is None or not ready:
            return
        res = self.resource("v1", "ConfigMap")
        try:
            live = _body(self._call("get ConfigMap %s/%s" % (self.namespace, name), res.get, name=name,
                                    namespace=self.namespace, serialize=False, expect=NotFoundError))
        except NotFoundError:
            live = None
        if live is not None and (live.get("data") or {}) == desired["data"]:
            return
        text = desired["data"].get("sshd_config", "")
        argv, stdin = login_check.sshd_test_command(text)
        try:
            rc, dummy, err = self.slurm_transport(ready[0], login_check.CONTAINER)(argv, stdin)
        except SlurmError:
            return  # the pod went away meanwhile: the next pass checks again
        found = login_check.sshd_problem(rc, err, text, (cluster.get("spec") or {}).get("login"))
        if found:
            raise SpecErrors([SpecError(found[0], found[1])])

    def applier(self, manifests, keep=()):
        """The apply of the cluster's ``manifests``, observed (live copies listed) but not run."""
        return Applier(
            self.client, manifests, self.field_manager, prune_selector="%s=%s" % (names.LABEL_CLUSTER, self.name),
            prune_kinds=kinds.prune_kinds(), prune_namespaces=[self.namespace], check_mode=self.check_mode,
            diff=self.diff, on_secret=self.on_secret, keep=set(keep)).observe()

    def preflight(self, cluster, nodesets, observed, now):
        """The plan, and its apply once the API server accepted every write of it in a dry run.

        Objects of a NodeSet the API server refuses make that NodeSet invalid (Degraded, its objects left as they
        are) and the plan is made again without it; a refusal of anything else raises SpecErrors naming the user's
        field. A key Secret that is missing while the cluster's pods run raises SecretMissing. Nothing is written
        here."""
        refused = {}
        while True:
            plan = core.plan(cluster, nodesets, observed, now, policy=self.policy, refused=refused)
            self.check_slurm_config(cluster, plan, observed)
            self.check_sshd_config(cluster, plan, observed)
            applier = self.applier(plan.manifests, plan.keep)
            refusals = applier.preflight()
            if not refusals:
                break
            errors = fieldmap.refusal_errors(plan.cluster, plan.valid_nodesets, refusals)
            cluster_errors, per_nodeset = core.split_errors(errors)
            if cluster_errors or not per_nodeset or set(per_nodeset) & set(refused):
                raise SpecErrors(errors)
            refused.update(per_nodeset)
        missing = [o["metadata"]["name"] for o in applier.absent()
                   if objects.generator(o) and o["metadata"]["name"] in plan.secrets_held]
        if missing:
            raise SecretMissing(
                "Secret(s) %s of SlurmCluster %s/%s are missing while its pods run with the keys they held: a new "
                "key would lock the running daemons out of each other, so none is generated and nothing was "
                "applied. Restore the Secret(s) from a backup, or set spec.maintenance: true (every pod stops; the "
                "next run generates new keys) and then false again" % (", ".join(missing), self.namespace, self.name))
        return plan, applier

    def act(self, plan, slurm_error, applier=None):
        """Carry ``plan`` out (its ``applier`` from :meth:`preflight`); returns what was done."""
        done: Dict[str, Any] = {"drained": [], "resumed": [], "deleted_nodes": [], "scaled": {}, "released": [],
                                "replaced_pods": []}
        slurm = self.slurm()  # only called upon when the plan changes Slurm
        for reason, nodes in sorted(plan.drain.items()):
            if not self.check_mode:
                slurm.drain(nodes, reason)
            done["drained"] += nodes
        if plan.resume:
            done["resumed"] = plan.resume if self.check_mode else slurm.resume(plan.resume)
        applied = (applier or self.applier(plan.manifests, plan.keep)).run()
        sts_res = self.resource("apps/v1", "StatefulSet")
        for sts_name, replicas in sorted(plan.scale.items()):
            if not self.check_mode:
                self._call("scale StatefulSet %s/%s" % (self.namespace, sts_name), self.client.patch, sts_res,
                           body={"spec": {"replicas": replicas}}, name=sts_name, namespace=self.namespace,
                           content_type="application/merge-patch+json")
            done["scaled"][sts_name] = replicas
        if plan.delete_pods:
            pod_res = self.resource("v1", "Pod")
            for pod_name, uid in plan.delete_pods:
                if not self.check_mode:
                    # The uid precondition: never the replacement the StatefulSet may already have made.
                    try:
                        self._call("replace pod %s/%s" % (self.namespace, pod_name), pod_res.delete, name=pod_name,
                                   namespace=self.namespace, body={"preconditions": {"uid": uid}},
                                   expect=(NotFoundError, ConflictError))
                    except (NotFoundError, ConflictError):
                        continue
                done["replaced_pods"].append(pod_name)
        if plan.delete_nodes:
            if not self.check_mode:
                slurm.delete(plan.delete_nodes)
            done["deleted_nodes"] = list(plan.delete_nodes)
        for pod_name, uid, host, why in plan.evict:
            if not self.check_mode and not self.move_pod(pod_name, uid, host, why):
                continue
            done["replaced_pods"].append(pod_name)
        # Said once a pod went with its jobs: a replaced pod only when this pass deleted it; a removed one when the
        # smaller StatefulSet was applied (or scaled) above.
        done["events"] = []
        for entry in plan.give_up:
            if entry["pod_uid"] and entry["node"] not in done["replaced_pods"]:
                continue
            done["events"].append(self.record_event(entry))
        return applied, done

    def jobs_on(self, node_names):
        """``{node: [job ids]}`` from slurmctld, ``{}`` when it cannot tell (the ids only inform status and Events)."""
        try:
            return self.slurm().jobs_on(node_names)
        except SlurmError:
            return {}

    def record_event(self, entry):
        """The DrainTimeoutExpired Event on the NodeSet of ``entry`` (``Plan.give_up``); returns its message. An
        Event that cannot be written is reported (a warning), never a reason to fail the pass."""
        event_type, reason, message = core.give_up_event(entry)
        stamp = _now_iso(self.clock())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "%s.%s" % (entry["nodeset"], uuid.uuid4().hex[:16]), "namespace": self.namespace},
                "involvedObject": {"apiVersion": names.API_VERSION, "kind": names.NODESET_KIND,
                                   "name": entry["nodeset"], "namespace": self.namespace, "uid": entry["nodeset_uid"]},
                "type": event_type, "reason": reason, "message": message[:1024],
                "source": {"component": self.field_manager}, "reportingComponent": self.field_manager,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        if not self.check_mode:
            try:
                self._call("record Event %s on NodeSet %s/%s" % (reason, self.namespace, entry["nodeset"]),
                           self.resource("v1", "Event").create, body=body, namespace=self.namespace)
            except KubernetesError as e:
                self.warnings.append("%s (%s)" % (e.msg, message))
        return message

    def move_pod(self, pod_name, uid, host, why):
        """Cordon the Kubernetes node of an unhealthy worker (annotated with why), then evict its pod (the Eviction
        API: a PodDisruptionBudget may refuse, the next pass asks again). True when the pod was evicted."""
        if host:
            res = self.resource("v1", "Node")
            self._call("cordon Node %s" % host, self.client.patch, res, name=host,
                       content_type="application/merge-patch+json", body={"metadata": {"annotations": {
                           names.ANNOTATION_CORDONED: "%s/%s: %s" % (self.namespace, pod_name, why)}},
                           "spec": {"unschedulable": True}})
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod_name, "namespace": self.namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self._call("evict pod %s/%s" % (self.namespace, pod_name), self.client.request, "POST",
                       "/api/v1/namespaces/%s/pods/%s/eviction" % (self.namespace, pod_name), body=body,
                       expect=(NotFoundError, ConflictError))
        except (NotFoundError, ConflictError):
            return False
        except KubernetesError as e:
            if e.details.get("status") == 429:  # a disruption budget says not now
                return False
            raise
        return True

    # --- the whole converge ---------------------------------------------------------------------------------
    def converge(self, wait_timeout=0, wait_for_ready=False, retire=(), poll=2.0):
        """Passes until settled (nothing pending; Ready too with ``wait_for_ready``) or ``wait_timeout``."""
        deadline = self.clock() + wait_timeout
        totals: Dict[str, Any] = {"drained": [], "resumed": [], "deleted_nodes": [], "scaled": {}, "released": [],
                                  "replaced_pods": [], "events": []}
        objects_seen, counts, diffs, changed = {}, {}, [], False
        passes = 0
        timings = dict.fromkeys(("observe", "render", "apply", "status"), 0.0)
        mark = [time.monotonic()]

        def lap(phase):
            now = time.monotonic()
            timings[phase] += now - mark[0]
            mark[0] = now

        while True:
            passes += 1
            mark[0] = time.monotonic()
            cluster = self.get_cr(names.CLUSTER_KIND, self.name)
            if cluster is None:
                raise KubernetesError("SlurmCluster %s/%s not found" % (self.namespace, self.name), status=404)
            nodesets, observed, slurm_error = self.observe(cluster, retire)
            lap("observe")
            try:
                # A deletion policy this reconciler could not honour is refused now, not at deletion time.
                problems = data_deletion_problems(self, (cluster.get("spec") or {}).get("deletionPolicy"))
                if problems:
                    raise SpecErrors(problems)
                plan, applier = self.preflight(cluster, nodesets, observed, int(self.clock()))
            except SpecErrors as e:
                message = str(e)
                self.patch_status(names.CLUSTER_KIND, self.name,
                                  lambda old, obj, m=message: st.invalid_cluster_status(
                                      old, obj, m, _now_iso(self.clock())))
                raise InvalidDefinition(e)
            except SecretMissing as e:
                self.patch_status(names.CLUSTER_KIND, self.name,
                                  lambda old, obj, m=e.message: st.invalid_cluster_status(
                                      old, obj, m, _now_iso(self.clock()), reason=st.REASON_SECRET_MISSING,
                                      phase="Failed"))
                raise
            if slurm_error and plan.pending:
                plan.pending.append("slurm: %s" % slurm_error)
            if observed["slurm"] is not None and plan.nodes_with_jobs():
                plan.set_jobs(self.jobs_on(plan.nodes_with_jobs()))
            lap("render")
            applied, done = self.act(plan, slurm_error, applier)
            lap("apply")
            for entry in applied["objects"]:
                ident = (entry["kind"], entry["namespace"], entry["name"])
                if entry["action"] != "unchanged" or ident not in objects_seen:
                    objects_seen[ident] = entry
            diffs += applied.get("diff") or []
            changed = changed or applied["changed"] or bool(done["drained"] or done["resumed"] or done["scaled"]
                                                            or done["deleted_nodes"] or done["replaced_pods"])
            for key in ("drained", "resumed", "deleted_nodes", "replaced_pods", "events"):
                totals[key] += [n for n in done[key] if n not in totals[key]]
            totals["scaled"].update(done["scaled"])
            released = self.release(nodesets, plan, retire)
            totals["released"] += released
            changed = changed or bool(released)
            self.report(cluster, nodesets, observed, plan)
            lap("status")
            settled = not plan.pending and (plan.ready or not wait_for_ready)
            if settled or self.check_mode or self.clock() + poll > deadline:
                break
            pause = poll if changed else max(poll, plan.requeue_after or poll)
            self.sleep(min(pause, max(0.0, deadline - self.clock())))
        for entry in objects_seen.values():
            counts[entry["action"]] = counts.get(entry["action"], 0) + 1
        result = {
            "changed": changed, "ready": plan.ready, "phase": plan.phase, "message": plan.message,
            "pending": plan.pending, "deferred": plan.deferred, "requeue_after": plan.requeue_after,
            "invalid": plan.invalid, "objects": list(objects_seen.values()), "counts": counts, "slurm": totals,
            "nodesets": plan.nodesets, "passes": passes, "timings": timings,
        }
        if self.diff:
            result["diff"] = diffs
        if self.warnings:
            result["warnings"] = list(dict.fromkeys(self.warnings))
        return result

    def release(self, nodesets, plan, retire):
        """NodeSets whose nodes are all gone: drop our finalizer (being deleted) or delete them (retired by
        the definition, ``site.yml``)."""
        released = []
        res = self.resource(names.API_VERSION, names.NODESET_KIND)
        for ns in nodesets:
            name = ns["metadata"]["name"]
            if name not in plan.release:
                continue
            released.append(name)
            if self.check_mode:
                continue
            if name in retire and ns["metadata"].get("deletionTimestamp") == "retiring":
                try:
                    self._call("delete NodeSet %s/%s" % (self.namespace, name), res.delete, name=name,
                               namespace=self.namespace, expect=NotFoundError)
                except NotFoundError:
                    pass
            finalizers = ns["metadata"].get("finalizers") or []
            if FINALIZER in finalizers:
                live = self.get_cr(names.NODESET_KIND, name)
                if live is not None:
                    self.patch_finalizers(live, [f for f in live["metadata"].get("finalizers") or [] if f != FINALIZER])
        if self.nodeset_finalizer and not self.check_mode:
            for ns in nodesets:
                md = ns["metadata"]
                if md.get("deletionTimestamp") or FINALIZER in (md.get("finalizers") or []):
                    continue
                self.patch_finalizers(ns, list(md.get("finalizers") or []) + [FINALIZER])
        return released

    def report_pods(self, observed, plan, now):
        """Each worker pod's SlurmNodeReady condition, written (pods/status) only when it changed."""
        res = self.resource("v1", "Pod")
        for name, desired in sorted(plan.pod_conditions.items()):
            pod = observed["pods"].get(name)
            live = projection.live_condition(pod)
            if pod is None or projection.same_condition(live, desired):
                continue
            cond = dict(desired, lastTransitionTime=now if live is None or live.get("status") != desired["status"]
                        else live.get("lastTransitionTime") or now)
            try:
                self._call("write the %s condition of pod %s/%s" % (desired["type"], self.namespace, name),
                           self.client.patch, res.status, name=name, namespace=self.namespace,
                           body={"status": {"conditions": [cond]}},
                           content_type="application/strategic-merge-patch+json", expect=NotFoundError)
            except NotFoundError:
                continue

    def report(self, cluster, nodesets, observed, plan):
        now = _now_iso(self.clock())
        if self.write_status:
            self.report_pods(observed, plan, now)
        self.patch_status(names.CLUSTER_KIND, self.name, lambda old, obj: st.cluster_status(old, obj, plan, now))
        for ns in nodesets:
            name = ns["metadata"]["name"]
            if name in plan.release:
                continue
            facts = plan.nodesets.get(name)
            sts = observed["statefulsets"].get(names.worker_name(self.name, name))
            selector = st.label_selector(((sts or {}).get("spec") or {}).get("selector", {}).get("matchLabels")) \
                if sts else st.label_selector(names.selector_labels(self.name, names.COMPONENT_WORKER, name))
            self.patch_status(names.NODESET_KIND, name,
                              lambda old, obj, f=facts, s=selector: st.nodeset_status(old, obj, plan, f, s, now))


# --- the definition (site.yml) --------------------------------------------------------------------------------


class Failure(Exception):
    """A converge failure for the module to report: ``reason`` (errors.*) decides retry; ``details`` are extra
    result keys (``field`` for an invalid definition)."""

    def __init__(self, msg, reason, **details):
        super(Failure, self).__init__(msg)
        self.msg = msg
        self.reason = reason
        self.details = details


def _fail_spec(errors, prefix=""):
    errs = getattr(errors, "errors", None) or [errors]
    return Failure(prefix + "; ".join(str(e) for e in errs), failures.INVALID_SPEC, field=errs[0].path,
                   errors=[{"path": e.path, "message": e.message} for e in errs])


def split_definition(docs, namespace=None):
    """The one SlurmCluster of a definition and its NodeSets; any other document is an error that names it."""
    clusters, nodesets, problems = [], [], []
    for index, doc in enumerate(docs or ()):
        if not isinstance(doc, dict):
            problems.append(SpecError("definition[%d]" % index, "not a mapping"))
            continue
        kind, api = doc.get("kind"), doc.get("apiVersion")
        where = "definition[%d] (%s %s)" % (index, kind, (doc.get("metadata") or {}).get("name"))
        if api != names.API_VERSION or kind not in (names.CLUSTER_KIND, names.NODESET_KIND):
            problems.append(SpecError(where, "not a %s SlurmCluster or NodeSet: this playbook does not know what "
                                             "to do with it" % names.API_VERSION))
            continue
        doc = dict(doc, metadata=dict(doc.get("metadata") or {}))
        if namespace and not doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = namespace
        (clusters if kind == names.CLUSTER_KIND else nodesets).append(doc)
    if len(clusters) != 1:
        problems.append(SpecError("definition", "must hold exactly one SlurmCluster (found %d)" % len(clusters)))
    else:
        name = clusters[0]["metadata"].get("name")
        for ns in nodesets:
            ref = ((ns.get("spec") or {}).get("clusterRef") or {}).get("name")
            if ref != name:
                problems.append(SpecError("nodesets[%s].spec.clusterRef.name" % ns["metadata"].get("name"),
                                          "names SlurmCluster %r, which this definition does not hold (it holds %r)"
                                          % (ref, name)))
    if problems:
        raise SpecErrors(problems)
    return clusters[0], nodesets


def _definition_docs(conv, cluster, nodesets):
    label = {names.LABEL_CLUSTER: conv.name}
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": conv.namespace}}]
    for doc in [cluster] + nodesets:
        doc = dict(doc, metadata=dict(doc["metadata"], namespace=conv.namespace,
                                      labels=dict(doc["metadata"].get("labels") or {}, **label)))
        doc.pop("status", None)
        docs.append(doc)
    return docs


def apply_definition(conv, cluster, nodesets, check_mode, diff, on_secret):
    """Apply the namespace, the SlurmCluster and its NodeSets (labelled as the cluster's)."""
    return apply_manifests(conv.client, _definition_docs(conv, cluster, nodesets), conv.field_manager,
                           check_mode=check_mode, diff=diff, on_secret=on_secret)


def _definition_refusals(cluster, nodesets, refusals):
    """Errors of a dry run of the definition's own documents: the API server's paths are the user's already."""
    errors = []
    for refusal in refusals:
        obj = refusal["object"]
        prefix = "nodesets[%s]." % obj["metadata"]["name"] if obj["kind"] == names.NODESET_KIND else ""
        for cause in refusal.get("causes") or [{"field": "", "message": refusal["message"]}]:
            errors.append(SpecError(prefix + (cause.get("field") or "spec"), "refused by the API server (dry run, "
                                    "nothing was applied): %s" % (cause.get("message") or refusal["message"])))
    return errors


def check_definition(conv, cluster, nodesets, collection_version=names.COLLECTION_VERSION):
    """Everything ``site.yml`` can know about a definition before it writes any of it, or SpecErrors:

    the pure validation with the installer's policy and the stored objects (immutable fields); NodeSet names taken
    by another cluster's NodeSets; names the cluster's objects would share with another owner's in the namespace;
    then a server-side dry run of the documents themselves and of every object rendered from them."""
    every_cluster = conv.list(names.API_VERSION, names.CLUSTER_KIND)
    every_nodeset = conv.list(names.API_VERSION, names.NODESET_KIND)
    live_cluster = next((c for c in every_cluster if c["metadata"]["name"] == conv.name), None)
    live_nodesets = dict((ns["metadata"]["name"], ns) for ns in every_nodeset)
    errors = []
    for ns in nodesets:
        name = ns["metadata"].get("name")
        live = live_nodesets.get(name)
        owner = ((live or {}).get("spec") or {}).get("clusterRef", {}).get("name")
        if live is not None and owner != conv.name:
            errors.append(SpecError("nodesets[%s].metadata.name" % name, "NodeSet %s/%s belongs to SlurmCluster %s: "
                                    "a NodeSet cannot move between clusters (name this one differently)"
                                    % (conv.namespace, name, owner)))
    mine = dict((n, o) for n, o in live_nodesets.items() if (o.get("spec") or {}).get("clusterRef", {}).get(
        "name") == conv.name)
    try:
        checked_cluster, checked = specs.validate_cluster_with_nodesets(
            cluster, nodesets, collection_version, conv.policy, old_cluster=live_cluster, old_nodesets=mine)
    except SpecErrors as e:
        errors.extend(e.errors)
    created = dict((n, o["metadata"].get("creationTimestamp")) for n, o in live_nodesets.items())
    owners = conv.owners([o for o in every_nodeset if o["metadata"]["name"] not in
                          set(ns["metadata"].get("name") for ns in nodesets) and
                          (o.get("spec") or {}).get("clusterRef", {}).get("name") != conv.name],
                         [c for c in every_cluster if c["metadata"]["name"] != conv.name])
    owners.append({"cluster": conv.name, "nodeset": None,
                   "created": ((live_cluster or {}).get("metadata") or {}).get("creationTimestamp")})
    owners += [{"cluster": conv.name, "nodeset": ns["metadata"].get("name"),
                "created": created.get(ns["metadata"].get("name"))} for ns in nodesets]
    errors.extend(specs.name_collisions(owners, conv.name))
    if not errors:
        secrets = conv.database_secrets(checked_cluster)
        errors.extend(specs.database_secret_errors(checked_cluster, secrets) + identity.secret_errors(
            checked_cluster, secrets))
    if errors:
        raise SpecErrors(errors)
    # The dry runs need the namespace: an empty one is the only thing created before the definition is judged
    # (in check mode nothing is: the check-mode apply then predicts what it cannot ask).
    if conv.get_namespace() is None:
        if conv.check_mode:
            return
        apply_manifests(conv.client, _definition_docs(conv, cluster, [])[:1], conv.field_manager)
    refusals = Applier(conv.client, _definition_docs(conv, cluster, nodesets), conv.field_manager,
                       check_mode=conv.check_mode).observe().preflight()
    if refusals:
        raise SpecErrors(_definition_refusals(cluster, nodesets, refusals))
    uid = ((live_cluster or {}).get("metadata") or {}).get("uid")
    shown = dict(checked_cluster, metadata=dict(checked_cluster["metadata"], uid=uid)) if uid else checked_cluster
    manifests = render.render_cluster(shown, [dict(ns, metadata=dict(
        ns["metadata"], uid=((live_nodesets.get(ns["metadata"]["name"]) or {}).get("metadata") or {}).get("uid")))
        for ns in checked], collection_version, served=conv.served_kinds())
    # Seen as the converge sees them (its label selector): an object of that name someone else made is a conflict.
    refusals = conv.applier(manifests).preflight()
    if refusals:
        raise SpecErrors(fieldmap.refusal_errors(checked_cluster, checked, refusals))


def execute(params, check_mode=False, diff=False, on_secret=None):
    """Entry point of the module and of its action plugin: clients from the auth options, then :func:`run`."""
    try:
        dynamic, core_v1 = clients(params)
    except KubernetesError as e:
        raise Failure(e.msg, failures.UNAVAILABLE)
    namespace_of = {}

    def transport(pod, container="slurmctld"):
        return KubernetesExecTransport(core_v1, namespace_of["ns"], pod, container)

    def bind(conv_namespace):
        namespace_of["ns"] = conv_namespace

    return run(dynamic, params, transport, check_mode=check_mode, diff=diff, on_secret=on_secret, bind=bind)


def run(client, params, slurm_transport, check_mode=False, diff=False, on_secret=None, clock=time.time,
        sleep=time.sleep, bind=None):
    """The ``slurm_cluster`` module's work (``params`` as its argument spec gives them); raises Failure."""
    try:
        return _run(client, params, slurm_transport, check_mode, diff, on_secret, clock, sleep, bind)
    except InvalidDefinition as e:
        raise _fail_spec(e.errors)
    except SpecError as e:
        raise _fail_spec(e)
    except SecretMissing as e:
        raise Failure(e.message, failures.DATA_MISSING)
    except DryRunRefused as e:  # a refusal no field could be told for (not expected: the converge maps them)
        raise Failure(e.msg, failures.INVALID_SPEC, status=e.details.get("status"))
    except KubernetesError as e:
        details = dict(e.details)
        status = details.pop("status", None)
        raise Failure(e.msg, failures.reason_of_status(status), status=status, **details)
    except SlurmError as e:
        raise Failure(e.msg, failures.UNAVAILABLE, **e.details)


def _run(client, params, slurm_transport, check_mode, diff, on_secret, clock, sleep, bind):
    definition = params.get("definition")
    namespace, name = params.get("namespace"), params.get("name")
    cluster_doc, nodeset_docs = None, []
    try:
        policy = policies.normalize(params.get("policy"))
    except ValueError as e:
        raise Failure("policy: %s" % e, failures.INVALID_SPEC, field="policy")
    if definition:
        cluster_doc, nodeset_docs = split_definition(definition, namespace)
        namespace = cluster_doc["metadata"].get("namespace") or namespace or "default"
        name = cluster_doc["metadata"]["name"]
        cluster_doc["metadata"]["namespace"] = namespace
        for ns in nodeset_docs:
            ns["metadata"]["namespace"] = ns["metadata"].get("namespace") or namespace
        # The whole definition must be valid before anything is written (the pure part first: no request).
        specs.validate_cluster_with_nodesets(cluster_doc, nodeset_docs, policy=policy)
    if not name or not namespace:
        raise Failure("give definition, or name and namespace", failures.INVALID_SPEC, field="name")
    if bind:
        bind(namespace)
    conv = Converger(client, namespace, name, params.get("field_manager") or "soperator.slurm", slurm_transport,
                     check_mode=check_mode, diff=diff, on_secret=on_secret, clock=clock, sleep=sleep,
                     nodeset_finalizer=params.get("nodeset_finalizer", False), policy=policy)
    if params.get("state", "present") == "absent":
        return teardown(conv, params)
    result = {"changed": False, "name": name, "namespace": namespace}
    retire = []
    if definition:
        check_definition(conv, cluster_doc, nodeset_docs)
        applied = apply_definition(conv, cluster_doc, nodeset_docs, check_mode, diff, on_secret)
        result["changed"] = applied["changed"]
        result["definition"] = applied["objects"]
        wanted = set(ns["metadata"]["name"] for ns in nodeset_docs)
        if params.get("prune_nodesets", True) and not (check_mode and conv.get_cr(names.CLUSTER_KIND, name) is None):
            retire = [ns["metadata"]["name"] for ns in conv.nodesets() if ns["metadata"]["name"] not in wanted]
        if params.get("resources_only"):
            res = conv.resource(names.API_VERSION, names.NODESET_KIND)
            for nodeset_name in retire:  # the operator drains them (its finalizer holds them until then)
                if not check_mode:
                    conv._call("delete NodeSet %s/%s" % (namespace, nodeset_name), res.delete, name=nodeset_name,
                               namespace=namespace)
                result["changed"] = True
            result["retired"] = retire
            return result
        if check_mode and conv.get_cr(names.CLUSTER_KIND, name) is None:
            result["message"] = "the SlurmCluster would be created; its objects are rendered on the real run"
            return result
    converged = conv.converge(wait_timeout=params.get("wait_timeout", 0), wait_for_ready=params.get("wait", False),
                              retire=retire)
    converged["changed"] = converged["changed"] or result["changed"]
    result.update(converged)
    if params.get("wait") and not converged["ready"]:
        raise Failure("SlurmCluster %s/%s not ready after %ss: %s"
                      % (namespace, name, params.get("wait_timeout"), converged["message"]),
                      failures.UNAVAILABLE, pending=converged["pending"], phase=converged["phase"])
    return result


# --- teardown ----------------------------------------------------------------------------------------------------


def _allowed(conv, verb, resource):
    """SelfSubjectAccessReview: may we ``verb`` ``resource`` (core group) in the cluster's namespace?"""
    res = conv.resource("authorization.k8s.io/v1", "SelfSubjectAccessReview")
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": conv.namespace, "verb": verb, "resource": resource}}}
    answer = _body(conv._call("review access to %s %s" % (verb, resource), res.create, body=body, serialize=False))
    return bool((answer.get("status") or {}).get("allowed"))


def data_deletion_problems(conv, deletion_policy):
    """Fields of ``spec.deletionPolicy`` asking to delete data we have no right to delete."""
    problems = []
    for field, resource in (("jail", "persistentvolumeclaims"), ("secrets", "secrets"),
                            ("database", "persistentvolumeclaims"), ("database", "secrets")):
        if any(p.path == "spec.deletionPolicy.%s" % field for p in problems):
            continue
        if (deletion_policy or {}).get(field) == "Delete" and not _allowed(conv, "delete", resource):
            problems.append(SpecError("spec.deletionPolicy.%s" % field,
                                      "Delete is not allowed: the reconciler may not delete %s in namespace %s "
                                      "(install the operator with operator_allow_data_deletion: true, or use "
                                      "Retain)" % (resource, conv.namespace)))
    return problems


def teardown(conv, params):
    """Delete what the cluster runs and serves; keep the jail and the Secrets unless told (or the SlurmCluster's
    deletionPolicy says) otherwise. Data the reconciler may not delete is kept, with a warning."""
    cluster = conv.get_cr(names.CLUSTER_KIND, conv.name)
    # What the API server stored (with the CRD's defaults); without a SlurmCluster: keep everything.
    policy = ((cluster or {}).get("spec") or {}).get("deletionPolicy") or {}
    delete = {"jail": params.get("delete_volumes"), "secrets": params.get("delete_secrets"),
              "database": params.get("delete_database")}
    for key in delete:
        if delete[key] is None:
            delete[key] = policy.get(key) == "Delete"
    warnings = []
    for problem in data_deletion_problems(conv, dict((k, "Delete" if v else "Retain") for k, v in delete.items())):
        warnings.append("%s: kept. %s" % (problem.path, problem.message))
        delete[problem.path.rpartition(".")[2]] = False
    deleted = []
    selector = "%s=%s" % (names.LABEL_CLUSTER, conv.name)
    prune_kinds = kinds.prune_kinds()
    nodesets = conv.nodesets()
    if params.get("delete_resources", True):
        res = conv.resource(names.API_VERSION, names.NODESET_KIND)
        for ns in nodesets:
            if not conv.check_mode:
                conv._call("delete NodeSet %s/%s" % (conv.namespace, ns["metadata"]["name"]), res.delete,
                           name=ns["metadata"]["name"], namespace=conv.namespace, expect=NotFoundError)
            deleted.append("NodeSet %s" % ns["metadata"]["name"])
    for ns in nodesets:  # the cluster goes whole: no drain, so no finalizer of ours holds a NodeSet any more
        finalizers = ns["metadata"].get("finalizers") or []
        if FINALIZER in finalizers and not conv.check_mode:
            live = conv.get_cr(names.NODESET_KIND, ns["metadata"]["name"])
            if live is not None:
                conv.patch_finalizers(live, [f for f in live["metadata"].get("finalizers") or [] if f != FINALIZER])
    prune_kinds = [k for k in prune_kinds if conv.served(*objects.parse_kind(k))]
    for kind_text in prune_kinds:
        api_version, kind = objects.parse_kind(kind_text)
        res = conv.resource(api_version, kind)
        for item in conv.list(api_version, kind, selector):
            if (item["metadata"].get("labels") or {}).get(names.LABEL_MANAGED_BY) != names.MANAGED_BY:
                continue
            if not conv.check_mode:
                try:
                    conv._call("delete %s %s/%s" % (kind, conv.namespace, item["metadata"]["name"]), res.delete,
                               name=item["metadata"]["name"], namespace=conv.namespace,
                               body={"propagationPolicy": "Foreground"}, expect=NotFoundError)
                except NotFoundError:
                    continue
            deleted.append("%s %s" % (kind, item["metadata"]["name"]))
    # Data is deleted by name (never listed): the Secrets and claims the renderer creates, and no claim the
    # user brought (jail.existingClaim).
    data_objects = []
    if delete["secrets"]:
        data_objects += [("Secret", n) for n in (names.munge_key_name(conv.name), names.ssh_host_keys_name(conv.name),
                                                 names.jwt_key_name(conv.name))]
    if delete["database"]:
        # What the cluster made for its database (an external one is never ours): the in-cluster MariaDB's volume,
        # a mariadb-operator MariaDB, the generated password.
        data_objects += [("PersistentVolumeClaim", names.db_claim_name(conv.name)),
                         ("Secret", names.db_password_name(conv.name))]
        if conv.served("k8s.mariadb.com/v1alpha1", "MariaDB"):
            data_objects.append(("MariaDB", names.database_name(conv.name)))
    if delete["jail"]:
        existing = ((((cluster or {}).get("spec") or {}).get("jail") or {}).get("existingClaim"))
        claims = [names.spool_claim_name(conv.name)]
        if not existing:
            claims.append(names.jail_claim_name(conv.name))
        data_objects += [("PersistentVolumeClaim", n) for n in claims]
    for kind_name, obj_name in data_objects:
        res = conv.resource(kinds.api_version(kinds.by_name(kind_name)), kind_name)
        try:
            if not conv.check_mode:
                conv._call("delete %s %s/%s" % (kind_name, conv.namespace, obj_name), res.delete, name=obj_name,
                           namespace=conv.namespace, expect=NotFoundError)
            else:
                conv._call("get %s" % kind_name, res.get, name=obj_name, namespace=conv.namespace,
                           expect=NotFoundError)
        except NotFoundError:
            continue
        deleted.append("%s %s" % (kind_name, obj_name))
    if params.get("delete_resources", True) and cluster is not None and not cluster["metadata"].get(
            "deletionTimestamp"):
        res = conv.resource(names.API_VERSION, names.CLUSTER_KIND)
        if not conv.check_mode:
            conv._call("delete SlurmCluster %s/%s" % (conv.namespace, conv.name), res.delete, name=conv.name,
                       namespace=conv.namespace, expect=NotFoundError)
        deleted.append("SlurmCluster %s" % conv.name)
    deadline = conv.clock() + (params.get("wait_timeout") or 0)
    while deleted and not conv.check_mode and conv.clock() < deadline:
        left = [i for k in prune_kinds for i in conv.list(*(objects.parse_kind(k) + (selector,)))
                if (i["metadata"].get("labels") or {}).get(names.LABEL_MANAGED_BY) == names.MANAGED_BY]
        if not left:
            break
        conv.sleep(1.0)
    kept = {"jail": not delete["jail"], "secrets": not delete["secrets"], "database": not delete["database"]}
    return {"changed": bool(deleted), "deleted": deleted, "kept": kept,
            "data_kept": warnings, "name": conv.name, "namespace": conv.namespace}


def release_finalizers(client, namespaces, check_mode=False):
    """Remove our finalizer from every SlurmCluster and NodeSet in ``namespaces`` (all when empty), so that
    removing the operator strands no resource. Returns ``[(kind, namespace, name)]`` released."""
    released = []
    for kind in (names.CLUSTER_KIND, names.NODESET_KIND):
        res = client.resources.get(api_version=names.API_VERSION, kind=kind)
        for namespace in (namespaces or [None]):
            conv = Converger(client, namespace, None, "soperator.slurm", None, check_mode=check_mode)
            body = _body(conv._call("list %s" % kind, res.get, namespace=namespace, serialize=False))
            for item in body.get("items") or []:
                md = item["metadata"]
                if FINALIZER not in (md.get("finalizers") or []):
                    continue
                released.append((kind, md["namespace"], md["name"]))
                if check_mode:
                    continue
                item.setdefault("kind", kind)
                conv.namespace = md["namespace"]
                conv.patch_finalizers(item, [f for f in md["finalizers"] if f != FINALIZER])
    return released
