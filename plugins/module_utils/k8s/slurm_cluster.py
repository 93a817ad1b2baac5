# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""The work of the ``slurm_cluster`` module (and of its action plugin, which runs it in-process): the module's
parameters to a definition intake (``definition.py``), a converge (``converger.py``) or a teardown
(``teardown.py``); every failure to a :class:`Failure` whose reason (``api/errors.py``) says whether a retry helps.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import time
from typing import Any, Callable, Dict, List, Mapping, Optional

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import definition as definitions
from ansible_collections.soperator.slurm.plugins.module_utils.api import errors as failures
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError, SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.apply import DryRunRefused
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.client import dynamic_client
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.converger import (
    Converger, InvalidDefinition, SecretMissing,
)
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.definition import apply_definition, check_definition
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.slurm_exec import (
    KubernetesExecTransport, PodTransport, SlurmError, Transport,
)
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.teardown import teardown
from ansible_collections.soperator.slurm.plugins.module_utils.types import NodeSet, SlurmCluster

# The module's parameters (its argument spec's), and what it returns.
Params = Mapping[str, Any]
Result = Dict[str, Any]


class Failure(Exception):
    """A converge failure for the module to report: ``reason`` (errors.*) decides retry; ``details`` are extra
    result keys (``field`` for an invalid definition)."""

    def __init__(self, msg: str, reason: str, **details: Any) -> None:
        super(Failure, self).__init__(msg)
        self.msg = msg
        self.reason = reason
        self.details = details


def _fail_spec(errors: SpecErrors | SpecError, prefix: str = "") -> Failure:
    errs = getattr(errors, "errors", None) or [errors]
    return Failure(prefix + "; ".join(str(e) for e in errs), failures.INVALID_SPEC, field=errs[0].path,
                   errors=[{"path": e.path, "message": e.message} for e in errs])


def execute(params: Params, check_mode: bool = False, diff: bool = False,
            on_secret: Optional[Callable[[str], None]] = None) -> Result:
    """Entry point of the module and of its action plugin: clients from the auth options, then :func:`run`."""
    try:
        dynamic = dynamic_client(params)
    except KubernetesError as e:
        raise Failure(e.msg, failures.UNAVAILABLE)
    rest = access.Rest(dynamic)
    namespace_of: Dict[str, str] = {}

    def transport(pod: str, container: str = "slurmctld") -> Transport:
        return KubernetesExecTransport(rest, namespace_of["ns"], pod, container)

    def bind(conv_namespace: str) -> None:
        namespace_of["ns"] = conv_namespace

    return run(dynamic, params, transport, check_mode=check_mode, diff=diff, on_secret=on_secret, bind=bind)


def run(client: access.Client, params: Params, slurm_transport: PodTransport, check_mode: bool = False,
        diff: bool = False, on_secret: Optional[Callable[[str], None]] = None,
        clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
        bind: Optional[Callable[[str], None]] = None) -> Result:
    """The ``slurm_cluster`` module's work (``params`` as its argument spec gives them); raises Failure."""
    try:
        return _run(client, params, slurm_transport, check_mode, diff, on_secret, clock, sleep, bind)
    except InvalidDefinition as e:
        raise _fail_spec(e.errors)
    except SpecError as e:
        raise _fail_spec(e)
    except SecretMissing as e:
        raise Failure(e.message, failures.DATA_MISSING)
    except DryRunRefused as e:  # a refusal no field could be told for (not expected: the converge maps them)
        raise Failure(e.msg, failures.INVALID_SPEC, status=e.details.get("status"))
    except KubernetesError as e:
        details = dict(e.details)
        status = details.pop("status", None)
        raise Failure(e.msg, failures.reason_of_status(status), status=status, **details)
    except SlurmError as e:
        raise Failure(e.msg, failures.UNAVAILABLE, **e.details)


def _run(client: access.Client, params: Params, slurm_transport: PodTransport, check_mode: bool, diff: bool,
         on_secret: Optional[Callable[[str], None]], clock: Callable[[], float], sleep: Callable[[float], None],
         bind: Optional[Callable[[str], None]]) -> Result:
    definition = params.get("definition")
    namespace, name = params.get("namespace"), params.get("name")
    cluster_doc: SlurmCluster | None = None
    nodeset_docs: List[NodeSet] = []
    try:
        policy = policies.normalize(params.get("policy"))
    except ValueError as e:
        raise Failure("policy: %s" % e, failures.INVALID_SPEC, field="policy")
    if definition:
        cluster_doc, nodeset_docs = definitions.split_definition(definition, namespace)
        namespace = cluster_doc["metadata"].get("namespace") or namespace or "default"
        name = cluster_doc["metadata"]["name"]
        cluster_doc["metadata"]["namespace"] = namespace
        for ns in nodeset_docs:
            ns["metadata"]["namespace"] = ns["metadata"].get("namespace") or namespace
        # The whole definition must be valid before anything is written (the pure part first: no request).
        specs.validate_cluster_with_nodesets(cluster_doc, nodeset_docs, policy=policy)
        if not params.get("resources_only") and params.get("state", "present") == "present":
            problems = definitions.direct_converge_errors(nodeset_docs)
            if problems:
                raise SpecErrors(problems)
    if not name or not namespace:
        raise Failure("give definition, or name and namespace", failures.INVALID_SPEC, field="name")
    if bind:
        bind(namespace)
    conv = Converger(client, namespace, name, params.get("field_manager") or "soperator.slurm", slurm_transport,
                     check_mode=check_mode, diff=diff, on_secret=on_secret, clock=clock, sleep=sleep,
                     nodeset_finalizer=params.get("nodeset_finalizer", False), policy=policy)
    if params.get("state", "present") == "absent":
        return teardown(conv, params)
    result: Result = {"changed": False, "name": name, "namespace": namespace}
    retire: List[str] = []
    if cluster_doc is not None:  # a definition was given
        check_definition(conv, cluster_doc, nodeset_docs)
        applied = apply_definition(conv, cluster_doc, nodeset_docs, check_mode, diff, on_secret)
        result["changed"] = applied["changed"]
        result["definition"] = applied["objects"]
        wanted = set(ns["metadata"]["name"] for ns in nodeset_docs)
        if params.get("prune_nodesets", True) and not (check_mode and conv.get_cr(names.CLUSTER_KIND, name) is None):
            retire = [ns["metadata"]["name"] for ns in conv.nodesets() if ns["metadata"]["name"] not in wanted]
        if params.get("resources_only"):
            for nodeset_name in retire:  # the operator drains them (its finalizer holds them until then)
                if not check_mode:
                    conv.api.delete(names.API_VERSION, names.NODESET_KIND, nodeset_name, namespace)
                result["changed"] = True
            result["retired"] = retire
            return result
        if check_mode and conv.get_cr(names.CLUSTER_KIND, name) is None:
            result["message"] = "the SlurmCluster would be created; its objects are rendered on the real run"
            return result
    converged = conv.converge(wait_timeout=params.get("wait_timeout", 0), wait_for_ready=params.get("wait", False),
                              retire=retire)
    converged["changed"] = converged["changed"] or result["changed"]
    result.update(converged)
    if params.get("wait") and not converged["ready"]:
        raise Failure("SlurmCluster %s/%s not ready after %ss: %s"
                      % (namespace, name, params.get("wait_timeout"), converged["message"]),
                      failures.UNAVAILABLE, pending=converged["pending"], phase=converged["phase"])
    return result
