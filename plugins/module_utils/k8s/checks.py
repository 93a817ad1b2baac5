# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Configuration that cannot take a daemon down: a changed slurm.conf is parsed by the running controller's own
Slurm, a changed sshd_config by a ready login pod's ``sshd -t``, before anything is written; a refusal names the
field (``slurm/slurm_check.py``, ``slurm/login_check.py`` decide). The converger (``converger.py``) mixes this in.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Any, Callable, Dict, Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names, readiness
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import Applier
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import PodTransport, SlurmError
from ansible_collections.soperator.slurm.plugins.module_utils.plan.decided import Plan
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import login_check, slurm_check
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject, SlurmCluster


class ConfigChecks(object):
    """Candidate configurations judged by the running daemons' own programs (``self.api``, ``self.namespace``,
    ``self.name``, ``self.slurm_transport``, ``self.controller_ready``)."""

    api: access.Api
    namespace: str
    name: str
    slurm_transport: PodTransport
    controller_ready: Callable[[Mapping[str, KubeObject]], bool]

    def _live_data(self, name: str, applier: Applier | None = None) -> Dict[str, Any] | None:
        """The live ConfigMap's data: from the apply's listing when there is one (no request), else read."""
        if applier is not None:
            live = next((o for o in applier.live.values() if o.get("kind") == "ConfigMap"
                         and o["metadata"].get("name") == name), None)
        else:
            live = self.api.get("v1", "ConfigMap", name, self.namespace,
                                what="get ConfigMap %s/%s" % (self.namespace, name))
        return None if live is None else (live.get("data") or {})

    def check_slurm_config(self, cluster: SlurmCluster, plan: Plan, observed: Mapping[str, Any],
                           applier: Applier | None = None) -> None:
        """A slurm.conf that differs from the live one is parsed by the running controller's own Slurm first: one
        it refuses raises SpecErrors naming the field, before anything is written (the live config, and slurmctld
        on it, stay). Without a running controller there is nothing to restart: the typed values are the check."""
        name = names.slurm_config_name(self.name)
        desired = next((m for m in plan.objects.manifests
                        if m["kind"] == "ConfigMap" and m["metadata"]["name"] == name), None)
        if desired is None or not self.controller_ready(observed["pods"]):
            return
        if self._live_data(name, applier) == desired["data"]:
            return
        transport = self.slurm_transport(names.controller_pod(self.name))
        argv, stdin = slurm_check.command(desired["data"])
        try:
            rc, dummy, err = transport(argv, stdin)
        except SlurmError:
            return  # the controller went away meanwhile: the next pass checks again
        found = slurm_check.problem(rc, err, desired["data"], cluster.get("spec"))
        if found:
            raise SpecErrors([SpecError(found[0], found[1])])

    def check_sshd_config(self, cluster: SlurmCluster, plan: Plan, observed: Mapping[str, Any],
                          applier: Applier | None = None) -> None:
        """A changed sshd_config is tested by a ready login pod's own sshd (``sshd -t``) before it is written: one it
        refuses raises SpecErrors naming the field; the live config and the login pods stay."""
        name = names.sshd_config_name(self.name)
        desired = next((m for m in plan.objects.manifests
                        if m["kind"] == "ConfigMap" and m["metadata"]["name"] == name), None)
        login_sts = names.login_name(self.name)
        ready = sorted(n for n, pod in observed["pods"].items() if names.ordinal(n, login_sts) is not None
                       and not pod["metadata"].get("deletionTimestamp") and readiness.ready(pod))
        if desired is None or not ready:
            return
        if self._live_data(name, applier) == desired["data"]:
            return
        text = desired["data"].get("sshd_config", "")
        argv, stdin = login_check.sshd_test_command(text)
        try:
            rc, dummy, err = self.slurm_transport(ready[0], login_check.CONTAINER)(argv, stdin)
        except SlurmError:
            return  # the pod went away meanwhile: the next pass checks again
        found = login_check.sshd_problem(rc, err, text, (cluster.get("spec") or {}).get("login"))
        if found:
            raise SpecErrors([SpecError(found[0], found[1])])
