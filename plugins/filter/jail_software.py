# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters ``jail_software_plan`` (the role jail_software's variables judged as a whole, with the Slurm client paths
the jail's own list names) and ``jail_software_missing`` (the Debian packages dpkg does not have): api/jail_software.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils.api import jail_software
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths


def jail_software_plan(request, slurm_paths="", modulefiles_dir=jail_software.MODULEFILES_DIR):
    return jail_software.plan(dict(request or {}), paths.image_slurm_paths(slurm_paths), modulefiles_dir)


def jail_software_missing(packages, dpkg_output=""):
    return jail_software.missing_packages(list(packages or []), dpkg_output)


class FilterModule(object):
    def filters(self):
        return {"jail_software_plan": jail_software_plan, "jail_software_missing": jail_software_missing}
