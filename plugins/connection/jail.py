# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: jail
short_description: Run tasks as root inside a Slurm cluster's jail, through the Kubernetes API
version_added: 0.2.0
author:
  - soperator.slurm maintainers (!UNKNOWN)
description:
  - "Runs modules and commands, and puts and fetches files, as root inside the jail of a SlurmCluster: the shared root
    filesystem every login session and job sees as C(/). The host is C(<namespace>/<SlurmCluster name>), as the
    P(soperator.slurm.jails#inventory) inventory names it."
  - "Each command is an exec (C(pods/exec)) into a pod that mounts the jail, authenticated and authorised by your own
    kubeconfig and RBAC: no SSH key, no new credential in the cluster. It runs C(/bin/sh) chrooted into the jail, with
    a clean environment and without CAP_SYS_ADMIN and CAP_SETPCAP (which the pod's container holds for its
    entrypoint's mounts): what a root login session may do, no more. Paths are resolved inside the jail only."
  - "While the cluster runs: its first ready login pod (container C(sshd)). While no login pod is ready (the cluster
    in maintenance): the jail's administration Job C(<cluster>-jail-admin), which the connection makes from the login
    StatefulSet the converge applied (the login image, its capabilities, the jail and its sub-mounts, nothing else:
    no sshd, host keys, munge or sssd), unless O(admin_pod) is off. It ends itself after O(admin_pod_idle) seconds
    without a command and Kubernetes then removes it (C(ttlSecondsAfterFinished: 0))."
  - "Modules run with the jail's own Python (the P(soperator.slurm.jails#inventory) inventory sets
    C(ansible_python_interpreter) to C(/usr/bin/python3)); check mode and diff mode are the modules' own."
  - "What travels: Ansible's command lines in the exec's URL (the API server's audit log records them, at every audit
    level); the modules' arguments and the files on its standard input, never in the URL."
  - "Whoever may create C(pods/exec) on the login pods is root in the jail and more: see the collection's
    docs/security.md, \"The jail connection\"."
requirements:
  - kubernetes >= 24.2.0 (the Python client, on the Ansible controller)
options:
  remote_addr:
    description:
      - The jail, C(<namespace>/<SlurmCluster name>).
    type: str
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_soperator_jail
  kubeconfig:
    description:
      - Path of the kubeconfig to use; default C(K8S_AUTH_KUBECONFIG), then C(KUBECONFIG), then C(~/.kube/config).
    type: str
    vars:
      - name: ansible_soperator_kubeconfig
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description:
      - The kubeconfig context; default its current context.
    type: str
    vars:
      - name: ansible_soperator_context
    env:
      - name: K8S_AUTH_CONTEXT
  admin_pod:
    description:
      - Whether to make the jail's administration Job while no login pod is ready (the cluster in maintenance).
        Needs C(statefulsets) get and C(jobs) get, create and delete in the namespace, besides C(pods) list and
        C(pods/exec) create.
    type: bool
    default: true
    vars:
      - name: ansible_soperator_admin_pod
  admin_pod_idle:
    description:
      - Seconds the administration pod stays without a command before it ends.
    type: int
    default: 300
    vars:
      - name: ansible_soperator_admin_pod_idle
  admin_pod_timeout:
    description:
      - Seconds to wait for a pod to enter the jail from (the administration pod starting).
    type: int
    default: 300
    vars:
      - name: ansible_soperator_admin_pod_timeout
  command_timeout:
    description:
      - Seconds a command may run (a package installation included) before it is reported as failed (rc 124).
    type: int
    default: 3600
    vars:
      - name: ansible_soperator_command_timeout
  pipelining:
    description:
      - Send modules on the exec's standard input (one exec per module) instead of as files (several).
    type: bool
    default: true
    env:
      - name: ANSIBLE_PIPELINING
    ini:
      - section: defaults
        key: pipelining
    vars:
      - name: ansible_pipelining
"""

EXAMPLES = r"""
# An inventory of the jails (soperator.slurm.jails) sets the connection for every jail:
#   ansible -i cluster.jails.yml all -m ansible.builtin.setup -a filter=ansible_distribution*
# or name one jail by hand:
- name: Manage the jail of SlurmCluster demo in namespace slurm
  hosts: slurm/demo
  gather_facts: true
  vars:
    ansible_connection: soperator.slurm.jail
    ansible_python_interpreter: /usr/bin/python3
  tasks:
    - name: A package in the jail
      ansible.builtin.apt:
        name: htop
"""

import shlex

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access, client
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.jail_exec import Jail, JailError
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import jail_shell

display = Display()


class Connection(ConnectionBase):
    """Commands as root in a SlurmCluster's jail, by exec through the Kubernetes API (k8s/jail_exec.py)."""

    transport = "soperator.slurm.jail"
    has_pipelining = True
    has_tty = False
    default_user = "root"

    def __init__(self, play_context, new_stdin=None, *args, **kwargs):
        super(Connection, self).__init__(play_context, new_stdin, *args, **kwargs)
        self._jail = None

    def _connect(self):
        if self._connected:
            return self
        host = self.get_option("remote_addr")
        try:
            namespace, cluster = jail_shell.parse_host(host)
            api = access.Api(client.api_client({"kubeconfig": self.get_option("kubeconfig"),
                                                "context": self.get_option("context")}), resolve=access.table())
            self._jail = Jail(api, namespace, cluster, make_admin=self.get_option("admin_pod"),
                              idle=self.get_option("admin_pod_idle"), wait_timeout=self.get_option("admin_pod_timeout"),
                              timeout=self.get_option("command_timeout"), log=display.display)
            choice = self._jail.resolve()
        except (ValueError, JailError, access.KubernetesError) as e:
            raise AnsibleConnectionFailure(getattr(e, "msg", None) or str(e))
        entered = "jail %s: entered from pod %s, container %s (%s)" % (host, choice.pod, choice.container, choice.why)
        display.vvv(entered, host=host)
        self._connected = True
        return self

    def _run(self, cmd, data=b""):
        try:
            return self._jail.run(cmd, data)
        except (JailError, access.KubernetesError) as e:
            raise AnsibleConnectionFailure(getattr(e, "msg", None) or str(e))

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        display.vvv("EXEC (jail) %s" % cmd, host=self.get_option("remote_addr"))
        rc, out, err = self._run(to_text(cmd, errors="surrogate_or_strict"), to_bytes(in_data or b""))
        return rc, to_bytes(out), to_bytes(err)

    def put_file(self, in_path, out_path):
        super(Connection, self).put_file(in_path, out_path)
        self._connect()
        display.vvv("PUT (jail) %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        try:
            with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as f:
                data = f.read()
        except (IOError, OSError) as e:
            raise AnsibleError("cannot read %s: %s" % (in_path, e))
        rc, out, err = self._run("cat > %s" % shlex.quote(out_path), data)
        if rc:
            raise AnsibleError("cannot put %s into the jail at %s: %s" % (in_path, out_path, to_text(err or out)))

    def fetch_file(self, in_path, out_path):
        super(Connection, self).fetch_file(in_path, out_path)
        self._connect()
        display.vvv("FETCH (jail) %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        rc, out, err = self._run("cat %s" % shlex.quote(in_path))
        if rc:
            raise AnsibleError("cannot fetch %s from the jail: %s" % (in_path, to_text(err)))
        try:
            with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as f:
                f.write(to_bytes(out))
        except (IOError, OSError) as e:
            raise AnsibleError("cannot write %s: %s" % (out_path, e))

    def close(self):
        self._connected = False
