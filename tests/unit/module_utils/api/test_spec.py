import copy

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api import cel, fields, schema, spec, values
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors


def errors_of(func, *args):
    with pytest.raises(SpecErrors) as info:
        func(*args)
    return [(e.path, e.message) for e in info.value.errors]


def paths(func, *args):
    return [path for path, _message in errors_of(func, *args)]


def _walk_rules(node, found):
    for rule in node.get("x-kubernetes-validations") or ():
        found.append(rule)
    for sub in (node.get("properties") or {}).values():
        _walk_rules(sub, found)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            _walk_rules(node[key], found)
    return found


def test_every_cel_rule_has_a_python_twin():
    rules = _walk_rules(schema.slurm_cluster_schema(), []) + _walk_rules(schema.nodeset_schema(), [])
    assert len(rules) >= 12
    messages = [rule["message"] for rule in rules]
    assert sorted(set(messages)) == sorted(cel.TWINS)


@pytest.mark.parametrize("mode, refused", [("0777", True), ("1777", False), ("0755", False), ("777\n", False)])
def test_the_sticky_bit_twin_reads_dollar_as_cel_does(mode, refused):
    # CEL's '[2367]$' (RE2) does not match "777\n": the rule lets it pass (the pattern refuses it), as the twin must.
    twin = cel.TWINS[schema.SUB_MOUNT_MODE_STICKY]
    assert bool(twin({"emptyDir": True, "mode": mode}, "spec.jail.subMounts[0]")) is refused


def test_cluster_defaults():
    result = spec.validate_cluster(make_cluster())
    s = result["spec"]
    assert s["clusterName"] == "demo"
    assert s["images"]["controller"] == "soperator/slurm-controller:0.1.0"
    assert s["images"]["pullPolicy"] == "IfNotPresent"
    assert s["login"] == {"replicas": 1, "service": {"type": "ClusterIP", "port": 22}, "updateGracePeriod": "30m"}
    assert s["controller"]["spool"] == {"size": "10Gi"}
    assert s["partitions"] == [{"name": "main", "default": True, "maxTime": "UNLIMITED", "state": "UP",
                                "hidden": False}]
    assert s["slurm"]["selectType"] == "select/cons_tres"
    assert s["slurm"]["maxNodeCount"] == 1024
    assert s["maintenance"] is False
    assert s["deletionPolicy"] == {"jail": "Retain", "secrets": "Retain", "database": "Retain"}
    assert s["accounting"]["enabled"] is False and s["restApi"]["enabled"] is False
    assert s["exporter"]["enabled"] is False
    assert s["jail"]["populate"] == {"repopulateToken": ""}


def test_collection_version_sets_default_images():
    result = spec.validate_cluster(make_cluster({"images": {"worker": "mine:1"}}), "9.9.9")
    assert result["spec"]["images"]["worker"] == "mine:1"
    assert result["spec"]["images"]["login"] == "soperator/slurm-login:9.9.9"


def test_input_is_never_mutated():
    obj = make_cluster({"partitions": [{"name": "a"}]})
    obj["status"] = {"phase": "Ready"}
    before = copy.deepcopy(obj)
    result = spec.validate_cluster(obj)
    assert obj == before
    assert result["status"] == {"phase": "Ready"}
    assert result["spec"]["partitions"][0]["state"] == "UP"


def test_namespace_defaults():
    obj = make_cluster()
    del obj["metadata"]["namespace"]
    assert spec.validate_cluster(obj)["metadata"]["namespace"] == "default"


def test_nodeset_defaults():
    result = spec.validate_nodeset(make_nodeset())
    assert result["spec"]["replicas"] == 1
    assert result["spec"]["gpu"] == {"count": 0, "resourceName": "nvidia.com/gpu"}
    assert result["spec"]["drainTimeout"] == "30m"


def test_all_errors_are_collected_with_paths():
    obj = make_cluster({
        "bogus": 1,
        "login": {"replicas": 17, "service": {"type": "Magic"}},
        "partitions": [{"name": "a", "default": True}, {"name": "a", "default": True, "maxTime": "soon"}],
        "slurm": {"slurmConf": {"Foo": "1"}, "maxNodeCount": "many"},
    })
    found = paths(spec.validate_cluster, obj)
    assert found == sorted(found, key=found.index)  # stable order
    for path in ["spec.bogus", "spec.login.replicas", "spec.login.service.type", "spec.partitions[1].default",
                 "spec.partitions[1].name", "spec.partitions[1].maxTime", "spec.slurm.maxNodeCount",
                 "spec.slurm.slurmConf.Foo"]:
        assert path in found, path


