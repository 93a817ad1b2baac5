# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The access layer's one error mapping (``access.py`` raises through it and re-exports it): every failure of a request
becomes a :class:`KubernetesError`, of the class that says what the caller may do about it: :class:`Transient` (the
API unreachable, 429, 5xx: try again), :class:`Conflict` (409: someone else wrote first, or the object exists),
:class:`Forbidden` (401, 403), :class:`Invalid` (400, 422: the request itself is refused) and :class:`NotFound`
(404). Its message names what was asked. Of the ``kubernetes`` library only its exception class is used here.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json
from typing import Any, Callable, TypeVar

from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

try:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error
except ImportError:  # a module reports the missing library before it builds a client; this file stays importable

    class ApiException(Exception):  # type: ignore[no-redef]
        status = None
        reason = None
        body = None

    class Urllib3Error(Exception):  # type: ignore[no-redef]
        pass

T = TypeVar("T")


class KubernetesError(Exception):
    """A request to the Kubernetes API failed. ``msg`` names what was asked; ``details`` are extra result keys for
    ``fail_json`` (``status``, object, fields, managers...); ``server_message`` and ``body`` are the API server's
    answer (its message, the decoded Status), when it answered."""

    def __init__(self, msg: str, server_message: str | None = None, body: KubeObject | None = None,
                 **details: Any) -> None:
        super(KubernetesError, self).__init__(msg)
        self.msg = msg
        self.details = details
        self.server_message = server_message
        self.body = body

    @property
    def status(self) -> int | None:
        return self.details.get("status")


class Transient(KubernetesError):
    """The API could not be reached, or answered 429 or 5xx: the same request may succeed later."""


class Conflict(KubernetesError):
    """409: another writer won an optimistic-concurrency race, the object already exists, or a field manager
    owns a field the request sets."""


class Forbidden(KubernetesError):
    """401 or 403: not allowed."""


class Invalid(KubernetesError):
    """400 or 422: the API server refuses the request itself (validation, admission, an immutable field)."""


class NotFound(KubernetesError):
    """404: no such object (or no such kind served)."""


_BY_STATUS = {400: Invalid, 401: Forbidden, 403: Forbidden, 404: NotFound, 409: Conflict, 422: Invalid,
              429: Transient}


def _decoded(body: Any) -> KubeObject | None:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        decoded = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def api_message(exc: BaseException) -> str:
    """The API server's message in an ApiException (its Status), else its reason."""
    body = _decoded(getattr(exc, "body", None))
    if body and body.get("message"):
        return str(body["message"])
    return str(getattr(exc, "reason", None) or exc)


def error(what: str, exc: BaseException) -> KubernetesError:
    """The :class:`KubernetesError` for ``exc`` raised while doing ``what`` (a KubernetesError passes as it is): an
    API server's answer (an ApiException, a websocket's refused handshake) by its status, anything else as the API
    not reached."""
    if isinstance(exc, KubernetesError):
        return exc
    code = getattr(exc, "status_code", None)  # websocket-client's WebSocketBadStatusException: a refused exec
    if isinstance(exc, ApiException) and getattr(exc, "status", None):
        status = int(exc.status)
        message = api_message(exc)
        body = _decoded(exc.body)
    elif isinstance(code, int):
        status = code
        body = _decoded(getattr(exc, "resp_body", None))
        message = str((body or {}).get("message") or exc)
    else:
        return Transient("%s: cannot reach the Kubernetes API: %s" % (what, exc))
    cls = _BY_STATUS.get(status, Transient if status >= 500 else KubernetesError)
    return cls("%s: %s" % (what, message), server_message=message, body=body, status=status)


def call(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, its library and transport errors raised as :func:`error` maps them."""
    try:
        return fn(*args, **kwargs)
    except (ApiException, Urllib3Error, OSError) as e:
        raise error(what, e)


def describe(exc: BaseException) -> str:
    """One line for a failure: status and the server's message (not the headers)."""
    if isinstance(exc, KubernetesError):
        return "(%s) %s" % (exc.status, exc.server_message) if exc.status else exc.msg
    if isinstance(exc, ApiException):
        return "(%s) %s" % (exc.status, api_message(exc))
    return str(exc)
