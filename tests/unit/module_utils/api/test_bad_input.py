"""Every class of bad input is refused by the validator, naming the user's field, before anything is rendered.

The classes: what the API server would refuse on the rendered objects; regular expressions read the way the API
server's RE2 reads them; quantities bounded; Slurm meanings; names that would collide; transition rules
(immutable fields); the installer's policy. tests/integration/test_validator_property.py holds the validator to the
real API server; these tests pin each class.
"""

import pytest
from resources import load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import references, spec
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.api.quantity import parse_quantity
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render


def refused(cluster_spec=None, nodesets=None, **kw):
    """{path: message} of every problem of a cluster (and NodeSets); fails when it is accepted."""
    with pytest.raises(SpecErrors) as info:
        spec.validate_cluster_with_nodesets(make_cluster(cluster_spec), nodesets or [], **kw)
    return dict((e.path, e.message) for e in info.value.errors)


def nodeset_refused(nodeset_spec, name="cpu"):
    return refused(None, [make_nodeset(name, nodeset_spec)])


# --- regular expressions: the whole string, explicit classes ------------------------------------------------------
@pytest.mark.parametrize("cluster_spec,path", [
    ({"clusterName": "demo\n"}, "spec.clusterName"),
    ({"partitions": [{"name": "main\n", "default": True}]}, "spec.partitions[0].name"),
    ({"slurm": {"slurmConf": {"MinJobAge": "300\n"}}}, "spec.slurm.slurmConf.MinJobAge"),
    ({"slurm": {"slurmConf": {"SchedulerParameters": "a\x0bb"}}}, "spec.slurm.slurmConf.SchedulerParameters"),
    ({"slurm": {"slurmConf": {"SchedulerParameters": "a\x1fb"}}}, "spec.slurm.slurmConf.SchedulerParameters"),
    ({"images": {"worker": "x:1\n"}}, "spec.images.worker"),
    ({"images": {"worker": "x:1\x0b"}}, "spec.images.worker"),
    ({"jail": {"storageClassName": "s", "size": "1Gi\n"}}, "spec.jail.size"),
    ({"login": {"updateGracePeriod": "30m\n"}}, "spec.login.updateGracePeriod"),
    ({"placement": {"nodeSelector": {"zone\n": "a"}}}, "spec.placement.nodeSelector[zone\n]"),
    ({"placement": {"nodeSelector": {"zone": "a\n"}}}, "spec.placement.nodeSelector.zone"),
])
def test_a_trailing_newline_or_control_character_is_refused_like_re2_does(cluster_spec, path):
    assert path in refused(cluster_spec)


def test_other_scripts_digits_are_not_numbers():
    # str.isdigit() says yes to these; int() and Slurm say no.
    assert "spec.slurm.slurmConf.MinJobAge" in refused({"slurm": {"slurmConf": {"MinJobAge": "\u0663\u0660"}}})
    assert "spec.slurm.slurmConf.MinJobAge" in refused({"slurm": {"slurmConf": {"MinJobAge": "\u00b2"}}})


def test_a_unicode_space_is_no_separator_for_slurm_and_is_kept():
    # Slurm splits on C isspace (ASCII only): a no-break space is part of the token, as both engines agree.
    cluster, _ = spec.validate_cluster_with_nodesets(make_cluster({"slurm": {"slurmConf": {
        "SchedulerParameters": "a\u00a0b"}}}), [])
    assert cluster["spec"]["slurm"]["slurmConf"]["SchedulerParameters"] == "a\u00a0b"


# --- quantities -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-1Gi", -5, "1e5000", "1e999999999", 10 ** 30, "9" * 31, "1" * 100 + "Gi",
                                   "9Ei", 2 ** 63, "1e19", ".", "1e", "1.5.5"])
def test_bad_memory_is_a_field_error_never_a_crash_or_a_hang(value):
    errors = nodeset_refused({"resources": {"limits": {"memory": value}}})
    assert any(p.startswith("nodesets[cpu].spec.resources.limits.memory") for p in errors), errors


