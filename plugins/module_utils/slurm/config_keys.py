# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Allowlists of raw configuration keys a SlurmCluster may set, and the keys the operator owns.

A raw override whose key is not listed here is refused (a typo would otherwise be silently ignored or, worse,
let a crafted key inject a line). Keys are matched exactly in their canonical spelling; the error suggests it
when only the case differs. The tables are the manual pages of the Slurm release ``version.SLURM`` names: a Slurm
upgrade reviews them with the rest of ``version.py``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Iterable, Literal, Mapping, Tuple, Union


# slurm.conf keys (Slurm 24.05 - 25.05 man page), without node/partition/nodeset lines and owned keys.
SLURM_CONF_KEYS = frozenset((
    "AccountingStorageEnforce", "AccountingStorageParameters", "AccountingStorageTRES", "AccountingStoreFlags",
    "AcctGatherEnergyType", "AcctGatherFilesystemType", "AcctGatherInterconnectType", "AcctGatherNodeFreq",
    "AcctGatherProfileType", "AllowSpecResourcesUsage", "BatchStartTimeout",
    "BcastExclude", "BcastParameters", "BurstBufferType", "CliFilterPlugins", "CommunicationParameters",
    "CompleteWait", "CpuFreqDef", "CpuFreqGovernors", "DataParserParameters", "DebugFlags", "DefCpuPerGPU",
    "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode", "DependencyParameters", "DisableRootJobs", "EioTimeout",
    "EnforcePartLimits", "Epilog", "EpilogMsgTime", "EpilogSlurmctld", "FairShareDampeningFactor",
    "FederationParameters", "FirstJobId", "GetEnvTimeout", "GpuFreqDef", "GroupUpdateForce", "GroupUpdateTime",
    "HashPlugin", "HealthCheckNodeState", "InactiveLimit", "InteractiveStepOptions", "JobAcctGatherFrequency",
    "JobAcctGatherParams", "JobAcctGatherType", "JobCompHost", "JobCompLoc", "JobCompParams",
    "JobCompPort", "JobCompType", "JobCompUser", "JobContainerType", "JobFileAppend", "JobRequeue",
    "JobSubmitPlugins", "KillOnBadExit", "LaunchParameters", "Licenses", "LogTimeFormat", "MailDomain",
    "MailProg", "MaxArraySize", "MaxBatchRequeue", "MaxDBDMsgs", "MaxJobId", "MaxMemPerCPU", "MaxMemPerNode",
    "MaxStepCount", "MaxTasksPerNode", "MCSParameters", "MCSPlugin", "MessageTimeout", "MinJobAge", "MpiDefault",
    "MpiParams", "NodeFeaturesPlugins", "OverTimeLimit", "PreemptExemptTime", "PreemptMode", "PreemptParameters",
    "PreemptType", "PrEpParameters", "PrEpPlugins", "PriorityCalcPeriod", "PriorityDecayHalfLife",
    "PriorityFavorSmall", "PriorityFlags", "PriorityMaxAge", "PriorityParameters", "PrioritySiteFactorParameters",
    "PrioritySiteFactorPlugin", "PriorityUsageResetPeriod", "PriorityWeightAge", "PriorityWeightAssoc",
    "PriorityWeightFairshare", "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS",
    "PriorityWeightTRES", "PrivateData", "ProctrackType", "Prolog", "PrologEpilogTimeout", "PrologFlags",
    "PrologSlurmctld", "PropagatePrioProcess", "PropagateResourceLimits", "PropagateResourceLimitsExcept",
    "RebootProgram", "ReconfigFlags", "RequeueExit", "RequeueExitHold", "ResumeFailProgram", "ResumeProgram",
    "ResumeRate", "ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog", "SchedulerParameters",
    "SchedulerTimeSlice", "ScronParameters", "SlurmctldDebug", "SlurmctldParameters", "SlurmctldSyslogDebug",
    "SlurmdDebug", "SlurmdParameters", "SlurmdSyslogDebug", "SlurmSchedLogFile", "SlurmSchedLogLevel",
    "SrunEpilog", "SrunPortRange", "SrunProlog", "SuspendExcNodes", "SuspendExcParts", "SuspendExcStates",
    "SuspendProgram", "SuspendRate", "SuspendTime", "SuspendTimeout", "SwitchParameters", "SwitchType",
    "TaskEpilog", "TaskPlugin", "TaskPluginParam", "TaskProlog", "TCPTimeout", "TmpFS", "TopologyParam",
    "TopologyPlugin", "TrackWCKey", "TreeWidth", "UnkillableStepProgram", "UnkillableStepTimeout", "UsePAM",
    "VSizeFactor", "WaitTime", "X11Parameters",
))

