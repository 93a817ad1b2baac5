# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules on what a user writes into Slurm's and sshd's configuration: raw keys against the allowlists of
``slurm/config_keys.py``, programs and files a daemon runs or loads (never where users write), the NCCL check's
schedule, partition and command. Pure."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Collection, Iterable, Mapping

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import schema
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys, paths
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import Errors, SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.api.fields import child_path, matches
from ansible_collections.soperator.slurm.plugins.module_utils.api.values import health_enabled
from ansible_collections.soperator.slurm.plugins.module_utils.types import Spec


def check_raw_keys(mapping: Mapping[str, object], path: str, allowed: Collection[str], owned: Mapping[str, str],
                   typed: Mapping[str, str], what: str, errors: Errors,
                   values: Mapping[str, config_keys.ValueRule] | None = None,
                   refused: Mapping[str, str] | None = None) -> None:
    refusals = refused or {}
    for key in sorted(mapping):
        key_path = child_path(path, key)
        rule = (values or {}).get(key)
        # A value that is not one token is already refused by the schema's pattern: one error per field.
        problem = rule and matches(schema.SLURM_VALUE_PATTERN, str(mapping[key])) and config_keys.check_value(
            rule, mapping[key])
        if problem:
            errors.append(SpecError(key_path, "%s value %r for %s: must be %s" % (what, str(mapping[key]), key,
                                                                                  problem)))
        if key in refusals:
            errors.append(SpecError(key_path, "%s key %s is not accepted: %s" % (what, key, refusals[key])))
        elif key in owned:
            errors.append(SpecError(key_path, "%s key %s is set by the operator (%s)" % (what, key, owned[key])))
        elif key in typed:
            errors.append(SpecError(key_path, "%s key %s has a typed field: use %s" % (what, key, typed[key])))
        elif key not in allowed:
            hint = config_keys.suggest(key, list(allowed) + list(owned) + list(typed) + list(refusals))
            errors.append(SpecError(key_path, "unknown %s key %r%s" % (
                what, key, " (did you mean %s?)" % hint if hint else "")))


# The standard cron schedule of a CronJob as the API server parses it (robfig/cron's standard parser): five fields,
# each a list of '*', N, N-M, optionally /step (N/step is N-max/step), within these bounds; names for months and
# days of the week. CRON_PATTERN only bounds the characters.
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
    ("month", 1, 12, dict((m, i + 1) for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")))),
    ("day of week", 0, 6, dict((d, i) for i, d in enumerate(
        ("sun", "mon", "tue", "wed", "thu", "fri", "sat")))))


def _cron_number(text: str, names_of: Mapping[str, int]) -> int:
    if text.lower() in names_of:
        return names_of[text.lower()]
    if not re.fullmatch(r"[0-9]{1,9}", text):
        raise ValueError("%r is not a number" % text)
    return int(text)


def cron_problem(schedule: str) -> str | None:
    """Why the API server would refuse ``schedule`` as a CronJob's, or None."""
    if "TZ" in schedule:
        return "a time zone (TZ, CRON_TZ) is not allowed in a schedule"
    if schedule.startswith("@"):
        return None if schedule in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                                    "@hourly") else "unknown descriptor %s" % schedule
    fields = schedule.split()
    if len(fields) != 5:
        return "expected 5 fields (minute hour day-of-month month day-of-week), found %d" % len(fields)
    for text, (what, low, high, names_of) in zip(fields, _CRON_FIELDS):
        for expr in (part for part in text.split(",") if part):
            try:
                range_text, slash, step_text = expr.partition("/")
                if "/" in step_text:
                    raise ValueError("too many slashes")
                bounds = range_text.split("-")
                if bounds[0] in ("*", "?"):
                    start, end = low, high
                else:
                    if len(bounds) > 2:
                        raise ValueError("too many hyphens")
                    start = _cron_number(bounds[0], names_of)
                    end = _cron_number(bounds[1], names_of) if len(bounds) == 2 else start
                step = _cron_number(step_text, {}) if slash else 1
                if slash and len(bounds) == 1:
                    end = high
                if start < low or end > high or start > end:
                    raise ValueError("outside %d-%d" % (low, high))
                if step == 0:
                    raise ValueError("a step must be positive")
            except ValueError as e:
                return "%s field %r: %s" % (what, expr, e)
    return None