@pytest.mark.parametrize("value", ["1e999999999", "1" * 10000, "1e" + "9" * 5000, "0." + "0" * 5000 + "1"])
def test_the_parser_refuses_huge_inputs_without_computing_them(value):
    with pytest.raises(ValueError):
        parse_quantity(value)


def test_bounds_of_the_parser():
    assert parse_quantity("7Ei") == 7 * 2 ** 60
    assert parse_quantity(2 ** 63 - 1) == 2 ** 63 - 1
    assert parse_quantity("1e18") == 10 ** 18
    for bad in ("1e19", 2 ** 63, "8Ei", -1):
        with pytest.raises(ValueError):
            parse_quantity(bad)


@pytest.mark.parametrize("size", ["0", 0, "0Gi", "0.0"])
def test_zero_sizes_are_refused(size):
    assert "spec.jail.size" in refused({"jail": {"storageClassName": "s", "size": size}})
    assert "spec.controller.spool.size" in refused({"controller": {"spool": {"size": size}}})


# --- what the API server refuses on the rendered objects ----------------------------------------------------------
@pytest.mark.parametrize("resources,path", [
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "spec.resources.requests.cpu"),
    ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}, "spec.resources.requests.memory"),
    ({"limits": {"foo": "1"}}, "spec.resources.limits.foo"),
    ({"limits": {"Example.com/foo": "1"}}, "spec.resources.limits[Example.com/foo]"),
    ({"limits": {"requests.cpu": "1"}}, "spec.resources.limits[requests.cpu]"),
    ({"requests": {"example.com/ib": "1"}}, "spec.resources.limits[example.com/ib]"),
    ({"requests": {"example.com/ib": "1"}, "limits": {"example.com/ib": "2"}},
     "spec.resources.requests[example.com/ib]"),
    ({"limits": {"example.com/ib": "500m"}}, "spec.resources.limits[example.com/ib]"),
    ({"limits": {"hugepages-2Mi": "1Gi"}}, "spec.resources.limits.hugepages-2Mi"),
    ({"limits": {"hugepages-2Mi": "1Mi", "memory": "1Gi"}}, "spec.resources.limits.hugepages-2Mi"),
    ({"limits": {"hugepages-3x": "2Mi", "memory": "1Gi"}}, "spec.resources.limits.hugepages-3x"),
])
def test_resources_the_api_server_would_refuse_on_the_pods(resources, path):
    assert "nodesets[cpu]." + path in nodeset_refused({"resources": resources})
    assert "spec.controller." + path[len("spec."):] in refused({"controller": {"resources": resources}})


def test_resources_the_api_server_accepts_are_accepted():
    ok = {"requests": {"cpu": "1", "memory": "2Gi", "example.com/ib": "1", "hugepages-2Mi": "4Mi"},
          "limits": {"cpu": "2", "memory": "4Gi", "example.com/ib": "1", "hugepages-2Mi": "4Mi",
                     "ephemeral-storage": "10Gi"}}
    spec.validate_cluster_with_nodesets(make_cluster({"login": {"resources": ok}}), [make_nodeset(spec={
        "resources": ok})])


@pytest.mark.parametrize("placement,path", [
    ({"nodeSelector": {"a" * 254 + "/x": "v"}}, "spec.placement.nodeSelector[%s/x]" % ("a" * 254)),
    ({"nodeSelector": {"a/b/c": "v"}}, "spec.placement.nodeSelector[a/b/c]"),
    ({"nodeSelector": {"zone": "bad value!"}}, "spec.placement.nodeSelector.zone"),
    ({"tolerations": [{"operator": "Exists", "value": "x"}]}, "spec.placement.tolerations[0].value"),
    ({"tolerations": [{"key": "a", "tolerationSeconds": 5}]}, "spec.placement.tolerations[0].tolerationSeconds"),
    ({"tolerations": [{"key": "", "value": "x"}]}, "spec.placement.tolerations[0].operator"),
    ({"tolerations": [{"key": "bad key", "operator": "Exists"}]}, "spec.placement.tolerations[0].key"),
    ({"tolerations": [{"key": "a" * 254 + "/x", "operator": "Exists"}]}, "spec.placement.tolerations[0].key"),
    ({"tolerations": [{"key": "a", "value": "bad value!"}]}, "spec.placement.tolerations[0].value"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
     "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}]}}}},
     "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].values"),
    ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchFields": [{"key": "a", "operator": "In", "values": ["x"]}]}}]}}},
     "spec.placement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
     ".matchFields[0].key"),
    ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {}}]}}},
     "spec.placement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "k", "matchLabelKeys": ["app"]}]}}},
     "spec.placement.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "k", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]}}},
     "spec.placement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector"
     ".matchExpressions[0].values"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}},
     "spec.placement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
    ({"affinity": {"nodeAffinity": {"required": {}}}}, "spec.placement.affinity.nodeAffinity.required"),
])
def test_placement_the_api_server_would_refuse_on_the_pods(placement, path):
    assert path in refused({"placement": placement})