# slurm.conf keys the operator writes itself: refused as raw overrides, with the reason.
SLURM_CONF_OWNED = {
    "ClusterName": "set spec.clusterName",
    "SlurmctldHost": "the controller address is derived from the cluster",
    "ControlMachine": "the controller address is derived from the cluster",
    "ControlAddr": "the controller address is derived from the cluster",
    "BackupController": "the controller address is derived from the cluster",
    "SlurmctldAddr": "the controller address is derived from the cluster",
    "SlurmctldPort": "the operator owns the ports",
    "SlurmdPort": "the operator owns the ports",
    "AuthType": "munge authentication is wired by the operator",
    "AuthInfo": "munge authentication is wired by the operator",
    "CredType": "munge authentication is wired by the operator",
    "NodeName": "nodes are dynamic: use NodeSets",
    "PartitionName": "use spec.partitions",
    "NodeSet": "use NodeSet objects",
    "DownNodes": "nodes are dynamic: use NodeSets",
    "FrontendName": "not supported",
    "MaxNodeCount": "set spec.slurm.maxNodeCount",
    "GresTypes": "derived from the NodeSets' GPUs",
    "PlugStackConfig": "the jail plugin stack is owned by the operator",
    "StateSaveLocation": "lives on the controller's spool volume",
    "SlurmdSpoolDir": "lives on a volume the jail also sees",
    "SlurmUser": "slurmctld runs as the images' slurm user",
    "SlurmdUser": "set by the images",
    "SlurmctldPidFile": "set by the images",
    "SlurmdPidFile": "set by the images",
    "SlurmctldLogFile": "daemons log to the container's output",
    "SlurmdLogFile": "daemons log to the container's output",
    "PluginDir": "set by the images",
    "Include": "every file is rendered by the operator",
    "AccountingStorageType": "set spec.accounting.enabled",
    "AccountingStorageHost": "slurmdbd is part of the cluster: set spec.accounting",
    "AccountingStorageBackupHost": "slurmdbd is part of the cluster: set spec.accounting",
    "AccountingStorageExternalHost": "slurmdbd is part of the cluster: set spec.accounting",
    "AccountingStoragePort": "slurmdbd is part of the cluster: set spec.accounting",
    "AccountingStorageUser": "slurmdbd is part of the cluster: set spec.accounting",
    "AccountingStoragePass": "slurmdbd authenticates with munge",
    "AuthAltTypes": "JSON Web Tokens are wired by the operator: set spec.restApi.enabled",
    "AuthAltParameters": "JSON Web Tokens are wired by the operator: set spec.restApi.enabled",
}

# slurm.conf keys refused whoever sets them, with the reason. slurm.conf is served (configless) to every node and
# client and must be readable by every user (slurm.conf(5)): a password in it is every jail user's.
SLURM_CONF_REFUSED = {
    "JobCompPass": "slurm.conf is served to every node and readable by every user of the jail, so a password there "
                   "is theirs; use a job completion plugin that needs none, or accounting (spec.accounting: its "
                   "database password stays in a Secret)",
}

# slurm.conf keys with a typed field in spec.slurm: one way to set each thing.
SLURM_CONF_TYPED = {
    "SelectType": "spec.slurm.selectType",
    "SelectTypeParameters": "spec.slurm.selectTypeParameters",
    "SchedulerType": "spec.slurm.schedulerType",
    "PriorityType": "spec.slurm.priorityType",
    "ReturnToService": "spec.slurm.returnToService",
    "SlurmctldTimeout": "spec.slurm.slurmctldTimeout",
    "SlurmdTimeout": "spec.slurm.slurmdTimeout",
    "KillWait": "spec.slurm.killWait",
    "HealthCheckInterval": "spec.slurm.healthCheckInterval",
    "HealthCheckProgram": "spec.slurm.healthCheckProgram",
    "MaxJobCount": "spec.slurm.maxJobCount",
    "DisableRootJobs": "spec.slurm.disableRootJobs",
}

