# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A new slurm.conf checked by the real Slurm of the running controller before it goes live.

The schema and the typed values of ``config_keys`` catch most mistakes; what only Slurm knows (``PreemptMode``
combinations, ``SelectTypeParameters`` words, plugins missing from this build) is checked by running, in the
slurmctld container, ``scontrol`` on the candidate files (it parses every line and exits non-zero naming the key,
without contacting slurmctld) and by looking for each configured plugin's shared object. The candidate files travel
base64-encoded on the exec's standard input (not its argv: the API server's audit log records an exec's argv) to a
fixed script: nothing of them is ever interpreted by a shell.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import base64
import re
from typing import Mapping

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys
from ansible_collections.soperator.slurm.plugins.module_utils.types import Spec

_PLUGIN = re.compile(r"^[a-z][a-z0-9_]*/[a-z0-9_]+$")
_PLUGIN_KEY = re.compile(r"(Type|Plugin|Plugins)$")

# stdin: slurm.conf, then cgroup.conf, one base64 line each (`read` takes no byte more than its line), then the
# plugin shared objects the configuration names on one line (names of [a-z0-9_] only: split on spaces).
SCRIPT = r"""set -eu
IFS= read -r conf
IFS= read -r cgroup
IFS= read -r sos
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf %s "$conf" | base64 -d > "$d/slurm.conf"
printf %s "$cgroup" | base64 -d > "$d/cgroup.conf"
for so in $sos; do
  found=no
  for dir in /usr/lib/*/slurm-wlm /usr/lib/*/slurm /usr/lib/slurm /usr/lib64/slurm; do
    [ -e "$dir/$so" ] && found=yes
  done
  [ $found = yes ] || { echo "plugin $so is not in this Slurm build" >&2; exit 3; }
done
SLURM_CONF="$d/slurm.conf" scontrol show hostnames check >/dev/null
"""

_ERRORS = (
    re.compile(r"error: (\w+) value"),             # MinJobAge value (soon) is not a valid number
    re.compile(r"error: (\w+)=\S* invalid"),       # PreemptMode=SOMETIMES invalid
    re.compile(r"error: Bad (\w+?): "),            # Bad SelectTypeParameter: Bogus
    re.compile(r"error: [Ii]nvalid (\w+)"),
)


def plugins(conf_text: str) -> dict[str, str]:
    """{shared object: key} of the plugins a slurm.conf names (``proctrack/cgroup`` -> ``proctrack_cgroup.so``)."""
    found: dict[str, str] = {}
    for line in conf_text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if " " in value or not _PLUGIN_KEY.search(key):
            continue  # NodeSet= and PartitionName= lines carry several keys; other keys name no plugin
        for item in value.split(","):
            if _PLUGIN.match(item):
                found.setdefault(item.replace("/", "_") + ".so", key)
    return found


def command(files: Mapping[str, str]) -> tuple[list[str], str]:
    """(argv, stdin) that check ``files`` (``{"slurm.conf": text, "cgroup.conf": text, ...}``) in the controller
    container: nothing of the files is in argv."""
    def b64(name: str) -> str:
        return base64.b64encode(files.get(name, "").encode("utf-8")).decode("ascii")
    return (["sh", "-c", SCRIPT, "soperator-check-config"],
            "%s\n%s\n%s\n" % (b64("slurm.conf"), b64("cgroup.conf"), " ".join(sorted(plugins(files.get(
                "slurm.conf", ""))))))


def field_of(key: str, cluster_spec: Spec | None) -> str:
    """The SlurmCluster field that sets slurm.conf ``key``."""
    slurm = (cluster_spec or {}).get("slurm") or {}
    keys = list(slurm.get("slurmConf") or {}) + list(config_keys.SLURM_CONF_TYPED)
    # Slurm's messages sometimes shorten the key ("Bad SelectTypeParameter"): exact, then extended, then prefix.
    candidates = ([k for k in keys if k == key] + [k for k in keys if k.startswith(key) and k != key]
                  + [k for k in keys if key.startswith(k) and k != key])
    for candidate in candidates:
        if candidate in (slurm.get("slurmConf") or {}):
            return "spec.slurm.slurmConf." + candidate
        return config_keys.SLURM_CONF_TYPED[candidate]
    return "spec.slurm"


def problem(rc: int, stderr: str | None, files: Mapping[str, str],
            cluster_spec: Spec | None) -> tuple[str, str] | None:
    """None when the check passed, else (field path, message) naming what Slurm refused."""
    if rc == 0:
        return None
    text = (stderr or "").strip()
    lines = [line for line in text.splitlines() if "fatal: Unable to process" not in line]
    message = "slurm.conf refused by this cluster's Slurm (nothing was applied): " + (
        "; ".join(dict.fromkeys(lines)) or "exit status %s" % rc)
    missing = re.search(r"plugin (\S+) is not in this Slurm build", text)
    if missing:
        key = plugins(files.get("slurm.conf", "")).get(missing.group(1), "")
        return field_of(key, cluster_spec) if key else "spec.slurm", message
    for pattern in _ERRORS:
        found = pattern.search(text)
        if found:
            return field_of(found.group(1), cluster_spec), message
    return "spec.slurm", message
