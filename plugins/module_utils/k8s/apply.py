# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Apply a list of manifests to a cluster: the only code of the collection that changes Kubernetes objects.

The decisions are pure and live in ``render/objects.py``; this file fetches live state, asks those helpers what
to do, and sends the requests through the one access layer (``access.py``). Request economy, the rule the
benchmarks hold us to:

* every (apiVersion, kind, namespace) of the desired set, and of the prune kinds, is LISTED ONCE (with the
  prune label selector when given, else all of that kind in the namespace, filtered by name);
* an object whose live copy is in sync (``objects.in_sync``: applied-hash annotation equal and live fields a
  superset of the desired ones) costs nothing more; any other object costs one server-side apply;
* so a no-op converge costs one request per kind and namespace, never one per object.

Create-only objects (annotation ``slurm.soperator.dev/create-only: "true"``) are created when absent, with
generated data for ``slurm.soperator.dev/generate: munge-key | ssh-host-keys | db-password | jwt-key``, and never
touched again.
Generated values (``generate.py``) are handed to ``on_secret`` (the module's ``no_log_values``) and never
returned.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import base64
from typing import Any, Callable, Collection, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access, generate
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

# Called with every generated secret value (the module's no_log_values).
OnSecret = Callable[[str], None]
# A listing's key: (apiVersion, kind, namespace or None).
Group = Tuple[str, str, Optional[str]]


# --- the apply run -------------------------------------------------------------------------------------


class _Run(object):
    """State of one ``apply_manifests`` call: the API (resolved resources), listings, results."""

    def __init__(self, client: access.Client, field_manager: str, check_mode: bool, force_conflicts: bool,
                 want_diff: bool, on_secret: OnSecret | None) -> None:
        self.api: access.Api = (client if isinstance(client, access.Api)
                                else access.Api(client, field_manager=field_manager))
        self.field_manager = field_manager
        self.check_mode = check_mode
        self.force_conflicts = force_conflicts
        self.want_diff = want_diff
        self.on_secret = on_secret or (lambda value: None)
        self.objects: List[Dict[str, Any]] = []
        self.diff: List[Dict[str, Any]] = []
        self.created_namespaces: Set[str] = set()

    def resource(self, api_version: str, kind: str, required: bool = True) -> access.Resource | None:
        """The API resource of a kind, or None when not served (see access.Api.resource)."""
        return self.api.resource(api_version, kind, required)

    def list(self, api_version: str, kind: str, namespace: str | None, selector: str | None) -> List[KubeObject]:
        return self.api.list(api_version, kind, namespace, selector)  # a kind not served (yet): nothing of it exists

    def get(self, desired: KubeObject) -> KubeObject | None:
        if self.resource(desired["apiVersion"], desired["kind"], required=False) is None:
            return None
        md = desired["metadata"]
        return self.api.get(desired["apiVersion"], desired["kind"], md["name"], md.get("namespace"),
                            what="get " + objects.describe(desired))

    def record(self, obj: KubeObject, action: str, before: KubeObject | None = None,
               after: KubeObject | None = None) -> None:
        md = obj.get("metadata") or {}
        entry = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": md.get("name"),
                 "namespace": md.get("namespace"), "action": action}
        self.objects.append(entry)
        if self.want_diff and action != "unchanged":
            header = objects.describe(obj)
            self.diff.append({"before_header": header, "after_header": header,
                              "before": objects.normalize(before) or {}, "after": objects.normalize(after) or {}})

    # One desired object --------------------------------------------------------------------------------

    def converge(self, desired: KubeObject, live: KubeObject | None) -> None:
        verdict = objects.plan_object(desired, live)
        if verdict in (objects.SKIP, objects.KEEP):
            self.record(desired, "unchanged")
            return
        if verdict == objects.CREATE:
            after = self.create(desired)
            if after is None:  # created meanwhile by someone else: create-only means leave it
                self.record(desired, "unchanged")
                return
        else:
            after = self.apply(desired, live)
        if live is not None and objects.same_object(live, after):
            self.record(desired, "unchanged")
            return
        if live is None and desired["kind"] == "Namespace":
            self.created_namespaces.add(desired["metadata"]["name"])
        action = "created" if live is None else "updated"
        self.record(desired, "would-%s" % action[:-1] if self.check_mode else action, live, after)

    def create(self, desired: KubeObject) -> KubeObject | None:
        what = "create " + objects.describe(desired)
        self.resource(desired["apiVersion"], desired["kind"])
        body = objects.without_applied_hash(desired)
        if self.check_mode:
            return self.dry_run_fallback(desired, lambda: self.api.create(body, dry_run=True, what=what))
        generated = generate.material(desired, what)
        for value in generated.values():
            self.on_secret(value)
            plain = base64.b64decode(value)
            if plain.isascii() and plain.decode("ascii").isprintable():
                self.on_secret(plain.decode("ascii"))  # a password is also hidden as itself
        if generated:
            body["data"] = dict(body.get("data") or {}, **generated)
        try:
            return self.api.create(body, what=what)
        except access.Conflict:  # AlreadyExists
            return None

    def apply(self, desired: KubeObject, live: KubeObject | None) -> KubeObject | None:
        what = "apply " + objects.describe(desired)
        self.resource(desired["apiVersion"], desired["kind"])
        body = objects.with_applied_hash(desired)

        def ssa(force: bool) -> KubeObject:
            # NotFound only matters to a dry run (namespace not created yet), see dry_run_fallback.
            return self.api.apply(body, force=force, dry_run=self.check_mode, what=what)

        def ssa_repairing() -> KubeObject:
            try:
                return ssa(self.force_conflicts)
            except access.Conflict as e:
                message = e.server_message or e.msg
                managers, fields = objects.parse_conflict(message)
                if objects.imperative_only(managers, live):
                    # Hand edits (kubectl edit/patch) of fields we declare: we are the source of truth.
                    return ssa(True)
                raise KubernetesError(
                    "%s: conflict on %s owned by field manager %s; change it there, or set force_conflicts "
                    "to take the fields over (%s)" % (
                        objects.describe(desired), ", ".join(fields) or "some fields",
                        ", ".join('"%s"' % m for m in managers) or "(unknown)", message),
                    object=objects.describe(desired), fields=fields, managers=managers, status=409)

        switch = objects.strategy_switch_patch(desired, live)
        if self.check_mode:
            if switch:  # the dry-run apply would be refused until the switch is made: predict it
                return objects.strip_volatile(desired)
            return self.dry_run_fallback(desired, ssa_repairing)
        if switch:
            md = desired["metadata"]
            self.api.patch(desired["apiVersion"], desired["kind"], md["name"], md.get("namespace"), switch,
                           what="switch the update strategy of " + objects.describe(desired))
        return ssa_repairing()

    def dry_run_fallback(self, desired: KubeObject, dry_run: Callable[[], KubeObject]) -> KubeObject | None:
        """A dry run inside a namespace this check-mode run would create cannot reach the server's
        admission (the namespace is absent): predict the object as given instead."""
        try:
            return dry_run()
        except access.NotFound as e:
            if desired["metadata"].get("namespace") in self.created_namespaces:
                return objects.strip_volatile(desired)
            raise KubernetesError("%s: %s" % (objects.describe(desired), e.server_message or e.msg), status=404)

    # Pruning --------------------------------------------------------------------------------------------

    def prune(self, obj: KubeObject) -> None:
        if not self.check_mode:
            md = obj["metadata"]
            if not self.api.delete(obj["apiVersion"], obj["kind"], md["name"], md.get("namespace"),
                                   propagation="Background", what="delete " + objects.describe(obj)):
                return  # gone meanwhile: nothing was changed by us
        self.record(obj, "would-prune" if self.check_mode else "pruned", obj, None)