def test_a_kubernetes_affinity_is_accepted_and_rendered_as_given():
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a"]},
                                  {"key": "cores", "operator": "Gt", "values": ["8"]}],
             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]}},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}},
            "matchLabelKeys": ["pod-template-hash"]}}]},
    }
    objects = render.render_cluster(make_cluster({"placement": {"affinity": affinity}}), [make_nodeset()])
    worker = [o for o in objects if o["metadata"]["name"] == "demo-cpu" and o["kind"] == "StatefulSet"][0]
    assert worker["spec"]["template"]["spec"]["affinity"] == affinity


@pytest.mark.parametrize("port", [80, 22, 29999, 32768])
def test_node_ports_outside_kubernetes_default_range(port):
    assert "spec.login.service.nodePort" in refused({"login": {"service": {"type": "NodePort", "nodePort": port}}})


@pytest.mark.parametrize("mount_path", ["/proc", "/sys/fs", "/dev", "/run/munge", "/run", "/tmp",
                                        "/var/spool/slurmd", "/var/spool", "/var", "/etc", "/etc/slurm", "/usr"])
def test_sub_mounts_colliding_with_what_soperator_mounts_or_the_system(mount_path):
    errors = refused({"jail": {"storageClassName": "s", "size": "1Gi", "subMounts": [
        {"name": "x", "mountPath": mount_path, "emptyDir": True}]}})
    assert "spec.jail.subMounts[0].mountPath" in errors


@pytest.mark.parametrize("mount_path", ["/home", "/scratch", "/data/sets", "/mnt/nvme", "/srv/x", "/home/shared"])
def test_sub_mounts_elsewhere_are_fine(mount_path):
    spec.validate_cluster(make_cluster({"jail": {"storageClassName": "s", "size": "1Gi", "subMounts": [
        {"name": "x", "mountPath": mount_path, "emptyDir": True}]}}))


def test_host_paths_are_read_only_unless_asked():
    cluster = make_cluster({"jail": {"storageClassName": "s", "size": "1Gi", "subMounts": [
        {"name": "ro", "mountPath": "/data", "hostPath": "/data"},
        {"name": "rw", "mountPath": "/scratch", "hostPath": "/scratch", "readOnly": False},
        {"name": "claim", "mountPath": "/home", "claimName": "homes"}]}})
    objects = render.render_cluster(cluster, [make_nodeset()])
    worker = [o for o in objects if o["metadata"]["name"] == "demo-cpu" and o["kind"] == "StatefulSet"][0]
    mounts = dict((m["name"], m) for m in worker["spec"]["template"]["spec"]["containers"][0]["volumeMounts"])
    assert mounts["submount-ro"]["readOnly"] is True
    assert mounts["submount-rw"]["readOnly"] is False
    assert mounts["submount-claim"]["readOnly"] is False


# --- Slurm meanings ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["default", "DEFAULT", "Default", "dEfAuLt"])
def test_a_partition_named_default_in_any_case(name):
    assert "spec.partitions[0].name" in refused({"partitions": [{"name": name, "default": True}]})


