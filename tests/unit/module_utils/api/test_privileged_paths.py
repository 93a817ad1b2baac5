"""Nothing a job user can write is a path a privileged process executes, loads or trusts (issue 22, items 1 and 2).

Two tables, each row judged under the installer's default policy and under the strictest one
(``allow_privileged_programs: false``, no host path), and refused naming the user's field:

- every system tree a jail sub-mount could take (in the jail, setuid programs and root's sessions trust them; the
  slurmd container mounts every sub-mount at the same path, where slurmd, its Prolog and the kubelet's probe run
  as root), with every kind of sub-mount;
- every slurm.conf key that makes slurmctld, slurmd or slurmstepd run, load or write a file (Slurm 24.11's
  slurm.conf(5): PARAMETERS and FILE AND DIRECTORY PERMISSIONS; cgroup.conf(5)), with every place users write.

The accepted rows (data directories; programs of the images) make each table able to fail both ways. The tables are
written out here rather than read from config_keys, and each constant of config_keys is checked to be covered, so
a tree or key dropped from the code, or added to it untested, fails.
"""

import os

import pytest
import yaml
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys, paths
from ansible_collections.soperator.slurm.plugins.modules import slurm_cluster

ROOT = os.path.abspath(__file__).rsplit(os.sep, 5)[0]

DEFAULT = {}
STRICTEST = {"allow_privileged_programs": False, "allowed_host_path_prefixes": []}
POLICIES = [pytest.param(DEFAULT, id="default-policy"), pytest.param(STRICTEST, id="strictest-policy")]
# A policy under which host paths are allowed: the hostPath kind's mountPath is then judged alone.
HOSTS = {"allowed_host_path_prefixes": ["/mnt/data"]}


def judge(cluster_spec, policy):
    """{path: message} of every problem (policy included); {} when accepted."""
    try:
        spec.validate_cluster_with_nodesets(make_cluster(cluster_spec), [make_nodeset()],
                                            policy=policies.normalize(policy))
    except SpecErrors as e:
        return dict((err.path, err.message) for err in e.errors)
    return {}


# --- 1. system trees ----------------------------------------------------------------------------------------------
# Every system tree, and paths below it that the review found accepted or that privileged programs trust: the
# loader's (/usr/lib*, /lib*), PATH's (/usr/local/bin, /usr/local/sbin, /usr/sbin, /bin, /sbin), Slurm's plugins,
# munge's key, sudo's and PAM's configuration, root's home, the state trees (/var/lib), /opt's packages.
SYSTEM_TREE_PATHS = [
    "/bin", "/bin/x", "/boot", "/boot/efi", "/dev", "/dev/shm", "/etc", "/etc/munge", "/etc/sudoers.d", "/etc/pam.d",
    "/etc/ld.so.conf.d", "/etc/slurm", "/etc/soperator", "/lib", "/lib/x86_64-linux-gnu/security", "/lib32",
    "/lib64", "/libx32", "/libexec", "/lib.usr-is-merged", "/opt", "/opt/x", "/opt/soperator/bin", "/proc",
    "/proc/x", "/root", "/root/.ssh", "/run", "/run/munge", "/sbin", "/sys", "/sys/fs/cgroup", "/tmp", "/tmp/x",
    "/mnt/soperator", "/mnt/soperator/sub-mounts", "/mnt/soperator/sub-mounts/x",
    "/usr", "/usr/local", "/usr/local/bin", "/usr/local/sbin", "/usr/sbin", "/usr/bin", "/usr/libexec",
    "/usr/lib/x86_64-linux-gnu/slurm", "/usr/lib/x86_64-linux-gnu/security", "/usr/local/cuda", "/usr/share",
    "/var", "/var/lib", "/var/lib/munge", "/var/tmp", "/var/spool", "/var/spool/slurmd", "/var/log", "/var/run",
    "/mnt", "/mnt/jail", "/mnt/jail/x", "/nix", "/nix/store", "/gnu", "/snap", "/snap/bin",
]
# Data directories: a sub-mount there is what sub-mounts are for.
DATA_PATHS = ["/home", "/home/shared", "/home/alice", "/scratch", "/scratch/nvme", "/data", "/data/sets", "/datasets",
              "/mnt/nvme", "/mnt/data/x", "/srv", "/srv/data", "/media/archive", "/cvmfs/soft.example.org", "/apps"]
