"""spec.containers (container steps, docs/containers.md): its defaults and bounds, the installer's policy over the
registries jobs may pull from (allowed_job_registries), the pull Secret taken only when marked for the cluster, and
what the renderers make of it (the jail plugin's container_* arguments, the workers' cache and Secret volumes)."""

import pytest
from resources import make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api import references
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec as specs
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import accounts
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import containers as container_steps

ON = {"enabled": True}


def cluster(containers=None, **spec):
    return make_cluster(dict({"containers": containers if containers is not None else ON}, **spec))


def judged(obj, policy=None):
    found = policies.check(specs.validate_cluster(obj), [], policies.normalize(policy or {}))
    return dict((e.path, e.message) for e in found)


def test_off_by_default_and_the_defaults_when_on():
    assert specs.validate_cluster(make_cluster())["spec"]["containers"] == {"enabled": False, "cacheSize": "50Gi",
                                                                            "registries": []}
    assert specs.validate_cluster(cluster())["spec"]["containers"]["enabled"] is True


@pytest.mark.parametrize("registry", ["myregistry", "reg.io/Team", "reg.io/", "https://reg.io", "reg.io/a b"])
def test_a_registry_that_is_no_registry_is_refused(registry):
    with pytest.raises(SpecErrors) as err:
        specs.validate_cluster(cluster({"enabled": True, "registries": [registry]}))
    assert [e.path for e in err.value.errors] == ["spec.containers.registries[0]"], err.value


@pytest.mark.parametrize("allowed, registries, refused", [
    ([], [], []),
    ([], ["anything.example.net"], []),
    (["registry.example.com"], ["registry.example.com"], []),
    (["registry.example.com"], ["Registry.Example.com/team"], []),
    (["registry.example.com/team"], ["registry.example.com/teamx"], [0]),
    (["registry.example.com"], ["registry.example.com.evil.net"], [0]),
    (["registry.example.com"], ["registry.example.com", "docker.io"], [1]),
])
def test_registries_the_policy_allows(allowed, registries, refused):
    found = judged(cluster({"enabled": True, "registries": registries}), {"allowed_job_registries": allowed})
    assert sorted(found) == ["spec.containers.registries[%d]" % i for i in refused], found
    for index in refused:
        assert "(allowed_job_registries)" in found["spec.containers.registries[%d]" % index]


def test_any_registry_is_refused_where_the_policy_names_some():
    found = judged(cluster(), {"allowed_job_registries": ["registry.example.com"]})
    assert list(found) == ["spec.containers.registries"], found
    assert "jobs would pull from any registry" in found["spec.containers.registries"]
    assert judged(make_cluster(), {"allowed_job_registries": ["registry.example.com"]}) == {}  # containers off


@pytest.mark.parametrize("bad", [["https://registry.example.com"], "registry.example.com", [3]])
def test_a_malformed_policy_is_refused_naming_the_key(bad):
    with pytest.raises(ValueError, match="allowed_job_registries"):
        policies.normalize({"allowed_job_registries": bad})


def test_the_pull_secret_is_taken_only_when_marked_for_the_cluster():
    obj = specs.validate_cluster(cluster({"enabled": True, "pullSecretRef": {"name": "regcred"}}))
    mark = {container_steps.LABEL_REGISTRY_SECRET: "demo"}
    assert references.marked_secret_errors(obj, {"regcred": mark}) == []
    unmarked = references.marked_secret_errors(obj, {"regcred": {}})
    assert [e.path for e in unmarked] == ["spec.containers.pullSecretRef.name"]
    assert "the workers would send its value to the registries jobs name" in unmarked[0].message
    assert "container steps" in references.marked_secret_errors(obj, {})[0].message
    # off: the Secret is not taken, so not asked for
    off = specs.validate_cluster(cluster({"enabled": False, "pullSecretRef": {"name": "regcred"}}))
    assert references.marked_secret_errors(off, {}) == []


def test_the_cache_owner_is_among_the_images_ids():
    assert accounts.system_id(container_steps.CACHE_OWNER) == "the container image cache's owner"


# --- what the renderers make of it -----------------------------------------------------------------------------------
def plugstack(obj, nodesets=()):
    return slurm_conf.render_plugstack_conf(specs.validate_cluster(obj), [specs.validate_nodeset(n) for n in nodesets])


def plugin_args(text):
    line = [line for line in text.splitlines() if line.startswith("required ")][0]
    return dict(word.split("=", 1) for word in line.split()[2:])


def test_plugstack_without_containers_is_unchanged():
    assert "container_" not in plugstack(make_cluster())


def test_plugstack_with_containers():
    obj = cluster({"enabled": True, "cacheSize": "20Gi", "registries": ["registry.example.com", "reg.io:5000/team"],
                   "pullSecretRef": {"name": "regcred"}},
                  jail={"storageClassName": "standard", "size": "10Gi", "subMounts": [
                      {"name": "data", "mountPath": "/data", "claimName": "data"},
                      {"name": "ref", "mountPath": "/ref", "hostPath": "/srv/ref"}]})
    args = plugin_args(plugstack(obj, [make_nodeset("gpu", {"gpu": {"count": 1, "type": "h100"}})]))
    assert args["jail"] == names.JAIL_MOUNT
    assert args["container_cache"] == container_steps.CACHE_DIR
    assert args["container_cache_size"] == str(20 << 30)
    assert args["container_registries"] == "registry.example.com,reg.io:5000/team"
    assert args["container_auth"] == container_steps.REGISTRY_AUTH_FILE
    # the pod's own mounts of the sub-mounts (no job writes there), at their jail paths; a hostPath read-only
    assert args["container_bind"] == "%s/data:/data,%s/ref:/ref:ro" % (names.SUB_MOUNTS_DIR, names.SUB_MOUNTS_DIR)
    assert args["container_driver"] == names.GPU_DRIVER_DIR
    assert args["container_slurm_conf"] == names.SLURM_RUN_DIR + "/conf"
    assert "container_driver" not in plugin_args(plugstack(cluster()))


def workers(obj):
    objects = render.render_cluster(obj, [make_nodeset()])
    sts = [o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "demo-cpu"][0]
    pod = sts["spec"]["template"]["spec"]
    slurmd = [c for c in pod["containers"] if c["name"] == "slurmd"][0]
    return pod["volumes"], slurmd["volumeMounts"]


def test_the_workers_cache_and_pull_secret():
    volumes, mounts = workers(cluster({"enabled": True, "pullSecretRef": {"name": "regcred"}}))
    by_name = {v["name"]: v for v in volumes}
    assert by_name["container-images"] == {"name": "container-images", "emptyDir": {}}
    assert by_name["registry-auth"]["secret"] == {
        "secretName": "regcred", "defaultMode": 0o400,
        "items": [{"key": ".dockerconfigjson", "path": ".dockerconfigjson"}]}
    assert {"name": "container-images", "mountPath": container_steps.CACHE_DIR} in mounts
    assert {"name": "registry-auth", "mountPath": container_steps.REGISTRY_AUTH_MOUNT, "readOnly": True} in mounts
    volumes, mounts = workers(make_cluster())
    assert not {"container-images", "registry-auth"} & {v["name"] for v in volumes}
