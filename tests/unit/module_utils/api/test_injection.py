"""Every CR string that reaches a config file is validated: an injection attempt is a SpecError naming the field,
never an extra line. Each case goes through render_cluster, the way the operator and the roles call it."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render

EVIL_VALUES = ["x\nSlurmUser=root", "x\rSlurmUser=root", "x\x00", "x SlurmUser=root", "x\tSlurmUser=root", "x\\",
               "x#"]


def _refused(cluster_spec=None, nodeset_spec=None, nodeset_name="cpu"):
    with pytest.raises(SpecErrors) as info:
        render.render_cluster(make_cluster(cluster_spec), [make_nodeset(nodeset_name, nodeset_spec)])
    return [e.path for e in info.value.errors]


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_slurm_conf_values(value):
    assert _refused({"slurm": {"slurmConf": {"MailProg": value}}}) == ["spec.slurm.slurmConf.MailProg"]


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_cgroup_conf_values(value):
    assert _refused({"slurm": {"cgroupConf": {"ConstrainCores": value}}}) == ["spec.slurm.cgroupConf.ConstrainCores"]


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_partition_config_values(value):
    assert _refused({"partitions": [{"name": "main", "default": True, "config": {"AllowGroups": value}}]}) == [
        "spec.partitions[0].config.AllowGroups"]


@pytest.mark.parametrize("key", ["MailProg\nSlurmUser", "Foo", "Include", "NodeName", "PartitionName",
                                 "SlurmctldHost", "PlugStackConfig", "AuthType", "MailProg=x ClusterName"])
def test_slurm_conf_keys(key):
    assert _refused({"slurm": {"slurmConf": {key: "1"}}})[0].startswith("spec.slurm.slurmConf")


@pytest.mark.parametrize("field,value", [
    ("name", "main\nPartitionName=evil"), ("name", "main Nodes=ALL"), ("maxTime", "1 Default=YES"),
    ("state", "UP\nX=1")])
def test_partition_fields(field, value):
    partition = {"name": "main", "default": True}
    partition[field] = value
    assert _refused({"partitions": [partition]}) == ["spec.partitions[0].%s" % field]


@pytest.mark.parametrize("field,value", [("clusterName", "demo\nSlurmUser=root"),
                                         ("clusterName", "demo SlurmUser=root")])
def test_cluster_name(field, value):
    assert _refused({field: value}) == ["spec.%s" % field]


def test_health_check_program():
    assert _refused({"slurm": {"healthCheckInterval": 5, "healthCheckProgram": "/x\nSlurmUser=root"}}) == [
        "spec.slurm.healthCheckProgram"]


@pytest.mark.parametrize("spec,path", [
    ({"features": ["ib\nNodeName=evil"]}, "nodesets[cpu].spec.features[0]"),
    ({"features": ["ib Gres=gpu:99"]}, "nodesets[cpu].spec.features[0]"),
    ({"features": ["a,b"]}, "nodesets[cpu].spec.features[0]"),
    ({"gpu": {"count": 1, "type": "h100 Weight=1"}}, "nodesets[cpu].spec.gpu.type"),
    ({"partitions": ["main\nPartitionName=x"]}, "nodesets[cpu].spec.partitions[0]"),
])
def test_nodeset_strings(spec, path):
    assert path in _refused(nodeset_spec=spec)


def test_nodeset_name():
    assert _refused(nodeset_name="cpu\nx") == ["nodesets[cpu\nx].metadata.name"]


@pytest.mark.parametrize("value", ["60\nPermitRootLogin yes", "60\rPermitRootLogin yes", "60\x00"])
def test_sshd_values(value):
    assert _refused({"login": {"sshdConfig": {"ClientAliveInterval": value}}}) == [
        "spec.login.sshdConfig.ClientAliveInterval"]


@pytest.mark.parametrize("key", ["ClientAliveInterval\nPermitRootLogin", "Match", "ForceCommand",
                                 "AuthorizedKeysCommand", "ChrootDirectory"])
def test_sshd_keys(key):
    assert _refused({"login": {"sshdConfig": {key: "x"}}})[0].startswith("spec.login.sshdConfig")


def test_safe_values_are_rendered_on_one_line():
    objects = render.render_cluster(make_cluster({"slurm": {"slurmConf": {"SchedulerParameters": "bf_continue"}},
                                                  "login": {"sshdConfig": {"AllowUsers": "alice bob"}}}),
                                    [make_nodeset()])
    data = [o for o in objects if o["kind"] == "ConfigMap"]
    assert "\nSchedulerParameters=bf_continue\n" in data[0]["data"]["slurm.conf"]
    assert "\nAllowUsers alice bob\n" in data[1]["data"]["sshd_config"]


@pytest.mark.parametrize("conf,path,expected", [
    ({"slurmConf": {"MinJobAge": "soon"}}, "spec.slurm.slurmConf.MinJobAge", "must be a whole number 0..4294967294"),
    ({"slurmConf": {"MessageTimeout": "70000"}}, "spec.slurm.slurmConf.MessageTimeout", "0..65534"),
    ({"slurmConf": {"OverTimeLimit": "forever"}}, "spec.slurm.slurmConf.OverTimeLimit", "or UNLIMITED"),
    ({"slurmConf": {"ProctrackType": "proctrack/cray_aries"}}, "spec.slurm.slurmConf.ProctrackType",
     "one of proctrack/cgroup"),
    ({"slurmConf": {"TaskPlugin": "task/cgroup,task/bogus"}}, "spec.slurm.slurmConf.TaskPlugin",
     "comma-separated list of task/affinity"),
    ({"slurmConf": {"SlurmctldDebug": "loud"}}, "spec.slurm.slurmConf.SlurmctldDebug", "one of quiet"),
    ({"cgroupConf": {"ConstrainCores": "maybe"}}, "spec.slurm.cgroupConf.ConstrainCores", "one of YES"),
])
def test_a_raw_value_slurm_cannot_parse_is_refused_naming_the_field(conf, path, expected):
    with pytest.raises(SpecErrors) as info:
        render.render_cluster(make_cluster({"slurm": conf}), [make_nodeset("cpu", {})])
    [error] = info.value.errors
    assert error.path == path and expected in str(error), str(error)


@pytest.mark.parametrize("conf", [
    {"MinJobAge": "300"}, {"MinJobAge": "0"}, {"OverTimeLimit": "UNLIMITED"}, {"SuspendTime": "INFINITE"},
    {"TaskPlugin": "task/cgroup,task/affinity"}, {"ProctrackType": "proctrack/linuxproc"},
    {"SlurmctldDebug": "debug2"}, {"MailProg": "/usr/bin/mail"},
])
def test_values_slurm_parses_are_accepted(conf):
    render.render_cluster(make_cluster({"slurm": {"slurmConf": conf}}), [make_nodeset("cpu", {})])
