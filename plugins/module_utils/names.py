# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names shared by the schema, the renderers and the planners: API group, labels, annotations, paths.

One place for every string that another layer (adapters, roles, images, the SPANK plugin) also relies on.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.soperator.slurm.plugins.module_utils import digests

COLLECTION_VERSION = "0.1.0"  # tests/unit/module_utils/test_names.py checks it against galaxy.yml

GROUP = "slurm.soperator.dev"
VERSION = "v1alpha1"
API_VERSION = GROUP + "/" + VERSION
CLUSTER_KIND = "SlurmCluster"
NODESET_KIND = "NodeSet"
CLUSTER_PLURAL = "slurmclusters"
NODESET_PLURAL = "nodesets"

# Labels on every rendered object.
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_CLUSTER = GROUP + "/cluster"
LABEL_NODESET = GROUP + "/nodeset"
MANAGED_BY = "soperator.slurm"

COMPONENT_CONTROLLER = "controller"
COMPONENT_WORKER = "worker"
COMPONENT_LOGIN = "login"
COMPONENT_JAIL = "jail"
COMPONENT_CONFIG = "config"
COMPONENT_SECRET = "secret"
COMPONENT_POPULATE = "populate-jail"
COMPONENT_HEALTH = "health"
COMPONENT_ACCOUNTING = "accounting"  # slurmdbd
COMPONENT_DATABASE = "accounting-db"  # the in-cluster MariaDB
COMPONENT_REST = "rest"  # slurmrestd
COMPONENT_EXPORTER = "exporter"  # the Prometheus exporter
COMPONENT_BACKUP = "jail-backup"  # the jail's restic backups (and their retention step)
COMPONENT_RESTORE = "jail-restore"  # a restore Job (playbooks/jail-restore.yml)
COMPONENT_IDENTITY = "identity"  # the sssd configuration (spec.identity)
COMPONENT_JAIL_ADMIN, MANAGED_BY_JAIL_CONNECTION = "jail-admin", "soperator.slurm.jail"  # render/jail.py admin_job

# The finalizer on SlurmClusters and NodeSets (operator/watches.yaml names it too: a unit test keeps them equal).
FINALIZER = GROUP + "/finalizer"

# Annotations: every one the collection writes or reads is named here.
ANNOTATION_CONFIG_HASH = GROUP + "/config-hash"
# On every applied object: the hash of the manifest it was applied from (render/objects.py: is the live one ours).
ANNOTATION_APPLIED_HASH = GROUP + "/applied-hash"
# An object the prune step must leave alone: "false".
ANNOTATION_PRUNE = GROUP + "/prune"
# On a StatefulSet: the hash of the pod template it was rendered with, so a plan sees that a template it is about
# to apply differs from the live one (a rolling update follows) without comparing API-server-defaulted templates.
ANNOTATION_TEMPLATE_HASH = GROUP + "/template-hash"
# On the controller's pod template: the SlurmUser its slurmctld runs as (absent: root, a release from before
# slurmctld ran as slurm). Read back by the converge plan: Slurm cannot change SlurmUser under running slurmd.
ANNOTATION_SLURM_USER = GROUP + "/slurm-user"
SLURM_USER_BEFORE_ANNOTATION = "root"
# On the login StatefulSet: when its current pod template was first applied (UTC, RFC 3339): the start of the
# grace period users' sessions on older login pods get before those pods are replaced.
ANNOTATION_TEMPLATE_SINCE = GROUP + "/template-since"
ANNOTATION_CREATE_ONLY = GROUP + "/create-only"
# On a Secret an External accounting database names (passwordSecretRef, tls.caSecretRef): the SlurmCluster it is
# given to. slurmdbd mounts such a Secret and sends its value to the database host the SlurmCluster names, so only
# a Secret whose owner marked it for that cluster (this label, value the cluster's name) is taken: an editor of
# SlurmClusters cannot hand the database host any other Secret of the namespace.
LABEL_DATABASE_SECRET = GROUP + "/database-secret-for"
# On a Secret spec.jail.backup names (the repository's password, its credentials): the SlurmCluster it is given to.
# The backup pods send the credentials to the endpoint the SlurmCluster names, so, as for the database, only a
# Secret its owner marked for that cluster is taken.
LABEL_BACKUP_SECRET = GROUP + "/backup-secret-for"
# The same for the Secrets of a directory (spec.identity.ldap: the bind password, which sssd sends to the directory
# the SlurmCluster names, and the CA it trusts).
LABEL_IDENTITY_SECRET = GROUP + "/identity-secret-for"
ANNOTATION_GENERATE = GROUP + "/generate"
GENERATE_MUNGE_KEY = "munge-key"
GENERATE_SSH_HOST_KEYS = "ssh-host-keys"
# The accounting database's password (and, for a mariadb-operator MariaDB, its root password): random, once.
GENERATE_DB_PASSWORD = "db-password"
DB_PASSWORD_KEY = "password"
DB_ROOT_PASSWORD_KEY = "root-password"
# The HS256 key slurmctld and slurmdbd verify JSON Web Tokens with (auth/jwt, for slurmrestd): random, once.
GENERATE_JWT_KEY = "jwt-key"
JWT_KEY_FILE = "jwt_hs256.key"
MUNGE_KEY_FILE = "munge.key"
# Host key types sshd is configured with and the apply adapter generates (once) for the login Secret.
SSH_HOST_KEY_TYPES = ("ed25519", "rsa")
SSH_HOST_KEY_FILES = tuple("ssh_host_%s_key" % t for t in SSH_HOST_KEY_TYPES)