CGROUP_CONF_KEYS = frozenset((
    "AllowedRAMSpace", "AllowedSwapSpace", "CgroupPlugin", "ConstrainCores",
    "ConstrainDevices", "ConstrainRAMSpace", "ConstrainSwapSpace", "EnableControllers", "EnableExtraControllers",
    "IgnoreSystemd", "IgnoreSystemdOnFailure", "MaxRAMPercent", "MaxSwapPercent", "MemorySwappiness",
    "MinRAMSpace", "SignalChildrenProcesses", "SystemdTimeout",
))
CGROUP_CONF_OWNED = {
    # slurmd (root) creates and writes the job cgroups below it: the container's own tree, which the entrypoint
    # makes writable for slurmd, and nothing else.
    "CgroupMountpoint": "slurmd uses the container's /sys/fs/cgroup",
}

# Keys of one PartitionName line that spec.partitions[].config may set.
PARTITION_KEYS = frozenset((
    "AllocNodes", "AllowAccounts", "AllowGroups", "AllowQos", "Alternate", "CpuBind", "DefCpuPerGPU",
    "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode", "DefaultTime", "DenyAccounts", "DenyQos", "DisableRootJobs",
    "ExclusiveTopo", "ExclusiveUser", "GraceTime", "LLN", "MaxCPUsPerNode", "MaxCPUsPerSocket", "MaxMemPerCPU",
    "MaxMemPerNode", "MaxNodes", "MinNodes", "OverSubscribe", "OverTimeLimit", "PowerDownOnIdle", "PreemptMode",
    "PriorityJobFactor", "PriorityTier", "QOS", "ReqResv", "ResumeTimeout", "RootOnly", "SelectTypeParameters",
    "SuspendTime", "SuspendTimeout", "TRESBillingWeights",
))
PARTITION_OWNED = {
    "PartitionName": "set spec.partitions[].name",
    "Nodes": "a partition's nodes are the NodeSets that join it",
    "Default": "set spec.partitions[].default",
    "MaxTime": "set spec.partitions[].maxTime",
    "State": "set spec.partitions[].state",
    "Hidden": "set spec.partitions[].hidden",
}

# slurm.conf keys whose change restarts slurmctld (its pod is replaced, the queue kept on the spool volume), with
# the reason. Every other line (partitions, NodeSets, node definitions, scheduling and limits) is applied in place by
# `scontrol reconfigure`: "Changes to the configuration file take effect upon restart of Slurm daemons, daemon receipt
# of the SIGHUP signal, or execution of the command "scontrol reconfigure" unless otherwise noted" (slurm.conf(5),
# DESCRIPTION, Slurm 24.11.5). Sources: slurm.conf(5) and scontrol(1) of Debian slurm-client 24.11.5-4+deb13u1
# (docs/slurm-24.11-findings.md C.5), and what the controller's entrypoint reads from slurm.conf at start.
_LISTENING = ("slurm.conf(5) DESCRIPTION: \"Changes to TCP listening settings will require a daemon restart\"; "
              "scontrol(1) reconfigure \"will not be able to change the daemons' listening TCP port settings\"")
_AUTH = ("scontrol(1) reconfigure \"will not be able to change the daemons' ... authentication mechanism\"; "
         "slurm.conf(5) AuthType: \"All Slurm daemons and commands must be terminated prior to changing the value "
         "of AuthType and later restarted\"")
RESTART_KEYS = {
    "SlurmctldPort": _LISTENING,
    "SlurmdPort": _LISTENING,
    "CommunicationParameters": _LISTENING + " (its NoInAddrAny, NoCtldInAddrAny choose the listening address)",
    "AuthType": _AUTH,
    "AuthInfo": _AUTH,
    "AuthAltTypes": _AUTH,
    "CredType": _AUTH,
    "AuthAltParameters": _AUTH + "; and the controller's entrypoint installs the JWT key at the path it names, "
                                 "at start (images/lib/soperator-entrypoint, install_jwt_key)",
    "SwitchType": "slurm.conf(5) SwitchType: \"All Slurm daemons, commands and running jobs must be restarted or "
                  "reconfigured for a change in SwitchType to take effect\"",
    "SlurmUser": "the controller's entrypoint hands the spool to SlurmUser at start (images/lib/soperator-entrypoint, "
                 "prepare_controller)",
    "StateSaveLocation": "the controller's spool volume is mounted there (render/controller.py)",
}
_RESTART_KEYS_LOWER = dict((k.lower(), k) for k in RESTART_KEYS)


