#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: jail_restore_job
short_description: Judge a restore of a SlurmCluster's jail and render its Job
version_added: 0.2.0
description:
  - The role M(soperator.slurm.jail_restore)'s judgement, before anything is written. Reads the stored SlurmCluster
    O(namespace)/O(cluster) and the labels of the Secrets its backups take (metadata only, never their values), and
    returns the restore Job in RV(job); it creates nothing.
  - "Refuses what the cluster's converge would refuse, with the converge's own function and messages: the
    installer's O(policy) (the backup image's registry, the repository's endpoint, ...) and the Secrets' marks
    (C(slurm.soperator.dev/backup-secret-for=<cluster>)). RV(field) names the SlurmCluster's field."
  - "Refuses a bad request naming the role's variable (C(jail_restore_snapshot), C(jail_restore_path),
    C(jail_restore_into)): in place only while the cluster is in maintenance, and never into the path itself or a
    directory above it."
author:
  - soperator.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - soperator.slurm.attributes
  - soperator.slurm.attributes.READ_ONLY
  - soperator.slurm.k8s_auth
options:
  cluster:
    description: Name of the SlurmCluster.
    type: str
    required: true
  namespace:
    description: Its namespace.
    type: str
    default: default
  snapshot:
    description: The restic snapshot id, or C(latest).
    type: str
    default: latest
  path:
    description: A path of the jail to restore; empty for the whole jail.
    type: str
    default: ""
  into:
    description:
      - A new directory of the jail to restore into; empty for in place.
      - The restore Job refuses one that exists or is reached through a symlink, and hands it over only once it is
        complete.
    type: str
    default: ""
  policy:
    description:
      - "The installer's policy, with the keys and defaults of
        M(soperator.slurm.slurm_cluster)'s O(soperator.slurm.slurm_cluster#module:policy) (the same
        C(soperator_policy) C(site.yml) converges with); an unknown key is refused."
    type: dict
    default: {}
seealso:
  - module: soperator.slurm.slurm_cluster
"""

EXAMPLES = r"""
- name: Judge the request and render the restore Job
  soperator.slurm.jail_restore_job:
    cluster: demo
    namespace: slurm
    snapshot: latest
    path: /home/alice
    into: /restore/alice
    policy: "{{ soperator_policy }}"
  register: judged

# The role soperator.slurm.jail_restore then creates judged.job (kubernetes.core.k8s) and waits for it.
- name: Show its name
  ansible.builtin.debug:
    msg: "{{ judged.job.metadata.name }}"
"""

RETURN = r"""
job:
  description: The restore Job (batch/v1), named after the request.
  returned: success
  type: dict
field:
  description: The first refused field of the SlurmCluster (C(spec.images.backup)), or the role's variable.
  returned: failure on a refusal
  type: str
  sample: spec.jail.backup.passwordSecretRef.name
errors:
  description: Every refusal, with its path and what is wrong.
  returned: failure on a refusal
  type: list
  elements: dict
  contains:
    path:
      description: The field or variable.
      type: str
    message:
      description: What is wrong with it.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import (
    AUTH_ARG_SPEC, dynamic_client, require_kubernetes,
)
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.restore import restore_job


def argument_spec():
    spec = dict(
        cluster=dict(type="str", required=True),
        namespace=dict(type="str", default="default"),
        snapshot=dict(type="str", default="latest"),
        path=dict(type="str", default=""),
        into=dict(type="str", default=""),
        policy=dict(type="dict", default={}),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    require_kubernetes(module)
    try:
        job = restore_job(dynamic_client(module.params), module.params)
    except SpecErrors as e:
        module.fail_json(msg="the restore is refused: %s" % e, field=e.errors[0].path,
                         errors=[{"path": err.path, "message": err.message} for err in e.errors])
    except KubernetesError as e:
        module.fail_json(msg=e.msg, **e.details)
    module.exit_json(changed=False, job=job)


if __name__ == "__main__":
    main()