# Drain reasons: the one table of those we own. A Slurm node drained with another reason belongs to an
# administrator: never overwritten, never resumed. Each of ours is resumed only by whoever drained it, and only once
# its cause is gone (tests/unit/module_utils/test_names.py holds the health program's copy of its prefixes equal to
# these).
DRAIN_REASON_PREFIX = "soperator:"
REASON_SCALE_IN = DRAIN_REASON_PREFIX + " scale-in"        # a NodeSet shrinks or goes; resumed if the pod stays
REASON_MAINTENANCE = DRAIN_REASON_PREFIX + " maintenance"  # spec.maintenance; resumed when it ends
REASON_UPDATE = DRAIN_REASON_PREFIX + " update"            # a rolling update; resumed when the new pod's slurmd answers
# Kubernetes node state projected into Slurm by the converge (spec.healthChecks.kubernetesNodes).
REASON_NODE_CORDONED = DRAIN_REASON_PREFIX + " node cordoned"
REASON_NODE_CONDITION = DRAIN_REASON_PREFIX + " node condition "  # + the condition type
# The health program's (images/worker/soperator_health.py, REASON_PREFIX there): only it resumes them, or the
# converge once the program no longer runs; the NCCL check's (NCCL_REASON_PREFIX there) are a measurement, left to an
# administrator.
HEALTH_REASON_PREFIX = DRAIN_REASON_PREFIX + " health:"
NCCL_REASON_PREFIX = HEALTH_REASON_PREFIX + " nccl:"
# Reasons the converge resumes itself, each when its cause is gone.
CONVERGE_REASONS = (REASON_SCALE_IN, REASON_MAINTENANCE, REASON_UPDATE, REASON_NODE_CORDONED, REASON_NODE_CONDITION)
# On a Kubernetes node the converge cordoned (spec.healthChecks.kubernetesNodes.evictUnhealthyAfter): why, for whoever
# uncordons it once repaired.
ANNOTATION_CORDONED = GROUP + "/cordoned"
# The scheduling gate of a pinned NodeSet's workers: the converge adds the node affinity of the worker's pin (or none,
# the pin released) and removes it (plan/pins.py).
PIN_GATE = GROUP + "/pin"
# The pod condition carrying a worker's Slurm node state (status from Slurm, reason its state in CamelCase).
POD_CONDITION_SLURM_NODE = "SlurmNodeReady"