def _prepare(run: _Run, manifests: Sequence[KubeObject],
             skip_unserved: Iterable[str] = ()) -> Tuple[List[KubeObject], List[KubeObject]]:
    """Validate, and drop a namespace given on a cluster-scoped object (identity must match live copies).

    Returns (the objects to apply, the objects of ``skip_unserved`` kinds the cluster does not serve)."""
    problems = objects.check_manifests(manifests)
    if problems:
        raise KubernetesError("invalid manifests: " + "; ".join(problems), problems=problems)
    try:
        optional = set(objects.parse_kind(k) for k in skip_unserved)
    except ValueError as e:
        raise KubernetesError("skip_unserved: %s" % e)
    out: List[KubeObject] = []
    skipped: List[KubeObject] = []
    for obj in manifests:
        resource = run.resource(obj["apiVersion"], obj["kind"], required=False)
        if resource is None and (obj["apiVersion"], obj["kind"]) in optional:
            skipped.append(obj)
            continue
        obj = objects.without_applied_hash(obj)
        md = obj["metadata"]
        if resource is not None and not resource.namespaced:
            md.pop("namespace", None)
        elif resource is not None and not md.get("namespace"):
            raise KubernetesError("%s: metadata.namespace is required for a namespaced %s" % (
                objects.describe(obj), obj["kind"]))
        out.append(obj)
    return out, skipped


