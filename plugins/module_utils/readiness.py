# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a Kubernetes object is Ready: the one readiness predicate of the collection and the operator runtime. Pure.

An object is Ready when its status condition ``Ready`` is ``"True"``: a pod as its kubelet reports it, a SlurmCluster
as the converge wrote it (``plan/status.py``). The planners (``plan/model.pod_ready``), the converge's reads
(``k8s/observe.py``), the jails inventory (``api/jail_hosts.py``) and the operator runtime (its Slurm status loop,
its settle wait and its drift digest) ask this module; ``tests/unit/test_one_path.py`` refuses a second copy.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

READY = "Ready"


def condition(obj: KubeObject | None, ctype: str) -> KubeObject | None:
    """The condition of type ``ctype`` in ``obj``'s status (the first, should there be two); None without one."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return cond
    return None


def status(obj: KubeObject | None) -> str | None:
    """The status of ``obj``'s Ready condition (``"True"``, ``"False"``, ``"Unknown"``), None without one."""
    cond = condition(obj, READY)
    return None if cond is None else cond.get("status")


def ready(obj: KubeObject | None) -> bool:
    """Whether ``obj`` (a pod, a SlurmCluster, ...) is Ready."""
    return status(obj) == "True"