# Paths inside the containers (the images and the SPANK plugin rely on them).
JAIL_MOUNT = "/mnt/jail"
# Where a pod mounts the jail's sub-mounts (one directory each, by name): not at their jail paths, which users can
# write to (runc would follow a symlink there into the container's own files); the entrypoint binds each into the
# jail without following any (soperator-bind-beneath).
SUB_MOUNTS_DIR = "/mnt/soperator/sub-mounts"
SPANK_CHROOT_PLUGIN = "/usr/lib/x86_64-linux-gnu/slurm/spank_chroot.so"
# A GPU worker's NVIDIA driver user space (images/worker/soperator_driver.py): its files bound into the container's
# /run (which the jail plugin binds into every task), and the jail's loader cache plus them, which plugstack.conf
# binds over the jail's own in each task.
GPU_DRIVER_DIR = "/run/soperator/nvidia"
GPU_DRIVER_LOADER_CACHE = GPU_DRIVER_DIR + "/ld.so.cache"
JAIL_LOADER_CACHE = "/etc/ld.so.cache"
SLURM_CONFIG_DIR = "/etc/slurm"
SLURMCTLD_SPOOL = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
SLURM_RUN_DIR = "/run/slurm"
MUNGE_RUN_DIR = "/run/munge"
MUNGE_KEY_MOUNT = "/etc/soperator/munge"
SSH_HOST_KEYS_MOUNT = "/etc/soperator/ssh-host-keys"
SSHD_CONFIG_MOUNT = "/etc/soperator/sshd"
POPULATE_TOOL_DIR = "/opt/soperator/bin"
POPULATE_TOOL = "populate-jail"
NODE_READY_PROBE = "/usr/local/bin/soperator-node-ready"  # images/lib/soperator-node-ready
# The worker image's health programs (images/worker) and where their per-NodeSet configuration is mounted.
HEALTH_CHECK_PROGRAM = "/usr/local/sbin/soperator-health-check"
NCCL_CHECK_PROGRAM = "/usr/local/sbin/soperator-nccl-check"
HEALTH_CONFIG_MOUNT = "/etc/soperator/health"
HEALTH_CONFIG_FILE = "health.json"
NCCL_CONFIG_FILE = "nccl.json"
# Results of the NCCL check, in the jail (JSON and a Prometheus textfile).
NCCL_RESULTS_DIR = "/var/lib/soperator/nccl"
JWT_KEY_MOUNT = "/etc/soperator/jwt"
JWT_KEY_PATH = JWT_KEY_MOUNT + "/" + JWT_KEY_FILE
# slurmctld's copy of the JWT key (root:slurm 0440): the controller entrypoint makes it from the Secret's file
# (root's 0400), because slurmctld reads the key at start as root without CAP_DAC_*, then as SlurmUser after each
# `scontrol reconfigure` (which re-executes it). slurmdbd runs as SlurmUser from the start and reads the Secret's
# file through its pod's fsGroup.
SLURMCTLD_JWT_KEY_PATH = "/run/slurmctld/" + JWT_KEY_FILE
# slurmdbd: the rendered slurmdbd.conf without its password (ConfigMap), the password (Secret), an external
# database's CA (Secret); the entrypoint assembles the real file in a memory volume at SLURMDBD_RUN_DIR.
SLURMDBD_CONFIG_MOUNT = "/etc/soperator/slurmdbd"
DB_PASSWORD_MOUNT = "/etc/soperator/db-password"
DB_CA_MOUNT = "/etc/soperator/db-ca"
SLURMDBD_RUN_DIR = "/run/slurmdbd"
MARIADB_DATA_DIR = "/var/lib/mysql"
MARIADB_RUN_DIR = "/run/mysqld"
EXPORTER_BINARY = "/usr/local/bin/slurm-exporter"
# The backup image (images/backup): its program, and where its pods mount what it reads. The snapshots hold the
# jail at JAIL_MOUNT (the backup pods mount it there, read-only), so a restore maps paths one to one.
BACKUP_PROGRAM = "/usr/local/bin/soperator-backup"
BACKUP_PASSWORD_MOUNT = "/etc/soperator/backup-password"
BACKUP_CREDENTIALS_MOUNT = "/etc/soperator/backup-credentials"
BACKUP_REPOSITORY_MOUNT = "/mnt/repository"
BACKUP_CACHE_DIR = "/var/cache/restic"
# The keys of the credentials Secrets: S3 (restic's AWS_* variables) and a REST server's HTTP basic auth.
BACKUP_S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
BACKUP_REST_KEYS = ("RESTIC_REST_USERNAME", "RESTIC_REST_PASSWORD")
# Snapshots of a cluster carry its name as restic's host and this tag: retention forgets only these.
BACKUP_TAG = "soperator"
# The jail directory (root's, 0700) a restore into a directory writes below, then hands over by one rename: no user
# can reach what restic writes until it is complete (images/backup/soperator-backup).
RESTORE_STAGING = "/.soperator-restore"
# A directory (spec.identity): the sssd sidecar's rendered sssd.conf (ConfigMap, no password), the bind password and
# the CA (Secrets, mounted in the sidecar alone), the socket directory it shares with the pod's daemon (libnss-sss and
# sss_ssh_authorizedkeys connect there; login and worker pods bind it read-only into the jail), and the file where
# it writes what its last look at the directory found (read by the converge: IdentityReady).
SSSD_CONFIG_MOUNT = "/etc/soperator/sssd"
IDENTITY_BIND_PASSWORD_MOUNT = "/etc/soperator/identity/bind-password"
IDENTITY_BIND_PASSWORD_FILE = "password"
IDENTITY_CA_MOUNT = "/etc/soperator/identity/ca"
IDENTITY_CA_FILE = "ca.crt"
SSS_PIPES_DIR = "/var/lib/sss/pipes"
IDENTITY_STATUS_FILE = "/run/soperator/identity-status"
# The login image's AuthorizedKeysCommand (images/login): a directory user's keys, only for the directory's account.
AUTHORIZED_KEYS_COMMAND = "/usr/local/sbin/soperator-authorized-keys"
# Fixed ids of the users the accounting images run as (images/*/Containerfile): the pods run as them
# (runAsUser) with no capability at all. slurm is Debian's fixed id (SlurmUser: slurmdbd, the NCCL check); the
# others are chosen here.
SLURM_UID = 64030
MYSQL_UID = 992
SLURMRESTD_UID = 993
EXPORTER_UID = 65534  # nobody: the exporter only reads what any Slurm user may read

