# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one dispatch of the collection's Kubernetes modules' action plugins: with a local connection a module's work
runs inside the worker process Ansible already forked for the task, instead of a new Python interpreter that imports
the Kubernetes client again (about a CPU-second per task, each site.yml and each operator run). Any other
connection, or no ``kubernetes`` library here, runs the module on the target. The work is the same function either
way: the module's ``execute``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
from collections.abc import Mapping

from ansible.plugins.action import ActionBase

from ansible_collections.soperator.slurm.plugins.module_utils.render import objects


def _plain_copy(value):
    """A deep copy of a manifest as plain JSON types (fast: no tags, no copy protocol); deepcopy for what JSON cannot
    carry (a date YAML read)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return copy.deepcopy(value)


class LocalModuleAction(ActionBase):
    """Subclasses name the module and say where its work is (``load``) and how its failure reads (``failure``)."""

    _supports_check_mode = True
    _supports_async = False
    MODULE = ""  # e.g. soperator.slurm.apply_manifests
    MANIFESTS = ""  # the option holding user manifests, whose Secret values are masked in what is returned
    VALIDATION = {}  # extra keywords of validate_argument_spec (required_one_of, ...)

    def load(self):
        """(argument_spec(), execute, the exception types execute raises for a failure the user should read)."""
        raise NotImplementedError

    def failure(self, error):
        """The result fields of one of load()'s exceptions."""
        return dict(failed=True, msg=error.msg, **error.details)

    def validate(self, argument_spec):
        """``validate_argument_spec``, without its deep copy of the manifests: the CRDs ``site.yml`` applies are
        300 KB of tagged values, whose deep copy took seconds of every run. Each manifest that is a mapping is
        validated as an empty one (``elements: dict`` takes any mapping as it is) and handed to the work as a plain
        copy; anything else is validated (and refused) as before."""
        value = self._task.args.get(self.MANIFESTS) if self.MANIFESTS else None
        if not isinstance(value, list) or not any(isinstance(m, Mapping) for m in value):
            return self.validate_argument_spec(argument_spec=argument_spec, **self.VALIDATION)
        given = self._task.args
        self._task.args = dict(given, **{self.MANIFESTS: [{} if isinstance(m, Mapping) else m for m in value]})
        try:
            validation, params = self.validate_argument_spec(argument_spec=argument_spec, **self.VALIDATION)
        finally:
            self._task.args = given
        params[self.MANIFESTS] = [_plain_copy(m) if isinstance(m, Mapping) else checked
                                  for m, checked in zip(value, params[self.MANIFESTS])]
        return validation, params

    def run(self, tmp=None, task_vars=None):
        result = super(LocalModuleAction, self).run(tmp, task_vars)
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import KUBERNETES_IMPORT_ERROR

        if getattr(self._connection, "transport", None) != "local" or KUBERNETES_IMPORT_ERROR:
            result.update(self._execute_module(module_name=self.MODULE, task_vars=task_vars))
            return result
        argument_spec, execute, errors = self.load()
        validation, params = self.validate(argument_spec)
        # Secret values the user gave may be echoed by an API error: mask them in everything we return.
        hidden = set(validation._no_log_values) | set(objects.secret_values(params.get(self.MANIFESTS) or []))
        try:
            result.update(execute(params, self._task.check_mode, self._task.diff, hidden.add))
        except errors as e:
            result.update(self.failure(e))
        if hidden:
            from ansible.module_utils.common.parameters import remove_values

            result = remove_values(result, hidden)
        return result
