# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception type of the pure core: a bad spec, with the path of the offending field."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from typing import Iterable, List


class SpecError(ValueError):
    """An invalid SlurmCluster/NodeSet spec.

    ``path`` is the JSON-ish path of the field (``spec.partitions[1].name``) so modules, roles and the
    operator can all report exactly which field is wrong.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super(SpecError, self).__init__("%s: %s" % (path, message))


class SpecErrors(SpecError):
    """Several SpecError at once, so a user fixes every problem in one pass."""

    def __init__(self, errors: Iterable[SpecError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super(SpecErrors, self).__init__(first.path, first.message)
        self.args = ("; ".join(str(e) for e in self.errors),)

    def __str__(self) -> str:
        return self.args[0]


# What every rule of the validator appends to, and what SpecErrors carries: each problem with its field path.
Errors = List[SpecError]


# Why a reconcile failed: the reconciler reports one of these as ``reason`` with its failure, and the operator
# decides from it alone whether to retry soon (:func:`retryable`). No message is ever parsed for that.
INVALID_SPEC = "InvalidSpec"      # the user's definition: nothing a retry fixes; ``field`` names it
FORBIDDEN = "Forbidden"           # RBAC refused a request: retried slowly (an admin may grant it)
CONFLICT = "Conflict"             # another field manager owns a field, or a write raced: retried
UNAVAILABLE = "Unavailable"       # the API or slurmctld did not answer: retried
API_ERROR = "ApiError"            # any other refusal by the API server: retried
NOT_FOUND = "NotFound"            # the object is gone: nothing to do until it is recreated
DATA_MISSING = "DataMissing"      # a key Secret is gone while pods run with its keys: restore it (retried slowly)

PERMANENT_REASONS = (INVALID_SPEC, NOT_FOUND)


def reason_of_status(status: int | None) -> str:
    """The failure reason of an HTTP status from the API server (0: no answer at all)."""
    if not status:
        return UNAVAILABLE
    if status == 403:
        return FORBIDDEN
    if status == 404:
        return NOT_FOUND
    if status == 409:
        return CONFLICT
    if status in (422, 400):
        return INVALID_SPEC
    if status == 429 or status >= 500:
        return UNAVAILABLE
    return API_ERROR


def retryable(reason: str) -> bool:
    """Whether a failure of this reason may go away by itself (retry with backoff) or needs a spec change."""
    return reason not in PERMANENT_REASONS