def test_a_feature_named_like_another_nodeset_would_move_its_nodes():
    errors = refused(None, [make_nodeset("cpu", {"features": ["ib", "GPU"]}), make_nodeset("gpu")])
    assert "gpu" in errors["nodesets[cpu].spec.features[1]"] and "NodeSet gpu" in errors[
        "nodesets[cpu].spec.features[1]"]
    # Its own name is a feature anyway: no problem.
    spec.validate_cluster_with_nodesets(make_cluster(), [make_nodeset("cpu", {"features": ["cpu"]})])


def test_a_gpu_type_without_a_count():
    assert "nodesets[cpu].spec.gpu.type" in nodeset_refused({"gpu": {"type": "h100"}})
    assert "nodesets[cpu].spec.gpu.type" in nodeset_refused({"gpu": {"type": "h100", "count": 0}})


def test_programs_run_as_root_must_not_be_where_users_write():
    for key, value in (("Prolog", "/mnt/jail/home/alice/p"), ("Epilog", "/tmp/e"), ("PrologSlurmctld", "/home/x"),
                       ("Prolog", "prolog.sh")):
        assert "spec.slurm.slurmConf.%s" % key in refused({"slurm": {"slurmConf": {key: value}}})
    assert "spec.slurm.healthCheckProgram" in refused({"slurm": {"healthCheckInterval": 60,
                                                                 "healthCheckProgram": "/mnt/jail/hc"}})


# --- names --------------------------------------------------------------------------------------------------------
def owner(cluster, nodeset=None, created=None):
    return {"cluster": cluster, "nodeset": nodeset, "created": created}


def test_objects_of_two_clusters_that_would_share_names_are_refused_naming_both():
    # Cluster x with NodeSet y-controller makes x-y-controller, the controller of cluster x-y.
    owners = [owner("x-y", created="2026-01-01T00:00:00Z"), owner("x", created="2026-01-02T00:00:00Z"),
              owner("x", "y-controller")]
    errors = references.name_collisions(owners, "x")
    assert [e.path for e in errors] == ["nodesets[y-controller].metadata.name"]
    assert "NodeSet y-controller (of SlurmCluster x)" in errors[0].message and "SlurmCluster x-y" in errors[0].message
    assert references.name_collisions(owners, "x-y") == []  # the older one keeps running


def test_worker_statefulsets_of_two_clusters():
    # Cluster a with NodeSet b-c and cluster a-b with NodeSet c both make StatefulSet a-b-c.
    owners = [owner("a", created="2026-01-01T00:00:00Z"), owner("a", "b-c", created="2026-01-01T00:00:00Z"),
              owner("a-b", created="2026-01-02T00:00:00Z"), owner("a-b", "c")]
    assert [e.path for e in references.name_collisions(owners, "a-b")] == ["nodesets[c].metadata.name"]
    assert references.name_collisions(owners, "a") == []


def test_a_new_cluster_named_into_an_existing_ones_objects_is_refused():
    owners = [owner("a", created="2026-01-01T00:00:00Z"), owner("a", "login2", created="2026-01-01T00:00:00Z"),
              owner("a-login2")]
    # a-login2's... no clash: its objects are a-login2-*; a's NodeSet pods are a-login2-<n>: the controller pods
    # a-login2-controller-0 are not a family member (tail not digits).
    assert references.name_collisions(owners, "a-login2") == []
    owners = [owner("a", created="2026-01-01T00:00:00Z"), owner("a", "populate-jail-initial",
                                                                 created="2026-01-01T00:00:00Z")]
    errors = references.name_collisions(owners, "a")
    assert [e.path for e in errors] == ["nodesets[populate-jail-initial].metadata.name"]


@pytest.mark.parametrize("nodeset", ["b-accounting", "b-accounting-db", "b-accounting-db-password", "b-rest",
                                     "b-exporter", "b-jwt-key", "b-health-checks", "b-nccl-check",
                                     "b-slurmdbd-config"])
def test_names_of_accounting_rest_exporter_and_health_objects_are_an_owners_too(nodeset):
    """Cluster a's NodeSet b-<x> against cluster a-b's accounting, REST API, exporter and health objects: reserved for
    a-b whether or not it runs them yet (it may switch them on later)."""
    owners = [owner("a-b", created="2026-01-01T00:00:00Z"), owner("a", created="2026-01-02T00:00:00Z"),
              owner("a", nodeset)]
    errors = references.name_collisions(owners, "a")
    assert [e.path for e in errors] == ["nodesets[%s].metadata.name" % nodeset]
    assert "SlurmCluster a-b" in errors[0].message and "named a-%s:" % nodeset in errors[0].message


