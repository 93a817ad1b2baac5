# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``soperator.slurm.apply_manifests``: run in the task's worker process with a local connection
(``plugin_utils.local_module``); the work is ``modules.apply_manifests.execute``. Files of ``src`` are found and
read here, on the controller, and handed on as ``manifests``: never templated (the CRDs are 600 KB of YAML, whose
templating and finalising as task arguments took most of a ``site.yml`` no-op)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError

from ansible_collections.soperator.slurm.plugins.plugin_utils.local_module import LocalModuleAction


class ActionModule(LocalModuleAction):
    MODULE = "soperator.slurm.apply_manifests"
    MANIFESTS = "manifests"

    @property
    def VALIDATION(self):  # noqa: N802  (the base class's attribute)
        from ansible_collections.soperator.slurm.plugins.modules.apply_manifests import ONE_SOURCE

        return ONE_SOURCE

    def load(self):
        from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
        from ansible_collections.soperator.slurm.plugins.modules.apply_manifests import argument_spec, execute

        return argument_spec(), execute, KubernetesError

    def run(self, tmp=None, task_vars=None):
        src, given = self._task.args.get("src"), self._task.args
        if src is not None and given.get("manifests") is None:
            from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import read_manifest_files

            src = [src] if isinstance(src, str) else src  # one path, as a list: what type=list makes of it
            if not isinstance(src, list) or not all(isinstance(p, str) for p in src):
                return dict(failed=True, msg="src: a list of paths, not %r" % (src,))
            try:
                manifests = read_manifest_files([self._find_needle("files", p) for p in src])
            except (AnsibleError, OSError, ValueError) as e:
                return dict(failed=True, msg="src: %s" % e)
            self._task.args = dict((k, v) for k, v in given.items() if k != "src")
            self._task.args["manifests"] = manifests
        return super(ActionModule, self).run(tmp, task_vars)
