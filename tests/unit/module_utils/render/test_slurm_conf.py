import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecError
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf


def _validated(cluster_spec=None, nodesets=()):
    return spec.validate_cluster_with_nodesets(make_cluster(cluster_spec), list(nodesets))


def _lines(text):
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _keys(text):
    return dict(line.split("=", 1) for line in _lines(text) if " " not in line)


def test_node_conf_params():
    nodeset = spec.validate_nodeset(make_nodeset("h100", {
        "gpu": {"count": 8, "type": "h100"}, "features": ["ib", "h100"],
        "resources": {"limits": {"cpu": "96", "memory": "1000Gi"}}}))
    assert slurm_conf.node_conf_params(nodeset) == "CPUs=96 RealMemory=972800 Gres=gpu:h100:8 Feature=h100,ib"
    nodeset = spec.validate_nodeset(make_nodeset("g", {"gpu": {"count": 2}}))
    assert slurm_conf.node_conf_params(nodeset) == "Gres=gpu:2 Feature=g"
    assert slurm_conf.node_conf_params(spec.validate_nodeset(make_nodeset())) == "Feature=cpu"


def test_slurm_conf_defaults():
    cluster, nodesets = _validated(nodesets=[make_nodeset("cpu", {"replicas": 2}), make_nodeset("big")])
    text = slurm_conf.render_slurm_conf(cluster, nodesets)
    keys = _keys(text)
    assert keys["ClusterName"] == "demo"
    assert keys["SlurmctldHost"] == "demo-controller-0(demo-controller-0.demo-controller.hpc.svc)"
    assert keys["SlurmctldParameters"] == "enable_configless"
    assert keys["AuthType"] == "auth/munge"
    assert keys["ProctrackType"] == "proctrack/cgroup"
    assert keys["TaskPlugin"] == "task/cgroup,task/affinity"
    assert keys["PrologFlags"] == "Contain"
    assert keys["ReturnToService"] == "2"
    assert keys["MailProg"] == "/bin/true"
    assert keys["SlurmctldPort"] == "6817" and keys["SlurmdPort"] == "6818"
    assert keys["StateSaveLocation"] == "/var/spool/slurmctld"
    assert keys["SlurmdSpoolDir"] == "/var/spool/slurmd"
    assert keys["MaxNodeCount"] == "1024"
    # The shipped health program runs unless the cluster names its own
    assert keys["HealthCheckProgram"] == "/usr/local/sbin/soperator-health-check"
    assert keys["HealthCheckInterval"] == "120" and keys["HealthCheckNodeState"] == "ANY"
    for absent in ("AccountingStorageType", "GresTypes", "NodeName"):
        assert absent not in keys
    lines = _lines(text)
    assert "NodeSet=big Feature=big" in lines and "NodeSet=cpu Feature=cpu" in lines
    assert lines[-1] == "PartitionName=main Nodes=big,cpu Default=YES MaxTime=UNLIMITED State=UP"


def test_scaling_never_changes_slurm_conf():
    one = slurm_conf.render_slurm_conf(*_validated(nodesets=[make_nodeset(spec={"replicas": 1})]))
    many = slurm_conf.render_slurm_conf(*_validated(nodesets=[make_nodeset(spec={"replicas": 50})]))
    assert one == many


def test_partitions_and_overrides():
    cluster, nodesets = _validated({
        "partitions": [{"name": "cpu", "default": True}, {"name": "gpu", "maxTime": "2-00:00:00"},
                       {"name": "debug", "hidden": True, "state": "DRAIN", "config": {"PriorityTier": "5",
                                                                                      "AllowGroups": "a,b"}},
                       {"name": "empty"}],
        "slurm": {"slurmConf": {"TaskPlugin": "task/cgroup", "SchedulerParameters": "bf_continue",
                                "SlurmctldParameters": "enable_configless,cloud_dns"},
                  "healthCheckInterval": 300, "healthCheckProgram": "/usr/sbin/nhc", "maxNodeCount": 10},
    }, [make_nodeset("cpu", {"partitions": ["cpu", "debug"]}), make_nodeset("gpu", {
        "partitions": ["gpu", "debug"], "gpu": {"count": 1, "type": "a100"}})])
    text = slurm_conf.render_slurm_conf(cluster, nodesets)
    lines = _lines(text)
    assert "PartitionName=cpu Nodes=cpu Default=YES MaxTime=UNLIMITED State=UP" in lines
    assert "PartitionName=gpu Nodes=gpu Default=NO MaxTime=2-00:00:00 State=UP" in lines
    assert ("PartitionName=debug Nodes=cpu,gpu Default=NO MaxTime=UNLIMITED State=DRAIN Hidden=YES AllowGroups=a,b "
            "PriorityTier=5") in lines
    assert "PartitionName=empty Default=NO MaxTime=UNLIMITED State=UP" in lines
    keys = _keys(text)
    assert keys["SlurmctldParameters"] == "enable_configless,cloud_dns"
    assert keys["TaskPlugin"] == "task/cgroup"
    assert lines.count("TaskPlugin=task/cgroup") == 1
    assert not any(line.startswith("TaskPlugin=task/cgroup,") for line in lines)
    assert keys["GresTypes"] == "gpu"
    assert keys["HealthCheckInterval"] == "300" and keys["HealthCheckProgram"] == "/usr/sbin/nhc"
    # raw overrides come after the defaults
    assert lines.index("SchedulerParameters=bf_continue") > lines.index("MailProg=/bin/true")


def test_cgroup_conf_merged_by_key():
    cluster, _ = _validated({"slurm": {"cgroupConf": {"ConstrainCores": "no", "AllowedSwapSpace": "0"}}})
    lines = _lines(slurm_conf.render_cgroup_conf(cluster))
    assert lines == ["CgroupPlugin=autodetect", "IgnoreSystemd=yes", "ConstrainCores=no", "ConstrainDevices=yes",
                     "ConstrainRAMSpace=yes", "AllowedSwapSpace=0"]


def test_gres_conf_only_for_gpu_sets():
    cluster, nodesets = _validated({"slurm": {"maxNodeCount": 16}}, [
        make_nodeset("cpu"), make_nodeset("h100", {"gpu": {"count": 8, "type": "h100"}})])
    assert _lines(slurm_conf.render_gres_conf(cluster, nodesets)) == ["NodeName=demo-h100-[0-15] AutoDetect=nvidia"]
    files = slurm_conf.render_config_files(cluster, nodesets)
    assert sorted(files) == ["cgroup.conf", "gres.conf", "plugstack.conf", "slurm.conf"]
    cluster, nodesets = _validated(nodesets=[make_nodeset("cpu")])
    assert slurm_conf.render_gres_conf(cluster, nodesets) is None
    assert "gres.conf" not in slurm_conf.render_config_files(cluster, nodesets)


def test_plugstack_jail_first():
    cluster, _ = _validated()
    lines = _lines(slurm_conf.render_plugstack_conf(cluster))
    assert lines[0] == "required /usr/lib/x86_64-linux-gnu/slurm/spank_chroot.so jail=/mnt/jail"


@pytest.mark.parametrize("value", ["a\nb", "a b", "a\\", "a#b", "a\x00", "a\rb", "a\tb"])
def test_conf_line_refuses_unsafe_values(value):
    with pytest.raises(SpecError) as info:
        slurm_conf.conf_line("MailProg", value, "spec.slurm.slurmConf.MailProg")
    assert info.value.path == "spec.slurm.slurmConf.MailProg"
    assert slurm_conf.conf_line("MailProg", "/bin/true", "x") == "MailProg=/bin/true"
