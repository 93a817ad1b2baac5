# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Accounting: slurmdbd's StatefulSet and Service, its configuration, and the database it stores into: an
in-cluster MariaDB StatefulSet (Debian's MariaDB, our image), a mariadb-operator ``MariaDB``, or none (external).

MariaDB runs as its own unprivileged user, slurmdbd as SlurmUser (``slurm``: slurmctld accepts slurmdbd's
connection only from its SlurmUser), both from their first instruction (``runAsUser``) and with no capability; the
Secrets they read are their group's through the pod's ``fsGroup``. The database password never reaches a
ConfigMap: slurmdbd's entrypoint appends it from the Secret when it writes slurmdbd.conf into a memory volume, and
MariaDB's entrypoint puts it into an init file there.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from dataclasses import dataclass, field
from typing import List, Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import identity as directory
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import (
    RUNTIME_DEFAULT,
    ClusterContext,
    config_hash,
    container_resources,
    security,
    statefulset,
    tcp_probe,
)
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

MARIADB_OPERATOR_API_VERSION = "k8s.mariadb.com/v1alpha1"
# Settings slurmdbd asks of its database (it warns at start otherwise): long lock waits for its rollups.
MARIADB_SETTINGS = "[mariadb]\ninnodb_lock_wait_timeout=900\ninnodb_log_file_size=64M\nmax_allowed_packet=64M\n"


def non_root(uid: int, read_only: bool = False) -> KubeObject:
    """A container that runs as ``uid`` from its first instruction: nothing to drop to, no capability."""
    context = security([], RUNTIME_DEFAULT)
    context.update(runAsUser=uid, runAsGroup=uid, runAsNonRoot=True)
    if read_only:
        context["readOnlyRootFilesystem"] = True
    return context


def database_password_ref(c: ClusterContext) -> tuple[str, str]:
    """(Secret name, key) of the password slurmdbd connects with."""
    database = c.spec["accounting"]["database"]
    if database["type"] == "External":
        return database["passwordSecretRef"]["name"], database["passwordSecretRef"]["key"]
    return names.db_password_name(c.name), names.DB_PASSWORD_KEY


def accounting_service(c: ClusterContext) -> KubeObject:
    name = names.accounting_name(c.name)
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": c.owned(name, names.COMPONENT_ACCOUNTING),
        "spec": {
            "clusterIP": "None",
            # slurmctld resolves slurmdbd's pod name while both start.
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(c.name, names.COMPONENT_ACCOUNTING),
            "ports": [{"name": "slurmdbd", "port": names.SLURMDBD_PORT, "targetPort": "slurmdbd", "protocol": "TCP"}],
        },
    }


