# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names shared by the schema, the renderers and the planners: API group, labels, annotations, paths.

One place for every string that another layer (adapters, roles, images, the SPANK plugin) also relies on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

COLLECTION_VERSION = "0.1.0"  # tests/unit/test_names.py checks it against galaxy.yml

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

# Annotations (the same strings as objects.py, which the apply adapter reads).
ANNOTATION_CONFIG_HASH = GROUP + "/config-hash"
# On a StatefulSet: the hash of the pod template it was rendered with, so a plan sees that a template it is about
# to apply differs from the live one (a rolling update follows) without comparing API-server-defaulted templates.
ANNOTATION_TEMPLATE_HASH = GROUP + "/template-hash"
# On the login StatefulSet: when its current pod template was first applied (UTC, RFC 3339): the start of the
# grace period users' sessions on older login pods get before those pods are replaced.
ANNOTATION_TEMPLATE_SINCE = GROUP + "/template-since"
ANNOTATION_CREATE_ONLY = GROUP + "/create-only"
ANNOTATION_GENERATE = GROUP + "/generate"
GENERATE_MUNGE_KEY = "munge-key"
GENERATE_SSH_HOST_KEYS = "ssh-host-keys"
MUNGE_KEY_FILE = "munge.key"
# Host key types sshd is configured with and the apply adapter generates (once) for the login Secret.
SSH_HOST_KEY_TYPES = ("ed25519", "rsa")
SSH_HOST_KEY_FILES = tuple("ssh_host_%s_key" % t for t in SSH_HOST_KEY_TYPES)

# Drain reasons written by the operator start with this; anything else belongs to an administrator.
DRAIN_REASON_PREFIX = "soperator:"

# Paths inside the containers (the images and the SPANK plugin rely on them).
JAIL_MOUNT = "/mnt/jail"
SPANK_CHROOT_PLUGIN = "/usr/lib/x86_64-linux-gnu/slurm/spank_chroot.so"
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

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SSH_PORT = 22

IMAGE_REPOSITORIES = {
    "controller": "soperator/slurm-controller",
    "worker": "soperator/slurm-worker",
    "login": "soperator/slurm-login",
    "populateJail": "soperator/populate-jail",
    "jail": "soperator/jail",
}

# NodeSet names that would collide with the cluster's own object names (`<cluster>-<nodeset>`) or with Slurm
# keywords in `Nodes=`.
RESERVED_NODESET_NAMES = ("controller", "login", "login-headless", "jail", "slurm-config", "sshd-config",
                          "munge-key", "ssh-host-keys", "populate-jail", "all")


def default_image(component, collection_version=COLLECTION_VERSION):
    return "%s:%s" % (IMAGE_REPOSITORIES[component], collection_version)


def controller_name(cluster):
    return "%s-controller" % cluster


def login_name(cluster):
    return "%s-login" % cluster


def login_headless_name(cluster):
    return "%s-login-headless" % cluster


def worker_name(cluster, nodeset):
    """StatefulSet and headless Service of a NodeSet; its pods (= Slurm nodes) are ``<this>-<ordinal>``."""
    return "%s-%s" % (cluster, nodeset)


def slurm_config_name(cluster):
    return "%s-slurm-config" % cluster


def sshd_config_name(cluster):
    return "%s-sshd-config" % cluster


def munge_key_name(cluster):
    return "%s-munge-key" % cluster


def ssh_host_keys_name(cluster):
    return "%s-ssh-host-keys" % cluster


# The controller's spool comes from a claim template: Kubernetes names its claim <template>-<pod>.
SPOOL_CLAIM_TEMPLATE = "spool"


def spool_claim_name(cluster, ordinal=0):
    return "%s-%s-%d" % (SPOOL_CLAIM_TEMPLATE, controller_name(cluster), ordinal)


def jail_claim_name(cluster):
    return "%s-jail" % cluster


# The kubelet's default --cluster-domain; the controller's DNS search list is built from it.
CLUSTER_DOMAIN = "cluster.local"
# Kubernetes allows 32 search domains per pod; the namespace's three come first.
MAX_EXTRA_DNS_SEARCHES = 29


def conf_server(cluster, namespace):
    """Where slurmd and sackd fetch their configuration (configless Slurm)."""
    return "%s-0.%s.%s.svc:%d" % (controller_name(cluster), controller_name(cluster), namespace, SLURMCTLD_PORT)


def labels(cluster, component, nodeset=None):
    """The full label set of an object of ``cluster``."""
    result = selector_labels(cluster, component, nodeset)
    result[LABEL_PART_OF] = "soperator"
    result[LABEL_MANAGED_BY] = MANAGED_BY
    result[LABEL_CLUSTER] = cluster
    return result


def selector_labels(cluster, component, nodeset=None):
    """The immutable subset used in StatefulSet/Service/PDB selectors."""
    result = {LABEL_NAME: "slurm", LABEL_INSTANCE: cluster, LABEL_COMPONENT: component}
    if nodeset is not None:
        result[LABEL_NODESET] = nodeset
    return result

# SlurmCluster status field the operator runtime writes: the digest of the pod and StatefulSet states its last
# successful run started from (a check that finds the same inputs and nothing else differing runs nothing).
STATUS_RECONCILED_DIGEST = "reconciledDigest"
