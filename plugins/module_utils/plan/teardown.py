# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Teardown (``state: absent``), decided: what goes and what stays. Pure; the adapter (``k8s/teardown.py``) reads
what is there, asks the API server what it may delete, and deletes what this plan names.

Everything the cluster runs and serves goes (its NodeSets, the objects of the kinds it owns that carry its label and
our managed-by label, the SlurmCluster itself); its data stays unless told: the jail (and the controller's spool),
the key Secrets and the accounting database are deleted only when the module's options say so, else when the
SlurmCluster's ``spec.deletionPolicy`` says ``Delete``. Data the reconciler may not delete is kept, with a warning
naming the field. Data is deleted by name, never listed: the Secrets and claims the renderer creates, never a claim
the user brought (``jail.existingClaim``) nor an External database's Secrets.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Any, Iterable, Mapping, Sequence, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils import kinds, names
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, NodeSet, SlurmCluster

# deletionPolicy field -> the core resources deleting it needs (SelfSubjectAccessReview, verb delete).
DATA_RESOURCES = (("jail", "persistentvolumeclaims"), ("secrets", "secrets"), ("database", "persistentvolumeclaims"),
                  ("database", "secrets"))
FIELDS = ("jail", "secrets", "database")
MARIADB = kinds.by_name("MariaDB")
# An object a teardown deletes by name: (apiVersion, kind, name).
ObjectName = Tuple[str, str, str]


def reviews(deletion_policy: Mapping[str, object] | None) -> list[str]:
    """The resources whose ``delete`` the API server must allow for ``deletion_policy`` (fields set to Delete)."""
    wanted: list[str] = []
    for field, resource in DATA_RESOURCES:
        if (deletion_policy or {}).get(field) == "Delete" and resource not in wanted:
            wanted.append(resource)
    return wanted


def deletion_problems(deletion_policy: Mapping[str, object] | None, allowed: Mapping[str, bool],
                      namespace: str) -> Errors:
    """SpecErrors of ``spec.deletionPolicy`` fields asking to delete data the reconciler may not delete. ``allowed``:
    ``{resource: bool}``, the API server's answers for :func:`reviews`."""
    problems: Errors = []
    for field, resource in DATA_RESOURCES:
        if any(p.path == "spec.deletionPolicy.%s" % field for p in problems):
            continue
        if (deletion_policy or {}).get(field) == "Delete" and not allowed.get(resource, False):
            problems.append(SpecError("spec.deletionPolicy.%s" % field,
                                      "Delete is not allowed: the reconciler may not delete %s in namespace %s "
                                      "(install the operator with operator_allow_data_deletion: true, or use "
                                      "Retain)" % (resource, namespace)))
    return problems


def data_to_delete(params: Mapping[str, Any], cluster: SlurmCluster | None) -> dict[str, bool]:
    """``{field: bool}``: the module's options (``delete_volumes``, ``delete_secrets``, ``delete_database``), a field
    not given taking the stored SlurmCluster's deletionPolicy (without a SlurmCluster: keep)."""
    policy = ((cluster or {}).get("spec") or {}).get("deletionPolicy") or {}
    given: dict[str, Any] = {"jail": params.get("delete_volumes"), "secrets": params.get("delete_secrets"),
                             "database": params.get("delete_database")}  # each True, False or None
    return dict((field, given[field] if given[field] is not None else policy.get(field) == "Delete")
                for field in FIELDS)


class Teardown(object):
    """What a teardown does, in this order: delete ``nodesets``, release ``finalizers`` (NodeSets still holding
    ours), delete ``objects`` (``(apiVersion, kind, name)``) and ``data`` (``(apiVersion, kind, name)``, deleted by
    name, each only if it exists), delete the SlurmCluster when ``delete_cluster``; then wait for the objects to go.
    ``warnings``: data kept because it may not be deleted; ``kept``: ``{field: bool}``."""

    nodesets: list[str]
    finalizers: list[str]
    objects: list[ObjectName]
    data: list[ObjectName]
    delete_cluster: bool
    warnings: list[str]
    kept: dict[str, bool]

    def __init__(self) -> None:
        self.nodesets = []
        self.finalizers = []
        self.objects = []
        self.data = []
        self.delete_cluster = False
        self.warnings = []
        self.kept = {}


def plan_teardown(name: str, namespace: str, cluster: SlurmCluster | None, params: Mapping[str, Any],
                  allowed: Mapping[str, bool], nodesets: Sequence[NodeSet], listed: Iterable[KubeObject],
                  mariadb_served: bool) -> Teardown:
    """Decide a teardown of SlurmCluster ``name``.

    ``cluster``: the stored SlurmCluster (None: gone); ``params``: the module's options; ``allowed``: ``{resource:
    bool}`` for :func:`reviews` of the data asked to go; ``nodesets``: the cluster's NodeSets; ``listed``: the
    objects of its prune kinds carrying its label; ``mariadb_served``: whether the cluster serves mariadb-operator's
    MariaDB."""
    t = Teardown()
    delete = data_to_delete(params, cluster)
    asked = dict((k, "Delete" if v else "Retain") for k, v in delete.items())
    for problem in deletion_problems(asked, allowed, namespace):
        t.warnings.append("%s: kept. %s" % (problem.path, problem.message))
        delete[problem.path.rpartition(".")[2]] = False
    resources = params.get("delete_resources", True)
    if resources:
        t.nodesets = [ns["metadata"]["name"] for ns in nodesets]
    # The cluster goes whole: no drain, so no finalizer of ours holds a NodeSet any more.
    t.finalizers = [ns["metadata"]["name"] for ns in nodesets
                    if names.FINALIZER in (ns["metadata"].get("finalizers") or [])]
    t.objects = [(item["apiVersion"], item["kind"], item["metadata"]["name"]) for item in listed
                 if (item["metadata"].get("labels") or {}).get(names.LABEL_MANAGED_BY) == names.MANAGED_BY]
    if delete["secrets"]:
        keys = (names.munge_key_name(name), names.ssh_host_keys_name(name), names.jwt_key_name(name))
        t.data += [("v1", "Secret", n) for n in keys]
    if delete["database"]:
        # What the cluster made for its database (an external one is never ours): the in-cluster MariaDB's volume,
        # a mariadb-operator MariaDB, the generated password.
        t.data += [("v1", "PersistentVolumeClaim", names.db_claim_name(name)),
                   ("v1", "Secret", names.db_password_name(name))]
        if mariadb_served:
            t.data.append((kinds.api_version(MARIADB), MARIADB.kind, names.database_name(name)))
    if delete["jail"]:
        existing = (((cluster or {}).get("spec") or {}).get("jail") or {}).get("existingClaim")
        claims = [names.spool_claim_name(name)] + ([] if existing else [names.jail_claim_name(name)])
        t.data += [("v1", "PersistentVolumeClaim", n) for n in claims]
    t.delete_cluster = bool(resources and cluster is not None and not cluster["metadata"].get("deletionTimestamp"))
    t.kept = dict((field, not delete[field]) for field in FIELDS)
    return t


def managed(items: Iterable[KubeObject]) -> list[KubeObject]:
    """Those of ``items`` the collection made (its managed-by label): what a teardown still waits for."""
    return [i for i in items if (i["metadata"].get("labels") or {}).get(names.LABEL_MANAGED_BY) == names.MANAGED_BY]