# Top-level directories of the images' Debian trixie rootfs (hack/slurm-rootfs.sh; `tar -t` of its rootfs): each is
# a system tree or one of the data trees.
TRIXIE_TOP_LEVEL = ["bin", "boot", "dev", "etc", "home", "lib", "lib64", "media", "mnt", "opt", "proc", "root", "run",
                    "sbin", "srv", "sys", "tmp", "usr", "var"]
DATA_TOP_LEVEL = {"home", "media", "mnt", "srv"}
KINDS = {
    "emptyDir": {"emptyDir": True},
    "claim": {"claimName": "data"},
    "claim-read-only": {"claimName": "data", "readOnly": True},
    "hostPath": {"hostPath": "/mnt/data/x"},
    "hostPath-writable": {"hostPath": "/mnt/data/x", "readOnly": False},
}


def sub_mounts(*mounts):
    return {"jail": {"storageClassName": "s", "size": "1Gi", "subMounts": [
        dict({"name": "m%d" % i, "mountPath": path}, **KINDS[kind]) for i, (path, kind) in enumerate(mounts)]}}


@pytest.mark.parametrize("policy", POLICIES + [pytest.param(HOSTS, id="host-paths-allowed")])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("path", SYSTEM_TREE_PATHS)
def test_a_sub_mount_in_a_system_tree_is_refused_naming_its_field(path, kind, policy):
    errors = judge(sub_mounts((path, kind)), policy)
    assert "spec.jail.subMounts[0].mountPath" in errors, errors
    assert path in errors["spec.jail.subMounts[0].mountPath"]