# slurmctld drops root for this user (the images and the jail have it, uid 64030 as Debian fixes it).
SLURM_USER = "slurm"

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SSH_PORT = 22
SLURMDBD_PORT = 6819
SLURMRESTD_PORT = 6820
MARIADB_PORT = 3306
EXPORTER_PORT = 9341

IMAGE_REPOSITORIES = {
    "controller": "soperator/slurm-controller",
    "worker": "soperator/slurm-worker",
    "login": "soperator/slurm-login",
    "populateJail": "soperator/populate-jail",
    "jail": "soperator/jail",
    "slurmdbd": "soperator/slurmdbd",
    "slurmrestd": "soperator/slurmrestd",
    "exporter": "soperator/slurm-exporter",
    "mariadb": "soperator/mariadb",
    "backup": "soperator/backup",
    "sssd": "soperator/sssd",
}

# NodeSet names that would collide with the cluster's own object names (`<cluster>-<nodeset>`) or with Slurm
# keywords in `Nodes=`.
RESERVED_NODESET_NAMES = ("controller", "login", "login-headless", "jail", "slurm-config", "sshd-config",
                          "munge-key", "ssh-host-keys", "populate-jail", "all", "health-checks", "nccl-check",
                          "accounting", "accounting-db", "accounting-db-password", "slurmdbd-config", "jwt-key",
                          "rest", "exporter", "backup", "retention", "restore", "sssd-config")


