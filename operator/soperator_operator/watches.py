"""Load an operator-sdk ``watches.yaml`` into typed entries (pure, apart from reading the file)."""

from dataclasses import dataclass, field
from typing import Any

import yaml

from ansible_collections.soperator.slurm.plugins.module_utils.api import durations
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

DEFAULT_RECONCILE_PERIOD = 600.0  # seconds; operator-sdk's own default is 10h, ours repairs drift sooner
DEFAULT_FULL_RUN_PERIOD = 6 * 3600.0  # with drift checks: a role run regardless, for what caches cannot see


def parse_duration(value: object) -> float:
    """Seconds in a Go duration or plain seconds: the collection's one parser."""
    return durations.seconds(value)


@dataclass(frozen=True)
class Finalizer:
    name: str
    role: str | None = None
    playbook: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OwnerRef:
    """Our extension: events of this kind reconcile another watched object, named by a field of this one."""
    kind: str
    name_field: str

    def owner_name(self, obj: KubeObject) -> str | None:
        value: Any = obj
        for part in self.name_field.split("."):
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Watch:
    group: str
    version: str
    kind: str
    role: str | None = None
    playbook: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    reconcile_period: float = DEFAULT_RECONCILE_PERIOD
    manage_status: bool = True
    finalizer: Finalizer | None = None
    reconcile_owner: OwnerRef | None = None
    # Our extensions: compare the render with the watch caches and run the role only when something differs
    # (the SlurmCluster entry); run it anyway once per full_run_period.
    drift_check: bool = False
    full_run_period: float = DEFAULT_FULL_RUN_PERIOD
    # The role's entry point our runtime runs (tasks_from; upstream ignores it and runs main).
    tasks_from: str | None = None

    @property
    def api_version(self) -> str:
        return "%s/%s" % (self.group, self.version)

    @property
    def plural(self) -> str:
        """Resource name; our kinds follow the plain lower-case + s rule (checked against the CRDs in tests)."""
        return self.kind.lower() + "s"


def _bool(value: object, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1")


def parse_watches(entries: object) -> list[Watch]:
    if not isinstance(entries, list):
        raise ValueError("watches file must hold a list of entries")
    watches = []
    for index, entry in enumerate(entries):
        where = "watches[%d]" % index
        for key in ("group", "version", "kind"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise ValueError("%s.%s is required" % (where, key))
        if bool(entry.get("role")) == bool(entry.get("playbook")):
            raise ValueError("%s: give exactly one of role or playbook" % where)
        fin = entry.get("finalizer")
        finalizer = None
        if fin:
            if not fin.get("name"):
                raise ValueError("%s.finalizer.name is required" % where)
            finalizer = Finalizer(name=fin["name"], role=fin.get("role"), playbook=fin.get("playbook"),
                                  vars=dict(fin.get("vars") or {}))
        owner = entry.get("x-soperator-reconcile-owner")
        period = entry.get("reconcilePeriod")
        watches.append(Watch(
            group=entry["group"], version=entry["version"], kind=entry["kind"],
            role=entry.get("role"), playbook=entry.get("playbook"), vars=dict(entry.get("vars") or {}),
            reconcile_period=DEFAULT_RECONCILE_PERIOD if period in (None, "") else parse_duration(period),
            manage_status=_bool(entry.get("manageStatus"), True),
            finalizer=finalizer,
            reconcile_owner=OwnerRef(kind=owner["kind"], name_field=owner["nameField"]) if owner else None,
            drift_check=_bool(entry.get("x-soperator-drift-check"), False),
            full_run_period=parse_duration(entry.get("x-soperator-full-run-period") or DEFAULT_FULL_RUN_PERIOD),
            tasks_from=entry.get("x-soperator-tasks-from") or None,
        ))
    kinds = {(w.group, w.kind) for w in watches}
    for w in watches:
        if w.reconcile_owner and (w.group, w.reconcile_owner.kind) not in kinds:
            raise ValueError("%s: reconcile owner kind %s is not watched" % (w.kind, w.reconcile_owner.kind))
    return watches


def load_watches(path: str) -> list[Watch]:
    with open(path, encoding="utf-8") as handle:
        return parse_watches(yaml.safe_load(handle) or [])
