# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``soperator.slurm.slurm_cluster``: run in the task's worker process with a local connection
(``plugin_utils.local_module``); the work is ``module_utils.k8s.slurm_cluster.execute``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils.api import errors
from ansible_collections.soperator.slurm.plugins.plugin_utils.local_module import LocalModuleAction


class ActionModule(LocalModuleAction):
    MODULE = "soperator.slurm.slurm_cluster"
    MANIFESTS = "definition"
    VALIDATION = {"required_one_of": [("definition", "name")]}

    def load(self):
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_cluster import Failure, execute
        from ansible_collections.soperator.slurm.plugins.modules.slurm_cluster import argument_spec

        return argument_spec(), execute, Failure

    def failure(self, error):
        return dict(failed=True, msg=error.msg, reason=error.reason, retryable=errors.retryable(error.reason),
                    **error.details)
