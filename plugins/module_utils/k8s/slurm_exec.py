# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The only code of the collection that runs Slurm commands (``scontrol``).

Commands run through an injected transport, a callable ``(argv, stdin=None) -> (rc, stdout, stderr)``; what a
command reads (a candidate configuration) travels as ``stdin``, never in ``argv``: an exec's argv is part of its
URL, which the API server's audit log records.

* ``KubernetesExecTransport``: exec in the controller pod (container ``slurmctld``) through the Kubernetes
  API, for real use;
* ``LocalTransport``: a local process with an argv prefix (the tests' way into a real Slurm in a rootfs).

What to run is decided elsewhere: the planners (``plan/``, from Slurm's output parsed by ``slurm/scontrol.py``) and
the converge (``converger.py``), which calls :class:`Slurm`'s operations, one ``scontrol`` call each.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import drains
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import scontrol

try:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream, ws_client
except ImportError:  # the module reports the missing library before a Kubernetes transport is built

    class ApiException(Exception):  # type: ignore[no-redef]
        status = None

    stream = ws_client = None  # type: ignore[assignment]

# Epoch seconds in scontrol's times (the Reason's `[user@time]`): no time zone to guess.
SCONTROL = ["env", "SLURM_TIME_FORMAT=%s", "scontrol"]
DEFAULT_COMMAND_TIMEOUT = 60
STDIN_CHUNK = 1 << 20


class SlurmError(Exception):
    """A Slurm command failed or could not run. ``details``: command, rc, stdout, stderr (for fail_json)."""

    def __init__(self, msg, command=None, rc=None, stdout=None, stderr=None):
        super(SlurmError, self).__init__(msg)
        self.msg = msg
        self.details = dict(command=command, rc=rc, stdout=stdout, stderr=stderr)


class LocalTransport(object):
    """Run argv as a local process, after ``prefix`` (e.g. ``nsenter -t <pid> ... env -i PATH=...``)."""

    def __init__(self, prefix=(), timeout=DEFAULT_COMMAND_TIMEOUT):
        self.prefix = list(prefix)
        self.timeout = timeout

    def __call__(self, argv, stdin=None):
        try:
            cp = subprocess.run(self.prefix + list(argv), capture_output=True, text=True, timeout=self.timeout,
                                input=stdin if stdin is not None else "", check=False)
        except subprocess.TimeoutExpired:
            return 124, "", "timed out after %ss" % self.timeout
        except OSError as e:
            return 127, "", str(e)
        return cp.returncode, cp.stdout, cp.stderr


class KubernetesExecTransport(object):
    """Exec argv in a container of a pod (the pod's ``exec`` subresource); no shell, no tty. ``stdin`` is
    written to the command's standard input (the exec's stream, not its URL); the command must read no more than
    it is sent (the channel protocols before v5 cannot close stdin).

    ``api``: a ``kubernetes.client.ApiClient`` (the request is built here: the generated ``CoreV1Api`` imports
    every core model, tens of MiB in each process that holds it), or a ``CoreV1Api``."""

    def __init__(self, api, namespace, pod, container="slurmctld", timeout=DEFAULT_COMMAND_TIMEOUT, binary=False):
        self.core_v1 = api
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.timeout = timeout
        # bytes in and out (the jail connection's files), else text
        self.binary = binary

    def _open(self, argv, stdin):
        api = self.core_v1
        if hasattr(api, "connect_get_namespaced_pod_exec") or not hasattr(api, "param_serialize"):
            return stream(api.connect_get_namespaced_pod_exec, self.pod, self.namespace,
                          command=list(argv), container=self.container, stdin=stdin is not None, stdout=True,
                          stderr=True, tty=False, _preload_content=False, **self._binary())
        query = [("command", list(argv)), ("container", self.container),
                 ("stdin", "true" if stdin is not None else "false"), ("stdout", "true"), ("stderr", "true"),
                 ("tty", "false")]
        dummy, url, headers, dummy, dummy = api.param_serialize(
            "GET", "/api/v1/namespaces/%s/pods/%s/exec" % (self.namespace, self.pod), header_params={},
            auth_settings=["BearerToken"])
        return ws_client.WSClient(api.configuration, ws_client.get_websocket_url(url, query), headers, True,
                                  **self._binary())

    def _binary(self):
        # Only when asked: kubernetes < 27 has no binary websocket (and no such keyword).
        return {"binary": True} if self.binary else {}

    def __call__(self, argv, stdin=None):
        try:
            ws = self._open(argv, stdin)
        except ApiException as e:
            raise SlurmError("cannot exec in pod %s/%s (container %s): %s %s"
                             % (self.namespace, self.pod, self.container, e.status, e.reason),
                             command=list(argv))
        except Exception as e:  # websocket / transport errors
            raise SlurmError("cannot exec in pod %s/%s (container %s): %s"
                             % (self.namespace, self.pod, self.container, e), command=list(argv))
        try:
            if stdin is not None:
                # In pieces: one websocket frame per MiB of a large file.
                for start in range(0, len(stdin), STDIN_CHUNK):
                    ws.write_stdin(stdin[start:start + STDIN_CHUNK])
            ws.run_forever(timeout=self.timeout)
            if ws.is_open():
                late = "timed out after %ss" % self.timeout
                return 124, ws.read_stdout(), ws.read_stderr() + (late.encode() if self.binary else late)
            rc = ws.returncode
            return (rc if rc is not None else 1), ws.read_stdout(), ws.read_stderr()
        except Exception as e:  # a kubelet that answers exec with something else than a status (kwok's fake)
            raise SlurmError("exec in pod %s/%s (container %s) gave no exit status: %s"
                             % (self.namespace, self.pod, self.container, e), command=list(argv))
        finally:
            ws.close()


class Slurm(object):
    """The Slurm operations the collection needs, each one ``scontrol`` call."""

    def __init__(self, transport):
        self.transport = transport

    def run(self, argv):
        rc, out, err = self.transport(argv)
        if rc != 0:
            raise SlurmError("%s exited %s: %s" % (" ".join(argv), rc, (err or out).strip()),
                             command=list(argv), rc=rc, stdout=out, stderr=err)
        return out

    def show_nodes(self):
        """``{name: node}`` from ``scontrol show node -o`` (see scontrol.parse_show_node)."""
        argv = SCONTROL + ["show", "node", "-o"]
        out = self.run(argv)
        try:
            return scontrol.parse_show_node(out)
        except scontrol.ScontrolParseError as e:
            raise SlurmError(str(e), command=argv, rc=0, stdout=out)

    def show_topology(self):
        """``{node: its lowest switch or block}`` (scontrol.parse_show_topology)."""
        return scontrol.parse_show_topology(self.run(SCONTROL + ["show", "topology"]))

    def config_file(self, file_name):
        """The text of one file of the controller's mounted configuration (None: absent)."""
        rc, out, dummy = self.transport(["cat", "%s/%s" % (names.SLURM_CONFIG_DIR, file_name)])
        return out if rc == 0 else None

    def set_features(self, node_name, features):
        self.run(scontrol.features_update(node_name, features))

    def reconfigure(self):
        self.run(["scontrol", "reconfigure"])

    def drain(self, node_names, reason):
        self._update(node_names, "state=drain", "reason=%s" % reason)

    def down(self, node_names, reason):
        """Mark nodes DOWN: slurmctld ends their jobs as on a node failure (requeued where the job allows it)."""
        self._update(node_names, "state=down", "reason=%s" % reason)

    def resume(self, node_names, prefix=names.DRAIN_REASON_PREFIX):
        """Resume those of ``node_names`` whose CURRENT reason is ours (re-read right before): an admin who
        drained one in the meantime keeps it drained. Returns the names resumed."""
        if not node_names:
            return []
        nodes = self.show_nodes()
        ours = [n for n in node_names if n in nodes and drains.is_ours(nodes[n]["reason"], prefix)]
        self._update(ours, "state=resume")
        return ours

    def jobs_on(self, node_names):
        """``{node: [job ids]}`` of the jobs running (or completing, suspended) on each node; a node Slurm could not
        answer for is left out."""
        node_names = scontrol.validate_node_names(node_names)
        if not node_names:
            return {}
        rc, out, dummy = self.transport(["sh", "-c", scontrol.JOBS_SCRIPT, "soperator-jobs"] + list(node_names))
        return scontrol.parse_jobs(out, node_names) if rc == 0 else {}

    def delete(self, node_names):
        node_names = scontrol.validate_node_names(node_names)
        if node_names:
            self.run(["scontrol", "delete", "nodename=%s" % ",".join(node_names)])

    def power(self, node_names, how):
        """``scontrol power <how> <nodes>``: ``up``, ``down asap`` (drained first: a running job ends) or
        ``down force`` (only for nodes whose resume failed: nothing runs on them)."""
        if how not in ("up", "down asap", "down force"):
            raise ValueError("scontrol power: unknown mode %r" % (how,))
        node_names = scontrol.validate_node_names(node_names)
        if node_names:
            self.run(["scontrol", "power"] + how.split() + [",".join(node_names)])

    def _update(self, node_names, *settings):
        node_names = scontrol.validate_node_names(node_names)
        if node_names:
            self.run(["scontrol", "update", "nodename=%s" % ",".join(node_names)] + list(settings))
