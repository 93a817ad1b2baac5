"""Watch caches: list+watch one resource (per namespace, or cluster-wide) into memory, with a callback per change.

Like client-go's informers: a list gives the starting state and a resourceVersion, a watch from there keeps it
current (bookmarks keep the resourceVersion fresh), ``410 Gone`` relists, any other failure relists after a
capped backoff. Objects deleted while the watch was down are found by the relist and reported as deleted.
"""

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

from . import classify, workqueue

if TYPE_CHECKING:
    from .kube import Kube

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

# ``on_change(event_type, old, new)``: a change the store has taken in (ADDED: old None; DELETED: new None).
ChangeHandler = Callable[[str, KubeObject | None, KubeObject | None], None]
# A test on a cached object (``Store.list``).
Predicate = Callable[[KubeObject], bool]
# What ``Store.replace`` changed: (old or None, new) of the objects added or changed, and the objects removed.
Changed = list[tuple[KubeObject | None, KubeObject]]
Removed = list[KubeObject]


def Resource(group: str, version: str, plural: str,  # noqa: N802  (a constructor, as it was a class)
             kind: str) -> access.Resource:
    """A namespaced API resource, ``group`` "" for the core API: the access layer's (its ``path(namespace)`` lists
    the resource in a namespace, or everywhere)."""
    return access.resource(group, version, plural, kind)


class Gone(Exception):
    """The watch's resourceVersion is too old: relist."""


class Store:
    """Objects by (namespace, name), thread-safe; reads return the stored dicts (treat them as read-only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[str | None, str | None], KubeObject] = {}  # (namespace: None if cluster-scoped, name)

    def get(self, namespace: str | None, name: str) -> KubeObject | None:
        with self._lock:
            return self._items.get((namespace, name))

    def list(self, namespace: str | None = None, predicate: Predicate | None = None) -> list[KubeObject]:
        with self._lock:
            items = list(self._items.values())
        return [o for o in items if (namespace is None or o["metadata"].get("namespace") == namespace)
                and (predicate is None or predicate(o))]

    def put(self, obj: KubeObject) -> KubeObject | None:
        md = obj["metadata"]
        with self._lock:
            old = self._items.get((md.get("namespace"), md["name"]))
            self._items[(md.get("namespace"), md["name"])] = obj
        return old

    def remove(self, namespace: str | None, name: str | None) -> KubeObject | None:
        with self._lock:
            return self._items.pop((namespace, name), None)

    def replace(self, namespace: str | None, objs: Iterable[KubeObject]) -> tuple[Changed, Removed]:
        """Set the contents of ``namespace`` (None: all) to ``objs``; returns (added_or_changed, removed)."""
        fresh = dict(((o["metadata"].get("namespace"), o["metadata"]["name"]), o) for o in objs)
        with self._lock:
            stale = [k for k in self._items if (namespace is None or k[0] == namespace) and k not in fresh]
            removed = [self._items.pop(k) for k in stale]
            changed = []
            for key, obj in fresh.items():
                old = self._items.get(key)
                self._items[key] = obj
                if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    changed.append((old, obj))
        return changed, removed

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class Informer:
    """Keeps ``store`` in sync with ``resource`` in ``namespaces`` ([None]: all), objects matching ``selector``.

    ``on_change(event_type, old, new)`` is called from the informer's threads after the store changed.
    """

    def __init__(self, kube: "Kube", resource: access.Resource, namespaces: Iterable[str | None] | None,
                 on_change: ChangeHandler, selector: str | None = None, stopping: threading.Event | None = None,
                 watch_timeout: int = 240) -> None:
        self.kube = kube
        self.resource = resource
        self.namespaces = list(namespaces or [None])
        self.selector = selector
        self.on_change = on_change
        self.store = Store()
        self.stopping = stopping or threading.Event()
        self.watch_timeout = watch_timeout
        self._synced: dict[str | None, threading.Event] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for ns in self.namespaces:
            ready = threading.Event()
            self._synced[ns] = ready
            t = threading.Thread(target=self._run, args=(ns, ready), daemon=True,
                                 name="watch-%s-%s" % (self.resource.plural, ns or "all"))
            t.start()
            self._threads.append(t)

    def synced(self) -> bool:
        return all(e.is_set() for e in self._synced.values())

    def wait_synced(self, timeout: float | None = None) -> bool:
        for event in self._synced.values():
            if not event.wait(timeout):
                return False
        return True

    def _run(self, namespace: str | None, ready: threading.Event) -> None:
        failures = 0
        while not self.stopping.is_set():
            try:
                rv = self._relist(namespace)
                ready.set()
                failures = 0
                while not self.stopping.is_set():
                    rv = self._watch(namespace, rv)
            except Gone:
                log.debug("watch of %s expired; relisting", self.resource.plural)
                continue
            except Exception as exc:  # noqa: BLE001  network and API errors: relist after a backoff
                failures += 1
                log.warning("watch of %s in %s failed: %s; retrying", self.resource.plural, namespace or "all",
                            exc)
            self.stopping.wait(classify.backoff(failures, 0.5, 30.0))

    def _relist(self, namespace: str | None) -> str | None:
        body = self.kube.request_json("GET", self.resource.path(namespace), self._params())
        items = body.get("items") or []
        for item in items:
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
        changed, removed = self.store.replace(namespace, items)
        for old, new in changed:
            self.on_change(ADDED if old is None else MODIFIED, old, new)
        for old in removed:
            self.on_change(DELETED, old, None)
        return (body.get("metadata") or {}).get("resourceVersion")

    def _params(self, **extra: str | None) -> dict[str, str | None]:
        params = dict(extra)
        if self.selector:
            params["labelSelector"] = self.selector
        return params

    def _watch(self, namespace: str | None, rv: str | None) -> str | None:
        params = self._params(watch="true", resourceVersion=rv, allowWatchBookmarks="true",
                              timeoutSeconds=str(self.watch_timeout))
        for event in self.kube.stream_json(self.resource.path(namespace), params, self.watch_timeout + 30,
                                           self.stopping):
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise Gone()
                raise RuntimeError("watch error: %s" % json.dumps(obj)[:300])
            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
            if etype == "BOOKMARK":
                continue
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
            md = obj.get("metadata") or {}
            if etype == DELETED:
                old = self.store.remove(md.get("namespace"), md.get("name"))
                self.on_change(DELETED, old or obj, None)
            elif etype in (ADDED, MODIFIED):
                old = self.store.put(obj)
                self.on_change(ADDED if old is None else MODIFIED, old, obj)
        return rv


class Caches(Protocol):
    """What the runtime's other loops (``nodes.py``, ``slurmstatus.py``) use of the controller: the caches of the
    watched kinds (``informers``) and of the objects the clusters own (``owned``, by kind), the work queue, and the
    event set when the runtime stops."""

    @property
    def informers(self) -> Mapping[str, Informer]: ...

    @property
    def owned(self) -> Mapping[str, Informer]: ...

    @property
    def queue(self) -> workqueue.WorkQueue[workqueue.Key]: ...

    @property
    def _stopping(self) -> threading.Event: ...


def cluster_of(obj: KubeObject | None, label: str) -> str | None:
    labels: Mapping[str, str] = ((obj or {}).get("metadata") or {}).get("labels", {})
    return labels.get(label)