def default_image(component: str, collection_version: str = COLLECTION_VERSION) -> str:
    return "%s:%s" % (IMAGE_REPOSITORIES[component], collection_version)


def controller_name(cluster: str) -> str:
    return "%s-controller" % cluster


def login_name(cluster: str) -> str:
    return "%s-login" % cluster


def login_headless_name(cluster: str) -> str:
    return "%s-login-headless" % cluster


# slurmctld's ResumeProgram, SuspendProgram and ResumeFailProgram (elastic NodeSets): one program of the controller
# image under three names; it only records Slurm's request (images/controller/soperator-power).
POWER_PROGRAM = "/usr/local/sbin/soperator-power"
POWER_PROGRAMS = (("ResumeProgram", "/usr/local/sbin/soperator-resume"),
                  ("SuspendProgram", "/usr/local/sbin/soperator-suspend"),
                  ("ResumeFailProgram", "/usr/local/sbin/soperator-resume-fail"))
# The same program as PrologSlurmctld: a job whose nodes were powered up starts once they registered.
WAIT_NODES_PROGRAM = "/usr/local/sbin/soperator-wait-nodes"
# Where it records them (slurmctld's log directory in the controller pod, SlurmUser's).
POWER_LOG = "/var/log/slurm/power.log"


def worker_name(cluster: str, nodeset: str) -> str:
    """StatefulSet and headless Service of a NodeSet; its pods (= Slurm nodes) are ``<this>-<ordinal>``."""
    return "%s-%s" % (cluster, nodeset)


def pod_name(statefulset: str, ordinal: int) -> str:
    """The pod ``<statefulset>-<ordinal>`` of a StatefulSet; a worker pod's name is its Slurm node's too."""
    return "%s-%d" % (statefulset, ordinal)


def ordinal(pod: str, statefulset: str) -> int | None:
    """The ordinal of ``pod`` when it is ``<statefulset>-<n>`` (as a StatefulSet names its pods), else None."""
    head, sep, tail = pod.rpartition("-")
    if sep and head == statefulset and re.fullmatch(r"[0-9]+", tail) and (tail == "0" or not tail.startswith("0")):
        return int(tail)
    return None


def statefulset_of(pod: str) -> str:
    """The StatefulSet ``<statefulset>-<n>`` would be a pod of (the name without its last ``-part``)."""
    return pod.rpartition("-")[0]


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def every_node_worker(cluster: str, nodeset: str, node: str) -> str:
    """The worker (pod = hostname = Slurm node) of an every-node NodeSet on Kubernetes node ``node``: ``<cluster>-
    <nodeset>-<node, sanitised>-<5 letters>``, a DNS label of at most 63 characters; pure and stable. The node name is
    lowercased, each run of characters but [a-z0-9] (the dots of ``n1.example.com``) made one ``-`` and cut to fit;
    the letters hash the NodeSet and the exact node name, so nodes that sanitise or cut alike (``a.b``, ``a-b``) and
    sets whose names join alike (``a`` on ``b-x``, ``a-b`` on ``x``) differ, and the name never ends in ``-<digits>``
    (a StatefulSet pod's, :func:`ordinal`)."""
    prefix, value, suffix = worker_name(cluster, nodeset), int(digests.of_value([nodeset, node])[:12], 16), ""
    for _index in range(5):
        value, digit = divmod(value, len(_LETTERS))
        suffix += _LETTERS[digit]
    middle = re.sub(r"[^a-z0-9]+", "-", node.lower())[:max(0, 63 - len(prefix) - len(suffix) - 2)].strip("-")
    return "-".join(part for part in (prefix, middle, suffix) if part)


def controller_pod(cluster: str) -> str:
    """The pod slurmctld runs in (the controller StatefulSet has one): the reconciler asks its scontrol."""
    return pod_name(controller_name(cluster), 0)


def slurm_config_name(cluster: str) -> str:
    return "%s-slurm-config" % cluster


def sshd_config_name(cluster: str) -> str:
    return "%s-sshd-config" % cluster