def line_key(line: str) -> str | None:
    """The key of one slurm.conf line (the word before its first '='), None for a blank or comment line."""
    text = line.strip()
    if not text or text.startswith("#") or "=" not in text:
        return None
    return text.split("=", 1)[0].strip()


def restart_lines(slurm_conf: str) -> str:
    """The lines of ``slurm_conf`` (its text) whose change needs slurmctld restarted (RESTART_KEYS; Slurm's keys are
    case-insensitive): the part of the file the controller's restart hash covers."""
    return "\n".join(line for line in slurm_conf.splitlines()
                     if (line_key(line) or "").lower() in _RESTART_KEYS_LOWER) + "\n"


# sshd_config keywords spec.login.sshdConfig may set. Everything about where users land (ChrootDirectory),
# how they authenticate (keys only, read from the jail) and what sshd runs is owned by the operator.
SSHD_KEYS = frozenset((
    "AcceptEnv", "AllowAgentForwarding", "AllowGroups", "AllowStreamLocalForwarding", "AllowTcpForwarding",
    "AllowUsers", "Ciphers", "ClientAliveCountMax", "ClientAliveInterval", "DenyGroups", "DenyUsers",
    "DisableForwarding", "GatewayPorts", "HostKeyAlgorithms", "KexAlgorithms", "LogLevel", "LoginGraceTime",
    "MACs", "MaxAuthTries", "MaxSessions", "MaxStartups", "PermitRootLogin", "PermitTTY", "PerSourceMaxStartups",
    "PrintLastLog", "PrintMotd", "PubkeyAcceptedAlgorithms", "TCPKeepAlive", "UseDNS", "X11Forwarding",
))
SSHD_OWNED = {
    "ChrootDirectory": "every session is jailed",
    "HostKey": "host keys come from the cluster's Secret",
    "AuthorizedKeysFile": "keys are read from the jail's home directories",
    "AuthorizedKeysCommand": "would run a command as root (directory keys: spec.identity)",
    "AuthorizedKeysCommandUser": "would run a command as root (directory keys: spec.identity)",
    "PasswordAuthentication": "key authentication only",
    "KbdInteractiveAuthentication": "key authentication only",
    "ChallengeResponseAuthentication": "key authentication only",
    "PermitEmptyPasswords": "key authentication only",
    "PermitUserEnvironment": "would let users change the environment of the jailed session",
    "Port": "set spec.login.service.port",
    "ListenAddress": "sshd listens on the pod's addresses",
    "Subsystem": "owned by the operator",
    "ForceCommand": "owned by the operator",
    "Match": "conditional blocks are not supported",
    "Include": "every file is rendered by the operator",
    "PidFile": "owned by the operator",
    "UsePAM": "key authentication only: PAM is off, or opens sessions only (first-login homes, spec.identity)",
    "Banner": "sshd reads the file as root before the session is jailed (put a message in the jail's /etc/motd)",
}
# PermitRootLogin may only be tightened: a password root login is never allowed.
SSHD_PERMIT_ROOT_LOGIN = ("prohibit-password", "forced-commands-only", "no")


