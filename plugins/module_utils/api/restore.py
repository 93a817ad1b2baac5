# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a restore of the jail may ask (playbooks/jail-restore.yml, the role jail_restore): a snapshot, optionally a
path of the jail, restored in place only while the cluster is in maintenance, else into a new directory of the jail
(the backup program refuses one that exists or is reached through a symlink, and hands it over only complete).
Pure: every problem names the role's variable, and nothing is written before all are answered."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import matches
from ansible_collections.soperator.slurm.plugins.module_utils.types import SlurmCluster

SNAPSHOT_PATTERN = r"^([0-9a-f]{8,64}|latest)$"
MAINTENANCE_PHASE = "Maintenance"  # plan.model.PHASE_MAINTENANCE (a layer above: a unit test holds them equal)


def restore_problems(cluster: SlurmCluster, snapshot: object, path: str, into: str) -> Errors:
    """SpecErrors (path = the role's variable) of a restore request for the SlurmCluster ``cluster`` (as stored, with
    its status): [] when it may go ahead."""
    errors = []
    spec = cluster.get("spec") or {}
    if not (spec.get("jail") or {}).get("backup"):
        errors.append(SpecError("jail_restore_cluster", "SlurmCluster %s has no spec.jail.backup: nothing to restore "
                                "from" % (cluster.get("metadata") or {}).get("name")))
    if not isinstance(snapshot, str) or not re.fullmatch(SNAPSHOT_PATTERN, snapshot):
        errors.append(SpecError("jail_restore_snapshot", "%r is not a snapshot id (hex, 8 to 64 digits) or latest"
                                % (snapshot,)))
    for var, value in (("jail_restore_path", path), ("jail_restore_into", into)):
        if value and not matches(schema.JAIL_PATH_PATTERN, value):
            errors.append(SpecError(var, "%r is not a path of the jail: %s" % (
                value, schema.PATTERN_HINTS[schema.JAIL_PATH_PATTERN])))
    if into and path and (into == path or path.startswith(into + "/")):
        errors.append(SpecError("jail_restore_into", "%r is %s %r: that restores over live files, which needs the "
                                "cluster in maintenance (leave jail_restore_into empty)" % (
                                    into, "the path" if into == path else "a directory above the path", path)))
    if not into:
        status = cluster.get("status") or {}
        if not spec.get("maintenance") or status.get("phase") != MAINTENANCE_PHASE:
            errors.append(SpecError("jail_restore_into", "restoring into the live jail needs the cluster in "
                                    "maintenance (spec.maintenance: true, and status.phase Maintenance: no pod "
                                    "uses the jail); else restore into a directory of the jail (e.g. /restore)"))
    return errors
