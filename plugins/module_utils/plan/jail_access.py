# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which pod the jail connection (plugins/connection/jail.py) enters a cluster's jail from. Pure: a function of the
cluster's login pods and administration pods as listed.

While the cluster runs, a ready login pod (its sshd container: the jail as users' sessions see it, with the pod's
Slurm clients, /dev, /proc and /sys bound in); the lowest ordinal, so that one play uses one pod. While no login pod
is ready (maintenance: every StatefulSet at zero), the jail's administration pod (render/jail.py ``admin_job``: the
login pod's image, capabilities, jail and sub-mounts, nothing else), made by the connection when there is none, and
waited for while it starts.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, NamedTuple, Optional

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan.model import pod_ready
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import jail_shell
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

EXEC, WAIT, MAKE = "exec", "wait", "make"


class Choice(NamedTuple):
    """``action``: EXEC (into ``pod``'s ``container``), WAIT (an administration pod is starting) or MAKE (the
    administration Job); ``why`` says it in words."""

    action: str
    pod: Optional[str]  # None: MAKE
    container: str
    why: str


def _running(pod: KubeObject, container: str) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(s.get("name") == container and "running" in (s.get("state") or {}) for s in statuses)


def _usable(pod: KubeObject, container: str) -> bool:
    return (not (pod.get("metadata") or {}).get("deletionTimestamp") and pod_ready(pod) and _running(pod, container)
            and (pod.get("status") or {}).get("phase") == "Running")


def _finished(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def choose(cluster: str, pods: Iterable[KubeObject]) -> Choice:
    """The Choice for ``cluster`` (its name) among ``pods`` (the namespace's pods of that cluster's login and
    administration components, any others ignored)."""
    login_sts = names.login_name(cluster)
    logins: list[KubeObject] = []
    admins: list[KubeObject] = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(names.LABEL_INSTANCE) != cluster:
            continue
        name = (pod.get("metadata") or {}).get("name") or ""
        if labels.get(names.LABEL_COMPONENT) == names.COMPONENT_LOGIN and names.ordinal(name, login_sts) is not None:
            logins.append(pod)
        elif labels.get(names.LABEL_COMPONENT) == names.COMPONENT_JAIL_ADMIN and labels.get(
                names.LABEL_MANAGED_BY) == names.MANAGED_BY_JAIL_CONNECTION:
            admins.append(pod)
    ready = sorted((p for p in logins if _usable(p, jail_shell.CONTAINER)),
                   key=lambda p: names.ordinal(p["metadata"]["name"], login_sts) or 0)  # (logins have one)
    if ready:
        return Choice(EXEC, ready[0]["metadata"]["name"], jail_shell.CONTAINER, "login pod %s is ready"
                      % ready[0]["metadata"]["name"])
    usable = sorted(p["metadata"]["name"] for p in admins if _usable(p, jail_shell.ADMIN_CONTAINER))
    if usable:
        return Choice(EXEC, usable[0], jail_shell.ADMIN_CONTAINER, "no login pod is ready; the jail's "
                      "administration pod %s is" % usable[0])
    starting = sorted(p["metadata"]["name"] for p in admins if not _finished(p)
                      and not (p.get("metadata") or {}).get("deletionTimestamp"))
    if starting:
        return Choice(WAIT, starting[0], jail_shell.ADMIN_CONTAINER, "no login pod is ready; the jail's "
                      "administration pod %s is starting" % starting[0])
    return Choice(MAKE, None, jail_shell.ADMIN_CONTAINER, "no login pod of %s is ready (maintenance?) and no "
                  "administration pod runs" % cluster)
