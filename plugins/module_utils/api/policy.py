# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer's policy: what a SlurmCluster or NodeSet may ask for that would make its author root on the
nodes. Pure.

The policy is NOT part of the API: it comes from whoever installs the collection (the cluster role's
``cluster_policy``, ``site.yml``'s ``soperator_policy``, the operator role's ``operator_policy``), so the author
of a resource cannot loosen it. Keys (all optional):

``allowed_host_path_prefixes``
    Node directories a jail sub-mount may use (``jail.subMounts[].hostPath`` equal to or below one). Default:
    none, every hostPath is refused. Host paths are read-only unless the sub-mount says ``readOnly: false``.
``allowed_registries``
    Image references every image must start with, at a path boundary: ``registry.example.com`` or
    ``registry.example.com/hpc``. An image without a registry is Docker Hub's (``docker.io/...``, and
    ``docker.io/library/...`` for a single name). Default: empty, any registry.
``allow_privileged_programs``
    Whether slurm.conf programs Slurm runs as root or SlurmUser (``Prolog``, ``Epilog``, ``RebootProgram``, ...,
    ``JobCompLoc`` of jobcomp/script and jobcomp/kafka, and ``spec.slurm.healthCheckProgram``) may be set, and
    another command than the default for the NCCL check (``spec.healthChecks.nccl.command``, run as SlurmUser).
    Default: true.
``allowed_program_prefixes``
    Directories those programs (and files they load as code) must be in (equal to or below one). Default:
    ``paths.IMAGE_PROGRAM_TREES``, the images' own trees (``/usr``, ``/bin``, ...), which no jail sub-mount
    may take. Where users write (``paths.USER_WRITABLE_TREES``) or a jail sub-mount is never allowed,
    whatever the prefixes.
``allowed_database_hosts``
    Hosts an External accounting database may be at (``spec.accounting.database.host``): a host name or address,
    or ``*.example.com`` for any host under that domain. Default: empty, any host.
