"""Node health in the render: slurm.conf, the settings the health programs read, the worker mount, the NCCL CronJob."""

import json

from resources import load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster_with_nodesets
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render.slurm_conf import render_slurm_conf


def objects(cluster, nodesets):
    return dict(((o["kind"], o["metadata"]["name"]), o) for o in render.render_cluster(cluster, nodesets))


def conf_keys(cluster, nodesets):
    c, ns = validate_cluster_with_nodesets(cluster, nodesets)
    return dict(line.split("=", 1) for line in render_slurm_conf(c, ns).splitlines() if "=" in line
                and not line.startswith(("#", "NodeSet", "PartitionName")))


def test_the_shipped_program_runs_unless_the_cluster_names_its_own():
    keys = conf_keys(make_cluster({"healthChecks": {"interval": 60, "nodeStates": ["IDLE", "MIXED"]}}), [])
    assert (keys["HealthCheckProgram"], keys["HealthCheckInterval"], keys["HealthCheckNodeState"]) == (
        names.HEALTH_CHECK_PROGRAM, "60", "IDLE,MIXED")
    own = conf_keys(make_cluster({"slurm": {"healthCheckInterval": 300, "healthCheckProgram": "/usr/sbin/nhc"}}), [])
    assert (own["HealthCheckProgram"], own["HealthCheckInterval"]) == ("/usr/sbin/nhc", "300")
    assert "HealthCheckNodeState" not in own
    off = conf_keys(make_cluster({"healthChecks": {"enabled": False}}), [])
    assert "HealthCheckProgram" not in off and "HealthCheckInterval" not in off


def test_each_nodeset_gets_its_own_settings_with_its_gpu_thresholds_over_the_clusters():
    cluster = make_cluster({"healthChecks": {"minFreeTmpMiB": 2048, "gpu": {"maxRetiredPages": 30}}})
    gpu = make_nodeset("gpu", {"gpu": {"count": 8}, "resources": {"limits": {"cpu": "8", "memory": "64Gi"}},
                               "healthChecks": {"gpu": {"persistenceMode": False}}})
    cpu = make_nodeset("cpu", {"healthChecks": {"enabled": False}})
    data = objects(cluster, [gpu, cpu])[("ConfigMap", "demo-health-checks")]["data"]
    g = json.loads(data["gpu.json"])
    assert g["enabled"] is True
    assert g["checks"]["gpu"] == {"count": 8, "persistenceMode": False, "maxUncorrectedEccErrors": 0,
                                  "maxRetiredPages": 30, "maxRemappedRows": 512,
                                  "xids": [48, 63, 64, 74, 79, 92, 94, 95], "maxXidEvents": 0}
    assert g["checks"]["dcgm"] == {"level": 1}
    assert g["checks"]["disks"] == [{"path": names.SLURMD_SPOOL, "minFreeMiB": 1024},
                                    {"path": "/tmp", "minFreeMiB": 2048}]
    assert g["checks"]["memory"]["minTotalMiB"] == 65536 - 3276  # its RealMemory
    assert g["checks"]["jail"] == {"path": names.JAIL_MOUNT, "requireMount": True}
    c = json.loads(data["cpu.json"])
    assert c["enabled"] is False and "gpu" not in c["checks"]


def test_workers_mount_their_own_file_where_the_program_reads_it():
    sts = objects(make_cluster(), [make_nodeset("cpu")])[("StatefulSet", "demo-cpu")]
    pod = sts["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "health-checks")
    assert volume["configMap"] == {"name": "demo-health-checks", "items": [{"key": "cpu.json", "path": "health.json"}]}
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "health-checks")
    assert mount == {"name": "health-checks", "mountPath": "/etc/soperator/health", "readOnly": True}


def test_the_nccl_check_is_off_unless_scheduled_and_a_gpu_nodeset_has_a_threshold():
    gpu = make_nodeset("gpu", {"gpu": {"count": 8}, "healthChecks": {"ncclMinBusBandwidthGBps": 350}})
    assert ("CronJob", "demo-nccl-check") not in objects(make_cluster(), [gpu])
    scheduled = make_cluster({"healthChecks": {"nccl": {"schedule": "0 3 * * 0"}}})
    assert ("CronJob", "demo-nccl-check") not in objects(scheduled, [make_nodeset("gpu", {"gpu": {"count": 8}})])
    assert ("CronJob", "demo-nccl-check") not in objects(dict(scheduled, spec=dict(scheduled["spec"],
                                                                                   maintenance=True)), [gpu])
    found = objects(scheduled, [gpu])
    cron = found[("CronJob", "demo-nccl-check")]
    assert cron["spec"]["schedule"] == "0 3 * * 0" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    # slurmctld calls srun back by its host name: a headless Service and the controller's DNS searches resolve it
    assert (pod["hostname"], pod["subdomain"]) == ("nccl-check", "demo-nccl-check")
    assert found[("Service", "demo-nccl-check")]["spec"]["clusterIP"] == "None"
    searches = found[("StatefulSet", "demo-controller")]["spec"]["template"]["spec"]["dnsConfig"]["searches"]
    assert searches[1] == "demo-nccl-check.hpc.svc.cluster.local"
    assert ("Service", "demo-nccl-check") not in objects(make_cluster(), [gpu])
    assert [c["name"] for c in pod["initContainers"]] == ["munge"]
    container = pod["containers"][0]
    assert container["args"] == [names.NCCL_CHECK_PROGRAM, "/etc/soperator/health/nccl.json"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # SlurmUser, not root: it may drain nodes, its jobs pass DisableRootJobs, it cannot write over the jail.
    assert (container["securityContext"]["runAsUser"], container["securityContext"]["runAsGroup"]) == (
        names.SLURM_UID, names.SLURM_UID)
    assert container["securityContext"]["runAsNonRoot"] is True and "runAsUser" not in pod["securityContext"]
    settings = json.loads(found[("ConfigMap", "demo-health-checks")]["data"]["nccl.json"])
    assert settings["nodesets"] == {"gpu": {"gpus": 8, "minBusBandwidthGBps": 350}}
    assert settings["args"] == ["-b", "512M", "-e", "8G", "-f", "2"]
    assert settings["resultsDir"] == "/mnt/jail/var/lib/soperator/nccl"


def test_the_gpu_example_schedules_the_nccl_check():
    cluster, nodesets = load_example("gpu-cluster.yaml")
    assert ("CronJob", "ml-nccl-check") in objects(cluster, nodesets)
