# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""A cluster's jail, entered as root through the Kubernetes API (the jail connection's adapter).

Which pod is decided by ``plan/jail_access.choose`` from the cluster's login and administration pods; the command
runs through ``slurm/jail_shell``'s fixed script with ``slurm_exec.KubernetesExecTransport`` (the collection's one
exec path), bytes in and out. While no login pod is ready, the jail's administration Job (``render/jail.admin_job``,
from the login StatefulSet the converge applied) is made and waited for; it ends itself once idle and its TTL removes
it. Every request is the user's own (their kubeconfig): ``pods`` list, ``pods/exec`` create on the pod, and for the
administration pod ``statefulsets`` get and ``jobs`` get, create and delete.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import time
from typing import Callable, List, Optional, cast

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import KubernetesExecTransport, SlurmError
from ansible_collections.soperator.slurm.plugins.module_utils.plan import jail_access
from ansible_collections.soperator.slurm.plugins.module_utils.render.jail import admin_job, admin_name
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import jail_shell
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


class JailError(Exception):
    def __init__(self, msg: str) -> None:
        super(JailError, self).__init__(msg)
        self.msg = msg


class Jail(object):
    """The jail of SlurmCluster ``namespace``/``cluster``: :meth:`run` a command in it as root.

    ``api``: an ``access.Api`` (its Rest carries the execs). ``make_admin``: whether the administration
    Job may be made while no login pod is ready; ``idle``: seconds it stays without an exec; ``wait_timeout``:
    seconds to wait for it; ``timeout``: seconds a command may run."""

    def __init__(self, api: access.Api, namespace: str, cluster: str, make_admin: bool = True, idle: float = 120,
                 wait_timeout: float = 300, timeout: float = 3600, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic,
                 log: Optional[Callable[[str], None]] = None) -> None:
        self.api = api
        self.namespace = namespace
        self.cluster = cluster
        self.make_admin = make_admin
        self.idle = idle
        self.wait_timeout = wait_timeout
        self.timeout = timeout
        self.sleep = sleep
        self.monotonic = monotonic
        self.log: Callable[[str], None] = log or (lambda message: None)
        self.choice: jail_access.Choice | None = None

    def _pods(self) -> List[KubeObject]:
        selector = "%s=%s,%s in (%s,%s)" % (names.LABEL_INSTANCE, self.cluster, names.LABEL_COMPONENT,
                                            names.COMPONENT_LOGIN, names.COMPONENT_JAIL_ADMIN)
        return self.api.list("v1", "Pod", self.namespace, selector, required=True,
                             what="list the login pods of %s/%s" % (self.namespace, self.cluster))

    def _make(self) -> None:
        """Create the administration Job (a finished one is deleted first)."""
        name = admin_name(self.cluster)
        job = self.api.get("batch/v1", "Job", name, self.namespace)
        if job is not None:
            status = job.get("status") or {}
            if not (status.get("succeeded") or status.get("failed")) and not job["metadata"].get("deletionTimestamp"):
                return  # its pod is on its way
            self.api.delete("batch/v1", "Job", name, self.namespace, propagation="Background")
            deadline = self.monotonic() + self.wait_timeout
            while self.api.get("batch/v1", "Job", name, self.namespace) is not None:
                if self.monotonic() >= deadline:
                    raise JailError("the finished Job %s/%s is still there after %s s" % (
                        self.namespace, name, self.wait_timeout))
                self.sleep(1)
        login = self.api.get("apps/v1", "StatefulSet", names.login_name(self.cluster), self.namespace)
        if login is None:
            raise JailError("SlurmCluster %s/%s has no login StatefulSet %s: no pod mounts its jail (was it ever "
                            "converged?)" % (self.namespace, self.cluster, names.login_name(self.cluster)))
        self.log("no login pod of %s/%s is ready: making the jail's administration Job %s" % (
            self.namespace, self.cluster, name))
        self.api.create(admin_job(login, self.idle))

    def resolve(self) -> jail_access.Choice:
        """The Choice (EXEC) of the pod to enter the jail from; JailError when there is none in time."""
        deadline = self.monotonic() + self.wait_timeout
        made = False
        while True:
            choice = jail_access.choose(self.cluster, self._pods())
            if choice.action == jail_access.EXEC:
                self.choice = choice
                return choice
            if choice.action == jail_access.MAKE and not made:
                if not self.make_admin:
                    raise JailError("%s (the connection may not make one: admin_pod is off)" % choice.why)
                self._make()
                made = True
            if self.monotonic() >= deadline:
                raise JailError("%s, after %s s" % (choice.why, self.wait_timeout))
            self.sleep(1)

    def run(self, command: str, stdin: bytes = b"") -> access.ExecResult:
        """(rc, stdout, stderr) of ``command`` (for /bin/sh) run as root in the jail, ``stdin`` its input (bytes).
        A pod that went away meanwhile (its replacement, an administration pod that ended) is chosen again, once."""
        stdin = stdin or b""
        for attempt in (0, 1):
            choice = self.choice or self.resolve()
            pod = cast(str, choice.pod)  # an EXEC choice names its pod
            transport = KubernetesExecTransport(self.api.rest, self.namespace, pod,
                                                choice.container, timeout=self.timeout, binary=True)
            try:
                return transport(jail_shell.enter_argv(command, len(stdin)), stdin if stdin else None)
            except SlurmError as e:
                self.choice = None
                # Only an exec that could not start is tried again: one that ran may have done its work.
                if attempt or not e.msg.startswith("cannot exec"):
                    raise JailError("in the jail of %s/%s, from pod %s: %s" % (
                        self.namespace, self.cluster, choice.pod, e.msg))
        raise JailError("unreachable")  # pragma: no cover
