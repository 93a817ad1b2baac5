# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The one way the collection and the operator runtime talk to the Kubernetes API.

* One error mapping: every failure of a request becomes a :class:`KubernetesError`, of the class that says what
  the caller may do about it: :class:`Transient` (the API unreachable, 429, 5xx: try again), :class:`Conflict`
  (409: someone else wrote first, or the object exists), :class:`Forbidden` (401, 403), :class:`Invalid` (400, 422:
  the request itself is refused) and :class:`NotFound` (404). Its message names what was asked.
* One request path, :class:`Rest`, over a ``kubernetes.client.ApiClient``: JSON in and out, a response streamed
  for the operator's watches.
* One object interface, :class:`Api`, by (apiVersion, kind): get, list, create, server-side apply, patch, delete,
  the status subresource (read, compute, write, again on a lost race), finalizers, Events, evictions, access
  reviews. Writes take ``dry_run``: a set of writes is first sent as a server-side dry run by the apply adapter
  (``apply.Applier.preflight``), the one dry-run-then-write path. Where resources live comes from discovery (the
  modules' DynamicClient, cached on disk) or from a fixed table (the operator runtime, see :func:`table`).

Nothing here decides what to write: the planners (``plan/``) and the apply rules (``render/objects.py``) do.
Importing this module needs neither Ansible nor, until a request is made, the ``kubernetes`` package.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid
from collections import namedtuple

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names
from ansible_collections.soperator.slurm.plugins.module_utils.api import durations

try:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError
    from urllib3.exceptions import HTTPError as Urllib3Error
except ImportError:  # a module reports the missing library before it builds a client; this file stays importable

    class ApiException(Exception):  # type: ignore[no-redef]
        status = None
        reason = None
        body = None

    class ResourceNotFoundError(Exception):  # type: ignore[no-redef]
        pass

    class ResourceNotUniqueError(Exception):  # type: ignore[no-redef]
        pass

    class Urllib3Error(Exception):  # type: ignore[no-redef]
        pass

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# Ask for an object's metadata only (PartialObjectMetadata), as client-go's metadata client does: a Secret's data
# never reaches this process.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


# --- errors ----------------------------------------------------------------------------------------------------
class KubernetesError(Exception):
    """A request to the Kubernetes API failed. ``msg`` names what was asked; ``details`` are extra result keys for
    ``fail_json`` (``status``, object, fields, managers...); ``server_message`` and ``body`` are the API server's
    answer (its message, the decoded Status), when it answered."""

    def __init__(self, msg, server_message=None, body=None, **details):
        super(KubernetesError, self).__init__(msg)
        self.msg = msg
        self.details = details
        self.server_message = server_message
        self.body = body

    @property
    def status(self):
        return self.details.get("status")


class Transient(KubernetesError):
    """The API could not be reached, or answered 429 or 5xx: the same request may succeed later."""


class Conflict(KubernetesError):
    """409: another writer won an optimistic-concurrency race, the object already exists, or a field manager
    owns a field the request sets."""


class Forbidden(KubernetesError):
    """401 or 403: not allowed."""


class Invalid(KubernetesError):
    """400 or 422: the API server refuses the request itself (validation, admission, an immutable field)."""


class NotFound(KubernetesError):
    """404: no such object (or no such kind served)."""


_BY_STATUS = {400: Invalid, 401: Forbidden, 403: Forbidden, 404: NotFound, 409: Conflict, 422: Invalid,
              429: Transient}


def _decoded(body):
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        decoded = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def api_message(exc):
    """The API server's message in an ApiException (its Status), else its reason."""
    body = _decoded(getattr(exc, "body", None))
    if body and body.get("message"):
        return body["message"]
    return str(getattr(exc, "reason", None) or exc)


def error(what, exc):
    """The :class:`KubernetesError` for ``exc`` raised while doing ``what`` (a KubernetesError passes as it is)."""
    if isinstance(exc, KubernetesError):
        return exc
    if isinstance(exc, ApiException) and getattr(exc, "status", None):
        status = exc.status
        cls = _BY_STATUS.get(status, Transient if status >= 500 else KubernetesError)
        message = api_message(exc)
        return cls("%s: %s" % (what, message), server_message=message, body=_decoded(exc.body), status=status)
    return Transient("%s: cannot reach the Kubernetes API: %s" % (what, exc))


def call(what, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its library and transport errors raised as :func:`error` maps them."""
    try:
        return fn(*args, **kwargs)
    except (ApiException, Urllib3Error, OSError) as e:
        raise error(what, e)


def describe(exc):
    """One line for a failure: status and the server's message (not the headers)."""
    if isinstance(exc, KubernetesError):
        return "(%s) %s" % (exc.status, exc.server_message) if exc.status else exc.msg
    if isinstance(exc, ApiException):
        return "(%s) %s" % (exc.status, api_message(exc))
    return str(exc)


# --- where resources live --------------------------------------------------------------------------------------
class Resource(namedtuple("Resource", "group version plural kind namespaced")):
    """An API resource; ``group`` "" is the core API."""

    __slots__ = ()

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    def path(self, namespace=None, name=None, subresource=None):
        base = "/api/%s" % self.version if not self.group else "/apis/%s/%s" % (self.group, self.version)
        if namespace and self.namespaced:
            base += "/namespaces/%s" % namespace
        base += "/" + self.plural
        if name:
            base += "/" + name
        if subresource:
            base += "/" + subresource
        return base


def resource(group, version, plural, kind, namespaced=True):
    return Resource(group, version, plural, kind, namespaced)


def table():
    """The resources the operator runtime reads and writes, from the collection's tables (no discovery)."""
    found = [resource(k.group, k.version, k.plural, k.kind) for k in kinds.OWNED + (kinds.POD,)]
    found += [resource(names.GROUP, names.VERSION, names.CLUSTER_PLURAL, names.CLUSTER_KIND),
              resource(names.GROUP, names.VERSION, names.NODESET_PLURAL, names.NODESET_KIND),
              resource("", "v1", "events", "Event"),
              resource("", "v1", "nodes", "Node", namespaced=False),
              resource("", "v1", "namespaces", "Namespace", namespaced=False),
              resource("coordination.k8s.io", "v1", "leases", "Lease")]
    return dict(((r.api_version, r.kind), r) for r in found)


def discovery(dynamic):
    """Where a kind lives, from a DynamicClient's discovery (cached on disk by the library); None: not served."""
    def resolve(api_version, kind):
        # Another project's kind (a CRD that may come and go: a PodMonitor, a ServiceMonitor) is asked of the server
        # first, one request: the library's discovery cache, a file every process on the host shares, may still list
        # a kind whose CRD was removed since it was written, and a kind it does not find makes it rediscover the
        # whole API (and every group after) at each lookup. Kubernetes' own kinds and ours are not asked.
        if _foreign(api_version) and not _listed(dynamic, api_version, kind):
            return None
        try:
            found = dynamic.resources.get(api_version=api_version, kind=kind)
        except (ResourceNotFoundError, ResourceNotUniqueError):  # not served (as one kind)
            return None
        group, dummy, version = api_version.rpartition("/")
        return Resource(group, version, found.name, kind, bool(found.namespaced))
    return resolve


def _foreign(api_version):
    """A group of neither Kubernetes itself (core, ``*.k8s.io``, the unsuffixed built-ins such as ``apps``) nor ours."""
    group = api_version.rpartition("/")[0]
    return "." in group and not group.endswith(".k8s.io") and group != names.GROUP


def _listed(dynamic, api_version, kind):
    """The server's own resource list of a group version names ``kind``."""
    try:
        body = Rest(dynamic).json("GET", "/apis/%s" % api_version, what="discovery of %s" % api_version)
    except NotFound:
        return False
    return any(r.get("kind") == kind for r in body.get("resources") or [])


# --- requests --------------------------------------------------------------------------------------------------
class Rest(object):
    """The one request path. Over a ``kubernetes.dynamic.DynamicClient`` (the modules: its ``request``, which every
    supported library version has) or a ``kubernetes.client.ApiClient`` (the operator runtime, whose pinned library
    has ``param_serialize``). ``timeout``: seconds (or a (connect, read) pair) for every request that does not give
    its own; None waits as long as the library does."""

    def __init__(self, client, timeout=None):
        self.dynamic = client if hasattr(client, "resources") else None
        self.api_client = getattr(client, "client", client)
        self.timeout = timeout

    def raw(self, method, path, params=None, body=None, content_type=JSON, accept=JSON, timeout=None, what=None):
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

    def json(self, method, path, params=None, body=None, content_type=JSON, accept=JSON, timeout=None, what=None):
        """One request; its decoded JSON body ({} when empty)."""
        raw = self.raw(method, path, params, body, content_type, accept, timeout, what)
        try:
            data = raw.data
        finally:
            if hasattr(raw, "release_conn"):
                raw.release_conn()
        return json.loads(data.decode("utf-8")) if data else {}

    def stream_json(self, path, params, read_timeout, stopping, connect_timeout=10):
        """Yield the JSON lines of a watch until the server ends it (or ``stopping`` is set)."""
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


# --- objects ---------------------------------------------------------------------------------------------------
def _describe(kind, namespace, name):
    return "%s %s/%s" % (kind, namespace, name) if namespace else "%s %s" % (kind, name)


class Api(object):
    """Objects by (apiVersion, kind). ``client``: a ``kubernetes.dynamic.DynamicClient`` (its ApiClient and its
    discovery) or a ``kubernetes.client.ApiClient`` with ``resolve`` (``(apiVersion, kind) -> Resource or None``,
    e.g. :func:`table`'s). ``field_manager`` names every write."""

    def __init__(self, client, resolve=None, field_manager="soperator.slurm", timeout=None):
        self.rest = Rest(client, timeout)
        if resolve is None:
            resolve = discovery(client)
        elif isinstance(resolve, dict):
            resolve = _from_table(resolve)
        self._resolve = resolve
        self._resources = {}
        self._retried = set()
        self.field_manager = field_manager

    # where -----------------------------------------------------------------------------------------------------
    def resource(self, api_version, kind, required=True):
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

    def served(self, api_version, kind):
        return self.resource(api_version, kind, required=False) is not None

    def _path(self, api_version, kind, namespace=None, name=None, subresource=None):
        return self.resource(api_version, kind).path(namespace, name, subresource)

    # reads -----------------------------------------------------------------------------------------------------
    def get(self, api_version, kind, name, namespace=None, metadata_only=False, timeout=None, what=None):
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

    def list(self, api_version, kind, namespace=None, selector=None, what=None, required=False):
        """Items of a kind (in ``namespace``, or everywhere), with their apiVersion and kind; [] when not served
        (unless ``required``: then NotFound)."""
        res = self.resource(api_version, kind, required=required)
        if res is None:
            return []
        what = what or "list %s%s" % (kind, " in namespace %s" % namespace if namespace else "")
        body = self.rest.json("GET", res.path(namespace), {"labelSelector": selector}, what=what)
        items = body.get("items") or []
        for item in items:  # list items carry no apiVersion/kind
            item["apiVersion"] = api_version
            item["kind"] = kind
        return items

    # writes ----------------------------------------------------------------------------------------------------
    def _write_params(self, dry_run, force=False, field_manager=None):
        return {"fieldManager": field_manager or self.field_manager, "dryRun": "All" if dry_run else None,
                "force": "true" if force else None}

    def create(self, obj, dry_run=False, what=None, timeout=None):
        """POST ``obj``; Conflict when it exists."""
        md = obj["metadata"]
        what = what or "create " + _describe(obj["kind"], md.get("namespace"), md.get("name"))
        return self.rest.json("POST", self._path(obj["apiVersion"], obj["kind"], md.get("namespace")),
                              self._write_params(dry_run), body=obj, what=what, timeout=timeout)

    def apply(self, obj, force=False, dry_run=False, what=None, field_manager=None):
        """Server-side apply ``obj`` as the field manager (``field_manager``: another one; ``force``: take over
        conflicting fields). A ``metadata.resourceVersion`` in ``obj`` makes it conditional (Conflict if stale)."""
        md = obj["metadata"]
        what = what or "apply " + _describe(obj["kind"], md.get("namespace"), md.get("name"))
        return self.rest.json("PATCH", self._path(obj["apiVersion"], obj["kind"], md.get("namespace"), md["name"]),
                              self._write_params(dry_run, force, field_manager), body=obj, content_type=APPLY_PATCH,
                              what=what)

    def replace(self, obj, what=None, timeout=None):
        """PUT ``obj`` (its resourceVersion makes it conditional)."""
        md = obj["metadata"]
        what = what or "replace " + _describe(obj["kind"], md.get("namespace"), md.get("name"))
        return self.rest.json("PUT", self._path(obj["apiVersion"], obj["kind"], md.get("namespace"), md["name"]),
                              {"fieldManager": self.field_manager}, body=obj, what=what, timeout=timeout)

    def patch(self, api_version, kind, name, namespace, body, content_type=MERGE_PATCH, subresource=None, what=None):
        what = what or "patch %s%s" % (_describe(kind, namespace, name), " " + subresource if subresource else "")
        return self.rest.json("PATCH", self._path(api_version, kind, namespace, name, subresource),
                              {"fieldManager": self.field_manager}, body=body, content_type=content_type,
                              what=what)

    def delete(self, api_version, kind, name, namespace=None, propagation=None, uid=None, dry_run=False,
               what=None):
        """DELETE one object (``uid``: only that incarnation); False when it was already gone."""
        what = what or "delete " + _describe(kind, namespace, name)
        body = {"preconditions": {"uid": uid}} if uid else None
        try:
            self.rest.json("DELETE", self._path(api_version, kind, namespace, name),
                           {"propagationPolicy": propagation, "dryRun": "All" if dry_run else None}, body=body,
                           what=what)
        except NotFound:
            return False
        return True

    def update_status(self, api_version, kind, name, namespace, compute, same, attempts=5, current=None):
        """Read the object, ``compute(old_status, obj) -> new status`` (None: nothing to write) and merge-patch it
        into the status subresource unless ``same(old, new)``, conditional on the resourceVersion read; a lost race
        (409) reads again, ``attempts`` times in all. ``current``: a copy at hand (a watch cache), tried first
        instead of a read. Returns the written (or unchanged) object, None when it is gone."""
        what = "write the status of " + _describe(kind, namespace, name)
        for attempt in range(attempts):
            obj = current if attempt == 0 and current is not None else self.get(api_version, kind, name, namespace)
            if obj is None:
                return None
            old = obj.get("status") or {}
            new = compute(old, obj)
            if new is None or same(old, new):
                return obj
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": new}
            try:
                return self.patch(api_version, kind, name, namespace, body, subresource="status", what=what)
            except Conflict:
                if attempt + 1 == attempts:
                    raise Conflict("%s: kept losing the update race" % what, status=409)
            except NotFound:
                return None
        return None

    def set_finalizers(self, obj, finalizers):
        """Replace the finalizers of ``obj`` as read (conditional on its resourceVersion); None when it is gone."""
        md = obj["metadata"]
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": md["resourceVersion"]}}
        try:
            what = "update the finalizers of " + _describe(obj["kind"], md.get("namespace"), md["name"])
            return self.patch(obj["apiVersion"], obj["kind"], md["name"], md.get("namespace"), body, what=what)
        except NotFound:
            return None

    def event(self, involved, event_type, reason, message, component, now, host=None):
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

    def evict(self, namespace, pod, uid):
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

    def may(self, namespace, verb, resource_name):
        """SelfSubjectAccessReview: may this client ``verb`` ``resource_name`` (core group) in ``namespace``?"""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource_name}}}
        answer = self.rest.json("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body,
                                what="review access to %s %s" % (verb, resource_name))
        return bool((answer.get("status") or {}).get("allowed"))


def _from_table(by_key):
    return lambda api_version, kind: by_key.get((api_version, kind))