def health_rules(spec: Spec, sub_mounts: list[tuple[str, str]], errors: Errors) -> None:
    """The NCCL check: a schedule the API server takes, a partition of the cluster, sizes in order, and its command
    (run as SlurmUser on every tested node) not where users write."""
    nccl = (spec.get("healthChecks") or {}).get("nccl") or {}
    path = "spec.healthChecks.nccl"
    schedule = nccl.get("schedule")
    if isinstance(schedule, str) and matches(schema.CRON_PATTERN, schedule):
        problem = cron_problem(schedule)
        if problem:
            errors.append(SpecError(path + ".schedule", "Invalid value: %r: %s" % (schedule, problem)))
    partitions = [p.get("name") for p in spec.get("partitions") or ()]
    if nccl.get("partition") and nccl["partition"] not in partitions:
        errors.append(SpecError(path + ".partition", "%r is not a partition of the cluster (%s)"
                                % (nccl["partition"], ", ".join(str(p) for p in partitions))))
    low, high = nccl.get("minBytes"), nccl.get("maxBytes")
    if (isinstance(low, str) and isinstance(high, str) and matches(schema.NCCL_SIZE_PATTERN, low)
            and matches(schema.NCCL_SIZE_PATTERN, high) and _bytes(low) > _bytes(high)):
        errors.append(SpecError(path + ".minBytes", "minBytes %s is more than maxBytes %s" % (low, high)))
    command = nccl.get("command")
    writable = (isinstance(command, str) and matches(schema.PROGRAM_PATH_PATTERN, command)
                and where_users_write(command, sub_mounts))
    if writable:
        errors.append(SpecError(path + ".command", "the NCCL check runs its command as SlurmUser (%s) on every "
                                "tested node: %s" % (names.SLURM_USER, writable)))


BACKUP_INTO_JAIL = "the repository may not be on a volume it backs up (the jail or one of its sub-mounts)"


def backup_rules(spec: Spec, errors: Errors) -> None:
    """The jail backup's schedules, as the API server takes a CronJob's; a repository claim that is not the jail's
    (spec.validate_cluster also checks the claim the cluster makes)."""
    jail = spec.get("jail") or {}
    backup = jail.get("backup") or {}
    path = "spec.jail.backup"
    claim = ((backup.get("repository") or {}).get("claim") or {}).get("claimName")
    if claim and claim in [jail.get("existingClaim")] + [m.get("claimName") for m in jail.get("subMounts") or ()]:
        errors.append(SpecError(path + ".repository.claim.claimName", BACKUP_INTO_JAIL))
    for field, schedule in ((path + ".schedule", backup.get("schedule")),
                            (path + ".retention.schedule", (backup.get("retention") or {}).get("schedule"))):
        problem = isinstance(schedule, str) and matches(schema.CRON_PATTERN, schedule) and cron_problem(schedule)
        if problem:
            errors.append(SpecError(field, "Invalid value: %r: %s" % (schedule, problem)))


def _bytes(size: str) -> int:
    return int(size.rstrip("KMG")) * 1024 ** ("KMG".find(size[-1]) + 1 if size[-1] in "KMG" else 0)


def where_users_write(path: str, sub_mounts: Iterable[tuple[str, str]]) -> str | None:
    """Why ``path`` (absolute) is where users can write, or None. ``sub_mounts``: ``[(field, mount path)]`` of the
    jail's sub-mounts (their volumes are the jobs' to write, and the slurmd container mounts them at the same
    path)."""
    for tree in paths.USER_WRITABLE_TREES:
        if paths.under(path, tree):
            return "%s is where users can write (%s)" % (path, tree)
    for field, mount_path in sub_mounts:
        if paths.under(path, mount_path):
            return "%s is where users can write (the jail sub-mount %s, %s)" % (path, mount_path, field)
    return None


def sub_mount_paths_of(jail: Spec) -> list[tuple[str, str]]:
    """``[(field, mount path)]`` of the jail's sub-mounts whose paths the schema accepts."""
    return [("spec.jail.subMounts[%d]" % index, sub["mountPath"])
            for index, sub in enumerate(jail.get("subMounts") or ())
            if matches(schema.JAIL_PATH_PATTERN, sub.get("mountPath"))]


_USES = {"program": "runs as", "loaded": "is a file loaded (it may name code) as", "written": "is a file written as"}