``allowed_backup_endpoints``
    Where the jail's backups may go (``spec.jail.backup.repository``): URLs an S3 repository's address
    (``endpoint/bucket/prefix``) or a REST repository's ``url`` must equal or be below, at a path boundary
    (``https://s3.example.com``, ``https://backup.example.com:8000/jails``; scheme, host and port as written). The
    backups read every user's files and the cluster's author holds the repository's password, so a repository is where
    the whole jail can be read. A ``claim`` repository stays in the cluster's namespace and is always allowed. Default:
    empty, any endpoint.
``allowed_directory_uris``
    Directories a cluster may take its users from (``spec.identity.ldap.uris``): LDAP URIs, whose host may be
    ``*.example.com`` for any host under that domain; a URI without a port allows the scheme's own (389, 636)
    only (``ldaps://ldap.example.org``, ``ldaps://*.example.org:1636``). A directory says who every user is: its
    author could otherwise hand the cluster users of their own. Default: empty, any directory.
``allow_plain_ldap``
    Whether a directory may be read over plain LDAP (an ``ldap://`` URI without ``tls.startTLS``): nothing
    authenticates its answers, so anyone on the path could hand the cluster users of their own. Default: false.
``min_directory_id``
    The lowest uid and gid a directory may give (``spec.identity.ldap.idRange.min`` at or above it), e.g. above the
    jail's own users. Default: 1000; never below (the images' system accounts are there).
``allowed_job_registries``
    Registries, or repository prefixes, container steps may pull images from (``registry.example.com``,
    ``registry.example.com:5000/team``): every ``spec.containers.registries`` entry must equal or be below one, at a
    path boundary, and with containers on, that list may not be empty (empty would mean any registry). What a job
    pulls runs on the nodes, as the job's user, and the workers send the pull Secret to those registries. Default:
    empty, any registry.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import List, Mapping, Sequence, TypedDict, cast

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import identity, schema
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys, paths
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.types import NodeSet, SlurmCluster, Spec


class Policy(TypedDict):
    """The installer's policy as :func:`normalize` returns it: every key (see the module's docstring), each checked,
    its default filled in."""

    allowed_host_path_prefixes: List[str]
    allowed_registries: List[str]  # no trailing '/'
    allow_privileged_programs: bool
    allowed_program_prefixes: List[str]
    allowed_database_hosts: List[str]  # lowercase
    allowed_backup_endpoints: List[str]  # scheme and host lowercase, no trailing '/'
    allowed_directory_uris: List[str]  # lowercase, no trailing '/'
    allow_plain_ldap: bool
    min_directory_id: int
    allowed_job_registries: List[str]  # no trailing '/', host lowercase


KEYS = ("allowed_host_path_prefixes", "allowed_registries", "allow_privileged_programs", "allowed_program_prefixes",
        "allowed_database_hosts", "allowed_backup_endpoints", "allowed_directory_uris", "allow_plain_ldap",
        "min_directory_id", "allowed_job_registries")
DEFAULTS: Policy = {"allowed_host_path_prefixes": [], "allowed_registries": [], "allow_privileged_programs": True,
                    "allowed_program_prefixes": list(paths.IMAGE_PROGRAM_TREES), "allowed_database_hosts": [],
                    "allowed_backup_endpoints": [], "allowed_directory_uris": [], "allow_plain_ldap": False,
                    "min_directory_id": schema.DIRECTORY_ID_MIN, "allowed_job_registries": []}
_ABSOLUTE = re.compile(r"/|(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)+")
_REGISTRY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*(/[a-z0-9][a-z0-9._-]*)*")
_DB_HOST = re.compile(r"(\*\.)?" + schema.DB_HOST_PATTERN.strip("^$"))
_ENDPOINT = re.compile(schema.BACKUP_URL_PATTERN.strip("^$"))
_JOB_REGISTRY = re.compile(schema.JOB_REGISTRY_PATTERN)
NCCL_DEFAULT_COMMAND = schema.health_checks_schema()["properties"]["nccl"]["properties"]["command"]["default"]
# Who sets the policy, for the error messages.
WHERE = "the installer's policy (cluster_policy of the cluster role, operator_policy of the operator)"


def normalize(policy: Mapping[str, object] | None) -> Policy:
    """The policy with defaults; ValueError naming the key when it is malformed."""
    policy = dict(policy or {})
    unknown = sorted(set(policy) - set(KEYS))
    if unknown:
        raise ValueError("unknown policy key(s) %s (known: %s)" % (", ".join(unknown), ", ".join(KEYS)))
    result: dict[str, object] = dict(DEFAULTS)
    result.update((k, v) for k, v in policy.items() if v is not None)
    prefixes = result["allowed_host_path_prefixes"]
    if not isinstance(prefixes, list) or not all(isinstance(p, str) and _ABSOLUTE.fullmatch(p) for p in prefixes):
        raise ValueError("allowed_host_path_prefixes must be a list of absolute paths without '.' components")
    registries = result["allowed_registries"]
    if not isinstance(registries, list) or not all(isinstance(r, str) and _REGISTRY.fullmatch(r.rstrip("/"))
                                                   for r in registries):
        raise ValueError("allowed_registries must be a list of registries or repository prefixes "
                         "(registry.example.com, registry.example.com/hpc)")
    result["allowed_registries"] = [r.rstrip("/") for r in registries]
    if not isinstance(result["allow_privileged_programs"], bool):
        raise ValueError("allow_privileged_programs must be a boolean")
    programs = result["allowed_program_prefixes"]
    if not isinstance(programs, list) or not all(isinstance(p, str) and _ABSOLUTE.fullmatch(p) for p in programs):
        raise ValueError("allowed_program_prefixes must be a list of absolute paths without '.' components")
    for prefix in programs:
        for tree in paths.USER_WRITABLE_TREES:
            if paths.under(prefix, tree):
                raise ValueError("allowed_program_prefixes: %s is where users write (%s): no program there is ever "
                                 "allowed" % (prefix, tree))
    result["allowed_program_prefixes"] = list(programs)
    hosts = result["allowed_database_hosts"]
    if not isinstance(hosts, list) or not all(isinstance(h, str) and _DB_HOST.fullmatch(h) for h in hosts):
        raise ValueError("allowed_database_hosts must be a list of host names or addresses, or *.domain")
    result["allowed_database_hosts"] = [h.lower() for h in hosts]
    endpoints = result["allowed_backup_endpoints"]
    if not isinstance(endpoints, list) or not all(
            isinstance(e, str) and _ENDPOINT.fullmatch(e) and not _dotted(e) for e in endpoints):
        raise ValueError("allowed_backup_endpoints must be a list of http(s) URLs without credentials or '.' "
                         "components (https://s3.example.com, https://backup.example.com:8000/jails)")
    result["allowed_backup_endpoints"] = [_url_key(e) for e in endpoints]
    _normalize_directory(result)
    job_registries = result["allowed_job_registries"]
    if not isinstance(job_registries, list) or not all(
            isinstance(r, str) and _JOB_REGISTRY.fullmatch(r.rstrip("/")) for r in job_registries):
        raise ValueError("allowed_job_registries must be a list of registries or repository prefixes "
                         "(registry.example.com, registry.example.com:5000/team)")
    result["allowed_job_registries"] = [job_registry_key(r) for r in job_registries]
    return cast(Policy, result)  # every key checked above


def _normalize_directory(result: dict[str, object]) -> None:
    uris = result["allowed_directory_uris"]
    if not isinstance(uris, list) or not all(isinstance(u, str) and identity.uri_pattern_parts(u) for u in uris):
        raise ValueError("allowed_directory_uris must be a list of LDAP URIs (ldaps://ldap.example.org, "
                         "ldaps://*.example.org:1636): ldap:// or ldaps://, a host, address or *.domain, an optional "
                         "port, nothing else")
    result["allowed_directory_uris"] = [u.lower().rstrip("/") for u in uris]
    if not isinstance(result["allow_plain_ldap"], bool):
        raise ValueError("allow_plain_ldap must be a boolean")
    lowest = result["min_directory_id"]
    if isinstance(lowest, bool) or not isinstance(lowest, int) or identity.id_range_problem(
            {"min": lowest, "max": lowest}) or lowest > schema.DIRECTORY_ID_LIMIT:
        raise ValueError("min_directory_id must be a uid and gid no image's account has (%d or above, up to %d; "
                         "not SlurmUser's or nobody's)" % (schema.DIRECTORY_ID_MIN, schema.DIRECTORY_ID_LIMIT))


def _dotted(url: str) -> bool:
    """Whether the path of ``url`` has a '.' or '..' component (or one spelled with %-escapes): it would leave the
    prefix it seems to be below."""
    path = url.split("://", 1)[-1].partition("/")[2]
    return any(c in (".", "..") or "%" in c for c in path.split("/"))


def _url_key(url: str) -> str:
    """``url`` as compared: scheme and host lowercased, no trailing '/'."""
    scheme, dummy, rest = url.partition("://")
    authority, dummy, path = rest.partition("/")
    return ("%s://%s/%s" % (scheme.lower(), authority.lower(), path)).rstrip("/")


def backup_repository_address(cluster: SlurmCluster) -> tuple[str, str] | None:
    """``(field, address)`` of where a validated cluster's backups go (an S3 repository's endpoint/bucket/prefix, a
    REST repository's url), or None: no backups, or a claim of the namespace."""
    backup = cluster["spec"]["jail"].get("backup") or {}
    repository = backup.get("repository") or {}
    if "s3" in repository:
        s3 = repository["s3"]
        return ("spec.jail.backup.repository.s3.endpoint", "%s/%s/%s" % (
            s3["endpoint"].rstrip("/"), s3["bucket"], s3.get("prefix") or cluster["metadata"]["name"]))
    if "rest" in repository:
        return "spec.jail.backup.repository.rest.url", repository["rest"]["url"]
    return None


def backup_endpoint_allowed(address: str, allowed: Sequence[str]) -> bool:
    """Whether the repository ``address`` equals or is below one of ``allowed`` (normalized), at a path boundary."""
    if not allowed:
        return True
    if _dotted(address):
        return False
    key = _url_key(address)
    return any(key == a or key.startswith(a + "/") for a in allowed)


def job_registry_key(prefix: str) -> str:
    """A registry or repository prefix as compared: its host lowercased, no trailing '/'."""
    host, sep, path = prefix.rstrip("/").partition("/")
    return host.lower() + sep + path


def job_registry_allowed(prefix: str, allowed: Sequence[str]) -> bool:
    """Whether the registry or repository prefix ``prefix`` equals or is below one of ``allowed`` (normalized)."""
    key = job_registry_key(prefix)
    return not allowed or any(key == a or key.startswith(a + "/") for a in allowed)


def _job_registry_errors(spec: Spec, policy: Policy) -> Errors:
    """spec.containers.registries outside the policy's, or empty (any) where the policy restricts them."""
    containers = spec.get("containers") or {}
    allowed = policy["allowed_job_registries"]
    if not containers.get("enabled") or not allowed:
        return []
    registries = containers.get("registries") or []
    if not registries:
        return [SpecError("spec.containers.registries", "jobs would pull from any registry; %s allows only %s "
                          "(allowed_job_registries): list the registries jobs may pull from"
                          % (WHERE, ", ".join(allowed)))]
    return [SpecError("spec.containers.registries[%d]" % index, "registry %s is not allowed by %s: what a job pulls "
                      "runs on the nodes, and the workers send the pull Secret there; allowed: %s "
                      "(allowed_job_registries)" % (registry, WHERE, ", ".join(allowed)))
            for index, registry in enumerate(registries) if not job_registry_allowed(registry, allowed)]


def database_host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether ``host`` is one of ``allowed`` (normalized), or under one of its ``*.domain`` entries."""
    host = host.lower()
    return not allowed or any(host == a or (a.startswith("*.") and host.endswith(a[1:])) for a in allowed)


def qualified_image(image: str) -> str:
    """``image`` with its registry spelled out, the way a container runtime resolves it."""
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return image
    return "docker.io/" + (image if sep else "library/" + image)


def image_allowed(image: str, registries: Sequence[str]) -> bool:
    if not registries:
        return True
    full = qualified_image(image)
    return any(full.startswith(prefix + "/") for prefix in registries)


def _images(cluster: SlurmCluster, nodesets: Sequence[NodeSet]) -> list[tuple[str, str]]:
    """(path, image) of every image a cluster runs (defaults included: they are pulled too)."""
    images = cluster["spec"]["images"]
    found = [("spec.images.%s" % key, images[key]) for key in sorted(names.IMAGE_REPOSITORIES) if images.get(key)]
    for ns in nodesets:
        if ns["spec"].get("image"):
            found.append(("nodesets[%s].spec.image" % ns["metadata"]["name"], ns["spec"]["image"]))
    return found


def check(cluster: SlurmCluster, nodesets: Sequence[NodeSet], policy: Policy) -> Errors:
    """Problems of a validated, defaulted cluster and its NodeSets against ``policy`` (normalized)."""
    errors = []
    spec = cluster["spec"]
    prefixes = policy["allowed_host_path_prefixes"]
    for index, sub in enumerate(spec["jail"].get("subMounts") or ()):
        path = sub.get("hostPath")
        if path is not None and not any(paths.under(path, p) for p in prefixes):
            errors.append(SpecError(
                "spec.jail.subMounts[%d].hostPath" % index,
                "host path %s is not allowed by %s: %s" % (
                    path, WHERE, "allowed prefixes: %s" % ", ".join(prefixes) if prefixes else
                    "no host path is allowed (allowed_host_path_prefixes is empty)")))
    database = spec["accounting"]["database"]
    if spec["accounting"]["enabled"] and database["type"] == "External" and not database_host_allowed(
            database["host"], policy["allowed_database_hosts"]):
        errors.append(SpecError("spec.accounting.database.host", "database host %s is not allowed by %s: "
                                "allowed hosts: %s" % (database["host"], WHERE,
                                                       ", ".join(policy["allowed_database_hosts"]))))
    repository = backup_repository_address(cluster)
    if repository is not None and not backup_endpoint_allowed(repository[1], policy["allowed_backup_endpoints"]):
        errors.append(SpecError(repository[0], "backup repository %s is not allowed by %s: the backups send every "
                                "user's files there; allowed: %s (allowed_backup_endpoints)" % (
                                    repository[1], WHERE, ", ".join(policy["allowed_backup_endpoints"]))))
    errors.extend(_directory_errors(spec, policy))
    errors.extend(_job_registry_errors(spec, policy))
    registries = policy["allowed_registries"]
    for path, image in _images(cluster, nodesets):
        if not image_allowed(image, registries):
            errors.append(SpecError(path, "image %s (%s) is not from a registry allowed by %s: %s"
                                    % (image, qualified_image(image), WHERE, ", ".join(registries))))
    errors.extend(_program_errors(spec, policy))
    return errors


def _directory_errors(spec: Spec, policy: Policy) -> Errors:
    """A directory's URIs the policy does not allow, plain LDAP unless allowed, an idRange below its lowest id."""
    ldap = (spec.get("identity") or {}).get("ldap")
    if not ldap:
        return []
    errors = []
    allowed = policy["allowed_directory_uris"]
    start_tls = bool((ldap.get("tls") or {}).get("startTLS"))
    for index, uri in enumerate(ldap["uris"]):
        path = "%s.uris[%d]" % (identity.FIELD, index)
        if not identity.uri_allowed(uri, allowed):
            errors.append(SpecError(path, "directory %s is not allowed by %s: the directory says who every user is; "
                                    "allowed directories: %s (allowed_directory_uris)" % (uri, WHERE,
                                                                                          ", ".join(allowed))))
        elif uri.lower().startswith("ldap://") and not start_tls and not policy["allow_plain_ldap"]:
            errors.append(SpecError(path, "directory %s is plain LDAP (no tls.startTLS): nothing authenticates its "
                                    "answers, anyone on the path could hand the cluster users of their own; %s does "
                                    "not allow it (allow_plain_ldap: false): use ldaps:// or tls.startTLS"
                                    % (uri, WHERE)))
    low = ldap["idRange"]["min"]
    if low < policy["min_directory_id"]:
        errors.append(SpecError(identity.FIELD + ".idRange.min", "%d is below the lowest id %s lets a directory give, "
                                "%d (min_directory_id): the ids below are the jail's own users'" % (
                                    low, WHERE, policy["min_directory_id"])))
    return errors


def _program_errors(spec: Spec, policy: Policy) -> Errors:
    """Programs Slurm runs as root or SlurmUser, and files it loads as code: refused altogether, or outside the
    allowed prefixes."""
    slurm = spec["slurm"]
    slurm_conf = slurm.get("slurmConf") or {}
    found = [("spec.slurm.slurmConf.%s" % key, key, str(slurm_conf[key]),
              ("runs as " if use == "program" else "is loaded as code by ") + who)
             for key, (use, who) in sorted(config_keys.file_keys(slurm_conf).items()) if use in ("program", "loaded")]
    if slurm.get("healthCheckProgram"):
        found.append(("spec.slurm.healthCheckProgram", "HealthCheckProgram", slurm["healthCheckProgram"],
                      "runs as root on every node"))
    command = ((spec.get("healthChecks") or {}).get("nccl") or {}).get("command")
    if command and command != NCCL_DEFAULT_COMMAND:
        found.append(("spec.healthChecks.nccl.command", "the NCCL check's command", command,
                      "runs as SlurmUser on every tested node"))
    errors = []
    prefixes = policy["allowed_program_prefixes"]
    for path, what, value, who in found:
        if not policy["allow_privileged_programs"]:
            if path == "spec.healthChecks.nccl.command":
                errors.append(SpecError(path, "the NCCL check runs its command as SlurmUser on every tested node; "
                                        "%s allows only the default %s (allow_privileged_programs: false)"
                                        % (WHERE, NCCL_DEFAULT_COMMAND)))
            else:
                errors.append(SpecError(path, "%s %s; %s does not allow such programs "
                                        "(allow_privileged_programs: false)" % (what, who, WHERE)))
        elif not any(paths.under(value, prefix) for prefix in prefixes):
            errors.append(SpecError(path, "%s %s: %s is not where the images keep programs; %s allows %s "
                                    "(allowed_program_prefixes)" % (
                                        what, who, value, WHERE,
                                        ", ".join(prefixes) if prefixes else "none")))
    return errors