def test_a_nodeset_name_ending_like_an_ordinal():
    errors = refused(None, [make_nodeset("cpu-0")])
    assert "nodesets[cpu-0].metadata.name" in errors


@pytest.mark.parametrize("name", [["cpu"], {"cpu": 1}, 5])
def test_a_nodeset_name_that_is_no_string_is_a_field_error_never_a_crash(name):
    """A definition's NodeSet named by a list or a mapping (unhashable) was a TypeError, not the user's field."""
    errors = refused(None, [make_nodeset(name)])
    assert errors == {"nodesets[%s].metadata.name" % (name,): "Required value"}


# --- transition rules: immutable fields -----------------------------------------------------------------------
def test_cluster_ref_is_immutable():
    stored = make_nodeset("cpu", cluster="a")
    moved = make_nodeset("cpu", cluster="b")
    with pytest.raises(SpecErrors) as info:
        spec.validate_nodeset(moved, old=stored)
    assert [e.path for e in info.value.errors] == ["spec.clusterRef"]
    spec.validate_nodeset(moved)  # a new NodeSet may name any cluster
    spec.validate_nodeset(stored, old=stored)


def test_the_spool_claim_template_is_immutable():
    stored = make_cluster({"controller": {"spool": {"size": "10Gi"}}})
    grown = make_cluster({"controller": {"spool": {"size": "20Gi"}}})
    with pytest.raises(SpecErrors) as info:
        spec.validate_cluster(grown, old=stored)
    assert [e.path for e in info.value.errors] == ["spec.controller.spool"]
    # The default is the stored value: writing it down changes nothing.
    spec.validate_cluster(make_cluster({"controller": {"spool": {"size": "10Gi"}}}), old=make_cluster())


def test_the_accounting_databases_storage_is_immutable_while_it_exists():
    def acct(size, enabled=True, kind="InCluster"):
        database = {"type": kind, "storage": {"size": size}}
        if kind == "External":
            database = {"type": kind, "host": "db", "passwordSecretRef": {"name": "db", "key": "password"}}
        return make_cluster({"accounting": {"enabled": enabled, "database": database}})
    with pytest.raises(SpecErrors) as info:
        spec.validate_cluster(acct("20Gi"), old=acct("10Gi"))
    assert [e.path for e in info.value.errors] == ["spec.accounting.database.storage"]
    with pytest.raises(SpecErrors):
        spec.validate_cluster(acct("20Gi", kind="MariaDBOperator"), old=acct("10Gi", kind="MariaDBOperator"))
    # Before the database exists (accounting off, stored defaults), on the way out, or to another type: any size.
    spec.validate_cluster(acct("20Gi"), old=acct("10Gi", enabled=False))
    spec.validate_cluster(acct("20Gi"), old=make_cluster())
    spec.validate_cluster(acct("20Gi", enabled=False), old=acct("10Gi"))
    spec.validate_cluster(acct("20Gi", kind="MariaDBOperator"), old=acct("10Gi"))
    spec.validate_cluster(acct("10Gi"), old=acct("10Gi"))


