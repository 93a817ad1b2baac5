"""Adapter: every Kubernetes API call the runtime makes (the roles make their own), through the collection's one
access layer (``plugins/module_utils/k8s/access.py``): its client, its error mapping, its request path and paths, its
writes (finalizers included), its exec. The watch caches stream through the same request path. Thin on purpose:
nothing here builds a request of its own."""

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypedDict

from kubernetes import config
from kubernetes.client import Configuration

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import KubernetesExecTransport
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

from .conditions import same_status
from .lease import LeaseSpec
from .watches import Watch

log = logging.getLogger(__name__)

SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
COMPONENT = "soperator-operator"
METADATA_ONLY = access.METADATA_ONLY
describe = access.describe  # one line for a failure: status and the server's message

# ``compute(old status, object) -> new status`` (None: nothing to write), for ``Kube.update_status``.
StatusCompute = Callable[[KubeObject, KubeObject], KubeObject | None]


class WatchEvent(TypedDict):
    """One line of a watch stream (``Kube.stream_json``): ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and the object
    (for ERROR a Status)."""
    type: str
    object: KubeObject


def api_client(kubeconfig: str | None = None, context: str | None = None,
               user_agent: str | None = None) -> access.Client:
    """An ApiClient from ``kubeconfig`` (or the default one) outside a pod, else the pod's service account."""
    cfg = Configuration()
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    return access.connect(cfg, user_agent)


def own_namespace(default: str = "default") -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SA_NAMESPACE_FILE, encoding="utf-8") as handle:
            return handle.read().strip() or default
    except OSError:
        return default


def now_iso() -> str:
    return durations.iso(time.time())