def test_messages_are_explicit():
    errors = dict(errors_of(spec.validate_cluster, make_cluster({"login": {"replicas": -1, "service": {
        "type": "NodePort", "port": 70000}}, "maintenance": "yes", "clusterName": "X" * 50})))
    assert errors["spec.login.replicas"] == "Invalid value: -1: should be greater than or equal to 0"
    assert errors["spec.login.service.port"] == "Invalid value: 70000: should be less than or equal to 65535"
    assert errors["spec.maintenance"] == "must be of type boolean, got string"
    found = errors_of(spec.validate_cluster, make_cluster({"clusterName": "x" * 50}))
    assert found[0] == ("spec.clusterName", "Too long: may not be more than 40 characters")


def test_metadata_and_kind():
    found = dict(errors_of(spec.validate_cluster, {"apiVersion": "v1", "kind": "Pod", "spec": {}}))
    assert found["metadata.name"] == "Required value"
    assert "expected SlurmCluster" in found["kind"]
    assert "expected slurm.soperator.dev/v1alpha1" in found["apiVersion"]
    assert found["spec.jail"] == "Required value"
    assert errors_of(spec.validate_cluster, "nope") == [("", "a SlurmCluster must be a mapping")]


def test_spec_of_wrong_type():
    obj = make_cluster()
    obj["spec"] = []
    assert paths(spec.validate_cluster, obj) == ["spec"]


def test_malformed_parts_do_not_crash_rules():
    obj = make_cluster({"partitions": ["main"], "slurm": {"slurmConf": "x"}, "login": {"sshdConfig": []},
                        "jail": {"existingClaim": "j", "subMounts": [1]}})
    found = paths(spec.validate_cluster, obj)
    assert "spec.partitions[0]" in found
    assert "spec.slurm.slurmConf" in found
    assert "spec.jail.subMounts[0]" in found


def test_int_or_string():
    assert spec.validate_cluster(make_cluster({"jail": {"storageClassName": "s", "size": 1000}}))
    found = dict(errors_of(spec.validate_cluster, make_cluster({"jail": {"storageClassName": "s", "size": 1.5}})))
    assert found["spec.jail.size"] == "must be an integer or a string, got number"
    found = dict(errors_of(spec.validate_cluster, make_cluster({"jail": {"storageClassName": "s",
                                                                           "size": None}})))
    assert "got null" in found["spec.jail.size"]


def test_unknown_fields_rejected_but_preserved_where_declared():
    obj = make_nodeset()
    obj["status"] = {"anything": [1, 2]}
    assert spec.validate_nodeset(obj)["status"]["anything"] == [1, 2]
    obj = make_cluster({"controller": {"spool": {"class": "x"}}})
    assert paths(spec.validate_cluster, obj) == ["spec.controller.spool.class"]
    # Affinity is typed like Kubernetes' own: a misspelt part is refused here, not on the rendered pods.
    obj = make_cluster({"placement": {"affinity": {"nodeAffinity": {"anything": [1, 2]}}}})
    assert paths(spec.validate_cluster, obj) == ["spec.placement.affinity.nodeAffinity.anything"]


def test_max_items_and_properties():
    obj = make_cluster({"partitions": [{"name": "p%d" % i} for i in range(65)],
                        "login": {"sshdConfig": dict(("K%d" % i, "v") for i in range(33))}})
    found = dict(errors_of(spec.validate_cluster, obj))
    assert found["spec.partitions"].startswith("Too many: 65")
    assert found["spec.login.sshdConfig"].startswith("Too many: 33")


def test_status_is_not_validated():
    obj = make_nodeset()
    obj["status"] = {"anything": "goes", "replicas": "x"}
    assert spec.validate_nodeset(obj)["status"]["anything"] == "goes"


@pytest.mark.parametrize("jail,ok", [
    ({"existingClaim": "j"}, True),
    ({"storageClassName": "s", "size": "1Gi"}, True),
    ({"storageClassName": "s"}, False),
    ({"size": "1Gi"}, False),
    ({}, False),
    ({"existingClaim": "j", "size": "1Gi"}, False),
])
def test_jail_source_twin(jail, ok):
    obj = make_cluster({"jail": jail})
    if ok:
        spec.validate_cluster(obj)
    else:
        assert errors_of(spec.validate_cluster, obj) == [
            ("spec.jail", "set exactly one of existingClaim, or storageClassName and size")]


