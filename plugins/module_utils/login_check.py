# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the converge asks a running login pod's sshd container: open sessions, and whether sshd accepts a config.

* Sessions: an outdated login pod is replaced once nobody is logged in to it. sshd's privileged monitor of each
  authenticated connection titles itself ``sshd-session: <user> [priv]`` (OpenSSH >= 9.8; ``sshd: <user>
  [priv]`` before), so the count is read from ``/proc/*/cmdline``: no tool beyond the shell's builtins and ``tr``.
* ``sshd -t``: a changed sshd_config is tested by the pod's own sshd before it is written (a config sshd refuses
  would keep every new login pod from starting). The candidate travels base64-encoded as an argument of a fixed
  script: nothing of it is ever interpreted by a shell.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import re

CONTAINER = "sshd"

SESSIONS_SCRIPT = r"""n=0
for f in /proc/[0-9]*/cmdline; do
  c=$(tr '\000' ' ' < "$f" 2>/dev/null) || continue
  case "$c" in
    "sshd-session: "*" [priv]"*|"sshd: "*" [priv]"*) n=$((n+1)) ;;
  esac
done
echo "$n"
"""

SSHD_TEST_SCRIPT = r"""set -eu
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf %s "$1" | base64 -d > "$d/sshd_config"
/usr/sbin/sshd -t -f "$d/sshd_config"
"""

_LINE = re.compile(r"line (\d+): (.*)")


def sessions_command():
    return ["sh", "-c", SESSIONS_SCRIPT, "soperator-login-sessions"]


def parse_sessions(rc, stdout):
    """Open sessions from the script's answer, None when it did not answer with a number."""
    text = (stdout or "").strip()
    return int(text) if rc == 0 and re.fullmatch(r"[0-9]{1,9}", text) else None


def sshd_test_command(sshd_config):
    return ["sh", "-c", SSHD_TEST_SCRIPT, "soperator-sshd-test",
            base64.b64encode(sshd_config.encode("utf-8")).decode("ascii")]


def sshd_problem(rc, stderr, sshd_config, login_spec):
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
