# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The only code of the collection that runs Slurm commands (``scontrol``).

Commands run through an injected transport, a callable ``(argv, stdin=None) -> (rc, stdout, stderr)``; what a
command reads (a candidate configuration) travels as ``stdin``, never in ``argv``: an exec's argv is part of its
URL, which the API server's audit log records.

* ``KubernetesExecTransport``: exec in a pod's container (the controller's ``slurmctld``, a login pod's ``sshd``)
  through the access layer's one exec path (``access.Rest.exec``), for real use;
* ``LocalTransport``: a local process with an argv prefix (the tests' way into a real Slurm in a rootfs).

What to run is decided elsewhere: the planners (``plan/``, from Slurm's output parsed by ``slurm/scontrol.py``) and
the converge (``converger.py``), which calls :class:`Slurm`'s operations, one ``scontrol`` call each.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import subprocess
from typing import Any, Callable, Dict, List, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol
from ansible_collections.soperator.slurm.plugins.module_utils.slurm.scontrol import SlurmNode

SCONTROL = scontrol.SCONTROL
DEFAULT_COMMAND_TIMEOUT = 60

# ``transport(argv, stdin=None) -> (rc, stdout, stderr)``: how a command reaches Slurm.
Transport = Callable[..., access.ExecResult]
# ``transport_to(pod, container="slurmctld") -> Transport``: the converge's way into a pod's container.
PodTransport = Callable[..., Transport]


class SlurmError(Exception):
    """A Slurm command failed or could not run. ``details``: command, rc, stdout, stderr (for fail_json)."""

    def __init__(self, msg: str, command: Sequence[str] | None = None, rc: int | None = None,
                 stdout: Any = None, stderr: Any = None) -> None:
        super(SlurmError, self).__init__(msg)
        self.msg = msg
        self.details: Dict[str, Any] = dict(command=command, rc=rc, stdout=stdout, stderr=stderr)


class LocalTransport(object):
    """Run argv as a local process, after ``prefix`` (e.g. ``nsenter -t <pid> ... env -i PATH=...``)."""

    def __init__(self, prefix: Sequence[str] = (), timeout: float = DEFAULT_COMMAND_TIMEOUT) -> None:
        self.prefix = list(prefix)
        self.timeout = timeout

    def __call__(self, argv: Sequence[str], stdin: str | None = None) -> access.ExecResult:
        try:
            cp = subprocess.run(self.prefix + list(argv), capture_output=True, text=True, timeout=self.timeout,
                                input=stdin if stdin is not None else "", check=False)
        except subprocess.TimeoutExpired:
            return 124, "", "timed out after %ss" % self.timeout
        except OSError as e:
            return 127, "", str(e)
        return cp.returncode, cp.stdout, cp.stderr


class KubernetesExecTransport(object):
    """Exec argv in a container of a pod (``access.Rest.exec``: no shell, no tty, ``stdin`` on the stream); an exec
    that cannot start or gives no exit status is a :class:`SlurmError` naming the pod (``"cannot exec in pod ..."``
    when it could not start: nothing ran). ``rest``: the access layer's request path; ``binary``: bytes in and out
    (the jail connection's files), else text."""

    def __init__(self, rest: access.Rest, namespace: str, pod: str, container: str = "slurmctld",
                 timeout: float = DEFAULT_COMMAND_TIMEOUT, binary: bool = False) -> None:
        self.rest = rest
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.timeout = timeout
        self.binary = binary

    def __call__(self, argv: Sequence[str], stdin: Any = None) -> access.ExecResult:
        try:
            return self.rest.exec(self.namespace, self.pod, self.container, argv, stdin, self.timeout, self.binary)
        except access.KubernetesError as e:
            raise SlurmError(e.msg, command=list(argv))


class Slurm(object):
    """The Slurm operations the collection needs, each one ``scontrol`` call."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def run(self, argv: List[str]) -> str:
        """The output of ``argv``; SlurmError when it exits non-zero."""
        rc, out, err = self.transport(argv)
        if rc != 0:
            raise SlurmError("%s exited %s: %s" % (" ".join(argv), rc, (err or out).strip()),
                             command=list(argv), rc=rc, stdout=out, stderr=err)
        return out

    def show_nodes(self) -> Dict[str, SlurmNode]:
        """``{name: node}`` from ``scontrol show node -o`` (see scontrol.parse_show_node)."""
        argv = list(scontrol.SHOW_NODES)
        out = self.run(argv)
        try:
            return scontrol.parse_show_node(out)
        except scontrol.ScontrolParseError as e:
            raise SlurmError(str(e), command=argv, rc=0, stdout=out)

    def show_topology(self) -> Dict[str, str]:
        """``{node: its lowest switch or block}`` (scontrol.parse_show_topology)."""
        return scontrol.parse_show_topology(self.run(SCONTROL + ["show", "topology"]))

    def config_file(self, file_name: str) -> str | None:
        """The text of one file of the controller's mounted configuration (None: absent)."""
        rc, out, dummy = self.transport(["cat", "%s/%s" % (names.SLURM_CONFIG_DIR, file_name)])
        return out if rc == 0 else None

    def set_features(self, node_name: str, features: Sequence[str]) -> None:
        self.run(scontrol.features_update(node_name, features))

    def reconfigure(self) -> None:
        self.run(["scontrol", "reconfigure"])

    def drain(self, node_names: Sequence[str], reason: str) -> None:
        self._update(node_names, "state=drain", "reason=%s" % reason)

    def down(self, node_names: Sequence[str], reason: str) -> None:
        """Mark nodes DOWN: slurmctld ends their jobs as on a node failure (requeued where the job allows it)."""
        self._update(node_names, "state=down", "reason=%s" % reason)

    def resume(self, node_names: Sequence[str], prefix: str = names.DRAIN_REASON_PREFIX) -> List[str]:
        """Resume those of ``node_names`` whose CURRENT reason is ours (re-read right before): an admin who
        drained one in the meantime keeps it drained. Returns the names resumed."""
        if not node_names:
            return []
        nodes = self.show_nodes()
        ours = [n for n in node_names if n in nodes and drains.is_ours(nodes[n]["reason"], prefix)]
        self._update(ours, "state=resume")
        return ours

    def jobs_on(self, node_names: Sequence[str]) -> Dict[str, List[str]]:
        """``{node: [job ids]}`` of the jobs running (or completing, suspended) on each node; a node Slurm could not
        answer for is left out."""
        valid = scontrol.validate_node_names(node_names)
        if not valid:
            return {}
        rc, out, dummy = self.transport(["sh", "-c", scontrol.JOBS_SCRIPT, "soperator-jobs"] + valid)
        return scontrol.parse_jobs(out, valid) if rc == 0 else {}

    def delete(self, node_names: Sequence[str]) -> None:
        valid = scontrol.validate_node_names(node_names)
        if valid:
            self.run(["scontrol", "delete", "nodename=%s" % ",".join(valid)])

    def power(self, node_names: Sequence[str], how: str) -> None:
        """``scontrol power <how> <nodes>``: ``up``, ``down asap`` (drained first: a running job ends) or
        ``down force`` (only for nodes whose resume failed: nothing runs on them)."""
        if how not in ("up", "down asap", "down force"):
            raise ValueError("scontrol power: unknown mode %r" % (how,))
        valid = scontrol.validate_node_names(node_names)
        if valid:
            self.run(["scontrol", "power"] + how.split() + [",".join(valid)])

    def _update(self, node_names: Sequence[str], *settings: str) -> None:
        valid = scontrol.validate_node_names(node_names)
        if valid:
            self.run(["scontrol", "update", "nodename=%s" % ",".join(valid)] + list(settings))
