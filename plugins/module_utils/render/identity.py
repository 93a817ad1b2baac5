# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A directory of users and groups (``spec.identity``): the sssd sidecar every pod of the cluster gets, and its
ConfigMap.

Each pod's daemon (slurmctld, slurmd, sshd, slurmdbd, slurmrestd) resolves users through libnss-sss, which asks the
pod's own sssd over the socket directory ``names.SSS_PIPES_DIR``: an emptyDir the sidecar writes and the daemon
mounts read-only (login and worker pods also bind it read-only into the jail, for sessions and jobs). sssd's own
state stays in the sidecar: its cache and configuration in memory volumes, its private sockets in a volume of its
own. The bind password and the CA are mounted in the sidecar alone, from optional volumes (a missing key is
reported in ``IdentityReady``, not a pod that never starts); the ConfigMap holds no password.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.identity import enabled
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    config_map,
    container_resources,
    security,
)
from ansible_collections.soperator.slurm.plugins.module_utils.render.sssd_conf import render_sssd_conf
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

# None: Debian builds sssd to run as root (its systemd unit says so), and root needs no capability for what it does
# here: it owns every file it reads and writes (its volumes, the Secrets' files), listens on no privileged port and
# becomes no other user (measured: tests/images/test_smoke.py runs it with an empty bounding set).
SSSD_CAPABILITIES: list[str] = []
CONFIG_KEY = "sssd.conf"          # nss only: every pod
LOGIN_CONFIG_KEY = "sssd-login.conf"  # nss and ssh: login pods (sshd's AuthorizedKeysCommand)
# How often the controller's sidecar looks at the directory (its finding is the SlurmCluster's IdentityReady); the
# others look at start and until the directory answers as it should.
CONTROLLER_CHECK_INTERVAL = 30
CHECK_INTERVAL = 60
_MEMORY = {"medium": "Memory", "sizeLimit": "64Mi"}


def sssd_config_map(c: ClusterContext) -> KubeObject:
    """``<cluster>-sssd-config``: sssd.conf without the bind password, for the login pods and for the others."""
    return config_map(c, names.sssd_config_name(c.name), {CONFIG_KEY: render_sssd_conf(c.obj),
                                                          LOGIN_CONFIG_KEY: render_sssd_conf(c.obj, ssh=True)})


def _volumes(c: ClusterContext, login: bool) -> list[KubeObject]:
    ldap = c.spec["identity"]["ldap"]
    volumes = [
        {"name": "sssd-config", "configMap": {"name": names.sssd_config_name(c.name), "items": [
            {"key": LOGIN_CONFIG_KEY if login else CONFIG_KEY, "path": "sssd.conf"}]}},
        {"name": "sssd-pipes", "emptyDir": {}},
        {"name": "sssd-private", "emptyDir": {}},
        {"name": "sssd-etc", "emptyDir": dict(_MEMORY)},
        {"name": "sssd-db", "emptyDir": dict(_MEMORY)},
        {"name": "sssd-mc", "emptyDir": {}},  # sssd_nss's memory-mapped caches: big, sparse, no secret
        {"name": "sssd-run", "emptyDir": dict(_MEMORY)},
    ]
    password = ldap.get("bindPasswordSecretRef")
    if password:
        volumes.append({"name": "identity-bind-password", "secret": {
            "secretName": password["name"], "defaultMode": 0o400, "optional": True,
            "items": [{"key": password["key"], "path": names.IDENTITY_BIND_PASSWORD_FILE}]}})
    ca = (ldap.get("tls") or {}).get("caSecretRef")
    if ca:
        volumes.append({"name": "identity-ca", "secret": {
            "secretName": ca["name"], "defaultMode": 0o444, "optional": True,
            "items": [{"key": ca["key"], "path": names.IDENTITY_CA_FILE}]}})
    return volumes


def sidecar(c: ClusterContext, login: bool = False, controller: bool = False) -> KubeObject:
    """The sssd sidecar: started (its socket there) before the pod's daemon, stopped after it."""
    ldap = c.spec["identity"]["ldap"]
    mounts = [
        {"name": "sssd-config", "mountPath": names.SSSD_CONFIG_MOUNT, "readOnly": True},
        {"name": "sssd-pipes", "mountPath": names.SSS_PIPES_DIR},
        {"name": "sssd-private", "mountPath": names.SSS_PIPES_DIR + "/private"},
        {"name": "sssd-etc", "mountPath": "/etc/sssd"},
        {"name": "sssd-db", "mountPath": "/var/lib/sss/db"},
        {"name": "sssd-mc", "mountPath": "/var/lib/sss/mc"},
        {"name": "sssd-run", "mountPath": "/run"},
    ]
    if ldap.get("bindPasswordSecretRef"):
        mounts.append({"name": "identity-bind-password", "mountPath": names.IDENTITY_BIND_PASSWORD_MOUNT,
                       "readOnly": True})
    if (ldap.get("tls") or {}).get("caSecretRef"):
        mounts.append({"name": "identity-ca", "mountPath": names.IDENTITY_CA_MOUNT, "readOnly": True})
    context = security(SSSD_CAPABILITIES, RUNTIME_DEFAULT)
    context["readOnlyRootFilesystem"] = True
    # The image's user is root (Debian's sssd runs as root); pods whose daemons run as another user (slurmdbd,
    # slurmrestd) set theirs per container, so nothing here is inherited.
    container = {
        "name": "sssd",
        "image": c.spec["images"]["sssd"],
        "imagePullPolicy": c.pull_policy,
        "restartPolicy": "Always",
        "args": ["/usr/sbin/sssd", "-i", "--logger=stderr"],
        "env": [{"name": "SOPERATOR_IDENTITY_CHECK", "value": "always" if controller else "until-ready"},
                {"name": "SOPERATOR_IDENTITY_CHECK_INTERVAL",
                 "value": str(CONTROLLER_CHECK_INTERVAL if controller else CHECK_INTERVAL)}],
        "startupProbe": {"exec": {"command": ["test", "-S", names.SSS_PIPES_DIR + "/nss"]},
                         "periodSeconds": 1, "failureThreshold": 60},
        "volumeMounts": mounts,
        "securityContext": context,
        "resources": container_resources(c.spec["identity"]["sssd"].get("resources")) or {
            "requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
    }
    return container


def attach(c: ClusterContext, pod: KubeObject, daemon: KubeObject, login: bool = False,
           controller: bool = False) -> KubeObject:
    """Give a pod spec the sssd sidecar (after its other sidecars) and its volumes, and its daemon container
    (``daemon``, a container of ``pod``) the socket directory, read-only. Nothing without ``spec.identity.ldap``."""
    if not enabled(c.spec):
        return pod
    pod.setdefault("initContainers", []).append(sidecar(c, login=login, controller=controller))
    pod["volumes"] = pod.get("volumes", []) + _volumes(c, login)
    daemon.setdefault("volumeMounts", []).append({"name": "sssd-pipes", "mountPath": names.SSS_PIPES_DIR,
                                                  "readOnly": True})
    daemon.setdefault("env", []).append({"name": "SOPERATOR_IDENTITY", "value": "sssd"})
    return pod