# What a refused dry run says of one object (see DryRunRefused).
Refusal = Dict[str, Any]
# In ``prune_namespaces``: every namespace (one cluster-wide list per kind).
ALL_NAMESPACES = "*"


class DryRunRefused(KubernetesError):
    """The API server refused objects of a set in a server-side dry run: nothing of the set was written.

    ``refusals``: one dict per refused object, ``{"object": the desired object, "status": HTTP status,
    "message": the API server's message, "causes": [{"field", "message", "reason"}]}`` (causes name fields of the
    object as the API server saw it, e.g. ``spec.template.spec.containers[0].resources.requests``)."""

    def __init__(self, refusals: List[Refusal]) -> None:
        self.refusals = refusals
        text = "; ".join("%s: %s" % (objects.describe(r["object"]), r["message"]) for r in refusals)
        super(DryRunRefused, self).__init__("the API server refused (dry run, nothing was applied): " + text,
                                            status=refusals[0]["status"] if refusals else None)


def _refusal(desired: KubeObject, err: KubernetesError) -> Refusal:
    """What a refused dry run (an access error) says about ``desired``: its message and the fields it names."""
    body = err.body or {}
    causes = [{"field": cause.get("field") or "", "message": cause.get("message") or "",
               "reason": cause.get("reason") or ""} for cause in ((body.get("details") or {}).get("causes") or [])]
    return {"object": desired, "status": err.status, "message": body.get("message") or err.server_message or err.msg,
            "causes": causes}


