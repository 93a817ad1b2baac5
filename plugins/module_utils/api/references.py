# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a cluster shares with the other owners of its namespace: the names its objects take (two owners
whose objects would share a name), and the Secrets an External database, the backups and a directory take (only
ones marked for the cluster).
Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Mapping, Optional, Sequence, TypedDict

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import marked_secret_refs
from ansible_collections.soperator.slurm.plugins.module_utils.types import SlurmCluster


# Who takes each kind of marked Secret, and why it must be marked: the process that takes it sends it to a host the
# SlurmCluster names.
_TAKER = {
    names.LABEL_DATABASE_SECRET: "an External database",
    names.LABEL_BACKUP_SECRET: "the backups",
    names.LABEL_IDENTITY_SECRET: "a directory",
    container_steps.LABEL_REGISTRY_SECRET: "container steps",
}


class Owner(TypedDict):
    """A SlurmCluster or NodeSet of a namespace, as :func:`name_collisions` compares them."""

    cluster: str  # the SlurmCluster's name (a NodeSet's clusterRef)
    nodeset: Optional[str]  # None: the SlurmCluster itself
    created: Optional[str]  # metadata.creationTimestamp; None: not created yet


_WHY = {
    names.LABEL_DATABASE_SECRET: "slurmdbd would send its value to the database host",
    names.LABEL_BACKUP_SECRET: "the backup pods would send its value to the repository the SlurmCluster names",
    names.LABEL_IDENTITY_SECRET: "sssd would send its value to the directory the SlurmCluster names",
    container_steps.LABEL_REGISTRY_SECRET: "the workers would send its value to the registries jobs name",
}


def marked_secret_errors(cluster: SlurmCluster, secrets: Mapping[str, Mapping[str, str]]) -> Errors:
    """The Secrets of :func:`values.marked_secret_refs` (an External database's, the backups', a directory's) that are
    missing or not marked for ``cluster``: their owner gives one to a cluster with the label the reference names,
    value the cluster's name. ``secrets``: ``{name: the Secret's labels}`` (a name left out: it does not exist)."""
    name = cluster["metadata"]["name"]
    errors = []
    for path, secret, label in marked_secret_refs(cluster.get("spec")):
        mark = "%s=%s" % (label, name)
        labels = secrets.get(secret)
        if labels is None:
            errors.append(SpecError(path, "Secret %s does not exist; %s takes only a Secret labelled %s" % (
                secret, _TAKER[label], mark)))
        elif labels.get(label) != name:
            errors.append(SpecError(path, "Secret %s is not marked for SlurmCluster %s: %s, so %s takes only a "
                                    "Secret its owner labelled %s (kubectl label secret %s %s)" % (
                                        secret, name, _WHY[label], _TAKER[label], mark, secret, mark)))
    return errors


def _owner_label(owner: Owner) -> str:
    if owner["nodeset"] is None:
        return "SlurmCluster %s" % owner["cluster"]
    return "NodeSet %s (of SlurmCluster %s)" % (owner["nodeset"], owner["cluster"])


def _meeting(a: Owner, b: Owner) -> str | None:
    """A name the objects of owners ``a`` and ``b`` would both take, or None."""
    exact_a, families_a = names.owned_names(a["cluster"], a["nodeset"])
    exact_b, families_b = names.owned_names(b["cluster"], b["nodeset"])
    for name in exact_a:
        if name in exact_b:
            return name
    for exact, families in ((exact_a, families_b), (exact_b, families_a)):
        for name in exact:
            for prefix, tail in families:
                if name.startswith(prefix) and re.fullmatch(tail, name[len(prefix):]):
                    return name
    shared = set(p for p, dummy in families_a) & set(p for p, dummy in families_b)
    if shared:
        return sorted(shared)[0] + "0"
    return None


def name_collisions(owners: Sequence[Owner], cluster_name: str) -> Errors:
    """SpecErrors-ready problems of ``cluster_name`` and its NodeSets whose objects would take names another owner
    of the namespace already takes.

    ``owners``: every SlurmCluster and NodeSet of the namespace (this cluster's included) as
    ``{"cluster": name, "nodeset": name or None, "created": creationTimestamp or None}``; a NodeSet's cluster is its
    clusterRef. Of two owners that meet, the one created later (None: not created yet) is refused, naming both, so
    a running cluster never stops because a newer one was named badly."""
    def age(owner: Owner) -> tuple[str, str, str]:
        return (owner.get("created") or "~", owner["cluster"], owner["nodeset"] or "")

    errors = []
    mine = [o for o in owners if o["cluster"] == cluster_name]
    for owner in mine:
        if owner["nodeset"] in names.RESERVED_NODESET_NAMES:
            continue  # already refused as reserved
        for other in owners:
            if other is owner or age(other) > age(owner) or other["nodeset"] in names.RESERVED_NODESET_NAMES or (
                    other["cluster"] == owner["cluster"] and other["nodeset"] == owner["nodeset"]):
                continue
            name = _meeting(owner, other)
            if name is None:
                continue
            path = "metadata.name" if owner["nodeset"] is None else "nodesets[%s].metadata.name" % owner["nodeset"]
            errors.append(SpecError(path, "the objects of %s and of %s would both be named %s: rename one of them"
                                    % (_owner_label(owner), _owner_label(other), name)))
            break
    return errors
