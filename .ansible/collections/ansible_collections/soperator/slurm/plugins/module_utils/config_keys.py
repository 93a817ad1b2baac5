# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Allowlists of raw configuration keys a SlurmCluster may set, and the keys the operator owns.

A raw override whose key is not listed here is refused (a typo would otherwise be silently ignored or, worse,
let a crafted key inject a line). Keys are matched exactly in their canonical spelling; the error suggests it
when only the case differs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# slurm.conf keys (Slurm 24.05 - 25.05 man page), without node/partition/nodeset lines and owned keys.
SLURM_CONF_KEYS = frozenset((
    "AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageExternalHost",
    "AccountingStorageHost", "AccountingStorageParameters", "AccountingStoragePass", "AccountingStoragePort",
    "AccountingStorageTRES", "AccountingStorageType", "AccountingStorageUser", "AccountingStoreFlags",
    "AcctGatherEnergyType", "AcctGatherFilesystemType", "AcctGatherInterconnectType", "AcctGatherNodeFreq",
    "AcctGatherProfileType", "AllowSpecResourcesUsage", "AuthAltParameters", "AuthAltTypes", "BatchStartTimeout",
    "BcastExclude", "BcastParameters", "BurstBufferType", "CliFilterPlugins", "CommunicationParameters",
    "CompleteWait", "CpuFreqDef", "CpuFreqGovernors", "DataParserParameters", "DebugFlags", "DefCpuPerGPU",
    "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode", "DependencyParameters", "DisableRootJobs", "EioTimeout",
    "EnforcePartLimits", "Epilog", "EpilogMsgTime", "EpilogSlurmctld", "FairShareDampeningFactor",
    "FederationParameters", "FirstJobId", "GetEnvTimeout", "GpuFreqDef", "GroupUpdateForce", "GroupUpdateTime",
    "HashPlugin", "HealthCheckNodeState", "InactiveLimit", "InteractiveStepOptions", "JobAcctGatherFrequency",
    "JobAcctGatherParams", "JobAcctGatherType", "JobCompHost", "JobCompLoc", "JobCompParams", "JobCompPass",
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
    "SlurmUser": "set by the images",
    "SlurmdUser": "set by the images",
    "SlurmctldPidFile": "set by the images",
    "SlurmdPidFile": "set by the images",
    "SlurmctldLogFile": "daemons log to the container's output",
    "SlurmdLogFile": "daemons log to the container's output",
    "PluginDir": "set by the images",
    "Include": "every file is rendered by the operator",
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
}

CGROUP_CONF_KEYS = frozenset((
    "AllowedRAMSpace", "AllowedSwapSpace", "CgroupMountpoint", "CgroupPlugin", "ConstrainCores",
    "ConstrainDevices", "ConstrainRAMSpace", "ConstrainSwapSpace", "EnableControllers", "EnableExtraControllers",
    "IgnoreSystemd", "IgnoreSystemdOnFailure", "MaxRAMPercent", "MaxSwapPercent", "MemorySwappiness",
    "MinRAMSpace", "SignalChildrenProcesses", "SystemdTimeout",
))
CGROUP_CONF_OWNED = {}

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

# sshd_config keywords spec.login.sshdConfig may set. Everything about where users land (ChrootDirectory),
# how they authenticate (keys only, read from the jail) and what sshd runs is owned by the operator.
SSHD_KEYS = frozenset((
    "AcceptEnv", "AllowAgentForwarding", "AllowGroups", "AllowStreamLocalForwarding", "AllowTcpForwarding",
    "AllowUsers", "Banner", "Ciphers", "ClientAliveCountMax", "ClientAliveInterval", "DenyGroups", "DenyUsers",
    "DisableForwarding", "GatewayPorts", "HostKeyAlgorithms", "KexAlgorithms", "LogLevel", "LoginGraceTime",
    "MACs", "MaxAuthTries", "MaxSessions", "MaxStartups", "PermitRootLogin", "PermitTTY", "PerSourceMaxStartups",
    "PrintLastLog", "PrintMotd", "PubkeyAcceptedAlgorithms", "TCPKeepAlive", "UseDNS", "X11Forwarding",
))
SSHD_OWNED = {
    "ChrootDirectory": "every session is jailed",
    "HostKey": "host keys come from the cluster's Secret",
    "AuthorizedKeysFile": "keys are read from the jail's home directories",
    "AuthorizedKeysCommand": "would run a command as root",
    "AuthorizedKeysCommandUser": "would run a command as root",
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
    "UsePAM": "key authentication only: PAM is off",
}
# PermitRootLogin may only be tightened: a password root login is never allowed.
SSHD_PERMIT_ROOT_LOGIN = ("prohibit-password", "forced-commands-only", "no")


def suggest(key, allowed):
    """The canonical spelling of ``key`` when only its case is wrong, else None."""
    lowered = key.lower()
    for candidate in allowed:
        if candidate.lower() == lowered:
            return candidate
    return None