def slurmdbd(c: ClusterContext, slurmdbd_config: Mapping[str, str]) -> KubeObject:
    spec = c.spec["accounting"]
    database = spec["database"]
    image = c.spec["images"]["slurmdbd"]
    secret_name, secret_key = database_password_ref(c)
    volumes = [
        {"name": "slurmdbd-config", "configMap": {"name": names.slurmdbd_config_name(c.name)}},
        # 0440 and the pod's fsGroup: the slurm group reads it, nobody else.
        {"name": "db-password", "secret": {"secretName": secret_name, "defaultMode": 0o440,
                                           "items": [{"key": secret_key, "path": "password"}]}},
        # The real slurmdbd.conf (with the password) lives in memory only.
        {"name": "slurmdbd-run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        # slurmdbd refuses to start unless its ArchiveDir (default /tmp) is writable, archiving or not (measured).
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ] + c.munge_volumes()
    mounts = [
        {"name": "slurmdbd-config", "mountPath": names.SLURMDBD_CONFIG_MOUNT, "readOnly": True},
        {"name": "db-password", "mountPath": names.DB_PASSWORD_MOUNT, "readOnly": True},
        {"name": "slurmdbd-run", "mountPath": names.SLURMDBD_RUN_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "munge-run", "mountPath": names.MUNGE_RUN_DIR},
    ]
    tls = database.get("tls")
    if tls:
        ref = tls["caSecretRef"]
        volumes.append({"name": "db-ca", "secret": {"secretName": ref["name"], "defaultMode": 0o444,
                                                    "items": [{"key": ref["key"], "path": ref["key"]}]}})
        mounts.append({"name": "db-ca", "mountPath": names.DB_CA_MOUNT, "readOnly": True})
    if c.spec["restApi"]["enabled"]:
        volumes.append(c.jwt_volume(mode=0o440))
        mounts.append({"name": "jwt-key", "mountPath": names.JWT_KEY_MOUNT, "readOnly": True})
    container = {
        "name": "slurmdbd",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        # The entrypoint writes slurmdbd.conf (template + password), checks that the database takes the password
        # (a refusal ends the container with a message the reconciler reports), waits for munge, then execs this.
        "args": ["/usr/sbin/slurmdbd", "-D"],
        "env": [{"name": "SOPERATOR_DB_TLS", "value": "1" if tls else "0"}],
        "ports": [{"name": "slurmdbd", "containerPort": names.SLURMDBD_PORT, "protocol": "TCP"}],
        "readinessProbe": tcp_probe("slurmdbd"),
        "volumeMounts": mounts,
        # The entrypoint's last words (why the database refused) become the container's termination message.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        # SlurmUser (slurmctld refuses slurmdbd's REQUEST_PERSIST_INIT from any other uid, measured), no capability:
        # it reads its group's Secrets, listens on an unprivileged port and writes only its memory volume.
        "securityContext": non_root(names.SLURM_UID, read_only=True),
    }
    resources = container_resources(spec["slurmdbd"].get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(spec["slurmdbd"].get("placement"), [container], volumes,
                     init_containers=[c.munge_sidecar(image)], grace=30)
    # The Secrets' files become the slurm group's (0440) without any capability; the munge key's too, but only the
    # munge sidecar (root) mounts that one.
    pod["securityContext"]["fsGroup"] = names.SLURM_UID
    directory.attach(c, pod, container)
    name = names.accounting_name(c.name)
    return statefulset(c, name, names.COMPONENT_ACCOUNTING, 1, name, pod,
                       annotations={names.ANNOTATION_CONFIG_HASH: config_hash(slurmdbd_config)})


# --- the in-cluster MariaDB ----------------------------------------------------------------------------------
def database_service(c: ClusterContext) -> KubeObject:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": c.owned(names.database_name(c.name), names.COMPONENT_DATABASE),
        "spec": {
            "selector": names.selector_labels(c.name, names.COMPONENT_DATABASE),
            "ports": [{"name": "mysql", "port": names.MARIADB_PORT, "targetPort": "mysql", "protocol": "TCP"}],
        },
    }


def mariadb(c: ClusterContext) -> KubeObject:
    database = c.spec["accounting"]["database"]
    image = c.spec["images"]["mariadb"]
    volumes = [
        {"name": "db-password", "secret": {"secretName": names.db_password_name(c.name), "defaultMode": 0o440,
                                           "items": [{"key": names.DB_PASSWORD_KEY, "path": "password"}]}},
        {"name": "mariadb-run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    container = {
        "name": "mariadb",
        "image": image,
        "imagePullPolicy": c.pull_policy,
        "args": ["/usr/sbin/mariadbd"],
        # The entrypoint creates the database and the user slurmdbd connects as, from these and the Secret.
        "env": [{"name": "SOPERATOR_DB_NAME", "value": database["name"]},
                {"name": "SOPERATOR_DB_USER", "value": database["user"]}],
        "ports": [{"name": "mysql", "containerPort": database["port"], "protocol": "TCP"}],
        "readinessProbe": tcp_probe("mysql"),
        "volumeMounts": [
            {"name": names.DB_CLAIM_TEMPLATE, "mountPath": names.MARIADB_DATA_DIR},
            {"name": "db-password", "mountPath": names.DB_PASSWORD_MOUNT, "readOnly": True},
            {"name": "mariadb-run", "mountPath": names.MARIADB_RUN_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": non_root(names.MYSQL_UID),
    }
    if database["port"] != names.MARIADB_PORT:
        container["args"].append("--port=%d" % database["port"])
    resources = container_resources(database.get("resources"))
    if resources:
        container["resources"] = resources
    pod = c.pod_spec(database.get("placement"), [container], volumes, grace=60)
    # The new volume and the Secret become the mysql user's group without any capability.
    pod["securityContext"]["fsGroup"] = names.MYSQL_UID
    storage = database["storage"]
    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage["size"]}}}
    if storage.get("storageClassName"):
        claim_spec["storageClassName"] = storage["storageClassName"]
    name = names.database_name(c.name)
    return statefulset(c, name, names.COMPONENT_DATABASE, 1, name, pod, extra={
        "volumeClaimTemplates": [{
            "metadata": {"name": names.DB_CLAIM_TEMPLATE, "labels": names.labels(c.name, names.COMPONENT_DATABASE)},
            "spec": claim_spec}],
        # The database outlives the StatefulSet: deletionPolicy.database decides.
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
    })


def mariadb_operator_database(c: ClusterContext) -> KubeObject:
    """A mariadb-operator ``MariaDB`` with the database and user slurmdbd needs. Created once (like a claim): the
    database outlives the SlurmCluster (deletionPolicy.database) and later edits of it are yours."""
    database = c.spec["accounting"]["database"]
    secret = names.db_password_name(c.name)
    storage = {"size": database["storage"]["size"]}
    if database["storage"].get("storageClassName"):
        storage["storageClassName"] = database["storage"]["storageClassName"]
    return {
        "apiVersion": MARIADB_OPERATOR_API_VERSION, "kind": "MariaDB",
        "metadata": c.metadata(names.database_name(c.name), names.COMPONENT_DATABASE,
                               annotations={names.ANNOTATION_CREATE_ONLY: "true"}),
        "spec": {
            "rootPasswordSecretKeyRef": {"name": secret, "key": names.DB_ROOT_PASSWORD_KEY},
            "username": database["user"],
            "passwordSecretKeyRef": {"name": secret, "key": names.DB_PASSWORD_KEY},
            "database": database["name"],
            "port": database["port"],
            "storage": storage,
            "myCnf": MARIADB_SETTINGS,
        },
    }


@dataclass(frozen=True)
class Accounting:
    """Every accounting object by kind, as :func:`accounting_objects` makes them, for render_cluster to place in apply
    order (empty without accounting)."""

    secrets: List[KubeObject] = field(default_factory=list)  # the database password, generated (not External)
    data: List[KubeObject] = field(default_factory=list)  # a mariadb-operator MariaDB, created once
    services: List[KubeObject] = field(default_factory=list)  # slurmdbd's, the in-cluster MariaDB's
    workloads: List[KubeObject] = field(default_factory=list)  # StatefulSets: the in-cluster MariaDB, then slurmdbd


def accounting_objects(c: ClusterContext, slurmdbd_config: Mapping[str, str]) -> Accounting:
    """Every accounting object by kind (:class:`Accounting`), for render_cluster to place in apply order."""
    database = c.spec["accounting"]["database"]
    found = Accounting(services=[accounting_service(c)])
    if database["type"] != "External":
        found.secrets.append(c.generated_secret(names.db_password_name(c.name), names.GENERATE_DB_PASSWORD,
                                                names.COMPONENT_DATABASE))
    if database["type"] == "MariaDBOperator":
        found.data.append(mariadb_operator_database(c))
    elif database["type"] == "InCluster":
        found.services.append(database_service(c))
        found.workloads.append(mariadb(c))
    found.workloads.append(slurmdbd(c, slurmdbd_config))
    return found
