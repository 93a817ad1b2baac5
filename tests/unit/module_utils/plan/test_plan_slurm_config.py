"""slurm.conf applied in place (scontrol reconfigure) or by a restart (plan/slurm_config.py): the whole planner, as
one reconcile decides it from the SlurmCluster's status, the controller pod and its mounted copy of the file."""

from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, slurm_config, status
from ansible_collections.soperator.slurm.plugins.module_utils.render import controller
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import config_keys, scontrol

NOW = 1_700_000_000
SLURM = scontrol.parse_show_node("NodeName=demo-cpu-0 CPUTot=2 CPUAlloc=0 State=IDLE+DYNAMIC_NORM")
ONE_HOUR = [{"name": "main", "default": True, "maxTime": "1:00:00"}]
UNLIMITED = [{"name": "main", "default": True}]


def cluster(partitions, slurm_conf=None, recorded=None):
    spec = {"partitions": partitions}
    if slurm_conf:
        spec["slurm"] = {"slurmConf": slurm_conf}
    obj = make_cluster(spec, uid="c-uid")
    if recorded:
        obj["status"] = {"slurmConfig": recorded}
    return obj


def files_of(obj):
    p = converge.plan(obj, [make_nodeset("cpu", {"replicas": 1}, uid="n-uid")],
                      {"statefulsets": {}, "pods": {}, "slurm": None}, NOW)
    return slurm_config.rendered_files(p.objects.manifests, "demo")


def given(obj):
    """status.slurmConfig as recorded once slurmctld has the slurm.conf of ``obj``."""
    files = files_of(obj)
    return {"digest": slurm_config.digest(files["slurm.conf"]), "restartDigest": controller.restart_digest(files)[:16],
            "appliedBy": "Reconfigured", "lastAppliedTime": "2023-11-14T22:12:20Z"}


def plan(obj, pod_of=None, mounted_of=None, slurm=SLURM, read=True):
    """One reconcile of ``obj``: its controller pod carries the restart hash of ``pod_of``'s files (default: obj's
    own), its mounted slurm.conf is ``mounted_of``'s (read only when ``read``: the adapter reads it on request)."""
    hash_files = files_of(pod_of or obj)
    pods = {"demo-controller-0": {"metadata": {"name": "demo-controller-0", "uid": "ctl", "annotations": {
        names.ANNOTATION_CONFIG_HASH: controller.restart_digest(hash_files)}}}}
    observed = {"statefulsets": {}, "pods": pods, "slurm": slurm}
    if read:
        observed["mounted_slurm_conf"] = files_of(mounted_of or obj)["slurm.conf"]
    return converge.plan(obj, [make_nodeset("cpu", {"replicas": 1}, uid="n-uid")], observed, NOW)


def test_a_partition_change_is_one_reconfigure_once_the_pod_has_the_file_and_never_a_restart():
    old, new = cluster(UNLIMITED), cluster(ONE_HOUR, recorded=given(cluster(UNLIMITED)))
    assert "MaxTime=1:00:00" in files_of(new)["slurm.conf"]
    # The controller's pod template is the same: no restart.
    assert controller.restart_digest(files_of(old)) == controller.restart_digest(files_of(new))
    asked = plan(new, read=False)
    assert asked.read_mounted_config and not asked.slurm.reconfigure
    waiting = plan(new, mounted_of=old)
    assert not waiting.slurm.reconfigure and any("waiting for the controller pod to see the new file" in w
                                           for w in waiting.report.pending)
    assert waiting.report.slurm_config == given(old)
    done = plan(new)
    assert done.slurm.reconfigure and "slurm.conf" in done.slurm.reconfigure
    assert done.report.slurm_config["digest"] == given(new)["digest"]
    assert done.report.slurm_config["appliedBy"] == "Reconfigured"
    assert done.report.slurm_config["lastAppliedTime"] == "2023-11-14T22:13:20Z"
    # Recorded: the next reconcile asks nothing, reads nothing.
    again = plan(cluster(ONE_HOUR, recorded=done.report.slurm_config), read=False)
    assert not again.slurm.reconfigure and not again.read_mounted_config and not again.report.pending
    assert again.report.slurm_config == done.report.slurm_config


def test_a_key_that_needs_a_restart_waits_for_the_new_pod_and_says_restarted():
    old = cluster(UNLIMITED)
    new = cluster(UNLIMITED, slurm_conf={"CommunicationParameters": "block_null_hash"}, recorded=given(old))
    assert controller.restart_digest(files_of(old)) != controller.restart_digest(files_of(new))
    # The old pod (its template's hash) gets the new file through its volume: not applied by reconfigure.
    rolling = plan(new, pod_of=old)
    assert not rolling.slurm.reconfigure
    assert any("replaced for a setting that needs a restart" in w for w in rolling.report.pending)
    done = plan(new)
    assert done.slurm.reconfigure and done.report.slurm_config["appliedBy"] == "Restarted"


def test_nothing_is_decided_while_slurmctld_does_not_answer():
    recorded = given(cluster(UNLIMITED))
    p = plan(cluster(ONE_HOUR, recorded=recorded), slurm=None)
    assert not p.slurm.reconfigure and not p.read_mounted_config and p.report.slurm_config == recorded


def test_a_cluster_without_a_record_is_reconfigured_once_and_recorded():
    """A cluster converged by an older operator: what its slurmctld read is not known, so it is given the file."""
    p = plan(cluster(UNLIMITED))
    assert p.slurm.reconfigure and p.report.slurm_config["appliedBy"] == "Reconfigured"


def test_the_status_carries_what_slurmctld_was_given():
    p = plan(cluster(ONE_HOUR, recorded=given(cluster(UNLIMITED))))
    written = status.cluster_status({}, {"metadata": {"generation": 3}}, p, "2023-11-14T22:13:20Z")
    assert written["slurmConfig"] == p.report.slurm_config


def test_restart_lines_are_the_documented_keys_only():
    text = ("# comment\nSlurmctldPort=6817\nslurmuser=slurm\nAuthType=auth/munge\nKillWait=30\n"
            "PartitionName=main Nodes=cpu MaxTime=UNLIMITED\nNodeSet=cpu Feature=cpu\nSwitchType=switch/x\n"
            "CommunicationParameters=block_null_hash\nMaxNodeCount=64\n")
    assert config_keys.restart_lines(text) == ("SlurmctldPort=6817\nslurmuser=slurm\nAuthType=auth/munge\n"
                                               "SwitchType=switch/x\nCommunicationParameters=block_null_hash\n")
    # Each restart key is a slurm.conf key the collection knows (allowed, owned or typed): no typo in the table.
    known = set(config_keys.SLURM_CONF_KEYS) | set(config_keys.SLURM_CONF_OWNED) | set(config_keys.SLURM_CONF_TYPED)
    assert set(config_keys.RESTART_KEYS) <= known