class Applier(object):
    """One apply of a set of manifests, in three steps a caller may separate:

    * :meth:`observe` lists (and fetches) the live copies, once;
    * :meth:`preflight` sends every write the set needs as a server-side dry run (``dryRun=All``: admission,
      validation, immutable fields, conflicts; nothing stored) and returns the refusals, all of them;
    * :meth:`run` writes: creates, applies, prunes (see :func:`apply_manifests`).

    A caller that must not write anything of a set unless all of it is accepted runs the three in order and
    stops at the first refusal (the converge: before it drains a node or applies an object)."""

    def __init__(self, client: access.Client, manifests: Sequence[KubeObject], field_manager: str,
                 prune_selector: str | None = None, prune_kinds: Sequence[str] | None = None,
                 prune_namespaces: Sequence[str] | None = None,
                 protect: Collection[str] = objects.DEFAULT_PROTECT_KINDS, check_mode: bool = False,
                 force_conflicts: bool = False, diff: bool = False,
                 on_secret: OnSecret | None = None, keep: Collection[Tuple[str, str]] = (),
                 skip_unserved: Iterable[str] = ()) -> None:
        self.run_state = _Run(client, field_manager, check_mode, force_conflicts, diff, on_secret)
        self.prune_selector = prune_selector
        self.prune_kinds = prune_kinds
        self.prune_namespaces = prune_namespaces
        self.protect = protect
        self.keep = keep
        self.want_diff = diff
        self.desired, self.skipped = _prepare(self.run_state, manifests, skip_unserved)
        self.live: Dict[objects.ObjectKey, KubeObject] = {}
        self.observed = False
        self.listed: Dict[Group, List[KubeObject]] = {}
        self.prune_groups: Set[Group] = set()

    def observe(self) -> Applier:
        """List every (apiVersion, kind, namespace) of the set and of the prune kinds once; fetch the objects the
        prune selector cannot see (create-only ones: read by name, never listed)."""
        run, desired, prune_selector = self.run_state, self.desired, self.prune_selector
        # Which listings to make: (apiVersion, kind, namespace) -> selector; objects the selector cannot see are
        # fetched one by one (rare: the renderer labels everything it makes).
        listings: Dict[Group, Optional[str]] = {}
        fetch_alone: List[KubeObject] = []
        for obj in desired:
            md = obj["metadata"]
            group = (obj["apiVersion"], obj["kind"], md.get("namespace"))
            if objects.is_create_only(obj) or (prune_selector and
                                               not objects.selector_matches(prune_selector, objects.labels(obj))):
                fetch_alone.append(obj)
            else:
                listings[group] = prune_selector
        if prune_selector:
            if self.prune_kinds:
                try:
                    kinds = [objects.parse_kind(k) for k in self.prune_kinds]
                except ValueError as e:
                    raise KubernetesError("prune.kinds: %s" % e)
            else:  # protected kinds are never pruned: no need to list them (nor the right to list Secrets)
                kinds = sorted(set((o["apiVersion"], o["kind"]) for o in desired if o["kind"] not in self.protect))
            namespaces: List[Optional[str]] = list(self.prune_namespaces or sorted(set(
                o["metadata"]["namespace"] for o in desired if o["metadata"].get("namespace"))))
            if ALL_NAMESPACES in namespaces:
                namespaces = [None]  # one list across every namespace
            for api_version, kind in kinds:
                resource = run.resource(api_version, kind, required=False)
                if resource is None:
                    continue
                for namespace in (namespaces if resource.namespaced else [None]):
                    group = (api_version, kind, namespace)
                    listings[group] = prune_selector
                    self.prune_groups.add(group)
        # A create-only object of a kind listed anyway (a Job) is found in that listing when the selector sees it:
        # no read by name (Secrets and claims are not listed: their reads stay by name).
        fetch_alone = [o for o in fetch_alone if not (
            (o["apiVersion"], o["kind"], o["metadata"].get("namespace")) in listings and prune_selector
            and objects.selector_matches(prune_selector, objects.labels(o)))]
        self.live = {}
        self.observed = True
        for group, selector in listings.items():
            self.listed[group] = run.list(group[0], group[1], group[2], selector)
            for item in self.listed[group]:
                self.live[objects.object_key(item)] = item
        for obj in fetch_alone:
            found = run.get(obj)
            if found is not None:
                self.live[objects.object_key(found)] = found
        return self

    def absent(self) -> List[KubeObject]:
        """The desired objects that do not exist yet (after :meth:`observe`)."""
        return [o for o in self.desired if objects.object_key(o) not in self.live]

    def changes(self) -> List[KubeObject]:
        """The desired objects a run would write (absent, or not in sync with their live copy; after
        :meth:`observe`)."""
        return [o for o in self.desired
                if objects.plan_object(o, self.live.get(objects.object_key(o))) not in (objects.SKIP, objects.KEEP)]

    def preflight(self) -> List[Refusal]:
        """Dry-run every write the set needs; returns the refusals (empty: the API server accepts all of it).

        Objects in sync cost nothing. A create in a namespace this set creates cannot be judged (the namespace
        does not exist yet): it is left to the real run, as in check mode."""
        if not self.observed:
            self.observe()
        run = self.run_state
        creating = set(o["metadata"]["name"] for o in self.desired
                       if o["kind"] == "Namespace" and objects.object_key(o) not in self.live)
        refusals: List[Refusal] = []
        for desired in self.desired:
            live = self.live.get(objects.object_key(desired))
            verdict = objects.plan_object(desired, live)
            if verdict in (objects.SKIP, objects.KEEP) or objects.strategy_switch_patch(desired, live):
                continue
            run.resource(desired["apiVersion"], desired["kind"])
            namespace = desired["metadata"].get("namespace")
            try:
                if verdict == objects.CREATE:
                    run.api.create(objects.without_applied_hash(desired), dry_run=True,
                                   what="dry-run create " + objects.describe(desired))
                else:
                    self._dry_apply(desired, live)
            except access.NotFound:
                if namespace in creating:
                    continue
                raise
            except access.Conflict as e:
                if verdict == objects.CREATE:
                    continue  # created meanwhile: create-only objects are then left alone
                refusals.append(_refusal(desired, e))
            except access.Invalid as e:
                refusals.append(_refusal(desired, e))
            except KubernetesError as e:
                if e.status is None:  # not an answer of the API server
                    raise
                raise KubernetesError("dry run of %s: %s" % (objects.describe(desired), e.server_message or e.msg),
                                      status=e.status)
        return refusals

    def _dry_apply(self, desired: KubeObject, live: KubeObject | None) -> None:
        run = self.run_state
        body = objects.with_applied_hash(desired)

        def ssa(force: bool) -> KubeObject:
            return run.api.apply(body, force=force, dry_run=True, what="dry-run apply " + objects.describe(desired))
        try:
            ssa(run.force_conflicts)
        except access.Conflict as e:
            managers, dummy = objects.parse_conflict(e.server_message or e.msg)
            if not objects.imperative_only(managers, live):
                raise
            ssa(True)  # hand edits of fields we declare: the real run takes them back the same way

    def run(self) -> Dict[str, Any]:
        """Write: create, apply, prune; returns ``{changed, objects, counts[, diff]}``."""
        if not self.observed:
            self.observe()
        run, desired = self.run_state, self.desired
        for obj in desired:
            run.converge(obj, self.live.get(objects.object_key(obj)))

        desired_keys = set(objects.object_key(o) for o in desired)
        seen = set()
        for group in sorted(self.prune_groups, key=lambda g: tuple(x or "" for x in g)):
            for obj in objects.plan_prune(self.listed[group], desired_keys, self.protect):
                if (obj.get("kind"), obj["metadata"].get("name")) in self.keep:
                    continue
                if objects.object_key(obj) not in seen:
                    seen.add(objects.object_key(obj))
                    run.prune(obj)

        counts = dict((k, 0) for k in ("created", "updated", "unchanged", "pruned"))
        base = {"would-create": "created", "would-update": "updated", "would-prune": "pruned"}
        for entry in run.objects:
            counts[base.get(entry["action"], entry["action"])] += 1
        result = {"changed": any(e["action"] != "unchanged" for e in run.objects), "objects": run.objects,
                  "counts": counts, "skipped": [objects.describe(o) for o in self.skipped]}
        if self.want_diff:
            result["diff"] = run.diff
        return result


