# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the jail connection (plugins/connection/jail.py) runs a command as root inside a cluster's jail, from a pod
that mounts it: one fixed script, exec'd in the login pod's sshd container (or the jail's administration pod, which
runs the same image with the same capabilities). Pure: the script and the argv; the adapter is k8s/jail_exec.py.

The script enters the jail as a root login session is: it removes CAP_SYS_ADMIN, then CAP_SETPCAP, from the bounding
set (the container has them for its entrypoint's mounts; an exec'd process gets the container's whole set), chroots
into the jail and runs ``/bin/sh -c <command>`` there with a clean environment. Paths are resolved inside the jail
only (a user's symlink never leads to the container's files). What the command reads travels on the exec's standard
input, counted (``head -c``: the channel protocols before v5 cannot close it); Ansible's module arguments go that way
(pipelining, or the module file put with ``cat``), so only Ansible's command lines, never a module's arguments, are
in the exec's URL, which the API server's audit log records.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.soperator.slurm.plugins.module_utils import names

CONTAINER = "sshd"  # the login pod's container that mounts the jail (and the administration pod's, named jail)
ADMIN_CONTAINER = "jail"
JAIL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV = ("PATH=" + JAIL_PATH, "HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/sh", "LANG=C.UTF-8")
# $1: how many bytes of standard input the command gets (0: none); $2: the command, for /bin/sh in the jail.
ENTER_SCRIPT = r"""set -u
bytes=$1 command=$2
case $bytes in '' | *[!0-9]*) echo "soperator-jail: $bytes is not a byte count" >&2; exit 125 ;; esac
enter() {
  exec /usr/bin/setpriv --bounding-set=-sys_admin -- /usr/bin/setpriv --bounding-set=-setpcap -- \
    /usr/sbin/chroot %(jail)s /usr/bin/env -i %(env)s /bin/sh -c "$command"
}
if [ "$bytes" -gt 0 ]; then /usr/bin/head -c "$bytes" | enter; else enter </dev/null; fi
""" % {"jail": names.JAIL_MOUNT, "env": " ".join(ENV)}
SCRIPT_NAME = "soperator-jail"

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


def enter_argv(command: str, stdin_size: int = 0) -> list[str]:
    """The exec's argv: ``command`` run by /bin/sh as root in the jail, given ``stdin_size`` bytes of input."""
    return ["/bin/sh", "-c", ENTER_SCRIPT, SCRIPT_NAME, str(int(stdin_size)), command]


def host_name(namespace: str, cluster: str) -> str:
    """The inventory name of a cluster's jail: ``<namespace>/<cluster>``."""
    return "%s/%s" % (namespace, cluster)


def parse_host(host: object) -> tuple[str, str]:
    """(namespace, cluster) of ``<namespace>/<cluster>``; ValueError naming what is wrong."""
    namespace, sep, cluster = str(host or "").partition("/")
    if not sep or not re.fullmatch(_LABEL, namespace) or not re.fullmatch(_LABEL, cluster) or len(namespace) > 63 \
            or len(cluster) > 63:
        raise ValueError("%r is no jail: a jail is named <namespace>/<SlurmCluster name>, e.g. slurm/demo" % (host,))
    return namespace, cluster
