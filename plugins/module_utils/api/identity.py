# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Users and groups from a directory (``spec.identity``): the rules CEL cannot judge (distinguished names, URIs),
the Python twins of its CEL rules, and what the sssd sidecar's look at the directory means for the SlurmCluster (the
condition ``IdentityReady``); the Secrets it takes are ``values.identity_secret_refs``, checked with the others
marked for a cluster by ``references.marked_secret_errors``. Pure.

How it runs: every pod of the cluster gets an sssd sidecar (``render/identity.py``) whose sssd.conf is rendered by
``render/sssd_conf.py`` and whose entrypoint checks the directory (bind, search bases) and writes one line,
``<Reason> <sssd.conf key> <what it found>``, to ``names.IDENTITY_STATUS_FILE``; the converge reads the controller's
(:data:`STATUS_COMMAND`) and turns it into the condition with :func:`condition`.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Callable, Sequence

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import accounts
from ansible_collections.soperator.slurm.plugins.module_utils.types import Spec

FIELD = "spec.identity.ldap"

# sssd.conf keys rendered from a field, and the field: the sidecar names the key in what it found (:func:`condition`
# turns the key back into the field for the SlurmCluster's IdentityReady condition).
KEY_FIELDS = {
    "ldap_uri": FIELD + ".uris",
    "ldap_search_base": FIELD + ".baseDN",
    "ldap_user_search_base": FIELD + ".userBaseDN",
    "ldap_group_search_base": FIELD + ".groupBaseDN",
    "ldap_default_bind_dn": FIELD + ".bindDN",
    "ldap_default_authtok": FIELD + ".bindPasswordSecretRef",
    "ldap_tls_cacert": FIELD + ".tls.caSecretRef",
    "ldap_id_use_start_tls": FIELD + ".tls.startTLS",
    "ldap_schema": FIELD + ".schema",
    "ldap_user_ssh_public_key": FIELD + ".sshPublicKeyAttribute",
    "min_id": FIELD + ".idRange.min",
    "max_id": FIELD + ".idRange.max",
}

CONDITION = "IdentityReady"
# The sidecar that writes the status, and the fixed command the converge reads it with (in the controller's pod).
CONTAINER = "sssd"
STATUS_COMMAND = ["cat", names.IDENTITY_STATUS_FILE]
# What the sidecar may report (images/lib/soperator-entrypoint, identity_check), and what each means.
REASONS = {
    "Ready": "the directory answers",
    "BindPasswordMissing": "the Secret of the bind password has no such key, or does not exist",
    "InvalidBindPassword": "the bind password cannot be used",
    "CertificateAuthorityMissing": "the Secret of the CA has no such key, or does not exist",
    "DirectoryUnreachable": "no URI answers",
    "CertificateRefused": "the directory's certificate does not chain to the CA, or does not name the host",
    "BindRefused": "the directory refused the bind",
    "BaseDNNotFound": "a search base does not exist on the directory, or the bind may not read it",
    "DirectoryError": "the directory answered with an error",
}
# sssd.conf keys whose problem is the pair of fields: a refused bind is the DN or its password.
_KEY_FIELDS = dict(KEY_FIELDS, ldap_default_bind_dn=FIELD + ".bindDN and " + FIELD + ".bindPasswordSecretRef")
_STATUS = re.compile(r"^([A-Z][A-Za-z]+) (-|[a-z_]+) (.*)$")


def enabled(cluster_spec: Spec | None) -> bool:
    return bool(((cluster_spec or {}).get("identity") or {}).get("ldap"))


# ------------------------------------------------------------------------------------------------ CEL twins
def _error(path: str, key: str, message: str) -> Errors:
    return [SpecError("%s.%s" % (path, key) if key else path, message)]


def _bind_pair(ldap: Spec, path: str) -> Errors:
    if ("bindDN" in ldap) != ("bindPasswordSecretRef" in ldap):
        return _error(path, "", schema.IDENTITY_RULES["bind_pair"])
    return []


def _starttls(ldap: Spec) -> bool:
    return bool((ldap.get("tls") or {}).get("startTLS"))


def _bind_tls(ldap: Spec, path: str) -> Errors:
    uris = ldap.get("uris") or []
    if "bindPasswordSecretRef" in ldap and not all(u.startswith("ldaps://") for u in uris) and not _starttls(ldap):
        return _error(path, "bindPasswordSecretRef", schema.IDENTITY_RULES["bind_tls"])
    return []


