# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception type of the pure core: a bad spec, with the path of the offending field."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class SpecError(ValueError):
    """An invalid SlurmCluster/NodeSet spec.

    ``path`` is the JSON-ish path of the field (``spec.partitions[1].name``) so modules, roles and the
    operator can all report exactly which field is wrong.
    """

    def __init__(self, path, message):
        self.path = path
        self.message = message
        super(SpecError, self).__init__("%s: %s" % (path, message))


class SpecErrors(SpecError):
    """Several SpecError at once, so a user fixes every problem in one pass."""

    def __init__(self, errors):
        self.errors = list(errors)
        first = self.errors[0]
        super(SpecErrors, self).__init__(first.path, first.message)
        self.args = ("; ".join(str(e) for e in self.errors),)

    def __str__(self):
        return self.args[0]