# --- accounting, the REST API, the exporter, node health ---------------------------------------------------------
@pytest.mark.parametrize("cluster_spec,path", [
    ({"accounting": {"enabled": True, "database": {"storage": {"size": "0"}}}},
     "spec.accounting.database.storage.size"),
    ({"accounting": {"enabled": True, "database": {"storage": {"size": "1e999999999"}}}},
     "spec.accounting.database.storage.size"),
    ({"accounting": {"enabled": True, "database": {"type": "External", "host": "db", "passwordSecretRef": {
        "name": "db", "key": ".."}}}}, "spec.accounting.database.passwordSecretRef.key"),
    ({"accounting": {"enabled": True, "database": {"type": "External", "host": "db", "passwordSecretRef": {
        "name": "db", "key": "p"}, "tls": {"caSecretRef": {"name": "ca", "key": "..ca.crt"}}}}},
     "spec.accounting.database.tls.caSecretRef.key"),
    ({"accounting": {"enabled": True, "slurmdbd": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}}},
     "spec.accounting.slurmdbd.resources.requests.cpu"),
    ({"accounting": {"enabled": True, "database": {"resources": {"limits": {"foo": "1"}}}}},
     "spec.accounting.database.resources.limits.foo"),
    ({"restApi": {"enabled": True, "placement": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}},
     "spec.restApi.placement.tolerations[0].value"),
    ({"restApi": {"enabled": True, "resources": {"limits": {"memory": "1Gi\n"}}}},
     "spec.restApi.resources.limits.memory"),
    ({"exporter": {"enabled": True, "placement": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}}},
     "spec.exporter.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
     ".nodeSelectorTerms"),
    ({"exporter": {"enabled": True, "serviceMonitor": {"interval": "1us"}}}, "spec.exporter.serviceMonitor.interval"),
    ({"exporter": {"enabled": True, "serviceMonitor": {"interval": "30m1h"}}},
     "spec.exporter.serviceMonitor.interval"),
    ({"exporter": {"enabled": True, "serviceMonitor": {"labels": {"a" * 254 + "/x": "y"}}}},
     "spec.exporter.serviceMonitor.labels[%s/x]" % ("a" * 254)),
    ({"healthChecks": {"nccl": {"schedule": "60 * * * *"}}}, "spec.healthChecks.nccl.schedule"),
    ({"healthChecks": {"nccl": {"schedule": "0 3 * * 7"}}}, "spec.healthChecks.nccl.schedule"),
    ({"healthChecks": {"nccl": {"schedule": "*/0 * * * *"}}}, "spec.healthChecks.nccl.schedule"),
    ({"healthChecks": {"nccl": {"schedule": "0 X * * *"}}}, "spec.healthChecks.nccl.schedule"),
    ({"healthChecks": {"nccl": {"schedule": "0 3 * * 0\n"}}}, "spec.healthChecks.nccl.schedule"),
    ({"healthChecks": {"nccl": {"partition": "gpu"}}}, "spec.healthChecks.nccl.partition"),
    ({"healthChecks": {"nccl": {"minBytes": "8G", "maxBytes": "512M"}}}, "spec.healthChecks.nccl.minBytes"),
    ({"healthChecks": {"nccl": {"command": "/home/alice/all_reduce_perf"}}}, "spec.healthChecks.nccl.command"),
    ({"healthChecks": {"nccl": {"command": "/tmp/x"}}}, "spec.healthChecks.nccl.command"),
])
def test_bad_input_of_the_optional_components(cluster_spec, path):
    errors = refused(cluster_spec)
    assert path in errors, errors


@pytest.mark.parametrize("schedule", ["0 3 * * 0", "@weekly", "*/15 2-4 1,15 jan-mar MON-FRI", "5/15 * * * *",
                                      "0 0 1 * *"])
def test_good_schedules_are_accepted(schedule):
    spec.validate_cluster_with_nodesets(make_cluster({"healthChecks": {"nccl": {"schedule": schedule}}}), [])


def test_the_nccl_check_command_is_a_privileged_program_for_the_policy():
    cluster = make_cluster({"healthChecks": {"nccl": {"schedule": "0 3 * * 0"}}})
    assert _policy_errors(cluster, [], {"allow_privileged_programs": False}) == []  # the default command
    cluster = make_cluster({"healthChecks": {"nccl": {"command": "/opt/nccl-tests/all_reduce_perf"}}})
    assert _policy_errors(cluster, [], {}) == []
    assert [e.path for e in _policy_errors(cluster, [], {"allow_privileged_programs": False})] == [
        "spec.healthChecks.nccl.command"]