def _starttls_ldap(ldap: Spec, path: str) -> Errors:
    if _starttls(ldap) and not all(u.startswith("ldap://") for u in ldap.get("uris") or []):
        return _error(path, "tls.startTLS", schema.IDENTITY_RULES["starttls"])
    return []


def _id_range(id_range: Spec, path: str) -> Errors:
    if id_range.get("min", schema.DIRECTORY_ID_MIN) > id_range.get("max", schema.DIRECTORY_ID_MAX):
        return _error(path, "", schema.IDENTITY_RULES["id_range"])
    return []


# The twins of spec.identity's CEL rules, by message (api/cel.py's TWINS takes them in).
TWINS: dict[str, Callable[[Spec, str], Errors]] = {
    schema.IDENTITY_RULES["bind_pair"]: _bind_pair,
    schema.IDENTITY_RULES["bind_tls"]: _bind_tls,
    schema.IDENTITY_RULES["starttls"]: _starttls_ldap,
    schema.IDENTITY_RULES["id_range"]: _id_range,
}


# ------------------------------------------------------------------------------------------------ Python rules
# RFC 4514: an attribute type (a descriptor or a numeric OID), '=', a value in which the special characters are
# escaped (\, or \2c); RDNs separated by ',' (multi-valued ones by '+').
_ATTRIBUTE_TYPE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*|[0-9]+(\.[0-9]+)*)$")
_HEX = "0123456789abcdefABCDEF"
_SPECIAL = ',+"\\<>;=# '


def _split_unescaped(text: str, separators: str) -> list[str] | None:
    """``text`` split at every separator that no backslash escapes; None when a backslash ends it."""
    parts: list[str] = []
    current, i = "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text):
                return None
            current += text[i:i + 2]
            i += 2
            continue
        if ch in separators:
            parts.append(current)
            current = ""
        else:
            current += ch
        i += 1
    parts.append(current)
    return parts


def dn_problem(dn: str) -> str | None:
    """Why ``dn`` is no RFC 4514 distinguished name (None when it is one)."""
    rdns = _split_unescaped(dn, ",")
    if rdns is None:
        return "it ends with a lone backslash"
    for rdn in rdns:
        for ava in _split_unescaped(rdn, "+") or ():
            attribute, equals, value = ava.partition("=")
            if not equals or not _ATTRIBUTE_TYPE.match(attribute.strip()):
                return "%r is not attribute=value" % ava
            if value.startswith(" ") or (value.endswith(" ") and not value.endswith("\\ ")):
                return "the value of %r has an unescaped leading or trailing space" % ava
            i = 0
            while i < len(value):
                ch = value[i]
                if ch == "\\":
                    pair = value[i + 1:i + 3]
                    if len(pair) == 2 and pair[0] in _HEX and pair[1] in _HEX:
                        i += 3
                        continue
                    if value[i + 1:i + 2] and value[i + 1] in _SPECIAL:
                        i += 2
                        continue
                    return "the value of %r has a bad escape" % ava
                if ch in '"<>;':
                    return "the value of %r has an unescaped %r" % (ava, ch)
                i += 1
    return None


# An LDAP URI in parts (schema.LDAP_URI_PATTERN), and an installer's pattern of them: its host may be *.domain.
_URI_PARTS = re.compile(r"(ldaps?)://((\*\.)?[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
                        r"(:([0-9]{1,5}))?/?")
DEFAULT_PORTS = {"ldap": 389, "ldaps": 636}