def program_rules(slurm_conf: Mapping[str, object], sub_mounts: list[tuple[str, str]], errors: Errors) -> None:
    """Every raw slurm.conf key that makes a daemon run, load or write a file (config_keys.file_keys): an absolute
    path, never where users write; plugins that would load a script soperator cannot render; options naming files
    a daemon trusts."""
    for key, (use, who) in sorted(config_keys.file_keys(slurm_conf).items()):
        value = str(slurm_conf[key])
        where = "spec.slurm.slurmConf.%s" % key
        if not matches(schema.SLURM_VALUE_PATTERN, value):
            continue  # the schema already refused it: one error per field
        if not matches(schema.PROGRAM_PATH_PATTERN, value):
            errors.append(SpecError(where, "%s must be an absolute path (no '.' components)" % key))
            continue
        problem = use != "user" and where_users_write(value, sub_mounts)
        if problem:
            advice = "" if use == "written" else " (use a program of the image)"
            errors.append(SpecError(where, "%s %s %s: %s%s" % (key, _USES[use], who, problem, advice)))
    jobcomp = str(slurm_conf.get("JobCompType", ""))
    loc_use = config_keys.JOBCOMP_LOC_USE.get(jobcomp)
    if loc_use in ("program", "loaded") and "JobCompLoc" not in slurm_conf:
        errors.append(SpecError("spec.slurm.slurmConf.JobCompType", "%s needs JobCompLoc (the %s)" % (
            jobcomp, "script to run" if loc_use == "program" else "librdkafka configuration file")))
    location = str(slurm_conf.get("JobCompLoc", ""))
    if loc_use == "url" and "@" in location.partition("://")[2].partition("/")[0]:
        errors.append(SpecError("spec.slurm.slurmConf.JobCompLoc", "JobCompLoc carries credentials (user@ in the "
                                "URL): slurm.conf is served to every node and readable by every user of the jail"))
    for (key, plugin), loaded in sorted(config_keys.CONFIG_DIR_SCRIPT_PLUGINS.items()):
        if key in slurm_conf and plugin in config_keys.plugin_names(slurm_conf[key]):
            errors.append(SpecError("spec.slurm.slurmConf.%s" % key, "%s=%s loads %s from the configuration "
                                    "directory, which soperator renders: no field can put that file there, and code "
                                    "Slurm runs as root or SlurmUser comes only from the images"
                                    % (key, slurm_conf[key], loaded)))
    for key, (options, reason) in sorted(config_keys.FILE_OPTIONS.items()):
        named = set(item.partition("=")[0].strip().lower() for item in str(slurm_conf.get(key, "")).split(","))
        for option in sorted(o for o in options if o.lower() in named):
            errors.append(SpecError("spec.slurm.slurmConf.%s" % key, "%s option %s names a file a daemon reads and "
                                    "trusts: %s" % (key, option, reason)))


def cluster_rules(spec: Spec, errors: Errors) -> list[tuple[str, str]]:
    """A SlurmCluster's raw keys (slurm.conf, cgroup.conf, partitions, slurmdbd.conf, sshd_config) and the programs
    and files its slurm.conf and health check make a daemon run or load; returns its sub-mounts as
    ``[(field, mount path)]`` (where users write, for the other rules)."""
    slurm = spec.get("slurm") or {}
    check_raw_keys(slurm.get("slurmConf") or {}, "spec.slurm.slurmConf", config_keys.SLURM_CONF_KEYS,
                   config_keys.SLURM_CONF_OWNED, config_keys.SLURM_CONF_TYPED, "slurm.conf", errors,
                   config_keys.SLURM_CONF_VALUES, config_keys.SLURM_CONF_REFUSED)
    check_raw_keys(slurm.get("cgroupConf") or {}, "spec.slurm.cgroupConf", config_keys.CGROUP_CONF_KEYS,
                   config_keys.CGROUP_CONF_OWNED, {}, "cgroup.conf", errors, config_keys.CGROUP_CONF_VALUES)
    for index, partition in enumerate(spec.get("partitions") or ()):
        check_raw_keys(partition.get("config") or {}, "spec.partitions[%d].config" % index,
                       config_keys.PARTITION_KEYS, config_keys.PARTITION_OWNED, {}, "partition", errors)
    if health_enabled(spec) and "HealthCheckNodeState" in (slurm.get("slurmConf") or {}):
        errors.append(SpecError("spec.slurm.slurmConf.HealthCheckNodeState", "slurm.conf key HealthCheckNodeState "
                                "has a typed field while the shipped health program runs: use "
                                "spec.healthChecks.nodeStates"))
    slurmdbd = ((spec.get("accounting") or {}).get("slurmdbd") or {})
    check_raw_keys(slurmdbd.get("config") or {}, "spec.accounting.slurmdbd.config", config_keys.SLURMDBD_CONF_KEYS,
                   config_keys.SLURMDBD_CONF_OWNED, {}, "slurmdbd.conf", errors, config_keys.SLURMDBD_CONF_VALUES)
    sshd = (spec.get("login") or {}).get("sshdConfig") or {}
    check_raw_keys(sshd, "spec.login.sshdConfig", config_keys.SSHD_KEYS, config_keys.SSHD_OWNED, {},
                   "sshd_config", errors)
    if "PermitRootLogin" in sshd and sshd["PermitRootLogin"] not in config_keys.SSHD_PERMIT_ROOT_LOGIN:
        errors.append(SpecError("spec.login.sshdConfig.PermitRootLogin", "must be one of %s (no password logins)"
                                % ", ".join(config_keys.SSHD_PERMIT_ROOT_LOGIN)))
    sub_mounts = sub_mount_paths_of(spec.get("jail") or {})
    program_rules(slurm.get("slurmConf") or {}, sub_mounts, errors)
    program = slurm.get("healthCheckProgram")
    problem = (isinstance(program, str) and matches(schema.PROGRAM_PATH_PATTERN, program)
               and where_users_write(program, sub_mounts))
    if problem:
        errors.append(SpecError("spec.slurm.healthCheckProgram", "HealthCheckProgram runs as root on every node: "
                                + problem))
    return sub_mounts
