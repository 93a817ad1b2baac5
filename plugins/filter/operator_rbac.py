# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``operator_rbac_rules``: the operator's RBAC rules, from the collection's one table of owned kinds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils.kinds import NODE_CORDON_RULES, NODE_RULES, operator_rules


def operator_rbac_rules(allow_data_deletion=False):
    return operator_rules(bool(allow_data_deletion))


def operator_node_rbac_rules(read_nodes=False, cordon_nodes=False):
    """The opt-in cluster-scoped rules on Nodes (spec.healthChecks.kubernetesNodes); none unless asked for."""
    return [dict(rule) for rule in (NODE_RULES if read_nodes else []) + (NODE_CORDON_RULES if cordon_nodes else [])]


class FilterModule(object):
    def filters(self):
        return {"operator_rbac_rules": operator_rbac_rules, "operator_node_rbac_rules": operator_node_rbac_rules}