def health_config_name(cluster: str) -> str:
    """The ConfigMap of the health programs' settings: one key per NodeSet, and the NCCL check's."""
    return "%s-health-checks" % cluster


def nccl_check_name(cluster: str) -> str:
    return "%s-nccl-check" % cluster


# A CronJob's name is at most 52 characters (its Jobs add 11), a Job's 63 (the job-name label): with a cluster
# name of at most 40, these fit.
def backup_name(cluster: str) -> str:
    """The jail backup's CronJob."""
    return "%s-backup" % cluster


def backup_retention_name(cluster: str) -> str:
    """The CronJob that applies the backup's retention (restic forget --prune)."""
    return "%s-retention" % cluster


def restore_job_name(cluster: str, request: object) -> str:
    """A restore Job: a short hash of what it restores (snapshot, path, target), so a request is one Job."""
    return "%s-restore-%s" % (cluster, digests.of_value(request)[:10])


def munge_key_name(cluster: str) -> str:
    return "%s-munge-key" % cluster


def ssh_host_keys_name(cluster: str) -> str:
    return "%s-ssh-host-keys" % cluster


# The controller's spool comes from a claim template: Kubernetes names its claim <template>-<pod>.
SPOOL_CLAIM_TEMPLATE = "spool"


def spool_claim_name(cluster: str, index: int = 0) -> str:
    return "%s-%s" % (SPOOL_CLAIM_TEMPLATE, pod_name(controller_name(cluster), index))


def jail_claim_name(cluster: str) -> str:
    return "%s-jail" % cluster


def accounting_name(cluster: str) -> str:
    """slurmdbd's StatefulSet and headless Service; its pod (``<this>-0``) is the DbdHost."""
    return "%s-accounting" % cluster


def slurmdbd_config_name(cluster: str) -> str:
    return "%s-slurmdbd-config" % cluster


def database_name(cluster: str) -> str:
    """The in-cluster database: MariaDB's StatefulSet and Service, or the mariadb-operator ``MariaDB``."""
    return "%s-accounting-db" % cluster


def db_password_name(cluster: str) -> str:
    return "%s-accounting-db-password" % cluster


# The in-cluster MariaDB's data come from a claim template: its claim is <template>-<pod>.
DB_CLAIM_TEMPLATE = "data"


def db_claim_name(cluster: str, index: int = 0) -> str:
    return "%s-%s" % (DB_CLAIM_TEMPLATE, pod_name(database_name(cluster), index))


def jwt_key_name(cluster: str) -> str:
    return "%s-jwt-key" % cluster


def rest_name(cluster: str) -> str:
    return "%s-rest" % cluster


def exporter_name(cluster: str) -> str:
    return "%s-exporter" % cluster


def sssd_config_name(cluster: str) -> str:
    """The ConfigMap of the sssd sidecars' sssd.conf (spec.identity), without the bind password."""
    return "%s-sssd-config" % cluster


def slurmdbd_host(cluster: str, namespace: str) -> str:
    """Where slurmctld reaches slurmdbd (AccountingStorageHost): its pod, through the headless Service."""
    return "%s.%s.%s.svc" % (pod_name(accounting_name(cluster), 0), accounting_name(cluster), namespace)


def database_host(cluster: str, namespace: str) -> str:
    return "%s.%s.svc" % (database_name(cluster), namespace)


def populate_job_name(cluster: str, repopulate_token: str | None) -> str:
    """``<cluster>-populate-jail-initial``, or a short hash of the token: a new token is a new Job."""
    if not repopulate_token:
        return "%s-populate-jail-initial" % cluster
    return "%s-populate-jail-%s" % (cluster, digests.of_text(repopulate_token)[:10])


# Tails of the names a family of objects takes: pods (and their claims) of a StatefulSet, populate Jobs, the Jobs
# a CronJob starts (its name and the scheduled minute) and their pods.
ORDINAL_TAIL = r"[0-9]+"
POPULATE_TAIL = r"initial|[0-9a-f]{10}"
CRONJOB_TAIL = r"[0-9]+(-[a-z0-9]{5})?"
RESTORE_TAIL = r"[0-9a-f]{10}(-[a-z0-9]{5})?"


