# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``soperator.slurm.slurm_cluster``: with a local connection the converge runs inside the
worker process Ansible already forked for the task, instead of a new Python interpreter that imports the
Kubernetes client again (about a CPU-second per task). Any other connection runs the module on the target.
The work is the same function either way (``module_utils.k8s.slurm_cluster.execute``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.soperator.slurm.plugins.module_utils.api import errors
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if getattr(self._connection, "transport", None) != "local":
            result.update(self._execute_module(module_name="soperator.slurm.slurm_cluster", task_vars=task_vars))
            return result
        from ansible_collections.soperator.slurm.plugins.modules.slurm_cluster import argument_spec
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_cluster import Failure, execute

        validation, params = self.validate_argument_spec(argument_spec=argument_spec(),
                                                         required_one_of=[("definition", "name")])
        hidden = set(validation._no_log_values) | set(objects.secret_values(params.get("definition") or []))
        try:
            result.update(execute(params, self._task.check_mode, self._task.diff, hidden.add))
        except Failure as e:
            result.update(failed=True, msg=e.msg, reason=e.reason, retryable=errors.retryable(e.reason),
                          **e.details)
        if hidden:
            from ansible.module_utils.common.parameters import remove_values

            result = remove_values(result, hidden)
        return result
