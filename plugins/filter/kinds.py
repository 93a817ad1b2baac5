# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``owned_kinds``: the kinds a Slurm cluster owns, from the collection's one table (module_utils/kinds.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import kinds


def owned_kinds(with_observed=False):
    table = kinds.OWNED + ((kinds.POD,) if with_observed else ())
    return [{"api_version": kinds.api_version(k), "kind": k.kind} for k in table]


class FilterModule(object):
    def filters(self):
        return {"owned_kinds": owned_kinds}