# --- what Slurm runs, loads, writes -----------------------------------------------------------------------------
# Every slurm.conf key that makes a Slurm daemon run, load or write a file (slurm.conf(5) of Slurm 24.11:
# PARAMETERS, FILE AND DIRECTORY PERMISSIONS; cgroup.conf(5)). Keys the operator owns (PluginDir,
# PlugStackConfig, Include, the log, pid and spool paths, AuthAltParameters' jwt_key) or that are not allowlisted
# (SlurmctldPrimaryOnProg, SlurmctldPrimaryOffProg) are refused before these rules run.
#
# Programs run as root (slurmd, slurmstepd) or SlurmUser (slurmctld, who owns the job queue and reads the JWT key):
# an administrator's choice, so whoever edits the SlurmCluster is root on every node through them. Such a program
# comes only from where the images keep programs (policy.py: allowed_program_prefixes, default
# IMAGE_PROGRAM_TREES), never from where users write (USER_WRITABLE_TREES) or a jail sub-mount; the installer may
# refuse them altogether (allow_privileged_programs: false).
PRIVILEGED_PROGRAM_KEYS = {
    "Prolog": "root on every node", "Epilog": "root on every node", "RebootProgram": "root on every node",
    "UnkillableStepProgram": "root on every node",
    "PrologSlurmctld": "SlurmUser on the controller", "EpilogSlurmctld": "SlurmUser on the controller",
    "ResumeProgram": "SlurmUser on the controller", "SuspendProgram": "SlurmUser on the controller",
    "ResumeFailProgram": "SlurmUser on the controller", "ResvProlog": "SlurmUser on the controller",
    "ResvEpilog": "SlurmUser on the controller", "MailProg": "SlurmUser on the controller",
}
# Programs run as the job's user (slurmstepd after it dropped to the user; srun): an absolute path is enough.
USER_PROGRAM_KEYS = ("TaskProlog", "TaskEpilog", "SrunProlog", "SrunEpilog")
# Files a daemon writes as SlurmUser: a path users can write would let them point it (a symlink) at any file of
# SlurmUser's, the controller's state included.
WRITTEN_FILE_KEYS = {"SlurmSchedLogFile": "SlurmUser on the controller"}
# JobCompLoc means what JobCompType makes of it: for jobcomp/script a program slurmctld runs as SlurmUser at every
# job's end; for jobcomp/kafka a librdkafka configuration it loads (which may name plugin libraries: code); for
# jobcomp/filetxt a file it writes; for elasticsearch a URL, for mysql a database (lua and none ignore it).
JOBCOMP_LOC_USE = {"jobcomp/script": "program", "jobcomp/kafka": "loaded", "jobcomp/filetxt": "written",
                   "jobcomp/elasticsearch": "url", "jobcomp/mysql": "database"}
# Plugins that load a script, or a file naming programs, from the configuration directory (slurm.conf's). soperator
# renders that directory (slurm.conf, cgroup.conf, gres.conf, plugstack.conf) and no field can add such a file, so
# the plugin could only fail slurmctld or, were the file ever to appear, run code nobody validated: refused.
# (key, plugin's short name) -> the file.
CONFIG_DIR_SCRIPT_PLUGINS = {
    ("JobSubmitPlugins", "lua"): "job_submit.lua (run by slurmctld as SlurmUser at every submission)",
    ("CliFilterPlugins", "lua"): "cli_filter.lua (run by every client, root's included)",
    ("BurstBufferType", "lua"): "burst_buffer.lua (run by slurmctld as SlurmUser)",
    ("BurstBufferType", "datawarp"): "burst_buffer.conf (its GetSysState and GetSysStatus programs)",
    ("JobCompType", "lua"): "jobcomp.lua (run by slurmctld as SlurmUser at every job's end)",
    ("NodeFeaturesPlugins", "helpers"): "helpers.conf (its Helper programs, run by slurmd as root)",
}
# Options of a parameter list that name a file a daemon reads and trusts; refused with the reason.
FILE_OPTIONS = {
    "AccountingStorageParameters": ({"SSL_CERT", "SSL_CA", "SSL_CAPATH", "SSL_KEY"},
                                    "certificates of a direct database connection: slurmctld talks to slurmdbd, "
                                    "never to a database"),
    "SwitchParameters": ({"fm_authdir"}, "the fabric manager's credentials are no file of the images"),
}
# The other keys of slurm.conf(5) that name a file or directory a daemon runs, loads or writes, all refused as
# raw overrides: the operator owns these (SLURM_CONF_OWNED) ...
OWNED_FILE_KEYS = ("PluginDir", "PlugStackConfig", "Include", "StateSaveLocation", "SlurmdSpoolDir",
                   "SlurmctldLogFile", "SlurmdLogFile", "SlurmctldPidFile", "SlurmdPidFile", "AuthAltParameters",
                   "AuthInfo")
# ... and these are no allowlisted key (programs of a backup controller, which soperator does not run).
UNLISTED_PROGRAM_KEYS = ("SlurmctldPrimaryOnProg", "SlurmctldPrimaryOffProg")


def plugin_names(value: object) -> list[str]:
    """The short names of a comma-separated plugin list: ``job_submit/lua,require_timelimit`` -> lua, ..."""
    return [item.strip().rsplit("/", 1)[-1].lower() for item in str(value).split(",") if item.strip()]


