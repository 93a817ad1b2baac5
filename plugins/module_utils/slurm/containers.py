# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container steps on the workers (docs/containers.md): the paths and ids the jail plugin, the worker image and the
renderers share. Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names

# On the Secret spec.containers.pullSecretRef names (the registries' credentials): the SlurmCluster it is given to. The
# workers send it to the registries jobs name, so, as for the database's, only a Secret its owner marked is taken.
LABEL_REGISTRY_SECRET = names.GROUP + "/registry-secret-for"

# Each worker's image cache (an emptyDir), which the jail plugin creates below and soperator-images fills.
CACHE_DIR = "/var/lib/soperator/images"
# The registries' credentials: the pull Secret, mounted root's 0400; the plugin hands it to the puller on a memfd.
REGISTRY_AUTH_MOUNT = "/etc/soperator/registry"
REGISTRY_AUTH_KEY = ".dockerconfigjson"
REGISTRY_AUTH_FILE = REGISTRY_AUTH_MOUNT + "/" + REGISTRY_AUTH_KEY
# The uid and gid that own the cache and run the pulls: no account in any image, never a job's (the plugin refuses
# it) nor a directory's (slurm/accounts.py). The plugin's default (spank_chroot/options.h SC_CONTAINER_OWNER_DEFAULT).
CACHE_OWNER = 64031
# The worker image's puller.
HELPER = "/usr/local/sbin/soperator-images"
