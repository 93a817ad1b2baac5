# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the converge asks a running login pod's sshd container: open sessions, and whether sshd accepts a config.

* Sessions: an outdated login pod is replaced once nobody is logged in to it. A count must not be something a
  logged-in user can forge (a process title is: ``exec -a "sshd: x [priv]" sleep inf`` would hold the pod until
  ``updateGracePeriod``), so only what the kernel says about processes is trusted (``/proc/<pid>/status``: real uid,
  parent), and a title only of a process whose real uid is 0 (root's, set by sshd's own code). A session is a
  connection process of the sshd listener (real uid 0, a child of the root ``[listener]`` process) that has
  authenticated: it has a child running as someone else than sshd's privilege separation user (the unprivileged
  pre-authentication child runs as that user; after authentication the session's child runs as the logged-in
  user, or the connection process itself runs root's commands). A job user cannot make a process of real uid 0
  (setuid programs keep the real uid), cannot make one a child of the listener or of a connection process (an
  orphan goes to the listener, as PID 1 of the container, but keeps its uid), and an unauthenticated client
  never gets past the privilege separation user. The script only prints; :func:`count_sessions` decides.
* ``sshd -t``: a changed sshd_config is tested by the pod's own sshd before it is written (a config sshd refuses
  would keep every new login pod from starting). The candidate travels base64-encoded on the exec's standard input
  (not its argv, which the API server's audit log records) to a fixed script: nothing of it is ever interpreted by
  a shell.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import base64
import re
from typing import Callable, Optional, TypedDict

from ansible_collections.soperator.slurm.plugins.module_utils.types import Spec

CONTAINER = "sshd"
# sshd's privilege separation user (soperator-entrypoint requires it in the jail's /etc/passwd, which the login
# container uses).
PRIVSEP_USER = "sshd"

# Line 1: the privilege separation user's uid (or -). Then the PPid and Uid lines of every process, and the title
# of each process whose real uid is 0, NULs and newlines made spaces (no title can start a line of its own).
SESSIONS_SCRIPT = r"""id -u "$1" 2>/dev/null || echo -
grep -HsE '^(PPid|Uid):' /proc/[0-9]*/status
for f in $(grep -lsE '^Uid:[[:space:]]+0[[:space:]]' /proc/[0-9]*/status); do
  d=${f%/status}
  printf '%s/cmdline:' "$d"
  tr '\000\n' '  ' 2>/dev/null < "$d/cmdline"
  echo
done
"""

# The candidate config arrives as one base64 line on stdin: `read` takes no byte more than that line.
SSHD_TEST_SCRIPT = r"""set -eu
IFS= read -r config
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf %s "$config" | base64 -d > "$d/sshd_config"
/usr/sbin/sshd -t -f "$d/sshd_config"
"""

_PROC_LINE = re.compile(r"^/proc/([0-9]+)/(status|cmdline):(.*)$")
_SSHD_TITLE = re.compile(r"^sshd(-session)?: ")
_LINE = re.compile(r"line (\d+): (.*)")


class Process(TypedDict):
    """What the session script says of one process (each None when it said nothing): its parent's pid, its real
    uid, and its title (printed only for a process of real uid 0)."""

    ppid: Optional[str]
    uid: Optional[str]
    title: Optional[str]


def sessions_command() -> list[str]:
    return ["sh", "-c", SESSIONS_SCRIPT, "soperator-login-sessions", PRIVSEP_USER]


def parse_processes(stdout: str | None) -> tuple[str | None, dict[str, Process]]:
    """(privilege separation uid or None, {pid: {"ppid", "uid", "title"}}) from the session script's output."""
    lines = (stdout or "").splitlines()
    privsep = lines[0].strip() if lines else ""
    procs: dict[str, Process] = {}
    for line in lines[1:]:
        found = _PROC_LINE.match(line)
        if not found:
            continue
        entry = procs.setdefault(found.group(1), {"ppid": None, "uid": None, "title": None})
        if found.group(2) == "cmdline":
            entry["title"] = found.group(3).strip()
            continue
        key, dummy, value = found.group(3).partition(":")
        fields = value.split()
        if key in ("PPid", "Uid") and fields and re.fullmatch(r"[0-9]+", fields[0]):
            entry["ppid" if key == "PPid" else "uid"] = fields[0]
    return (privsep if re.fullmatch(r"[0-9]+", privsep) else None), procs


def count_sessions(privsep_uid: str | None, procs: dict[str, Process]) -> int | None:
    """Authenticated sessions among ``procs`` (see the module's docstring); None when the privilege separation
    user is not known (nothing could tell an authenticated connection from one still authenticating)."""
    if privsep_uid is None:
        return None

    def root_titled(entry: Process, pattern: Callable[[str], object]) -> bool:
        title = entry["title"] or ""
        return entry["uid"] == "0" and bool(title) and bool(pattern(title))

    listeners = set(pid for pid, e in procs.items()
                    if root_titled(e, lambda t: _SSHD_TITLE.match(t) and "[listener]" in t))
    connections = set(pid for pid, e in procs.items() if e["ppid"] in listeners and pid not in listeners
                      and root_titled(e, _SSHD_TITLE.match))
    return len(set(e["ppid"] for e in procs.values()
                   if e["ppid"] in connections and e["uid"] is not None and e["uid"] != privsep_uid))


def parse_sessions(rc: int, stdout: str | None) -> int | None:
    """Open sessions from the script's answer, None when it did not answer as expected."""
    if rc != 0:
        return None
    return count_sessions(*parse_processes(stdout))


def sshd_test_command(sshd_config: str) -> tuple[list[str], str]:
    """(argv, stdin) that run ``sshd -t`` on ``sshd_config`` in the login container."""
    return (["sh", "-c", SSHD_TEST_SCRIPT, "soperator-sshd-test"],
            base64.b64encode(sshd_config.encode("utf-8")).decode("ascii") + "\n")


def sshd_problem(rc: int, stderr: str | None, sshd_config: str,
                 login_spec: Spec | None) -> tuple[str, str] | None:
    """None when ``sshd -t`` accepted the config, else (field path, message) naming what sshd refused."""
    if rc == 0:
        return None
    text = (stderr or "").strip()
    lines = [re.sub(r"^\S*sshd_config(?= line)", "sshd_config", line) for line in text.splitlines()
             if "terminating," not in line]
    message = "sshd_config refused by this cluster's sshd (nothing was applied): " + (
        "; ".join(dict.fromkeys(lines)) or "exit status %s" % rc)
    overrides = (login_spec or {}).get("sshdConfig") or {}
    found = _LINE.search(text)
    if found:
        config_lines = sshd_config.splitlines()
        number = int(found.group(1))
        if 0 < number <= len(config_lines):
            key = config_lines[number - 1].split(None, 1)[0] if config_lines[number - 1].strip() else ""
            if key in overrides:
                return "spec.login.sshdConfig." + key, message
    return "spec.login.sshdConfig", message