def file_keys(slurm_conf: Mapping[str, object]) -> dict[str, tuple[str, str]]:
    """``{key: (use, who)}`` of the raw slurm.conf keys of ``slurm_conf`` that name a file a daemon runs
    (``program``), loads as code or trusted configuration (``loaded``) or writes (``written``), as root or
    SlurmUser; and the user programs (``user``, who: the job's user)."""
    found: dict[str, tuple[str, str]] = {}
    for key in slurm_conf:
        if key in PRIVILEGED_PROGRAM_KEYS:
            found[key] = ("program", PRIVILEGED_PROGRAM_KEYS[key])
        elif key in USER_PROGRAM_KEYS:
            found[key] = ("user", "the job's user")
        elif key in WRITTEN_FILE_KEYS:
            found[key] = ("written", WRITTEN_FILE_KEYS[key])
    use = JOBCOMP_LOC_USE.get(str(slurm_conf.get("JobCompType", "")))
    if "JobCompLoc" in slurm_conf and use in ("program", "loaded", "written"):
        found["JobCompLoc"] = (use, "SlurmUser on the controller")
    return found


def suggest(key: str, allowed: Iterable[str]) -> str | None:
    """The canonical spelling of ``key`` when only its case is wrong, else None."""
    lowered = key.lower()
    for candidate in allowed:
        if candidate.lower() == lowered:
            return candidate
    return None


# --- values --------------------------------------------------------------------------------------------------------
# A raw value Slurm cannot parse (MinJobAge=soon) makes slurmctld exit at start on the new slurm.conf: the values of
# the keys below are checked before anything is written. Numbers are what Slurm's parser accepts for the key
# (uint16/uint32, some with a word such as UNLIMITED); plugin names are those Slurm 24.11 ships. Keys not listed
# (free-form parameter lists, programs, hosts) are only kept to one token by the schema.
U16 = 65534
U32 = 4294967294

# How a key's value is checked (:func:`check_value`): ("uint", maximum, words also accepted), ("enum", the values),
# ("list", the values a comma-separated list's items may take).
ValueRule = Union[Tuple[Literal["uint"], int, Tuple[str, ...]], Tuple[Literal["enum", "list"], Tuple[str, ...]]]


def _uint(maximum: int = U32, words: Iterable[str] = ()) -> ValueRule:
    return ("uint", maximum, tuple(words))


def _one_of(*values: str) -> ValueRule:
    return ("enum", tuple(values))


def _plugins(*values: str) -> ValueRule:
    """A comma-separated list, each item one of ``values``."""
    return ("list", tuple(values))


_YES_NO = ("YES", "NO", "yes", "no", "Yes", "No")
_LOG_LEVELS = ("quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5")