def uri_pattern_parts(uri: str, wildcard: bool = True) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an LDAP URI (lowercase; the scheme's port when it names none), or None when it is
    none; ``wildcard``: its host may be ``*.domain``."""
    found = _URI_PARTS.fullmatch(uri)
    if not found or (found.group(3) and not wildcard):
        return None
    scheme, host, port = found.group(1).lower(), found.group(2).lower(), found.group(6)
    port = int(port) if port else DEFAULT_PORTS[scheme]
    return (scheme, host, port) if 1 <= port <= 65535 else None


def uri_allowed(uri: str, allowed: Sequence[str]) -> bool:
    """Whether the directory ``uri`` is one of the installer's ``allowed`` URIs (normalized): the same scheme and
    port, the same host or one under its ``*.domain``. Any when ``allowed`` is empty."""
    if not allowed:
        return True
    parts = uri_pattern_parts(uri, wildcard=False)
    if parts is None:
        return False
    for entry in allowed:
        allowed_parts = uri_pattern_parts(entry)
        if allowed_parts is None:  # not normalized (policy.normalize refuses such an entry): allows nothing
            continue
        scheme, host, port = allowed_parts
        if (scheme, port) == parts[:1] + parts[2:] and (
                parts[1] == host or (host.startswith("*.") and parts[1].endswith(host[1:]))):
            return True
    return False


def _uri_problem(uri: str) -> str | None:
    port = re.search(r":([0-9]+)/?$", uri)
    if port and not 1 <= int(port.group(1)) <= 65535:
        return "port %s is not 1..65535" % port.group(1)
    return None


def id_range_problem(id_range: Spec) -> str | None:
    """Why the directory may not give the ids of ``idRange`` (None when it may): the images' own accounts (root,
    the system accounts, SlurmUser, nobody) are never the directory's, whatever a directory says."""
    low, high = id_range.get("min", schema.DIRECTORY_ID_MIN), id_range.get("max", schema.DIRECTORY_ID_MAX)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or low > high:
        return None  # the schema's and the CEL rule's to say
    held = accounts.system_ids_in(low, high)
    if not held:
        return None
    return ("Invalid value: %d..%d holds ids of the images' own accounts (%s): a directory could make its users "
            "root, SlurmUser or a system account; keep it within %d..%d, or above %d" % (
                low, high, ", ".join(held), accounts.SYSTEM_ID_MAX + 1, min(accounts.HIGH_IDS) - 1,
                max(accounts.HIGH_IDS)))


def rules(cluster_spec: Spec | None, errors: Errors) -> None:
    """Append the problems of ``spec.identity`` that CEL does not judge (RFC 4514 names, URI ports, the images' own
    ids in idRange)."""
    ldap = ((cluster_spec or {}).get("identity") or {}).get("ldap")
    if not isinstance(ldap, dict):
        return
    for index, uri in enumerate(ldap.get("uris") or ()):
        problem = isinstance(uri, str) and re.fullmatch(schema.LDAP_URI_PATTERN, uri) and _uri_problem(uri)
        if problem:
            errors.append(SpecError("%s.uris[%d]" % (FIELD, index), "Invalid value: %r: %s" % (uri, problem)))
    for key in ("baseDN", "userBaseDN", "groupBaseDN", "bindDN"):
        value = ldap.get(key)
        problem = isinstance(value, str) and re.fullmatch(schema.DN_PATTERN, value) and dn_problem(value)
        if problem:
            errors.append(SpecError("%s.%s" % (FIELD, key), "Invalid value: %r: not a distinguished name (RFC 4514): "
                                    "%s" % (value, problem)))
    id_range = ldap.get("idRange")
    problem = id_range_problem(id_range) if isinstance(id_range, dict) else None
    if problem:
        errors.append(SpecError(FIELD + ".idRange", problem))


# ------------------------------------------------------------------------------------------------ the condition
def parse_status(text: str | None) -> tuple[str, str | None, str] | None:
    """``(reason, sssd.conf key or None, detail)`` of the sidecar's status file; None when it says nothing usable."""
    line = (text or "").strip().splitlines()[:1]
    found = _STATUS.match(line[0]) if line else None
    if not found:
        return None
    reason, key, detail = found.groups()
    if reason not in REASONS:
        return None
    return reason, (None if key == "-" else key), detail


def condition(cluster_spec: Spec, status_text: str | None,
              why_unknown: str | None = None) -> tuple[str, str, str] | None:
    """``(status, reason, message)`` of ``IdentityReady``, or None when the cluster has no directory.

    ``status_text``: the controller's sidecar's status file (None: not read, ``why_unknown`` says why)."""
    if not enabled(cluster_spec):
        return None
    if cluster_spec.get("maintenance"):
        return "False", "Maintenance", "the cluster is in maintenance"
    parsed = parse_status(status_text) if status_text is not None else None
    if parsed is None:
        why = why_unknown or ("the sssd sidecar of the controller said %r" % (status_text or "")[:200]
                              if status_text else "the sssd sidecar of the controller has not looked yet")
        return "Unknown", "NotChecked", why
    reason, key, detail = parsed
    if reason == "Ready":
        return "True", "Ready", detail
    field = _KEY_FIELDS.get(key or "", FIELD)
    return "False", reason, "%s: %s (%s, seen from the controller's sssd sidecar)" % (field, detail, REASONS[reason])
