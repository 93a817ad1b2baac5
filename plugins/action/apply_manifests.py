# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``soperator.slurm.apply_manifests``: with a local connection the apply runs inside the worker
process Ansible already forked for the task, instead of a new Python interpreter that imports the Kubernetes client
again (about a CPU-second per task, each site.yml and each operator install). Any other connection, or no
``kubernetes`` library here, runs the module on the target. The work is the same function either way
(``modules.apply_manifests.execute``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.soperator.slurm.plugins.module_utils.render import objects


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import KUBERNETES_IMPORT_ERROR

        if getattr(self._connection, "transport", None) != "local" or KUBERNETES_IMPORT_ERROR:
            result.update(self._execute_module(module_name="soperator.slurm.apply_manifests", task_vars=task_vars))
            return result
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
        from ansible_collections.soperator.slurm.plugins.modules.apply_manifests import argument_spec, execute

        validation, params = self.validate_argument_spec(argument_spec=argument_spec())
        # Secret values the user gave may be echoed by an API error: mask them in everything we return.
        hidden = set(validation._no_log_values) | set(objects.secret_values(params.get("manifests") or []))
        try:
            result.update(execute(params, self._task.check_mode, self._task.diff, hidden.add))
        except KubernetesError as e:
            result.update(failed=True, msg=e.msg, **e.details)
        if hidden:
            from ansible.module_utils.common.parameters import remove_values

            result = remove_values(result, hidden)
        return result
