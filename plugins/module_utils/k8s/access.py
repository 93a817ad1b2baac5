# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The one way the collection and the operator runtime talk to the Kubernetes API.

* One error mapping (``errors.py``, re-exported here): every failure of a request becomes a
  :class:`KubernetesError` of the class that says what the caller may do about it (:class:`Transient`,
  :class:`Conflict`, :class:`Forbidden`, :class:`Invalid`, :class:`NotFound`), its message naming what was asked.
* One request path, :class:`Rest`, over a ``kubernetes.client.ApiClient``: JSON in and out, a response streamed
  for the operator's watches, a group version's discovery, and a command run in a pod's container
  (:meth:`Rest.exec`, the ``exec`` subresource over a websocket: ``slurm_exec.py``'s transport, the jail connection's,
  the operator's Slurm status). Every path is a :class:`Resource`'s (``resources.py``, re-exported here).
* One object interface, :class:`Api`, by (apiVersion, kind): get, list, create, server-side apply, patch, delete,
  the status subresource and the finalizers (read, change, write conditional on the resourceVersion, again on a
  lost race), Events, evictions, access reviews. Writes take ``dry_run``: a set of writes is first sent as a
  server-side dry run by the apply adapter (``apply.Applier.preflight``), the one dry-run-then-write path. Where
  resources live comes from discovery (the modules' DynamicClient, cached on disk) or from a fixed table (the
  operator runtime, see :func:`table`).
* The one place a client is made (:func:`connect`), from the ``kubernetes.client.Configuration`` that ``client.py``
  (the modules' options) or the operator runtime (its service account or kubeconfig) read.

No other module imports the ``kubernetes`` library's API classes (``tests/unit/test_one_path.py``). Nothing here
decides what to write: the planners (``plan/``) and the apply rules (``render/objects.py``) do. Importing this module
needs neither Ansible nor, until a request is made, the ``kubernetes`` package.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json
import uuid
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import errors, resources
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.errors import ApiException, Urllib3Error
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.resources import (
    ACCESS_REVIEWS, PODS, Resolve, from_table, group_path, split,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

# The error mapping and where resources live, as the access layer's callers know them (access.NotFound, ...).
KubernetesError = errors.KubernetesError
Transient = errors.Transient
Conflict = errors.Conflict
Forbidden = errors.Forbidden
Invalid = errors.Invalid
NotFound = errors.NotFound
Resource = resources.Resource
error, call, describe, api_message = errors.error, errors.call, errors.describe, errors.api_message
resource, table = resources.resource, resources.table

try:
    from kubernetes.client import ApiClient
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError
    from kubernetes.stream import stream, ws_client
except ImportError:  # a module reports the missing library before it builds a client; this file stays importable

    class ResourceNotFoundError(Exception):  # type: ignore[no-redef]
        pass

    class ResourceNotUniqueError(Exception):  # type: ignore[no-redef]
        pass

    ApiClient = DynamicClient = stream = ws_client = None  # type: ignore[assignment,misc]

# A ``kubernetes.dynamic.DynamicClient`` (the modules) or a ``kubernetes.client.ApiClient`` (the operator runtime, the
# jail connection and inventory): the library is untyped.
Client = Any
# Seconds a request may take, or a (connect, read) pair.
Timeout = Union[float, Tuple[float, float]]
# Query parameters (None: left out).
Params = Mapping[str, Optional[str]]
# (rc, stdout, stderr) of a command run in a container: text, or bytes when asked for.
ExecResult = Tuple[int, Any, Any]
# ``compute(old status, object) -> new status`` (None: nothing to write), ``same(old, new)``.
StatusCompute = Callable[[KubeObject, KubeObject], Optional[KubeObject]]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# Ask for an object's metadata only (PartialObjectMetadata), as client-go's metadata client does: a Secret's data
# never reaches this process.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
# Bytes of a command's input sent in one websocket frame.
STDIN_CHUNK = 1 << 20


# --- clients ---------------------------------------------------------------------------------------------------
def connect(configuration: Any, user_agent: str | None = None, dynamic: bool = False) -> Client:
    """A ``kubernetes.client.ApiClient`` for ``configuration`` (a ``kubernetes.client.Configuration``), its requests
    named ``user_agent`` (so that they can be told apart in audit logs); ``dynamic``: a ``DynamicClient`` over it,
    which discovers the API at once (``/version``, ``/api``; cached on disk by the library, per API host)."""
    api = ApiClient(configuration)
    if user_agent:
        api.user_agent = user_agent
    if not dynamic:
        return api
    try:
        return DynamicClient(api)
    except Exception as e:  # discovery fails when the API is unreachable (the library's own errors, not mapped)
        raise KubernetesError("cannot reach the Kubernetes API at %s: %s" % (api.configuration.host, e))


# --- where resources live --------------------------------------------------------------------------------------
def discovery(dynamic: Client) -> Resolve:
    """Where a kind lives, from a DynamicClient's discovery (cached on disk by the library); None: not served."""
    def resolve(api_version: str, kind: str) -> Resource | None:
        # Another project's kind (a CRD that may come and go: a PodMonitor, a ServiceMonitor) is asked of the server
        # first, one request: the library's discovery cache, a file every process on the host shares, may still list
        # a kind whose CRD was removed since it was written, and a kind it does not find makes it rediscover the
        # whole API (and every group after) at each lookup. Kubernetes' own kinds and ours are not asked.
        if _foreign(api_version) and not any(
                r.get("kind") == kind for r in Rest(dynamic).group_resources(api_version) or ()):
            return None
        try:
            found = dynamic.resources.get(api_version=api_version, kind=kind)
        except (ResourceNotFoundError, ResourceNotUniqueError):  # not served (as one kind)
            return None
        group, version = split(api_version)
        return Resource(group, version, found.name, kind, bool(found.namespaced))
    return resolve


def _foreign(api_version: str) -> bool:
    """A group of neither Kubernetes itself (core, ``*.k8s.io``, the unsuffixed built-ins such as ``apps``) nor ours."""
    group = api_version.rpartition("/")[0]
    return "." in group and not group.endswith(".k8s.io") and group != names.GROUP


# --- requests --------------------------------------------------------------------------------------------------
class Rest(object):
    """The one request path. Over a ``kubernetes.dynamic.DynamicClient`` (the modules: its ``request``, which every
    supported library version has) or a ``kubernetes.client.ApiClient`` (the operator runtime, whose pinned library
    has ``param_serialize``). ``timeout``: seconds (or a (connect, read) pair) for every request that does not give
    its own; None waits as long as the library does."""

    def __init__(self, client: Client, timeout: Timeout | None = None) -> None:
        self.dynamic: Client = client if hasattr(client, "resources") else None
        self.api_client: Client = getattr(client, "client", client)
        self.timeout = timeout

    def raw(self, method: str, path: str, params: Params | None = None, body: Any = None, content_type: str = JSON,
            accept: str = JSON, timeout: Timeout | None = None, what: str | None = None) -> Any:
        """The urllib3 response of one request (streamed, not read: release it); errors raised mapped."""
        what = what or "%s %s" % (method, path)
        query = [(k, v) for k, v in (params or {}).items() if v is not None]
        timeout = timeout if timeout is not None else self.timeout
        try:
            if self.dynamic is not None:
                extra = {"_request_timeout": timeout} if timeout is not None else {}
                return self.dynamic.request(method.lower(), path, body=body, query_params=query,
                                            header_params={"Accept": accept}, content_type=content_type,
                                            serialize=False, **extra)
            method, url, headers, body, post = self.api_client.param_serialize(
                method, path, query_params=query, header_params={"Accept": accept, "Content-Type": content_type},
                body=body, auth_settings=["BearerToken"])
            resp = self.api_client.call_api(method, url, header_params=headers, body=body, post_params=post,
                                            _request_timeout=timeout)
        except (ApiException, Urllib3Error, OSError) as e:
            raise error(what, e)
        raw = resp.response
        if resp.status >= 400:
            try:
                data = raw.data
            finally:
                raw.release_conn()
            failed = ApiException(status=resp.status, reason=raw.reason)
            failed.body = data
            raise error(what, failed)
        return raw

    def json(self, method: str, path: str, params: Params | None = None, body: Any = None, content_type: str = JSON,
             accept: str = JSON, timeout: Timeout | None = None, what: str | None = None) -> KubeObject:
        """One request; its decoded JSON body ({} when empty)."""
        raw = self.raw(method, path, params, body, content_type, accept, timeout, what)
        try:
            data = raw.data
        finally:
            if hasattr(raw, "release_conn"):
                raw.release_conn()
        decoded: KubeObject = json.loads(data.decode("utf-8")) if data else {}
        return decoded

    def stream_json(self, path: str, params: Params, read_timeout: float, stopping: Any,
                    connect_timeout: float = 10) -> Iterator[Any]:
        """Yield the JSON lines of a watch until the server ends it (or ``stopping``, an Event, is set)."""
        raw = self.raw("GET", path, params, timeout=(connect_timeout, read_timeout))
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

    def group_resources(self, api_version: str, timeout: Timeout | None = None) -> List[KubeObject] | None:
        """The resources a group version serves (its discovery document's), None when it serves none."""
        try:
            body = self.json("GET", group_path(api_version), timeout=timeout, what="discovery of %s" % api_version)
        except NotFound:
            return None
        return list(body.get("resources") or [])

    def exec(self, namespace: str, pod: str, container: str, argv: Sequence[str], stdin: Any = None,
             timeout: float = 60, binary: bool = False) -> ExecResult:
        """(rc, stdout, stderr) of ``argv`` in a container of a pod (its ``exec`` subresource; no shell, no tty);
        rc 124 when it ran past ``timeout`` seconds. ``stdin`` (None: none) is written to the command's standard input
        on the stream, never in the URL; the command must read no more than it is sent (the channel protocols before
        v5 cannot close stdin). ``binary``: bytes in and out (kubernetes >= 27), else text. Raises a mapped error,
        "cannot exec in pod ..." when the exec could not start."""
        what = "exec in pod %s/%s (container %s)" % (namespace, pod, container)
        try:
            ws = self._open_exec(namespace, pod, container, argv, stdin is not None, binary)
        except Exception as e:  # the library's, urllib3's and the websocket's errors
            raise error("cannot " + what, e)
        try:
            if stdin is not None:
                for start in range(0, len(stdin), STDIN_CHUNK):  # in pieces: one frame per MiB of a large file
                    ws.write_stdin(stdin[start:start + STDIN_CHUNK])
            ws.run_forever(timeout=timeout)
            if ws.is_open():
                late = "timed out after %ss" % timeout
                return 124, ws.read_stdout(), ws.read_stderr() + (late.encode() if binary else late)
            rc = ws.returncode
            return (rc if rc is not None else 1), ws.read_stdout(), ws.read_stderr()
        except Exception as e:  # a kubelet that answers exec with something else than a status (kwok's fake)
            raise KubernetesError("%s gave no exit status: %s" % (what, e))
        finally:
            ws.close()

    def _open_exec(self, namespace: str, pod: str, container: str, argv: Sequence[str], stdin: bool,
                   binary: bool) -> Any:
        # Only when asked: kubernetes < 27 has no binary websocket (and no such keyword).
        extra = {"binary": True} if binary else {}
        api: Client = self.api_client
        if not hasattr(api, "param_serialize"):  # a library before param_serialize: its generated API (heavy) builds it
            if not hasattr(api, "connect_get_namespaced_pod_exec"):
                from kubernetes.client import CoreV1Api
                api = CoreV1Api(api)
            return stream(api.connect_get_namespaced_pod_exec, pod, namespace, command=list(argv), container=container,
                          stdin=stdin, stdout=True, stderr=True, tty=False, _preload_content=False, **extra)
        query = [("command", list(argv)), ("container", container), ("stdin", "true" if stdin else "false"),
                 ("stdout", "true"), ("stderr", "true"), ("tty", "false")]
        dummy, url, headers, dummy, dummy = api.param_serialize(
            "GET", PODS.path(namespace, pod, "exec"), header_params={}, auth_settings=["BearerToken"])
        return ws_client.WSClient(api.configuration, ws_client.get_websocket_url(url, query), headers, True, **extra)


# --- objects ---------------------------------------------------------------------------------------------------
def _describe(kind: str | None, namespace: str | None, name: str | None) -> str:
    return "%s %s/%s" % (kind, namespace, name) if namespace else "%s %s" % (kind, name)


class Api(object):
    """Objects by (apiVersion, kind). ``client``: a ``kubernetes.dynamic.DynamicClient`` (its ApiClient and its
    discovery) or a ``kubernetes.client.ApiClient`` with ``resolve`` (``(apiVersion, kind) -> Resource or None``,
    or :func:`table`'s dict). ``field_manager`` names every write."""

    def __init__(self, client: Client, resolve: Resolve | Mapping[Tuple[str, str], Resource] | None = None,
                 field_manager: str = "soperator.slurm", timeout: Timeout | None = None) -> None:
        self.rest = Rest(client, timeout)
        if resolve is None:
            resolve = discovery(client)
        elif isinstance(resolve, Mapping):
            resolve = from_table(resolve)
        self._resolve: Resolve = resolve
        self._resources: Dict[Tuple[str, str], Optional[Resource]] = {}
        self._retried: set[Tuple[str, str]] = set()
        self.field_manager = field_manager

    # where -----------------------------------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str, required: bool = True) -> Resource | None:
        """The Resource of a kind, None when not served (and not ``required``: then NotFound). A kind found missing
        is looked up once more when required: a CRD applied meanwhile may serve it now (each miss costs the
        discovery a new look at the API)."""
        key = (api_version, kind)
        if key not in self._resources or (self._resources[key] is None and required and key not in self._retried):
            if key in self._resources:
                self._retried.add(key)
            try:
                self._resources[key] = self._resolve(api_version, kind)
            except (ApiException, Urllib3Error, OSError) as e:
                raise error("discovery of %s %s" % (api_version, kind), e)
        if self._resources[key] is None and required:
            raise NotFound("the cluster serves no %s of apiVersion %s (is its CRD installed?)" % (kind, api_version),
                           status=404)
        return self._resources[key]

    def served(self, api_version: str, kind: str) -> bool:
        return self.resource(api_version, kind, required=False) is not None

    def serves(self, res: Resource, timeout: Timeout | None = None) -> bool:
        """Whether the API server serves ``res`` (its group version's discovery, asked now; by its plural)."""
        return any(r.get("name") == res.plural for r in self.rest.group_resources(res.api_version, timeout) or ())

    def _path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None,
              subresource: str | None = None) -> str:
        found = cast(Resource, self.resource(api_version, kind))  # (required: NotFound when it is not served)
        return found.path(namespace, name, subresource)

    # reads -----------------------------------------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None, metadata_only: bool = False,
            timeout: Timeout | None = None, what: str | None = None) -> KubeObject | None:
        """The object, None when it does not exist."""
        what = what or "get " + _describe(kind, namespace, name)
        try:
            obj = self.rest.json("GET", self._path(api_version, kind, namespace, name),
                                 accept=METADATA_ONLY if metadata_only else JSON, timeout=timeout, what=what)
        except NotFound:
            return None
        if not metadata_only:
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
        return obj

    def list(self, api_version: str, kind: str, namespace: str | None = None, selector: str | None = None,
             what: str | None = None, required: bool = False) -> List[KubeObject]:
        """Items of a kind (in ``namespace``, or everywhere), with their apiVersion and kind; [] when not served
        (unless ``required``: then NotFound)."""
        res = self.resource(api_version, kind, required=required)
        if res is None:
            return []
        what = what or "list %s%s" % (kind, " in namespace %s" % namespace if namespace else "")
        body = self.rest.json("GET", res.path(namespace), {"labelSelector": selector}, what=what)
        items: List[KubeObject] = body.get("items") or []
        for item in items:  # list items carry no apiVersion/kind
            item["apiVersion"] = api_version
            item["kind"] = kind
        return items

    # writes ----------------------------------------------------------------------------------------------------
    def _write_params(self, dry_run: bool, force: bool = False,
                      field_manager: str | None = None) -> Dict[str, Optional[str]]:
        return {"fieldManager": field_manager or self.field_manager, "dryRun": "All" if dry_run else None,
                "force": "true" if force else None}

    def create(self, obj: KubeObject, dry_run: bool = False, what: str | None = None,
               timeout: Timeout | None = None) -> KubeObject:
        """POST ``obj``; Conflict when it exists."""
        md = obj["metadata"]
        what = what or "create " + _describe(obj["kind"], md.get("namespace"), md.get("name"))
        return self.rest.json("POST", self._path(obj["apiVersion"], obj["kind"], md.get("namespace")),
                              self._write_params(dry_run), body=obj, what=what, timeout=timeout)

    def apply(self, obj: KubeObject, force: bool = False, dry_run: bool = False, what: str | None = None,
              field_manager: str | None = None) -> KubeObject:
        """Server-side apply ``obj`` as the field manager (``field_manager``: another one; ``force``: take over
        conflicting fields). A ``metadata.resourceVersion`` in ``obj`` makes it conditional (Conflict if stale)."""
        md = obj["metadata"]
        what = what or "apply " + _describe(obj["kind"], md.get("namespace"), md.get("name"))
        return self.rest.json("PATCH", self._path(obj["apiVersion"], obj["kind"], md.get("namespace"), md["name"]),
                              self._write_params(dry_run, force, field_manager), body=obj, content_type=APPLY_PATCH,
                              what=what)

    def replace(self, obj: KubeObject, what: str | None = None, timeout: Timeout | None = None) -> KubeObject:
        """PUT ``obj`` (its resourceVersion makes it conditional)."""
        md = obj["metadata"]
        what = what or "replace " + _describe(obj["kind"], md.get("namespace"), md.get("name"))
        return self.rest.json("PUT", self._path(obj["apiVersion"], obj["kind"], md.get("namespace"), md["name"]),
                              {"fieldManager": self.field_manager}, body=obj, what=what, timeout=timeout)

    def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any,
              content_type: str = MERGE_PATCH, subresource: str | None = None, what: str | None = None) -> KubeObject:
        what = what or "patch %s%s" % (_describe(kind, namespace, name), " " + subresource if subresource else "")
        return self.rest.json("PATCH", self._path(api_version, kind, namespace, name, subresource),
                              {"fieldManager": self.field_manager}, body=body, content_type=content_type,
                              what=what)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               propagation: str | None = None, uid: str | None = None, dry_run: bool = False,
               what: str | None = None, grace_period: int | None = None) -> bool:
        """DELETE one object (``uid``: only that incarnation; ``grace_period``: seconds, 0 for a pod whose kubelet
        will never confirm); False when it was already gone."""
        what = what or "delete " + _describe(kind, namespace, name)
        body: KubeObject | None = {"preconditions": {"uid": uid}} if uid else None
        if grace_period is not None:
            body = dict(body or {}, gracePeriodSeconds=grace_period)
        try:
            self.rest.json("DELETE", self._path(api_version, kind, namespace, name),
                           {"propagationPolicy": propagation, "dryRun": "All" if dry_run else None}, body=body,
                           what=what)
        except NotFound:
            return False
        return True

    def update_status(self, api_version: str, kind: str, name: str, namespace: str | None, compute: StatusCompute,
                      same: Callable[[KubeObject, KubeObject], bool], attempts: int = 5,
                      current: KubeObject | None = None) -> KubeObject | None:
        """Read the object, ``compute(old_status, obj) -> new status`` (None: nothing to write) and merge-patch it
        into the status subresource unless ``same(old, new)``, conditional on the resourceVersion read; a lost race
        (409) reads again, ``attempts`` times in all. ``current``: a copy at hand (a watch cache), tried first
        instead of a read. Returns the written (or unchanged) object, None when it is gone."""
        def write(obj: KubeObject) -> KubeObject | None:
            old = obj.get("status") or {}
            new = compute(old, obj)
            return None if new is None or same(old, new) else {"status": new}
        return self._read_write(api_version, kind, name, namespace, write, "status", attempts, current)

    def update_finalizers(self, obj: KubeObject, change: Callable[[List[str]], List[str]],
                          attempts: int = 5) -> KubeObject | None:
        """The one way finalizers are written, as the status is: ``change(finalizers) -> finalizers`` on ``obj`` as
        given, then as read again after each lost race (409), merge-patched conditional on its resourceVersion
        (another writer's finalizer is never dropped); nothing is written when the list stays the same. Returns the
        written (or unchanged) object, None when it is gone."""
        def write(live: KubeObject) -> KubeObject | None:
            old = list(live["metadata"].get("finalizers") or [])
            new = change(list(old))
            return None if new == old else {"metadata": {"finalizers": new}}
        md = obj["metadata"]
        return self._read_write(obj["apiVersion"], obj["kind"], md["name"], md.get("namespace"), write, None,
                                attempts, obj)

    def add_finalizer(self, obj: KubeObject, finalizer: str) -> KubeObject | None:
        return self.update_finalizers(obj, lambda found: found if finalizer in found else found + [finalizer])

    def remove_finalizer(self, obj: KubeObject, finalizer: str) -> KubeObject | None:
        return self.update_finalizers(obj, lambda found: [f for f in found if f != finalizer])

    def _read_write(self, api_version: str, kind: str, name: str, namespace: str | None,
                    write: Callable[[KubeObject], Optional[KubeObject]], subresource: str | None, attempts: int,
                    current: KubeObject | None) -> KubeObject | None:
        """Optimistic concurrency: ``write(obj)`` (the merge patch, None: nothing) of the object read (``current``
        first), conditional on its resourceVersion, again on a lost race."""
        what = "write the %s of %s" % (subresource or "finalizers", _describe(kind, namespace, name))
        for attempt in range(attempts):
            obj = current if attempt == 0 and current is not None else self.get(api_version, kind, name, namespace)
            if obj is None:
                return None
            body = write(obj)
            if body is None:
                return obj
            body.setdefault("metadata", {})["resourceVersion"] = obj["metadata"]["resourceVersion"]
            try:
                return self.patch(api_version, kind, name, namespace, body, subresource=subresource, what=what)
            except Conflict:
                if attempt + 1 == attempts:
                    raise Conflict("%s: kept losing the update race" % what, status=409)
            except NotFound:
                return None
        return None

    def event(self, involved: KubeObject, event_type: str, reason: str, message: str, component: str, now: float,
              host: str | None = None) -> KubeObject:
        """A core/v1 Event on ``involved`` (an object with apiVersion, kind and metadata); raises on failure (an
        Event is a courtesy: callers report it and carry on)."""
        md = involved.get("metadata") or {}
        stamp = durations.iso(now)
        source = {"component": component}
        if host:
            source["host"] = host
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "%s.%s" % (md.get("name"), uuid.uuid4().hex[:16]),
                             "namespace": md.get("namespace")},
                "involvedObject": dict((k, v) for k, v in (
                    ("apiVersion", involved.get("apiVersion")), ("kind", involved.get("kind")),
                    ("name", md.get("name")), ("namespace", md.get("namespace")), ("uid", md.get("uid")),
                    ("resourceVersion", md.get("resourceVersion"))) if v is not None),
                "type": event_type, "reason": reason, "message": (message or "")[:1024], "source": source,
                "reportingComponent": component, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        return self.create(body, what="record Event %s on %s" % (reason, _describe(
            involved.get("kind"), md.get("namespace"), md.get("name"))))

    def evict(self, namespace: str, pod: str, uid: str | None) -> bool:
        """The Eviction API (a PodDisruptionBudget may refuse: 429); True when the pod was evicted."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self.rest.json("POST", self._path("v1", "Pod", namespace, pod, "eviction"), body=body,
                           what="evict pod %s/%s" % (namespace, pod))
        except (NotFound, Conflict):
            return False
        except Transient as e:
            if e.status == 429:  # a disruption budget says not now
                return False
            raise
        return True

    def may(self, namespace: str, verb: str, resource_name: str) -> bool:
        """SelfSubjectAccessReview: may this client ``verb`` ``resource_name`` (core group) in ``namespace``?"""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource_name}}}
        answer = self.rest.json("POST", ACCESS_REVIEWS.path(), body=body,
                                what="review access to %s %s" % (verb, resource_name))
        return bool((answer.get("status") or {}).get("allowed"))