@pytest.mark.parametrize("service,path", [
    ({"type": "NodePort", "nodePort": 30000}, None),
    ({"type": "LoadBalancer", "nodePort": 30000, "loadBalancerSourceRanges": ["10.0.0.0/8"]}, None),
    ({"nodePort": 30000}, "spec.login.service.nodePort"),
    ({"type": "NodePort", "loadBalancerSourceRanges": ["10.0.0.0/8"]}, "spec.login.service.loadBalancerSourceRanges"),
    ({"type": "NodePort", "loadBalancerSourceRanges": []}, None),
])
def test_service_twins(service, path):
    obj = make_cluster({"login": {"service": service}})
    if path is None:
        spec.validate_cluster(obj)
    else:
        assert paths(spec.validate_cluster, obj) == [path]


def test_source_ranges_duplicates_and_cidrs():
    obj = make_cluster({"login": {"service": {"type": "LoadBalancer", "loadBalancerSourceRanges": [
        "10.0.0.0/8", "10.0.0.0/8", "300.0.0.0/8", "2001:db8::/32"]}}})
    found = errors_of(spec.validate_cluster, obj)
    assert ("spec.login.service.loadBalancerSourceRanges[1]", "Duplicate value: '10.0.0.0/8'") in found
    assert ("spec.login.service.loadBalancerSourceRanges[2]", "Invalid value: '300.0.0.0/8': not a CIDR") in found
    assert len(found) == 2


def test_sub_mount_twins():
    mounts = [{"name": "a", "mountPath": "/data", "emptyDir": True},
              {"name": "a", "mountPath": "/data", "hostPath": "/x", "claimName": "c"},
              {"name": "b", "mountPath": "/b", "emptyDir": False}]
    found = errors_of(spec.validate_cluster, make_cluster({"jail": {"existingClaim": "j", "subMounts": mounts}}))
    assert ("spec.jail.subMounts[1]", "set exactly one of hostPath, claimName or emptyDir") in found
    assert ("spec.jail.subMounts[2]", "set exactly one of hostPath, claimName or emptyDir") in found
    assert ("spec.jail.subMounts[1].name", "subMount names must be unique") in found
    assert ("spec.jail.subMounts[1].mountPath", "subMount mountPaths must be unique") in found


@pytest.mark.parametrize("path,ok", [("/data", True), ("/a/b.c", True), ("/", False), ("/a/../b", False),
                                     ("relative", False), ("/a//b", False), ("/.hidden", False), ("/a b", False)])
def test_jail_paths(path, ok):
    obj = make_cluster({"jail": {"existingClaim": "j", "subMounts": [{"name": "a", "mountPath": path,
                                                                       "emptyDir": True}]}})
    if ok:
        spec.validate_cluster(obj)
    else:
        assert paths(spec.validate_cluster, obj) == ["spec.jail.subMounts[0].mountPath"]


def test_health_check_twin():
    obj = make_cluster({"slurm": {"healthCheckInterval": 60}})
    assert paths(spec.validate_cluster, obj) == ["spec.slurm.healthCheckInterval"]
    spec.validate_cluster(make_cluster({"slurm": {"healthCheckInterval": 0}}))
    spec.validate_cluster(make_cluster({"slurm": {"healthCheckInterval": 60, "healthCheckProgram": "/usr/sbin/nhc"}}))


@pytest.mark.parametrize("name,ok", [("demo", True), ("a" * 24, True), ("a" * 25, False), ("1demo", False),
                                     ("de.mo", False), ("demo-", False)])
def test_cluster_name_twins(name, ok):
    obj = make_cluster(name=name)
    if ok:
        spec.validate_cluster(obj)
    else:
        assert paths(spec.validate_cluster, obj) == ["metadata.name"]


def test_nodeset_name_twin():
    assert paths(spec.validate_nodeset, make_nodeset("x" * 25)) == ["metadata.name"]


def test_raw_keys():
    obj = make_cluster({
        "slurm": {"slurmConf": {"ClusterName": "x", "SelectType": "select/linear", "maxjobcount": "1",
                                "Bogus": "1", "DefMemPerCPU": "100"},
                  "cgroupConf": {"constraincores": "no", "ConstrainRAMSpace": "no"}},
        "partitions": [{"name": "main", "config": {"Nodes": "ALL", "PriorityTier": "2", "priorityTier": "1"}}],
        "login": {"sshdConfig": {"ChrootDirectory": "/", "PermitRootLogin": "yes", "MaxSessions": "4"}},
    })
    found = dict(errors_of(spec.validate_cluster, obj))
    assert found == {
        "spec.slurm.slurmConf.ClusterName": "slurm.conf key ClusterName is set by the operator (set spec.clusterName)",
        "spec.slurm.slurmConf.SelectType": "slurm.conf key SelectType has a typed field: use spec.slurm.selectType",
        "spec.slurm.slurmConf.maxjobcount": "unknown slurm.conf key 'maxjobcount' (did you mean MaxJobCount?)",
        "spec.slurm.slurmConf.Bogus": "unknown slurm.conf key 'Bogus'",
        "spec.slurm.cgroupConf.constraincores":
            "unknown cgroup.conf key 'constraincores' (did you mean ConstrainCores?)",
        "spec.partitions[0].config.Nodes": "partition key Nodes is set by the operator (a partition's nodes are the "
                                           "NodeSets that join it)",
        "spec.partitions[0].config.priorityTier": "unknown partition key 'priorityTier' (did you mean PriorityTier?)",
        "spec.login.sshdConfig.ChrootDirectory": "sshd_config key ChrootDirectory is set by the operator (every "
                                                 "session is jailed)",
        "spec.login.sshdConfig.PermitRootLogin": "must be one of prohibit-password, forced-commands-only, no (no "
                                                 "password logins)",
    }