class Kube:
    def __init__(self, api: access.Client, identity: str = COMPONENT, lease_timeout: float = 5.0) -> None:
        self.api = api
        known = access.table()
        # Kinds of the watches file beyond the collection's tables: plural by the lower-case + s rule (watches.py).
        self.objects = access.Api(api, field_manager=COMPONENT, resolve=lambda api_version, kind: known.get(
            (api_version, kind)) or access.resource(api_version.rpartition("/")[0], api_version.rpartition("/")[2],
                                                    kind.lower() + "s", kind))
        self.rest = self.objects.rest
        self.identity = identity
        # Every Lease call is bounded: a hung connection must never outlive the renew deadline unnoticed.
        self.lease_timeout = (min(3.0, lease_timeout), lease_timeout)

    # --- raw REST (the watch caches) ------------------------------------------------------------------------
    def request_json(self, method: str, path: str, params: Mapping[str, str | None] | None = None,
                     body: KubeObject | None = None, timeout: float = 60) -> KubeObject:
        """One request to ``path``; the decoded JSON body. Raises access errors on an error status."""
        return self.rest.json(method, path, params, body, timeout=(10, timeout))

    def exists(self, path: str, timeout: float = 30) -> bool:
        """Whether the object at ``path`` exists: a GET of its metadata only (a Secret's data never comes back)."""
        try:
            raw = self.rest.raw("GET", path, accept=METADATA_ONLY, timeout=(10, timeout))
        except access.NotFound:
            return False
        raw.release_conn()
        return True

    def serves(self, resource: access.Resource, timeout: float = 30) -> bool:
        """Whether the API server serves ``resource`` (a ``cache.Resource``): its group-version's discovery."""
        return self.objects.serves(resource, timeout=(10, timeout))

    def stream_json(self, path: str, params: Mapping[str, str | None], read_timeout: float,
                    stopping: threading.Event) -> Iterator[WatchEvent]:
        """Yield the JSON lines of a watch until the server ends it (or ``stopping`` is set)."""
        return self.rest.stream_json(path, params, read_timeout, stopping)

    # --- custom resources -------------------------------------------------------------------------------------
    def get(self, w: Watch, namespace: str, name: str) -> KubeObject | None:
        return self.objects.get(w.api_version, w.kind, name, namespace)

    def add_finalizer(self, w: Watch, obj: KubeObject, finalizer: str) -> KubeObject:
        """``obj`` (of ``w``'s kind) with ``finalizer`` (the access layer's one finalizer write); NotFound when gone."""
        written = self.objects.add_finalizer(dict(obj, apiVersion=w.api_version, kind=w.kind), finalizer)
        if written is None:
            raise access.NotFound("add the finalizer %s: %s %s/%s is gone" % (
                finalizer, w.kind, obj["metadata"].get("namespace"), obj["metadata"]["name"]), status=404)
        return written

    def remove_finalizer(self, w: Watch, obj: KubeObject, finalizer: str) -> KubeObject | None:
        """``obj`` without ``finalizer``; None when it is gone."""
        return self.objects.remove_finalizer(dict(obj, apiVersion=w.api_version, kind=w.kind), finalizer)

    def update_status(self, w: Watch, namespace: str, name: str, compute: StatusCompute, attempts: int = 5,
                      current: KubeObject | None = None) -> KubeObject | None:
        """Read the object, ``compute(old_status, obj) -> new status`` and write it to the status subresource.

        Skips the write when nothing but timestamps would change. Retries a lost optimistic-concurrency race
        (409) with a fresh read; returns the written object, or None if the object is gone. ``current``: a copy
        already at hand (the watch cache) tried first instead of a read; a stale one costs a 409 and a read.
        """
        return self.objects.update_status(w.api_version, w.kind, name, namespace, compute, same_status, attempts,
                                          current)

    # --- Slurm status (slurmstatus.py) -------------------------------------------------------------------------
    def exec_argv(self, namespace: str, pod: str, container: str, argv: Sequence[str],
                  timeout: float = 30) -> tuple[int, str, str]:
        """(rc, stdout, stderr) of argv in a container (no shell, no tty): the collection's exec transport."""
        return KubernetesExecTransport(self.rest, namespace, pod, container, timeout)(argv)

    def patch_nodeset_counts(self, namespace: str, name: str, counts: Mapping[str, Any]) -> None:
        """Merge the Slurm node counts into a NodeSet's status (its conditions and the rest stay)."""
        try:
            self.objects.patch(names.API_VERSION, names.NODESET_KIND, name, namespace, {"status": counts},
                               subresource="status")
        except access.NotFound:
            pass

    def patch_pod_condition(self, namespace: str, name: str, condition: Mapping[str, Any]) -> None:
        """One condition of a pod's status (strategic merge by type: the kubelet's conditions stay)."""
        try:
            self.objects.patch("v1", "Pod", name, namespace, {"status": {"conditions": [condition]}},
                               content_type=access.STRATEGIC_MERGE_PATCH, subresource="status")
        except access.NotFound:
            pass

    # --- children and events ----------------------------------------------------------------------------------
    def apply_as(self, manifest: KubeObject, field_manager: str, resource_version: str) -> KubeObject:
        """Server-side apply of a rendered ``manifest`` (our applied-hash annotation added, as the apply adapter
        does) as ``field_manager``, conditional on the live copy's ``resource_version`` (Conflict when stale)."""
        body = objects.with_applied_hash(manifest)
        body["metadata"]["resourceVersion"] = resource_version
        return self.objects.apply(body, field_manager=field_manager)

    def event(self, obj: KubeObject, event_type: str, reason: str, message: str) -> None:
        """A core/v1 Event on ``obj``; failures to record are logged, never raised."""
        meta = obj.get("metadata") or {}
        try:
            self.objects.event(obj, event_type, reason, message, COMPONENT, time.time(), host=self.identity)
        except Exception as exc:  # noqa: BLE001  an Event is a courtesy, never a reason to fail a run
            log.warning("could not record event %s on %s/%s: %s", reason, meta.get("namespace"),
                        meta.get("name"), describe(exc))

    # --- leases -----------------------------------------------------------------------------------------------
    def get_lease(self, namespace: str, name: str) -> KubeObject | None:
        return self.objects.get("coordination.k8s.io/v1", "Lease", name, namespace, timeout=self.lease_timeout)

    def create_lease(self, namespace: str, name: str, spec: LeaseSpec) -> KubeObject:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        return self.objects.create(body, timeout=self.lease_timeout)

    def replace_lease(self, namespace: str, name: str, resource_version: str | None, spec: LeaseSpec) -> KubeObject:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
                "spec": spec}
        return self.objects.replace(body, timeout=self.lease_timeout)
