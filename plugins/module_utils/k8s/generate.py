# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Internal to the soperator.slurm collection: not a public API, may change without notice.
"""Secret material the apply adapter generates once, for a create-only Secret annotated
``slurm.soperator.dev/generate``: the munge key, SSH host keys, the accounting database's passwords, the JWT key.
An adapter: it reads the system's randomness (the pure core never does).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import base64
import os
from typing import Any, Callable, Dict

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s.access import KubernetesError
from ansible_collections.soperator.slurm.plugins.module_utils.render import objects
from ansible_collections.soperator.slurm.plugins.module_utils.types import KubeObject

MUNGE_KEY_BYTES = 1024
# slurmdbd.conf holds the database password as one unquoted token: letters and digits only (32 of 62 symbols:
# 190 bits).
DB_PASSWORD_LENGTH = 32
DB_PASSWORD_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# HS256 key of auth/jwt; Slurm's documentation asks for 32 random bytes at least.
JWT_KEY_BYTES = 64


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def munge_key() -> Dict[str, str]:
    return {names.MUNGE_KEY_FILE: _b64(os.urandom(MUNGE_KEY_BYTES))}


def _password() -> str:
    import secrets  # stdlib; imported here so the module stays importable on old interpreters' sanity checks

    return "".join(secrets.choice(DB_PASSWORD_ALPHABET) for dummy in range(DB_PASSWORD_LENGTH))


def db_passwords() -> Dict[str, str]:
    """The accounting database user's password, and a root password (used by a mariadb-operator MariaDB)."""
    return {names.DB_PASSWORD_KEY: _b64(_password().encode("ascii")),
            names.DB_ROOT_PASSWORD_KEY: _b64(_password().encode("ascii"))}


def jwt_key() -> Dict[str, str]:
    return {names.JWT_KEY_FILE: _b64(os.urandom(JWT_KEY_BYTES))}


def ssh_host_keys(what: str) -> Dict[str, str]:
    """OpenSSH host keys of every type sshd is configured with, generated in-process (no ssh-keygen: the
    operator image and a bare control host need not have OpenSSH installed)."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
    except ImportError:
        raise KubernetesError("%s: the Python package cryptography (an ansible-core dependency) is needed to "
                              "generate ssh host keys" % what)
    makers: Dict[str, Callable[[], Any]] = {
        "ed25519": ed25519.Ed25519PrivateKey.generate,
        "rsa": lambda: rsa.generate_private_key(public_exponent=65537, key_size=3072)}
    data: Dict[str, str] = {}
    for key_type in names.SSH_HOST_KEY_TYPES:
        key = makers[key_type]()
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        name = "ssh_host_%s_key" % key_type
        data[name] = _b64(private)
        data[name + ".pub"] = _b64(public + b"\n")
    return data


def material(desired: KubeObject, what: str) -> Dict[str, str]:
    """The data to create a create-only object with (base64 values), {} for one that generates nothing."""
    kind = objects.generator(desired)
    if kind == names.GENERATE_MUNGE_KEY:
        return munge_key()
    if kind == names.GENERATE_SSH_HOST_KEYS:
        return ssh_host_keys(what)
    if kind == names.GENERATE_DB_PASSWORD:
        return db_passwords()
    if kind == names.GENERATE_JWT_KEY:
        return jwt_key()
    return {}
