"""Each SlurmCluster's jail as an Ansible host (api/jail_hosts.py): name, groups, variables."""

from ansible_collections.soperator.slurm.plugins.module_utils.api import jail_hosts

CLUSTER = {"metadata": {"name": "demo", "namespace": "hpc", "labels": {"team": "ml", "app.kubernetes.io/part-of": "x"}},
           "spec": {"maintenance": True, "partitions": [{"name": "main", "default": True}, {"name": "gpus"}]},
           "status": {"phase": "Maintenance", "conditions": [{"type": "Ready", "status": "False"}]}}
NODESETS = [
    {"metadata": {"name": "cpu", "namespace": "hpc"}, "spec": {"clusterRef": {"name": "demo"}, "replicas": 2},
     "status": {"readyReplicas": 2}},
    {"metadata": {"name": "a100", "namespace": "hpc"}, "spec": {"clusterRef": {"name": "demo"}, "replicas": 1,
                                                                "partitions": ["gpus"], "gpu": {"count": 8,
                                                                                                "type": "a100"}}},
    {"metadata": {"name": "cpu", "namespace": "hpc"}, "spec": {"clusterRef": {"name": "other"}, "replicas": 9}},
]


def test_the_host_is_namespace_slash_cluster_with_the_clusters_facts():
    v = jail_hosts.host_vars(CLUSTER, NODESETS, "24.11.5")
    assert v["soperator_jail"] == "hpc/demo" and v["ansible_connection"] == "soperator.slurm.jail"
    assert v["ansible_python_interpreter"] == "/usr/bin/python3"
    assert v["soperator_slurm_version"] == "24.11.5"
    assert v["soperator_partitions"] == [{"name": "main", "default": True, "nodesets": ["cpu"]},
                                         {"name": "gpus", "default": False, "nodesets": ["a100"]}]
    assert [s["name"] for s in v["soperator_nodesets"]] == ["a100", "cpu"]
    assert v["soperator_nodesets"][0] == {"name": "a100", "replicas": 1, "partitions": ["gpus"], "gpus": 8,
                                          "gpu_type": "a100", "elastic": False, "ready_replicas": None}
    assert v["soperator_gpu_nodesets"] == ["a100"]
    assert (v["soperator_maintenance"], v["soperator_phase"], v["soperator_ready"]) == (True, "Maintenance", False)


def test_a_cluster_as_stored_before_its_defaults_still_has_its_default_partition():
    v = jail_hosts.host_vars({"metadata": {"name": "demo", "namespace": "hpc"}, "spec": {}}, NODESETS[:1])
    assert v["soperator_partitions"] == [{"name": "main", "default": True, "nodesets": ["cpu"]}]
    assert v["soperator_maintenance"] is False and v["soperator_phase"] is None and v["soperator_slurm_version"] is None


def test_groups_by_namespace_and_labels_as_ansible_names_them():
    assert jail_hosts.groups(CLUSTER) == ["jails", "namespace_hpc", "label_app_kubernetes_io_part_of_x",
                                          "label_team_ml"]


def test_the_slurm_version_from_the_images_file():
    assert jail_hosts.slurm_version("24.11.5-4+deb13u1\n") == "24.11.5"
    assert jail_hosts.slurm_version("1:23.11.4-2") == "23.11.4"
    assert jail_hosts.slurm_version("") is None and jail_hosts.slurm_version(None) is None