def test_every_image_of_the_optional_components_is_judged_by_the_registries():
    cluster = make_cluster({"accounting": {"enabled": True}, "restApi": {"enabled": True},
                            "exporter": {"enabled": True}})
    errors = set(e.path for e in _policy_errors(cluster, [], {"allowed_registries": ["registry.example.com"]}))
    assert {"spec.images.slurmdbd", "spec.images.mariadb", "spec.images.slurmrestd", "spec.images.exporter",
            "spec.images.backup"} <= errors
    mine = dict(("spec.images.%s" % k, "registry.example.com/soperator/%s:1" % k) for k in (
        "controller", "worker", "login", "populateJail", "jail", "slurmdbd", "slurmrestd", "exporter", "mariadb",
        "backup", "sssd"))
    cluster["spec"]["images"] = dict((k.split(".")[-1], v) for k, v in mine.items())
    assert _policy_errors(cluster, [], {"allowed_registries": ["registry.example.com"]}) == []


# --- the installer's policy ---------------------------------------------------------------------------------
def test_host_paths_are_refused_unless_the_installer_allows_their_prefix():
    cluster, nodesets = load_example("gpu-cluster.yaml")
    errors = dict((e.path, e.message) for e in _policy_errors(cluster, nodesets, {}))
    assert "no host path is allowed" in errors["spec.jail.subMounts[1].hostPath"]
    assert _policy_errors(cluster, nodesets, {"allowed_host_path_prefixes": ["/mnt/local-nvme"]}) == []
    assert _policy_errors(cluster, nodesets, {"allowed_host_path_prefixes": ["/mnt"]}) == []
    errors = _policy_errors(cluster, nodesets, {"allowed_host_path_prefixes": ["/mnt/local"]})
    assert [e.path for e in errors] == ["spec.jail.subMounts[1].hostPath"]  # a path boundary, not a string prefix


def test_images_only_from_allowed_registries():
    cluster = make_cluster({"images": {"worker": "registry.example.com/hpc/worker:1"}})
    nodesets = [make_nodeset("cpu", {"image": "registry.example.com.evil/hpc/worker:1"})]
    errors = [e.path for e in _policy_errors(cluster, nodesets, {"allowed_registries": [
        "registry.example.com/hpc"]})]
    # The defaults are pulled too: soperator/slurm-controller is docker.io/soperator/slurm-controller.
    assert "spec.images.controller" in errors and "spec.images.worker" not in errors
    assert "nodesets[cpu].spec.image" in errors
    assert _policy_errors(cluster, [], {"allowed_registries": ["registry.example.com", "docker.io/soperator"]}) == []
    assert policies.qualified_image("busybox") == "docker.io/library/busybox"
    assert policies.qualified_image("localhost:5000/x") == "localhost:5000/x"


def test_privileged_programs_refusable_by_policy():
    cluster = make_cluster({"slurm": {"slurmConf": {"Prolog": "/usr/local/sbin/prolog", "TaskProlog": "/bin/true"},
                                      "healthCheckInterval": 60, "healthCheckProgram": "/usr/sbin/nhc"}})
    assert _policy_errors(cluster, [], {}) == []
    errors = sorted(e.path for e in _policy_errors(cluster, [], {"allow_privileged_programs": False}))
    assert errors == ["spec.slurm.healthCheckProgram", "spec.slurm.slurmConf.Prolog"]


def test_a_policy_error_of_a_nodeset_is_that_nodesets_alone():
    errors = refused(None, [make_nodeset("cpu", {"image": "evil.example.com/x:1"})],
                     policy=policies.normalize({"allowed_registries": ["docker.io"]}))
    assert list(errors) == ["nodesets[cpu].spec.image"]


@pytest.mark.parametrize("bad", [{"allowed_host_path_prefixes": ["relative"]}, {"allowed_host_path_prefixes": "/x"},
                                 {"allowed_registries": ["has space"]}, {"allow_privileged_programs": "no"},
                                 {"bogus": 1}])
def test_malformed_policies_are_refused(bad):
    with pytest.raises(ValueError):
        policies.normalize(bad)


def _policy_errors(cluster, nodesets, policy):
    cluster, nodesets = spec.validate_cluster_with_nodesets(cluster, nodesets)
    return policies.check(cluster, nodesets, policies.normalize(policy))
