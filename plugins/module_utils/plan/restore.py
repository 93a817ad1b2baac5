# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A restore of a SlurmCluster's jail, decided (the role jail_restore, its module jail_restore_job). Pure.

The restore Job runs the cluster's backup image as root with the capabilities that write every user's files, on the
jail mounted read-write, with the cluster's backup Secrets, against the cluster's repository: everything a converge
of that cluster would refuse under the installer's policy or without the Secrets' marks, it refuses too. So the
stored cluster is judged by the converge's own function (``converge.validate``, which applies ``policy.check`` and
``references.marked_secret_errors``), with the same messages, before the Job is rendered.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.policy import Policy
from ansible_collections.soperator.slurm.plugins.module_utils.api.restore import restore_problems
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge
from ansible_collections.soperator.slurm.plugins.module_utils.render.backup import restore_job as render_restore_job
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, SlurmCluster


def restore_job(cluster: SlurmCluster, secrets: Mapping[str, Mapping[str, str]] | None, policy: Policy | None,
                snapshot: str = "latest", path: str | None = "", into: str | None = "") -> KubeObject:
    """The restore Job of the stored SlurmCluster ``cluster`` (with its status); raises SpecErrors: the request's
    problems (paths are the role's variables, ``api/restore.py``), else the cluster's as its converge would raise
    them (paths are its fields). ``secrets``: ``{name: labels}`` of the Secrets it takes only when marked for it
    (``values.marked_secret_refs``; a missing one left out). ``policy``: the installer's (``policy.normalize``).
    Its NodeSets play no part: the Job runs none of their images."""
    problems = restore_problems(cluster, snapshot, path or "", into or "")
    if problems:
        raise SpecErrors(problems)
    valid = converge.validate(cluster, [], policy=policy, secrets=secrets)[0]
    return render_restore_job(ClusterContext(valid, []), snapshot, path or "", into or "")
