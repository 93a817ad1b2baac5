"""Adapter: every Kubernetes API call the runtime makes (the roles make their own). Thin on purpose."""

import json
import logging
import os
import uuid
from datetime import datetime, timezone

from kubernetes import client, config
from kubernetes.client.rest import ApiException

log = logging.getLogger(__name__)

SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def api_client(kubeconfig=None, context=None, user_agent=None):
    cfg = client.Configuration()
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    api = client.ApiClient(cfg)
    if user_agent:
        api.user_agent = user_agent  # so that its requests can be told apart in audit logs
    return api


def own_namespace(default="default"):
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SA_NAMESPACE_FILE, encoding="utf-8") as handle:
            return handle.read().strip() or default
    except OSError:
        return default


def describe(exc):
    """One line for an API error: status, reason and the server's message (not the headers)."""
    if isinstance(exc, ApiException):
        message = exc.reason or ""
        try:
            message = json.loads(exc.body).get("message") or message
        except (TypeError, ValueError, AttributeError):
            pass
        return "(%s) %s" % (exc.status, message)
    return str(exc)


# Ask for an object's metadata only (PartialObjectMetadata), as client-go's metadata client does.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def now_iso():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Kube:
    def __init__(self, api, identity="soperator-operator", lease_timeout=5.0):
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.coordination = client.CoordinationV1Api(api)
        self.identity = identity
        # Every Lease call is bounded: a hung connection must never outlive the renew deadline unnoticed.
        self.lease_timeout = (min(3.0, lease_timeout), lease_timeout)

    # --- raw REST (the watch caches) ------------------------------------------------------------------------
    def _raw(self, method, path, params, body, timeout, accept="application/json"):
        """The urllib3 response of one request (streamed, not read); raises ApiException on an error status."""
        method, url, headers, body, post = self.api.param_serialize(
            method, path, query_params=list((params or {}).items()),
            header_params={"Accept": accept, "Content-Type": "application/json"}, body=body,
            auth_settings=["BearerToken"])
        resp = self.api.call_api(method, url, header_params=headers, body=body, post_params=post,
                                 _request_timeout=timeout)
        raw = resp.response
        if resp.status >= 400:
            try:
                raise ApiException(http_resp=raw)
            finally:
                raw.release_conn()
        return raw

    def request_json(self, method, path, params=None, body=None, timeout=60):
        """One request to ``path``; the decoded JSON body. Raises ApiException on an error status."""
        raw = self._raw(method, path, params, body, (10, timeout))
        try:
            data = raw.data
        finally:
            raw.release_conn()
        return json.loads(data.decode("utf-8")) if data else {}

    def exists(self, path, timeout=30):
        """Whether the object at ``path`` exists: a GET of its metadata only (a Secret's data never comes back)."""
        try:
            raw = self._raw("GET", path, None, None, (10, timeout), accept=METADATA_ONLY)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        raw.release_conn()
        return True

    def serves(self, resource, timeout=30):
        """Whether the API server serves ``resource`` (a ``cache.Resource``): its group-version's discovery."""
        base = "/api/%s" % resource.version if not resource.group else "/apis/%s/%s" % (resource.group,
                                                                                       resource.version)
        try:
            listing = self.request_json("GET", base, timeout=timeout)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == resource.plural for r in listing.get("resources") or ())

    def stream_json(self, path, params, read_timeout, stopping):
        """Yield the JSON lines of a watch until the server ends it (or ``stopping`` is set)."""
        raw = self._raw("GET", path, params, None, (10, read_timeout))
        buf = b""
        try:
            for chunk in raw.stream(65536, decode_content=True):
                if stopping.is_set():
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line.decode("utf-8"))
            if buf.strip():
                yield json.loads(buf.decode("utf-8"))
        finally:
            raw.release_conn()

    # --- custom resources -------------------------------------------------------------------------------------
    def get(self, w, namespace, name):
        try:
            return self.custom.get_namespaced_custom_object(w.group, w.version, namespace, w.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def add_finalizer(self, w, obj, finalizer):
        meta = obj["metadata"]
        current = meta.get("finalizers")
        if current and finalizer in current:
            return obj
        if current:
            ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
                   {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]
        else:
            ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
                   {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]
        return self.custom.patch_namespaced_custom_object(w.group, w.version, meta["namespace"], w.plural,
                                                          meta["name"], ops,
                                                          _content_type="application/json-patch+json")

    def remove_finalizer(self, w, obj, finalizer):
        meta = obj["metadata"]
        current = meta.get("finalizers") or []
        if finalizer not in current:
            return obj
        index = current.index(finalizer)
        ops = [{"op": "test", "path": "/metadata/finalizers/%d" % index, "value": finalizer},
               {"op": "remove", "path": "/metadata/finalizers/%d" % index}]
        try:
            return self.custom.patch_namespaced_custom_object(w.group, w.version, meta["namespace"], w.plural,
                                                              meta["name"], ops,
                                                              _content_type="application/json-patch+json")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def update_status(self, w, namespace, name, compute, attempts=5, current=None):
        """Read the object, ``compute(old_status, obj) -> new status`` and write it to the status subresource.

        Skips the write when nothing but timestamps would change. Retries a lost optimistic-concurrency race
        (409) with a fresh read; returns the written object, or None if the object is gone. ``current``: a copy
        already at hand (the watch cache) tried first instead of a read; a stale one costs a 409 and a read.
        """
        from .conditions import same_status  # pure
        for attempt in range(attempts):
            obj = current if attempt == 0 and current is not None else self.get(w, namespace, name)
            if obj is None:
                return None
            old = obj.get("status") or {}
            new = compute(old, obj)
            if new is None or same_status(old, new):
                return obj
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": new}
            try:
                return self.custom.patch_namespaced_custom_object_status(w.group, w.version, namespace, w.plural,
                                                                         name, body)
            except ApiException as exc:
                if exc.status == 409 and attempt + 1 < attempts:
                    continue
                if exc.status == 404:
                    return None
                raise
        return None

    # --- Slurm status (slurmstatus.py) -------------------------------------------------------------------------
    def exec_argv(self, namespace, pod, container, argv, timeout=30):
        """(rc, stdout, stderr) of argv in a container (no shell, no tty)."""
        from kubernetes.stream import stream
        ws = stream(self.core.connect_get_namespaced_pod_exec, pod, namespace, command=list(argv),
                    container=container, stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False)
        try:
            ws.run_forever(timeout=timeout)
            if ws.is_open():
                return 124, ws.read_stdout(), ws.read_stderr()
            rc = ws.returncode
            return (rc if rc is not None else 1), ws.read_stdout(), ws.read_stderr()
        finally:
            ws.close()

    def patch_nodeset_counts(self, namespace, name, counts):
        """Merge the Slurm node counts into a NodeSet's status (its conditions and the rest stay)."""
        try:
            self.custom.patch_namespaced_custom_object_status("slurm.soperator.dev", "v1alpha1", namespace,
                                                              "nodesets", name, {"status": counts})
        except ApiException as exc:
            if exc.status != 404:
                raise

    def patch_pod_condition(self, namespace, name, condition):
        """One condition of a pod's status (strategic merge by type: the kubelet's conditions stay)."""
        try:
            self.core.patch_namespaced_pod_status(name, namespace, {"status": {"conditions": [condition]}})
        except ApiException as exc:
            if exc.status != 404:
                raise

    # --- children and events ----------------------------------------------------------------------------------
    def event(self, obj, event_type, reason, message):
        """A core/v1 Event on ``obj``; failures to record are logged, never raised."""
        meta = obj.get("metadata") or {}
        stamp = now_iso()
        body = {
            "metadata": {"name": "%s.%s" % (meta.get("name"), uuid.uuid4().hex[:12]),
                         "namespace": meta.get("namespace")},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "type": event_type, "reason": reason, "message": (message or "")[:1024],
            "source": {"component": "soperator-operator", "host": self.identity},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            self.core.create_namespaced_event(meta.get("namespace"), body)
        except Exception as exc:  # noqa: BLE001  an Event is a courtesy, never a reason to fail a run
            log.warning("could not record event %s on %s/%s: %s", reason, meta.get("namespace"),
                        meta.get("name"), exc)

    # --- leases -----------------------------------------------------------------------------------------------
    def get_lease(self, namespace, name):
        try:
            return self.api.sanitize_for_serialization(self.coordination.read_namespaced_lease(
                name, namespace, _request_timeout=self.lease_timeout))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create_lease(self, namespace, name, spec):
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        return self.coordination.create_namespaced_lease(namespace, body, _request_timeout=self.lease_timeout)

    def replace_lease(self, namespace, name, resource_version, spec):
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
                "spec": spec}
        return self.coordination.replace_namespaced_lease(name, namespace, body,
                                                          _request_timeout=self.lease_timeout)