SLURM_CONF_VALUES: dict[str, ValueRule] = {
    # seconds, counts, megabytes
    "BatchStartTimeout": _uint(U16), "CompleteWait": _uint(U16), "EioTimeout": _uint(U16),
    "EpilogMsgTime": _uint(), "FirstJobId": _uint(), "GetEnvTimeout": _uint(U16), "GroupUpdateTime": _uint(U16),
    "InactiveLimit": _uint(U16), "MaxArraySize": _uint(4000001), "MaxBatchRequeue": _uint(), "MaxDBDMsgs": _uint(),
    "MaxJobId": _uint(), "MaxStepCount": _uint(), "MaxTasksPerNode": _uint(U16), "MessageTimeout": _uint(U16),
    "MinJobAge": _uint(), "PrologEpilogTimeout": _uint(U16), "ResumeRate": _uint(U16), "ResumeTimeout": _uint(U16),
    "SuspendRate": _uint(U16), "SuspendTimeout": _uint(U16), "SuspendTime": _uint(words=("INFINITE", "-1")),
    "TCPTimeout": _uint(U16), "TreeWidth": _uint(65533), "UnkillableStepTimeout": _uint(U16),
    "VSizeFactor": _uint(65533), "WaitTime": _uint(U16), "FairShareDampeningFactor": _uint(U16),
    "SchedulerTimeSlice": _uint(U16), "AcctGatherNodeFreq": _uint(U16), "DefCpuPerGPU": _uint(),
    "DefMemPerCPU": _uint(words=("UNLIMITED",)), "DefMemPerGPU": _uint(words=("UNLIMITED",)),
    "DefMemPerNode": _uint(words=("UNLIMITED",)), "MaxMemPerCPU": _uint(words=("UNLIMITED",)),
    "MaxMemPerNode": _uint(words=("UNLIMITED",)), "OverTimeLimit": _uint(U16, ("UNLIMITED",)),
    "ResvOverRun": _uint(U16, ("UNLIMITED",)),
    "PriorityWeightAge": _uint(), "PriorityWeightAssoc": _uint(), "PriorityWeightFairshare": _uint(),
    "PriorityWeightJobSize": _uint(), "PriorityWeightPartition": _uint(), "PriorityWeightQOS": _uint(),
    # switches
    "KillOnBadExit": _one_of("0", "1"), "JobFileAppend": _one_of("0", "1"), "JobRequeue": _one_of("0", "1"),
    "DisableRootJobs": _one_of(*_YES_NO), "PriorityFavorSmall": _one_of(*_YES_NO), "TrackWCKey": _one_of(*_YES_NO),
    "EnforcePartLimits": _one_of("ALL", "ANY", "NO", "YES"),
    "SlurmctldDebug": _one_of(*_LOG_LEVELS), "SlurmdDebug": _one_of(*_LOG_LEVELS),
    "SlurmctldSyslogDebug": _one_of(*_LOG_LEVELS), "SlurmdSyslogDebug": _one_of(*_LOG_LEVELS),
    "SlurmSchedLogLevel": _one_of("0", "1"),
    # plugins (Slurm 24.11)
    "ProctrackType": _one_of("proctrack/cgroup", "proctrack/linuxproc", "proctrack/pgid"),
    "TaskPlugin": _plugins("task/affinity", "task/cgroup", "task/none"),
    "JobAcctGatherType": _one_of("jobacct_gather/cgroup", "jobacct_gather/linux", "jobacct_gather/none"),
    "JobCompType": _one_of("jobcomp/none", "jobcomp/elasticsearch", "jobcomp/filetxt", "jobcomp/kafka",
                           "jobcomp/lua", "jobcomp/mysql", "jobcomp/script"),
    "JobContainerType": _one_of("job_container/none", "job_container/tmpfs"),
    "MpiDefault": _one_of("none", "pmi2", "pmix", "pmix_v3", "pmix_v4", "pmix_v5", "cray_shasta"),
    "PreemptType": _one_of("preempt/none", "preempt/partition_prio", "preempt/qos"),
    "TopologyPlugin": _one_of("topology/default", "topology/tree", "topology/block"),
    "HashPlugin": _one_of("hash/k12", "hash/sha3"),
    "MCSPlugin": _one_of("mcs/none", "mcs/account", "mcs/group", "mcs/label", "mcs/user"),
    "AcctGatherEnergyType": _one_of("acct_gather_energy/none", "acct_gather_energy/gpu", "acct_gather_energy/ipmi",
                                    "acct_gather_energy/pm_counters", "acct_gather_energy/rapl",
                                    "acct_gather_energy/xcc"),
    "AcctGatherProfileType": _one_of("acct_gather_profile/none", "acct_gather_profile/hdf5",
                                     "acct_gather_profile/influxdb"),
    "AcctGatherInterconnectType": _one_of("acct_gather_interconnect/none", "acct_gather_interconnect/ofed",
                                          "acct_gather_interconnect/sysfs"),
    "AcctGatherFilesystemType": _one_of("acct_gather_filesystem/none", "acct_gather_filesystem/lustre"),
    "PrioritySiteFactorPlugin": _one_of("site_factor/none"),
}

