#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_manifests
short_description: Render the Kubernetes manifests of a Slurm cluster from its SlurmCluster and NodeSets
version_added: 0.1.0
description:
  - Turns a SlurmCluster object and its NodeSet objects into the list of Kubernetes manifests that run the
    cluster (controller, login, workers, accounting, configuration, secrets to create once).
  - Pure computation on the host running the module; it does not contact the cluster. Feed the result to
    M(soperator.slurm.apply_manifests).
  - An invalid spec fails with the path of every offending field, for example C(spec.nodeSets[1].replicas).
author:
  - soperator.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - soperator.slurm.attributes
  - soperator.slurm.attributes.READ_ONLY
options:
  cluster:
    description:
      - The SlurmCluster object (C(apiVersion), C(kind), C(metadata), C(spec)), as found in the cluster or in a
        file.
    type: dict
    required: true
  nodesets:
    description:
      - The NodeSet objects of this cluster (worker groups).
    type: list
    elements: dict
    default: []
seealso:
  - module: soperator.slurm.apply_manifests
"""

EXAMPLES = r"""
- name: Render the cluster described in files
  soperator.slurm.cluster_manifests:
    cluster: "{{ lookup('ansible.builtin.file', 'cluster.yaml') | from_yaml }}"
    nodesets: "{{ lookup('ansible.builtin.file', 'nodesets.yaml') | from_yaml_all | list }}"
  register: rendered

- name: Apply them
  soperator.slurm.apply_manifests:
    manifests: "{{ rendered.manifests }}"
    prune:
      selector: "slurm.soperator.dev/cluster={{ rendered.cluster_name }}"
"""

RETURN = r"""
manifests:
  description: The Kubernetes objects of the cluster, in the order to apply them.
  returned: success
  type: list
  elements: dict
cluster_name:
  description: The SlurmCluster's C(metadata.name).
  returned: success
  type: str
  sample: demo
field:
  description: Path of the first invalid field.
  returned: failure on an invalid spec
  type: str
  sample: spec.nodeSets[1].replicas
errors:
  description: Every invalid field, with its path and what is wrong.
  returned: failure on an invalid spec
  type: list
  elements: dict
  contains:
    path:
      description: Path of the field.
      type: str
    message:
      description: What is wrong with it.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.render.cluster import render_cluster


def argument_spec():
    return dict(
        cluster=dict(type="dict", required=True),
        nodesets=dict(type="list", elements="dict", default=[]),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    cluster = module.params["cluster"]
    try:
        manifests = render_cluster(cluster, module.params["nodesets"])
    except SpecError as e:
        errors = getattr(e, "errors", None) or [e]
        module.fail_json(msg=str(e), field=e.path,
                         errors=[{"path": err.path, "message": err.message} for err in errors])
    module.exit_json(changed=False, manifests=manifests,
                     cluster_name=(cluster.get("metadata") or {}).get("name"))


if __name__ == "__main__":
    main()
