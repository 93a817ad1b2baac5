# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``jail_restore_job``: the restore Job of a SlurmCluster's jail (render/backup.py), after the request is
judged (api/restore.py); a refusal names the role's variable and nothing is rendered."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.restore import restore_problems
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster
from ansible_collections.soperator.slurm.plugins.module_utils.render.backup import restore_job
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext


def jail_restore_job(cluster, snapshot="latest", path="", into=""):
    problems = restore_problems(cluster, snapshot, path or "", into or "")
    if problems:
        raise AnsibleFilterError("; ".join(str(p) for p in problems))
    try:
        valid = validate_cluster(cluster)
    except SpecErrors as e:
        raise AnsibleFilterError("the SlurmCluster is invalid: %s" % e)
    return restore_job(ClusterContext(valid, []), snapshot, path or "", into or "")


class FilterModule(object):
    def filters(self):
        return {"jail_restore_job": jail_restore_job}