@pytest.mark.parametrize("path", DATA_PATHS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_sub_mount_in_a_data_directory_is_accepted(path, kind):
    policy = HOSTS if kind.startswith("hostPath") else DEFAULT
    assert judge(sub_mounts((path, kind)), policy) == {}
    if not kind.startswith("hostPath"):
        assert judge(sub_mounts((path, kind)), STRICTEST) == {}
    assert paths.may_mirror(path)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_parent_of_a_system_tree_would_hide_it(policy):
    # /mnt holds /mnt/jail in every Slurm container: a sub-mount there would hide the jail from slurmd.
    message = judge(sub_mounts(("/mnt", "emptyDir")), policy)["spec.jail.subMounts[0].mountPath"]
    assert "would hide %s" % names.JAIL_MOUNT in message


@pytest.mark.parametrize("policy", POLICIES)
def test_a_mount_point_users_could_replace_with_a_link_is_refused(policy):
    # Inside a home its owner writes, or inside another sub-mount's volume: a symlink put where the mount point
    # goes would make the runtime mount the volume wherever it points (/usr/sbin of the slurmd container).
    errors = judge(sub_mounts(("/home/alice/data", "emptyDir")), policy)
    assert "a directory its user owns" in errors["spec.jail.subMounts[0].mountPath"]
    errors = judge(sub_mounts(("/data", "claim"), ("/data/ref", "claim-read-only")), policy)
    assert list(errors) == ["spec.jail.subMounts[1].mountPath"]
    assert "inside the sub-mount /data" in errors["spec.jail.subMounts[1].mountPath"]
    # Side by side is fine; a common prefix is no nesting (path boundaries).
    assert judge(sub_mounts(("/data", "claim"), ("/data-ref", "claim-read-only")), policy) == {}


def test_every_top_level_directory_of_the_images_is_a_system_tree_or_data():
    for name in TRIXIE_TOP_LEVEL:
        # Below a data tree is data; /mnt itself holds the jail's mount point, so only /mnt/<name> is.
        assert (name in DATA_TOP_LEVEL) == (paths.system_tree("/%s/x" % name) is None), name
        assert (name in DATA_TOP_LEVEL - {"mnt"}) == (paths.system_tree("/" + name) is None), name
    # The loader's trees are an open family: every top-level name starting with "lib" (/library too, knowingly).
    assert paths.system_tree("/library") == "/library"


def test_the_table_covers_every_system_tree_of_the_code():
    tested = set(SYSTEM_TREE_PATHS)
    assert set(paths.SUB_MOUNT_SYSTEM_TREES) <= tested
    assert paths.DAEMON_MIRROR_REFUSED_TREES == paths.SUB_MOUNT_SYSTEM_TREES
    for path in SYSTEM_TREE_PATHS:
        assert paths.system_tree(path) is not None and not paths.may_mirror(path), path


# --- 2. programs, loaded and written files --------------------------------------------------------------------------
# (field, the cluster's spec for a value): every key that makes a daemon run a file as root or SlurmUser.
def slurm_conf(key, extra=None):
    return lambda value: {"slurm": {"slurmConf": dict({key: value}, **(extra or {}))}}


PROGRAMS = {
    # slurmd / slurmstepd, as root, on every node
    "Prolog": slurm_conf("Prolog"), "Epilog": slurm_conf("Epilog"), "RebootProgram": slurm_conf("RebootProgram"),
    "UnkillableStepProgram": slurm_conf("UnkillableStepProgram"),
    # slurmctld, as SlurmUser
    "PrologSlurmctld": slurm_conf("PrologSlurmctld"), "EpilogSlurmctld": slurm_conf("EpilogSlurmctld"),
    "ResumeProgram": slurm_conf("ResumeProgram"), "SuspendProgram": slurm_conf("SuspendProgram"),
    "ResumeFailProgram": slurm_conf("ResumeFailProgram"), "ResvProlog": slurm_conf("ResvProlog"),
    "ResvEpilog": slurm_conf("ResvEpilog"), "MailProg": slurm_conf("MailProg"),
    "JobCompLoc": slurm_conf("JobCompLoc", {"JobCompType": "jobcomp/script"}),
    # a file slurmctld loads (librdkafka's configuration may name plugin libraries)
    "JobCompLoc(kafka)": slurm_conf("JobCompLoc", {"JobCompType": "jobcomp/kafka"}),
    # typed fields
    "healthCheckProgram": lambda value: {"slurm": {"healthCheckInterval": 60, "healthCheckProgram": value}},
    "nccl.command": lambda value: {"healthChecks": {"nccl": {"schedule": "0 3 * * 0", "command": value}}},
}
FIELDS = dict((name, "spec.slurm.slurmConf.%s" % name.split("(")[0]) for name in PROGRAMS)
FIELDS.update({"healthCheckProgram": "spec.slurm.healthCheckProgram", "nccl.command": "spec.healthChecks.nccl.command"})
# Where users write, in the jail or in the containers that run these programs; and a jail sub-mount's path.
USER_PATHS = ["/mnt/jail/usr/sbin/p", "/mnt/jail/home/alice/p", "/home/alice/p", "/root/p", "/tmp/p", "/var/tmp/p",
              "/dev/shm/p", "/run/p", "/var/run/p", "/var/lock/p", "/proc/1/root/usr/sbin/p",
              "/var/spool/slurmd/job1/p", "/data/p", "/scratch/nvme/p"]
WITH_SUB_MOUNTS = sub_mounts(("/data", "claim"), ("/scratch", "emptyDir"))
# Where the images keep programs: accepted under the default policy.
IMAGE_PATHS = ["/usr/sbin/p", "/usr/local/sbin/p", "/usr/local/bin/p", "/usr/lib/slurm/p", "/usr/libexec/p",
               "/bin/p", "/sbin/p", "/lib/p", "/opt/site/p", "/etc/slurm/p"]


def with_sub_mounts(cluster_spec):
    return dict(cluster_spec, **WITH_SUB_MOUNTS)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("value", USER_PATHS + ["relative/p", "/srv/site/p", "/var/lib/site/p"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_from_where_users_write_or_outside_the_images_is_refused(name, value, policy):
    errors = judge(with_sub_mounts(PROGRAMS[name](value)), policy)
    assert FIELDS[name] in errors, errors


@pytest.mark.parametrize("value", IMAGE_PATHS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_of_the_images_is_accepted_unless_the_installer_refuses_all(name, value):
    cluster_spec = with_sub_mounts(PROGRAMS[name](value))
    assert judge(cluster_spec, DEFAULT) == {}
    assert list(judge(cluster_spec, STRICTEST)) == [FIELDS[name]]


def test_a_program_below_a_sub_mount_is_refused_whatever_the_installer_allows():
    policy = {"allowed_program_prefixes": ["/data", "/srv"]}
    for name in sorted(PROGRAMS):
        errors = judge(with_sub_mounts(PROGRAMS[name]("/data/p")), policy)
        assert "the jail sub-mount /data, spec.jail.subMounts[0]" in errors[FIELDS[name]], (name, errors)
        assert judge(with_sub_mounts(PROGRAMS[name]("/srv/p")), policy) == {}, name
        assert FIELDS[name] in judge(with_sub_mounts(PROGRAMS[name]("/usr/sbin/p")), policy), name


@pytest.mark.parametrize("bad", [["/home/admin/bin"], ["/mnt/jail/opt"], ["/tmp"], ["/proc/1/root"], ["relative"],
                                 "/usr"])
def test_an_installer_prefix_where_users_write_is_refused(bad):
    with pytest.raises(ValueError):
        policies.normalize({"allowed_program_prefixes": bad})


def test_the_default_prefixes_are_the_images_system_trees():
    assert policies.normalize({})["allowed_program_prefixes"] == list(paths.IMAGE_PROGRAM_TREES)
    assert policies.normalize({"allowed_program_prefixes": None}) == policies.normalize({})
    for prefix in paths.IMAGE_PROGRAM_TREES:
        assert paths.system_tree(prefix) == prefix  # no sub-mount may take it


def test_where_the_installer_sets_the_policy_every_key_and_the_default_prefixes_are_documented():
    module = slurm_cluster.argument_spec()["policy"]["options"]
    with open(os.path.join(ROOT, "roles", "cluster", "meta", "argument_specs.yml")) as f:
        role = yaml.safe_load(f)["argument_specs"]["main"]["options"]["cluster_policy"]
    assert set(module) == set(role["options"]) == set(policies.KEYS)
    # Unset, not defaulted there: normalize() owns the default.
    assert module["allowed_program_prefixes"].get("default") is None
    assert "default" not in role["options"]["allowed_program_prefixes"]
    spelled = {"module": ", ".join("C(%s)" % p for p in paths.IMAGE_PROGRAM_TREES),
               "role": "(%s)" % ", ".join(paths.IMAGE_PROGRAM_TREES),
               "docs": ", ".join("`%s`" % p for p in paths.IMAGE_PROGRAM_TREES)}
    texts = {"module": " ".join(slurm_cluster.DOCUMENTATION.split()),
             "role": " ".join(role["options"]["allowed_program_prefixes"]["description"].split())}
    for doc in ("api.md", "security.md"):
        with open(os.path.join(ROOT, "docs", doc)) as f:
            assert spelled["docs"] in " ".join(f.read().split()), doc
    for where, text in texts.items():
        assert spelled[where] in text, where


WRITTEN = {"SlurmSchedLogFile": slurm_conf("SlurmSchedLogFile"),
           "JobCompLoc(filetxt)": slurm_conf("JobCompLoc", {"JobCompType": "jobcomp/filetxt"})}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_a_file_slurmctld_writes_is_never_where_users_write(name, policy):
    field = "spec.slurm.slurmConf.%s" % name.split("(")[0]
    for value in USER_PATHS + ["relative"]:
        assert field in judge(with_sub_mounts(WRITTEN[name](value)), policy), value
    # Not a program: the controller's own trees are fine, also under the strictest policy.
    assert judge(with_sub_mounts(WRITTEN[name]("/var/spool/slurmctld/jobcomp.log")), policy) == {}


USER_PROGRAMS = ["TaskProlog", "TaskEpilog", "SrunProlog", "SrunEpilog"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("key", USER_PROGRAMS)
def test_programs_run_as_the_jobs_user_need_only_an_absolute_path(key, policy):
    assert judge({"slurm": {"slurmConf": {key: "/home/alice/p"}}}, policy) == {}
    assert "spec.slurm.slurmConf.%s" % key in judge({"slurm": {"slurmConf": {key: "p"}}}, policy)


# Plugins that would load a script (or a file naming programs) from the configuration directory, and keys the
# operator owns or does not allow: refused whatever their value.
REFUSED_SETTINGS = [
    ("JobSubmitPlugins", "lua"), ("JobSubmitPlugins", "require_timelimit,job_submit/lua"),
    ("CliFilterPlugins", "cli_filter/lua"), ("BurstBufferType", "burst_buffer/lua"),
    ("BurstBufferType", "burst_buffer/datawarp"), ("JobCompType", "jobcomp/lua"),
    ("NodeFeaturesPlugins", "node_features/helpers"),
    ("JobCompType", "jobcomp/script"),  # without JobCompLoc: nothing to judge, and the plugin would not start
    ("AccountingStorageParameters", "SSL_CA=/home/alice/ca.pem"),
    ("AccountingStorageParameters", "max_step_records=10,SSL_KEY=/etc/k"),
    ("AccountingStorageParameters", "ssl_capath=/home/alice"), ("AccountingStorageParameters", "SSL_CERT=/tmp/c"),
    ("SwitchParameters", "fm_authdir=/home/alice"),
    ("PluginDir", "/home/alice/plugins"), ("PlugStackConfig", "/home/alice/plugstack.conf"),
    ("Include", "/home/alice/x.conf"), ("SlurmctldPrimaryOnProg", "/usr/sbin/p"),
    ("SlurmctldPrimaryOffProg", "/usr/sbin/p"), ("SlurmctldLogFile", "/tmp/l"), ("SlurmdLogFile", "/tmp/l"),
    ("SlurmctldPidFile", "/tmp/p"), ("SlurmdPidFile", "/tmp/p"), ("StateSaveLocation", "/tmp/s"),
    ("SlurmdSpoolDir", "/tmp/s"), ("AuthAltParameters", "jwt_key=/home/alice/key"), ("AuthInfo", "socket=/tmp/m"),
    ("HealthCheckProgram", "/usr/p"),
    # passwords: slurm.conf is every user's to read
    ("JobCompPass", "secret"), ("AccountingStoragePass", "secret"),
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("key,value", REFUSED_SETTINGS)
def test_settings_that_load_code_or_leak_secrets_are_refused(key, value, policy):
    assert "spec.slurm.slurmConf.%s" % key in judge({"slurm": {"slurmConf": {key: value}}}, policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_cgroup_mountpoint_is_the_containers(policy):
    assert "spec.slurm.cgroupConf.CgroupMountpoint" in judge(
        {"slurm": {"cgroupConf": {"CgroupMountpoint": "/home/alice/cg"}}}, policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_same_keys_with_safe_values_are_accepted(policy):
    accepted = {"JobSubmitPlugins": "require_timelimit", "CliFilterPlugins": "cli_filter/user_defaults",
                "AccountingStorageParameters": "max_step_records=10", "JobCompType": "jobcomp/elasticsearch",
                "JobCompLoc": "http://es.example.com:9200"}
    assert judge({"slurm": {"slurmConf": accepted}}, policy) == {}


def test_credentials_in_the_job_completion_url_are_refused():
    errors = judge({"slurm": {"slurmConf": {"JobCompType": "jobcomp/elasticsearch",
                                            "JobCompLoc": "https://user:pw@es.example.com:9200"}}}, DEFAULT)
    assert "credentials" in errors["spec.slurm.slurmConf.JobCompLoc"]
    assert "JobCompPass" in judge({"slurm": {"slurmConf": {"jobcomppass": "x"}}}, DEFAULT)[
        "spec.slurm.slurmConf.jobcomppass"]  # the hint names it


def test_the_tables_cover_every_key_of_the_code():
    tested = set(name.split("(")[0] for name in PROGRAMS) | set(name.split("(")[0] for name in WRITTEN)
    assert set(config_keys.PRIVILEGED_PROGRAM_KEYS) | set(config_keys.WRITTEN_FILE_KEYS) | {"JobCompLoc"} <= tested
    assert set(config_keys.USER_PROGRAM_KEYS) == set(USER_PROGRAMS)
    for key, plugin in config_keys.CONFIG_DIR_SCRIPT_PLUGINS:
        assert any(k == key and plugin in config_keys.plugin_names(v) for k, v in REFUSED_SETTINGS), (key, plugin)
    for key, (options, _) in config_keys.FILE_OPTIONS.items():
        for option in options:
            assert any(k == key and option.lower() + "=" in v.lower() for k, v in REFUSED_SETTINGS), (key, option)
    refused = set(k for k, _ in REFUSED_SETTINGS)
    assert set(config_keys.SLURM_CONF_REFUSED) | set(config_keys.OWNED_FILE_KEYS) <= refused
    assert set(config_keys.UNLISTED_PROGRAM_KEYS) <= refused
    for use in ("program", "loaded", "written"):
        assert any(config_keys.JOBCOMP_LOC_USE[t] == use for t in config_keys.JOBCOMP_LOC_USE)