# slurmdbd.conf keys spec.accounting.slurmdbd.config may set (Slurm 24.11 man page): purging, privacy, logging,
# limits. Where slurmdbd runs, how it authenticates and where its database is are the operator's; archiving needs a
# volume the pod does not have.
SLURMDBD_CONF_KEYS = frozenset((
    "CommitDelay", "DebugFlags", "DebugLevel", "DebugLevelSyslog", "LogTimeFormat", "MaxQueryTimeRange",
    "MessageTimeout", "Parameters", "PrivateData", "PurgeEventAfter", "PurgeJobAfter", "PurgeResvAfter",
    "PurgeStepAfter", "PurgeSuspendAfter", "PurgeTXNAfter", "PurgeUsageAfter", "TCPTimeout", "TrackSlurmctldDown",
    "TrackWCKey",
))
SLURMDBD_CONF_OWNED = {
    "AuthType": "munge authentication is wired by the operator",
    "AuthInfo": "munge authentication is wired by the operator",
    "AuthAltTypes": "JSON Web Tokens are wired by the operator: set spec.restApi.enabled",
    "AuthAltParameters": "JSON Web Tokens are wired by the operator: set spec.restApi.enabled",
    "DbdHost": "slurmdbd runs in the cluster's accounting pod",
    "DbdAddr": "slurmdbd runs in the cluster's accounting pod",
    "DbdBackupHost": "slurmdbd runs in the cluster's accounting pod",
    "DbdPort": "the operator owns the ports",
    "SlurmUser": "set by the image",
    "PidFile": "set by the image",
    "LogFile": "slurmdbd logs to the container's output",
    "PluginDir": "set by the image",
    "StorageType": "set spec.accounting.database",
    "StorageHost": "set spec.accounting.database",
    "StorageBackupHost": "set spec.accounting.database",
    "StoragePort": "set spec.accounting.database",
    "StorageLoc": "set spec.accounting.database.name",
    "StorageUser": "set spec.accounting.database.user",
    "StoragePass": "the password comes from a Secret: spec.accounting.database.passwordSecretRef",
    "StorageParameters": "set spec.accounting.database.tls",
    "ArchiveDir": "archiving is not supported (no archive volume)",
    "ArchiveEvents": "archiving is not supported (no archive volume)",
    "ArchiveJobs": "archiving is not supported (no archive volume)",
    "ArchiveResvs": "archiving is not supported (no archive volume)",
    "ArchiveScript": "archiving is not supported (no archive volume)",
    "ArchiveSteps": "archiving is not supported (no archive volume)",
    "ArchiveSuspend": "archiving is not supported (no archive volume)",
    "ArchiveTXN": "archiving is not supported (no archive volume)",
    "ArchiveUsage": "archiving is not supported (no archive volume)",
}
SLURMDBD_CONF_VALUES: dict[str, ValueRule] = {
    "DebugLevel": _one_of(*_LOG_LEVELS), "DebugLevelSyslog": _one_of(*_LOG_LEVELS),
    "CommitDelay": _uint(U16), "MessageTimeout": _uint(U16), "TCPTimeout": _uint(U16),
    "TrackSlurmctldDown": _one_of(*_YES_NO), "TrackWCKey": _one_of(*_YES_NO),
}

CGROUP_CONF_VALUES: dict[str, ValueRule] = {
    "CgroupPlugin": _one_of("autodetect", "cgroup/v1", "cgroup/v2", "disabled"),
    "ConstrainCores": _one_of(*_YES_NO), "ConstrainDevices": _one_of(*_YES_NO),
    "ConstrainRAMSpace": _one_of(*_YES_NO), "ConstrainSwapSpace": _one_of(*_YES_NO),
    "IgnoreSystemd": _one_of(*_YES_NO), "IgnoreSystemdOnFailure": _one_of(*_YES_NO),
    "SignalChildrenProcesses": _one_of(*_YES_NO), "EnableExtraControllers": _one_of(*_YES_NO),
    "MemorySwappiness": _uint(100), "SystemdTimeout": _uint(),
}


def check_value(rule: ValueRule, value: object) -> str | None:
    """None when ``value`` fits ``rule`` (an entry of the tables above), else what it must be."""
    text = str(value)
    if len(rule) == 3:  # ("uint", maximum, words): only a uint rule has three parts
        maximum, words = rule[1], rule[2]
        # [0-9] spelt out: str.isdigit() also takes other scripts' digits, which int() and Slurm refuse.
        if text in words or (re.fullmatch(r"[0-9]{1,20}", text) and int(text) <= maximum):
            return None
        return "a whole number 0..%d%s" % (maximum, "".join(" or %s" % w for w in words))
    kind, allowed = rule
    if kind == "enum":
        return None if text in allowed else "one of %s" % ", ".join(allowed)
    items = text.split(",")
    if items and all(item in allowed for item in items):
        return None
    return "a comma-separated list of %s" % ", ".join(allowed)
