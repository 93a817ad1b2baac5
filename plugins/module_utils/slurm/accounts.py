# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The images' own accounts: every user and group the /etc/passwd and /etc/group of the images hold (Debian's
base-passwd, the system accounts their packages create, ours), which a directory (``spec.identity``) must never
give. Pure.

One list, used by: the validation of ``spec.identity.ldap.idRange`` (no id of these in it), the installer's policy
(its lowest directory id is above them), sssd.conf (their names are filtered), the login's AuthorizedKeysCommand (a
uid outside the range opens nothing). ``tests/images/test_system_accounts.py`` reads the built images' files and
fails on an account missing here.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps

# Debian's SYS_UID_MAX and SYS_GID_MAX (/etc/login.defs, adduser.conf): every system account a package creates
# (adduser --system, a dynamic id) is at or below it, and base-passwd's static ones too, except nobody and nogroup.
SYSTEM_ID_MAX = 999
NOBODY_ID = 65534
# The images' ids above SYSTEM_ID_MAX, each with whose it is.
HIGH_IDS = {
    names.SLURM_UID: "slurm (SlurmUser)",
    container_steps.CACHE_OWNER: "the container image cache's owner",
    NOBODY_ID: "nobody and nogroup",
}

# Every user of every image run in a cluster's pods (hack/images.sh builds them), the jail's included.
USERS = (
    # Debian's base-passwd
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "_apt", "nobody",
    # ours, at fixed ids (images/*/Containerfile)
    "slurm", "munge", "sshd", "mysql", "slurmrestd", "openldap",
    # the packages'
    "systemd-network", "sssd", "restic-rest-server",
)
GROUPS = (
    # Debian's base-passwd
    "root", "daemon", "bin", "sys", "adm", "tty", "disk", "lp", "mail", "news", "uucp", "man", "proxy", "kmem",
    "dialout", "fax", "voice", "cdrom", "floppy", "tape", "sudo", "audio", "dip", "www-data", "backup", "operator",
    "list", "irc", "src", "shadow", "utmp", "video", "sasl", "plugdev", "staff", "games", "users", "nogroup",
    # ours, at fixed ids (images/*/Containerfile)
    "slurm", "munge", "mysql", "slurmrestd", "openldap",
    # the packages'
    "systemd-journal", "systemd-network", "_ssh", "sssd", "restic-rest-server",
)


def system_id(number: int) -> str | None:
    """Whose ``number`` is among the images' accounts (a short description), or None when it is no system id."""
    if number <= SYSTEM_ID_MAX:
        return "a system id (0..%d)" % SYSTEM_ID_MAX
    return HIGH_IDS.get(number)


def system_ids_in(low: int, high: int) -> list[str]:
    """The images' ids in ``low..high``, described: the system ids as one range, then each high id."""
    found: list[str] = []
    if low <= SYSTEM_ID_MAX:
        found.append("the system ids %d..%d" % (low, min(high, SYSTEM_ID_MAX)))
    found.extend("%s %d" % (who, number) for number, who in sorted(HIGH_IDS.items()) if low <= number <= high)
    return found
