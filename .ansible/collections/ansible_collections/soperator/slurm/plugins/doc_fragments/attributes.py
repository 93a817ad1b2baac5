# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """What every module declares about check mode, diff mode and idempotency (the levels are set per module)."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a prediction of C(changed) without modifying the cluster.
  diff_mode:
    description: Returns details on what changed (or would change in check mode) when run with C(--diff).
  idempotent:
    description:
      - When run twice in a row outside check mode with the same arguments, the second run reports no change.
      - This assumes the objects were not changed by someone else in between.
"""

    # For modules that only compute something: use together with DOCUMENTATION.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This module does not change anything, so it runs the same in check mode.
  diff_mode:
    support: N/A
    details:
      - This module does not change anything.
  idempotent:
    support: full
    details:
      - This module does not change anything.
"""