def owned_names(cluster: str, nodeset: str | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """The names of the objects a SlurmCluster itself (``nodeset`` None) or one of its NodeSets makes in the
    namespace: ``(exact names, [(prefix, tail pattern)])``; a family's members are ``prefix`` + a tail matching
    the pattern (pods of a StatefulSet, populate Jobs). Two owners whose names meet would overwrite each other's
    objects, or make a pod name resolve to another owner's Service."""
    if nodeset is not None:
        worker = worker_name(cluster, nodeset)
        return [worker], [(worker + "-", ORDINAL_TAIL)]
    exact = [controller_name(cluster), login_name(cluster), login_headless_name(cluster), slurm_config_name(cluster),
             sshd_config_name(cluster), munge_key_name(cluster), ssh_host_keys_name(cluster), jail_claim_name(cluster),
             health_config_name(cluster), nccl_check_name(cluster), accounting_name(cluster),
             slurmdbd_config_name(cluster), database_name(cluster), db_password_name(cluster), jwt_key_name(cluster),
             rest_name(cluster), exporter_name(cluster), backup_name(cluster), backup_retention_name(cluster),
             sssd_config_name(cluster)]
    stateful = (controller_name(cluster), login_name(cluster), accounting_name(cluster), database_name(cluster),
                rest_name(cluster), exporter_name(cluster))
    families = [(name + "-", ORDINAL_TAIL) for name in stateful]
    families += [("%s-%s-" % (SPOOL_CLAIM_TEMPLATE, controller_name(cluster)), ORDINAL_TAIL),
                 ("%s-%s-" % (DB_CLAIM_TEMPLATE, database_name(cluster)), ORDINAL_TAIL),
                 ("%s-populate-jail-" % cluster, POPULATE_TAIL),
                 (nccl_check_name(cluster) + "-", CRONJOB_TAIL),
                 (backup_name(cluster) + "-", CRONJOB_TAIL),
                 (backup_retention_name(cluster) + "-", CRONJOB_TAIL),
                 ("%s-restore-" % cluster, RESTORE_TAIL)]
    return exact, families


# The kubelet's default --cluster-domain; the controller's DNS search list is built from it.
CLUSTER_DOMAIN = "cluster.local"
# Kubernetes allows 32 search domains per pod; the namespace's three come first.
MAX_EXTRA_DNS_SEARCHES = 29


def conf_server(cluster: str, namespace: str) -> str:
    """Where slurmd and sackd fetch their configuration (configless Slurm)."""
    return "%s.%s.%s.svc:%d" % (controller_pod(cluster), controller_name(cluster), namespace, SLURMCTLD_PORT)


def labels(cluster: str, component: str, nodeset: str | None = None) -> dict[str, str]:
    """The full label set of an object of ``cluster``."""
    result = selector_labels(cluster, component, nodeset)
    result[LABEL_PART_OF] = "soperator"
    result[LABEL_MANAGED_BY] = MANAGED_BY
    result[LABEL_CLUSTER] = cluster
    return result


def selector_labels(cluster: str, component: str, nodeset: str | None = None) -> dict[str, str]:
    """The immutable subset used in StatefulSet/Service/PDB selectors."""
    result = {LABEL_NAME: "slurm", LABEL_INSTANCE: cluster, LABEL_COMPONENT: component}
    if nodeset is not None:
        result[LABEL_NODESET] = nodeset
    return result


# SlurmCluster status field the operator runtime writes: the digest of the pod and StatefulSet states its last
# successful run started from (a check that finds the same inputs and nothing else differing runs nothing).
STATUS_RECONCILED_DIGEST = "reconciledDigest"
# The operator Deployment's environment variable holding the installer's policy (the operator role's
# operator_policy, JSON): watches.yaml hands it to every run as cluster_policy, the runtime's drift check reads it.
POLICY_ENV = "SOPERATOR_POLICY"
