#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: finalizers
short_description: Release the soperator finalizer from SlurmClusters and NodeSets
version_added: 0.2.0
description:
  - Removes C(slurm.soperator.dev/finalizer) from every SlurmCluster and NodeSet in O(namespaces) (every
    namespace when empty). The operator puts it there so that a deleted cluster is torn down and a deleted NodeSet
    is drained first; once the operator is gone nothing would remove it and the resources could never be deleted.
  - The resources themselves, and everything their clusters run, are left alone.
author:
  - soperator.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - soperator.slurm.attributes
  - soperator.slurm.k8s_auth
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  state:
    description:
      - Only V(absent) (release the finalizers) is supported.
    type: str
    choices: [absent]
    default: absent
  namespaces:
    description:
      - Namespaces to look in; every namespace when empty.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Before removing the operator, let its resources go free
  soperator.slurm.finalizers:
    namespaces: [slurm]
    state: absent
"""

RETURN = r"""
released:
  description: The resources whose finalizer was (or in check mode would be) removed.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: SlurmCluster or NodeSet.
      type: str
    namespace:
      description: Its namespace.
      type: str
    name:
      description: Its name.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.soperator.slurm.plugins.module_utils.k8s.teardown import release_finalizers
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import (
    AUTH_ARG_SPEC,
    dynamic_client,
    require_kubernetes,
)


def argument_spec():
    spec = dict(state=dict(type="str", choices=["absent"], default="absent"),
                namespaces=dict(type="list", elements="str", default=[]))
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    require_kubernetes(module)
    try:
        released = release_finalizers(dynamic_client(module.params), module.params["namespaces"], module.check_mode)
    except KubernetesError as e:
        module.fail_json(msg=e.msg, **e.details)
    module.exit_json(changed=bool(released),
                     released=[{"kind": k, "namespace": ns, "name": n} for k, ns, n in released])


if __name__ == "__main__":
    main()
