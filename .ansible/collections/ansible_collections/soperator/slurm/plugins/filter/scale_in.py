# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters the cluster role uses around scale-in; the logic lives in module_utils/scale_in.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import scale_in


class FilterModule(object):
    def filters(self):
        return {
            "nodeset_resizes": scale_in.nodeset_resizes,
            "with_replicas": scale_in.with_replicas,
        }
