# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``soperator.slurm.apply_manifests``: run in the task's worker process with a local connection
(``plugin_utils.local_module``); the work is ``modules.apply_manifests.execute``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.plugin_utils.local_module import LocalModuleAction


class ActionModule(LocalModuleAction):
    MODULE = "soperator.slurm.apply_manifests"
    MANIFESTS = "manifests"

    def load(self):
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
        from ansible_collections.soperator.slurm.plugins.modules.apply_manifests import argument_spec, execute

        return argument_spec(), execute, KubernetesError