def test_nodeset_rules():
    obj = make_nodeset(spec={"gpu": {"count": 2}, "resources": {"limits": {"nvidia.com/gpu": 2, "memory": "100Mi"},
                                                                 "requests": {"nvidia.com/gpu": 2}}})
    assert paths(spec.validate_nodeset, obj) == ["spec.resources.requests[nvidia.com/gpu]",
                                                 "spec.resources.limits[nvidia.com/gpu]", "spec.resources"]


def test_node_sizing():
    assert values.cpu_count({"limits": {"cpu": "500m"}}) == 1
    assert values.cpu_count({"requests": {"cpu": "2500m"}}) == 2
    assert values.cpu_count({"limits": {"cpu": 4}, "requests": {"cpu": 1}}) == 4
    assert values.cpu_count({}) is None
    assert values.real_memory_mib({"limits": {"memory": "4Gi"}}) == 4096 - 256
    assert values.real_memory_mib({"requests": {"memory": "100Gi"}}) == 102400 - 5120
    assert values.real_memory_mib(None) is None


def test_cross_object_rules():
    cluster = make_cluster({"partitions": [{"name": "cpu", "default": True}, {"name": "gpu"}],
                            "slurm": {"maxNodeCount": 5}})
    nodesets = [
        make_nodeset("a", {"replicas": 3, "partitions": ["gpu", "nope"]}),
        make_nodeset("a", {"replicas": 3}),
        make_nodeset("login", cluster="other", namespace="elsewhere"),
    ]
    found = errors_of(spec.validate_cluster_with_nodesets, cluster, nodesets)
    assert ("nodesets[a].spec.partitions[1]", "unknown partition 'nope' (the cluster has: cpu, gpu)") in found
    assert ("nodesets[a].metadata.name", "Duplicate value: two NodeSets named 'a'") in found
    assert ("nodesets[login].metadata.name",
            "'login' is reserved (it would collide with the cluster's own objects)") in found
    assert ("nodesets[login].metadata.namespace", "must be the SlurmCluster's namespace 'hpc'") in found
    assert ("nodesets[login].spec.clusterRef.name", "does not reference SlurmCluster 'demo'") in found
    assert ("spec.slurm.maxNodeCount",
            "total NodeSet replicas and elastic maxNodes (7) exceed maxNodeCount (5)") in found


def test_cross_object_no_default_partition():
    cluster = make_cluster({"partitions": [{"name": "cpu"}]})
    found = errors_of(spec.validate_cluster_with_nodesets, cluster, [make_nodeset()])
    assert found == [("nodesets[cpu].spec.partitions",
                      "lists no partition and the cluster has no default partition")]


def test_nodeset_errors_are_prefixed():
    bad = make_nodeset(spec={"replicas": -1})
    unnamed = {"kind": "NodeSet", "spec": {"clusterRef": {"name": "demo"}}}
    found = paths(spec.validate_cluster_with_nodesets, make_cluster({"login": {"replicas": 99}}), [bad, unnamed])
    assert found == ["spec.login.replicas", "nodesets[cpu].spec.replicas", "nodesets[1].metadata.name"]
    found = paths(spec.validate_cluster_with_nodesets, make_cluster(), ["junk"])
    assert found == ["nodesets[0]"]


def test_nodeset_partitions_helper():
    cluster = spec.validate_cluster(make_cluster({"partitions": [{"name": "a"}, {"name": "b", "default": True}]}))
    assert values.nodeset_partitions(cluster["spec"], {"partitions": ["a"]}) == ["a"]
    assert values.nodeset_partitions(cluster["spec"], {}) == ["b"]


def test_child_path():
    assert fields.child_path("", "spec") == "spec"
    assert fields.child_path("spec.limits", "nvidia.com/gpu") == "spec.limits[nvidia.com/gpu]"
    assert fields.child_path("spec.partitions", 2) == "spec.partitions[2]"
