# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The work of the ``jail_restore_job`` module: read the stored SlurmCluster and the labels of the Secrets it takes
(metadata only, as the converge reads them), and hand both to the pure decision (``plan/restore.py``). Reads only."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Any, Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.observe import marked_secrets
from ansible_collections.soperator.slurm.plugins.module_utils.plan import restore
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject


def restore_job(client: access.Client, params: Mapping[str, Any]) -> KubeObject:
    """The restore Job for ``params`` (the module's); raises SpecErrors (paths: the role's variables, or the
    SlurmCluster's fields) or KubernetesError."""
    try:
        policy = policies.normalize(params.get("policy"))
    except ValueError as e:
        raise SpecErrors([SpecError("jail_restore_policy", str(e))])
    api = access.Api(client)
    namespace, name = params["namespace"], params["cluster"]
    cluster = api.get(names.API_VERSION, names.CLUSTER_KIND, name, namespace,
                      what="get SlurmCluster %s/%s" % (namespace, name))
    if cluster is None:
        raise SpecErrors([SpecError("jail_restore_cluster", "SlurmCluster %s/%s does not exist" % (namespace, name))])
    return restore.restore_job(cluster, marked_secrets(api, namespace, cluster), policy, params["snapshot"],
                               params["path"], params["into"])