def read_manifest_files(paths: Iterable[str]) -> List[KubeObject]:
    """The documents of YAML files, in order (empty documents left out); raises OSError or ValueError naming the
    file. Plain data: nothing is templated, LibYAML parses where it is installed."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs: List[KubeObject] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                found = [d for d in yaml.load_all(handle, Loader=loader) if d is not None]
        except yaml.YAMLError as e:
            raise ValueError("%s is not YAML: %s" % (path, e))
        for i, doc in enumerate(found):
            if not isinstance(doc, dict):
                raise ValueError("%s: document %d is not a mapping" % (path, i + 1))
        docs.extend(found)
    return docs


def apply_manifests(client: access.Client, manifests: Sequence[KubeObject], field_manager: str,
                    prune_selector: str | None = None, prune_kinds: Sequence[str] | None = None,
                    prune_namespaces: Sequence[str] | None = None,
                    protect: Collection[str] = objects.DEFAULT_PROTECT_KINDS, check_mode: bool = False,
                    force_conflicts: bool = False, diff: bool = False, on_secret: OnSecret | None = None,
                    keep: Collection[Tuple[str, str]] = (), dry_run_first: bool = False,
                    skip_unserved: Iterable[str] = ()) -> Dict[str, Any]:
    """Server-side apply ``manifests`` in order as ``field_manager``, then prune (see the module docstring).

    ``prune_selector``: label selector of the objects this set owns; when given, objects of ``prune_kinds``
    (``apiVersion/Kind`` strings; default the kinds of ``manifests``) matching it in ``prune_namespaces``
    (default the namespaces of ``manifests``) and absent from ``manifests`` are deleted, except kinds in
    ``protect``, objects annotated ``slurm.soperator.dev/prune: "false"`` and ``(kind, name)`` pairs in ``keep``.

    Create-only objects (Secrets, claims) are read by name, never listed: reading one Secret needs ``get`` on
    it, listing would need ``list`` on every Secret of the namespace.

    ``dry_run_first``: every write is first sent as a server-side dry run; any refusal raises DryRunRefused
    (listing all of them) before anything is written.

    ``skip_unserved``: kinds (``apiVersion/Kind``) whose objects are left out, not refused, where the cluster does
    not serve them (another project's CRD, e.g. a PodMonitor): the lookup is this call's own, confirmed with the
    server, so a stale discovery cache of another client cannot make it fail.

    Returns ``{changed, objects, counts[, diff]}``; raises KubernetesError.
    """
    applier = Applier(client, manifests, field_manager, prune_selector, prune_kinds, prune_namespaces, protect,
                      check_mode, force_conflicts, diff, on_secret, keep, skip_unserved).observe()
    if dry_run_first:
        refusals = applier.preflight()
        if refusals:
            raise DryRunRefused(refusals)
    return applier.run()
