import copy
import os
import re

import pytest
from resources import load_example, make_cluster, make_nodeset

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render import common as render_common
from ansible_collections.soperator.slurm.plugins.module_utils.render import controller as controller_render
from ansible_collections.soperator.slurm.plugins.module_utils.render import worker as render_worker
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths


def _by(objects, kind, name):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def _container(pod_spec, name):
    for container in pod_spec["containers"] + pod_spec.get("initContainers", []):
        if container["name"] == name:
            return container
    raise AssertionError(name)


@pytest.fixture
def cpu():
    cluster, nodesets = load_example("cpu-cluster.yaml")
    cluster["metadata"]["uid"] = "c-uid"
    nodesets[0]["metadata"]["uid"] = "n-uid"
    return cluster, nodesets


def test_apply_order_and_names(cpu):
    objects = render.render_cluster(*cpu)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "demo-munge-key"), ("Secret", "demo-ssh-host-keys"), ("PersistentVolumeClaim", "demo-jail"),
        ("ConfigMap", "demo-slurm-config"), ("ConfigMap", "demo-sshd-config"), ("ConfigMap", "demo-health-checks"),
        ("Service", "demo-controller"),
        ("Service", "demo-login"), ("Service", "demo-login-headless"), ("Service", "demo-cpu"),
        ("Job", "demo-populate-jail-initial"), ("StatefulSet", "demo-controller"), ("StatefulSet", "demo-login"),
        ("StatefulSet", "demo-cpu"), ("PodDisruptionBudget", "demo-login"), ("PodDisruptionBudget", "demo-cpu")]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "slurm"
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "slurm"
        assert labels["app.kubernetes.io/instance"] == "demo"
        assert labels["app.kubernetes.io/part-of"] == "soperator"
        assert labels["app.kubernetes.io/managed-by"] == "soperator.slurm"
        assert labels["slurm.soperator.dev/cluster"] == "demo"
        assert labels["app.kubernetes.io/component"] in ("controller", "worker", "login", "jail", "config", "secret",
                                                         "populate-jail")
        if labels["app.kubernetes.io/component"] == "worker":
            assert labels["slurm.soperator.dev/nodeset"] == "cpu"


def test_owner_references(cpu):
    objects = render.render_cluster(*cpu)
    for obj in objects:
        refs = obj["metadata"].get("ownerReferences")
        if obj["kind"] in ("Secret", "PersistentVolumeClaim"):
            assert refs is None
        elif obj["metadata"]["labels"]["app.kubernetes.io/component"] == "worker":
            assert refs == [{"apiVersion": names.API_VERSION, "kind": "NodeSet", "name": "cpu", "uid": "n-uid",
                             "controller": True, "blockOwnerDeletion": True}]
        else:
            assert refs[0]["kind"] == "SlurmCluster" and refs[0]["uid"] == "c-uid"
    cluster, nodesets = load_example("cpu-cluster.yaml")
    assert all("ownerReferences" not in o["metadata"] for o in render.render_cluster(cluster, nodesets))


def test_secrets_are_create_only_and_empty(cpu):
    objects = render.render_cluster(*cpu)
    munge = _by(objects, "Secret", "demo-munge-key")
    assert "data" not in munge and "stringData" not in munge
    assert munge["metadata"]["annotations"] == {"slurm.soperator.dev/create-only": "true",
                                                "slurm.soperator.dev/generate": "munge-key"}
    keys = _by(objects, "Secret", "demo-ssh-host-keys")
    assert keys["metadata"]["annotations"]["slurm.soperator.dev/generate"] == "ssh-host-keys"
    claim = _by(objects, "PersistentVolumeClaim", "demo-jail")
    assert claim["metadata"]["annotations"] == {"slurm.soperator.dev/create-only": "true"}
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "standard",
                             "resources": {"requests": {"storage": "20Gi"}}}


def test_controller(cpu):
    objects = render.render_cluster(*cpu)
    sts = _by(objects, "StatefulSet", "demo-controller")
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["serviceName"] == "demo-controller"
    pod = sts["spec"]["template"]["spec"]
    ctld = _container(pod, "slurmctld")
    assert ctld["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert ctld["securityContext"]["allowPrivilegeEscalation"] is False
    assert ctld["readinessProbe"]["tcpSocket"]["port"] == "slurmctld"
    assert {"name": "slurm-config", "configMap": {"name": "demo-slurm-config"}} in pod["volumes"]
    # slurmctld resolves job owners from the jail's users: read-only, never written.
    assert {"name": "jail", "mountPath": "/mnt/jail", "readOnly": True} in ctld["volumeMounts"]
    assert {"name": "jail", "persistentVolumeClaim": {"claimName": "demo-jail"}} in pod["volumes"]
    config = _by(objects, "ConfigMap", "demo-slurm-config")
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["slurm.soperator.dev/config-hash"] == controller_render.restart_digest(config["data"])
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert "storageClassName" not in sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert _container(pod, "munge")["restartPolicy"] == "Always"
    service = _by(objects, "Service", "demo-controller")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"][0]["port"] == 6817


def test_only_the_controller_mounts_the_slurm_config(cpu):
    for obj in render.render_cluster(*cpu):
        if obj["kind"] in ("StatefulSet", "Job") and obj["metadata"]["name"] != "demo-controller":
            volumes = obj["spec"]["template"]["spec"]["volumes"]
            assert not any(v.get("configMap", {}).get("name") == "demo-slurm-config" for v in volumes)


def test_only_a_key_that_needs_a_restart_changes_the_controllers_config_hash(cpu):
    """A partition's settings and killWait are applied in place (scontrol reconfigure): the pod template stays; a
    listening setting (CommunicationParameters) needs a restart (config_keys.RESTART_KEYS): its hash changes."""
    cluster, nodesets = cpu
    key = "slurm.soperator.dev/config-hash"

    def controller_of(changed):
        sts = _by(render.render_cluster(changed, nodesets), "StatefulSet", "demo-controller")
        return sts["spec"]["template"]["metadata"]["annotations"][key], sts

    before = _by(render.render_cluster(cluster, nodesets), "StatefulSet", "demo-controller")
    in_place = copy.deepcopy(cluster)
    in_place["spec"].setdefault("slurm", {})["killWait"] = 60
    in_place["spec"]["partitions"] = [{"name": "main", "default": True, "maxTime": "1:00:00",
                                       "config": {"PriorityTier": "5"}}]
    config = _by(render.render_cluster(in_place, nodesets), "ConfigMap", "demo-slurm-config")["data"]["slurm.conf"]
    assert "KillWait=60" in config and "MaxTime=1:00:00" in config and "PriorityTier=5" in config
    assert controller_of(in_place)[1] == before
    restart = copy.deepcopy(cluster)
    restart["spec"].setdefault("slurm", {}).setdefault("slurmConf", {})["CommunicationParameters"] = "block_null_hash"
    assert controller_of(restart)[0] != before["spec"]["template"]["metadata"]["annotations"][key]
    scaled = copy.deepcopy(nodesets)
    scaled[0]["spec"]["replicas"] = 5
    again = _by(render.render_cluster(cluster, scaled), "StatefulSet", "demo-controller")
    assert before == again


def test_worker(cpu):
    objects = render.render_cluster(*cpu)
    sts = _by(objects, "StatefulSet", "demo-cpu")
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["selector"]["matchLabels"]["slurm.soperator.dev/nodeset"] == "cpu"
    pod = sts["spec"]["template"]["spec"]
    slurmd = _container(pod, "slurmd")
    env = dict((e["name"], e.get("value")) for e in slurmd["env"])
    assert env["SLURM_NODESET"] == "cpu"
    assert env["SLURMD_CONF_PARAMS"] == "CPUs=1 RealMemory=1792 Feature=cpu"
    assert env["SLURM_CONF_SERVER"] == "demo-controller-0.demo-controller.slurm.svc:6817"
    # Absolute: slurmd re-execs argv[0] on `scontrol reconfigure` (found when sackd died of a bare name).
    assert slurmd["args"][:3] == ["/usr/sbin/slurmd", "-D", "-Z"]
    context = slurmd["securityContext"]
    assert "privileged" not in context
    assert "SYS_ADMIN" in context["capabilities"]["add"]
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["seccompProfile"] == {"type": "Unconfined"}
    assert context["appArmorProfile"] == {"type": "Unconfined"}
    mounts = dict((m["mountPath"], m["name"]) for m in slurmd["volumeMounts"])
    assert mounts["/mnt/jail"] == "jail"
    assert mounts["/var/spool/slurmd"] == "slurmd-spool" and mounts["/run/munge"] == "munge-run"
    # Nothing below the jail is the runtime's to mount: it would follow a symlink a job left there. The entrypoint
    # binds the runtime directories into the jail itself (read-only, symlink-proof).
    assert [m for m in mounts if m.startswith("/mnt/jail/")] == []
    assert pod["terminationGracePeriodSeconds"] == 60
    assert pod["automountServiceAccountToken"] is False
    pdb = _by(objects, "PodDisruptionBudget", "demo-cpu")
    assert pdb["spec"]["maxUnavailable"] == 1


def test_gpu_example():
    cluster, nodesets = load_example("gpu-cluster.yaml")
    objects = render.render_cluster(cluster, nodesets)
    gpu = _by(objects, "StatefulSet", "ml-h100")
    pod = gpu["spec"]["template"]["spec"]
    slurmd = _container(pod, "slurmd")
    assert slurmd["resources"]["limits"]["nvidia.com/gpu"] == 8
    env = dict((e["name"], e.get("value")) for e in slurmd["env"])
    assert "Gres=gpu:h100:8" in env["SLURMD_CONF_PARAMS"]
    assert "Feature=h100,nvlink,ib" in env["SLURMD_CONF_PARAMS"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    mounts = dict((m["mountPath"], m) for m in slurmd["volumeMounts"])
    assert mounts["/mnt/soperator/sub-mounts/datasets"]["readOnly"] is True
    assert mounts["/mnt/soperator/sub-mounts/scratch"]["readOnly"] is False
    assert env["SOPERATOR_JAIL_SUB_MOUNTS"] == "datasets:/datasets:ro scratch:/scratch:rw"
    assert env["SOPERATOR_JAIL_SHARED_PATHS"] == "/home /root /datasets /scratch"
    volumes = dict((v["name"], v) for v in pod["volumes"])
    assert volumes["submount-scratch"]["hostPath"] == {"path": "/mnt/local-nvme", "type": "Directory"}
    login = _by(objects, "Service", "ml-login")
    assert login["spec"]["type"] == "LoadBalancer"
    assert login["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    config = _by(objects, "ConfigMap", "ml-slurm-config")
    assert "gres.conf" in config["data"]


def test_login(cpu):
    objects = render.render_cluster(*cpu)
    sts = _by(objects, "StatefulSet", "demo-login")
    assert sts["spec"]["serviceName"] == "demo-login-headless"
    pod = sts["spec"]["template"]["spec"]
    sshd = _container(pod, "sshd")
    assert "SYS_CHROOT" in sshd["securityContext"]["capabilities"]["add"]
    # SYS_ADMIN is for the entrypoint's jail binds only (dropped before sshd: images/lib/soperator-entrypoint);
    # mount needs AppArmor unconfined, pivot_root is not used so seccomp stays the runtime default.
    assert "SYS_ADMIN" in sshd["securityContext"]["capabilities"]["add"]
    assert sshd["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
    assert sshd["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert _container(pod, "sackd")["args"][0] == "/usr/sbin/sackd"
    assert _container(pod, "sackd")["args"][-1] == "$(SLURM_CONF_SERVER)"
    # As SlurmUser: the configuration slurmctld pushes to it is credentialed for SlurmUser alone.
    sackd = _container(pod, "sackd")["securityContext"]
    assert (sackd["runAsUser"], sackd["runAsGroup"], sackd["runAsNonRoot"]) == (names.SLURM_UID, names.SLURM_UID, True)
    assert sackd["capabilities"] == {"drop": ["ALL"]} and sackd["readOnlyRootFilesystem"] is True
    # sshd, a main container, starts (and the pod turns Ready) only once sackd has slurm.conf where the jail's
    # /etc/slurm leads (images/jail: /etc/slurm -> /run/slurm/conf): no session finds it missing.
    assert _container(pod, "sackd")["restartPolicy"] == "Always" and sshd in pod["containers"]
    assert _container(pod, "sackd")["startupProbe"]["exec"]["command"] == ["test", "-s", "/run/slurm/conf/slurm.conf"]
    config = _by(objects, "ConfigMap", "demo-sshd-config")
    assert sts["spec"]["template"]["metadata"]["annotations"]["slurm.soperator.dev/config-hash"] == \
        render_common.config_hash(config["data"])
    service = _by(objects, "Service", "demo-login")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "ssh", "port": 22, "targetPort": "ssh", "protocol": "TCP"}]


def test_login_sackd_of_a_root_slurm_user_cluster_stays_root(cpu):
    """A cluster an earlier release made (SlurmUser root until its maintenance) keeps its login template as it was."""
    objects = render.render_cluster(*cpu, slurm_user="root")
    sackd = _container(_by(objects, "StatefulSet", "demo-login")["spec"]["template"]["spec"], "sackd")
    assert "runAsUser" not in sackd["securityContext"]


def test_node_port_service():
    cluster = make_cluster({"login": {"service": {"type": "NodePort", "nodePort": 30022, "port": 2222}}})
    service = _by(render.render_cluster(cluster, []), "Service", "demo-login")
    assert service["spec"]["ports"][0] == {"name": "ssh", "port": 2222, "targetPort": "ssh", "protocol": "TCP",
                                           "nodePort": 30022}


def test_maintenance(cpu):
    cluster, nodesets = cpu
    cluster["spec"]["maintenance"] = True
    objects = render.render_cluster(cluster, nodesets)
    assert not [o for o in objects if o["kind"] == "Job"]
    assert all(o["spec"]["replicas"] == 0 for o in objects if o["kind"] == "StatefulSet")
    assert _by(objects, "PersistentVolumeClaim", "demo-jail")
    assert len([o for o in objects if o["kind"] == "Secret"]) == 2


def test_populate_job(cpu):
    cluster, nodesets = cpu
    job = _by(render.render_cluster(cluster, nodesets), "Job", "demo-populate-jail-initial")
    assert job["metadata"]["annotations"] == {"slurm.soperator.dev/create-only": "true"}
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    populate = _container(pod, "populate")
    assert populate["image"] == "soperator/jail:0.1.0"
    assert "--overwrite" not in populate["command"]
    assert populate["command"][-1] == "--skip-if-populated", "an existing claim may come populated: not an error"
    assert _container(pod, "install-tool")["image"] == "soperator/populate-jail:0.1.0"
    cluster["spec"]["jail"]["populate"] = {"repopulateToken": "again"}
    jobs = [o for o in render.render_cluster(cluster, nodesets) if o["kind"] == "Job"]
    name = names.populate_job_name("demo", "again")
    assert jobs[0]["metadata"]["name"] == name and len(name) == len("demo-populate-jail-") + 10
    assert _container(jobs[0]["spec"]["template"]["spec"], "populate")["command"][-1] == "--overwrite"
    assert names.populate_job_name("demo", "other") != name


def test_existing_claim_and_sub_mounts():
    cluster = make_cluster({"jail": {"existingClaim": "shared", "subMounts": [
        {"name": "home", "mountPath": "/home", "claimName": "homes"},
        {"name": "tmp", "mountPath": "/scratch", "emptyDir": True}]}})
    objects = render.render_cluster(cluster, [make_nodeset()])
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    pod = _by(objects, "StatefulSet", "demo-cpu")["spec"]["template"]["spec"]
    volumes = dict((v["name"], v) for v in pod["volumes"])
    assert volumes["jail"]["persistentVolumeClaim"]["claimName"] == "shared"
    assert volumes["submount-home"]["persistentVolumeClaim"] == {"claimName": "homes", "readOnly": False}
    assert volumes["submount-tmp"]["emptyDir"] == {}
    job = [o for o in objects if o["kind"] == "Job"][0]
    assert [v["name"] for v in job["spec"]["template"]["spec"]["volumes"]] == ["jail", "tools"]


def _env(container):
    return dict((e["name"], e.get("value")) for e in container.get("env") or ())


def test_sub_mounts_are_mounted_outside_the_jail_and_bound_by_the_entrypoint():
    """The kubelet mounts each sub-mount by name outside the jail; the entrypoint of login and worker pods binds it
    at its jail path (symlink-proof), read-only as asked, an emptyDir's directory with its mode (0755 unless asked)."""
    cluster = make_cluster({"jail": {"storageClassName": "s", "size": "1Gi", "subMounts": [
        {"name": "data", "mountPath": "/data", "claimName": "data", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch", "emptyDir": True},
        {"name": "shared", "mountPath": "/shared", "emptyDir": True, "mode": "1777", "readOnly": True}]}})
    objects = render.render_cluster(cluster, [make_nodeset()])
    worker = _container(_by(objects, "StatefulSet", "demo-cpu")["spec"]["template"]["spec"], "slurmd")
    login = _container(_by(objects, "StatefulSet", "demo-login")["spec"]["template"]["spec"], "sshd")
    for container in (worker, login):
        assert _env(container)["SOPERATOR_JAIL_SUB_MOUNTS"] == \
            "data:/data:ro scratch:/scratch:rw:0755 shared:/shared:ro:1777"
        mounts = dict((m["name"], m) for m in container["volumeMounts"])
        assert mounts["submount-data"] == {"name": "submount-data", "mountPath": "/mnt/soperator/sub-mounts/data",
                                           "readOnly": True}
        # an emptyDir is writable where the kubelet mounts it (the entrypoint sets its mode), read-only in the jail
        assert mounts["submount-shared"]["readOnly"] is False
        assert not [m for m in container["volumeMounts"] if m["mountPath"].startswith(names.JAIL_MOUNT + "/")]
    assert "SOPERATOR_JAIL_SUB_MOUNTS" not in _env(_container(_by(objects, "StatefulSet", "demo-controller")[
        "spec"]["template"]["spec"], "slurmctld"))


@pytest.mark.parametrize("paths, shared", [
    ([], ["/home", "/root"]),
    # user data: shared, sorted; one inside a shared path rides along with it (the share is recursive)
    (["/scratch", "/data", "/home/shared", "/data/inner"], ["/home", "/root", "/data", "/scratch"]),
    # where the container's privileged processes execute, load or read files: never shared
    (["/usr/local/bin", "/usr/lib/x86_64-linux-gnu/slurm", "/etc/munge", "/opt/tools", "/var/lib/data",
      "/var/spool/slurmd", "/run/x", "/libexec/x", "/mnt/jail/x", "/mnt/soperator/sub-mounts/x", "/mnt/soperator",
      "/mnt/data", "/srv/x", "/sbin2"], ["/home", "/root", "/mnt/data", "/sbin2", "/srv/x"]),
])
def test_shared_jail_paths(paths, shared):
    assert render_worker.shared_jail_paths([{"mountPath": p} for p in paths]) == shared


def test_no_shared_jail_path_is_in_a_system_tree():
    """Every place of the images' filesystems where root's processes find programs, libraries, plugins,
    configuration or keys (the worker image's PATH, its Slurm plugin dir, /etc/munge, the probe, the health program)
    is in a system tree, so a sub-mount there is never shared with slurmd's container."""
    trusted = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
               "/usr/lib/x86_64-linux-gnu/slurm", "/lib/x86_64-linux-gnu", "/etc/munge", "/etc/slurm",
               "/etc/soperator", "/etc/ld.so.preload", names.NODE_READY_PROBE, names.HEALTH_CHECK_PROGRAM,
               names.SLURMD_SPOOL, names.SLURM_RUN_DIR, names.MUNGE_RUN_DIR, names.JAIL_MOUNT, names.SUB_MOUNTS_DIR,
               "/usr/local/lib/soperator", "/usr/lib/python3/dist-packages", "/opt/nvidia", "/var/lib/munge"]
    for path in trusted:
        assert paths.system_tree(path) is not None and not paths.may_mirror(path), path
        assert render_worker.shared_jail_paths([{"mountPath": path}]) == list(render_worker.SHARED_HOMES), path


def test_the_entrypoint_refuses_the_same_system_trees():
    """The entrypoint's own lists (it refuses, fail closed, whatever its manifest asks) are the pure core's."""
    path = os.path.join(os.path.abspath(__file__).rsplit(os.sep, 5)[0], "images", "lib", "soperator-entrypoint")
    with open(path) as f:
        text = f.read()

    def words(name):
        return re.search(r'^%s="([^"]*)"$' % name, text.replace("\\\n", ""), re.M).group(1).split()
    assert words("SYSTEM_TREES") == list(paths.DAEMON_MIRROR_REFUSED_TREES)
    assert paths.SUB_MOUNT_SYSTEM_NAME_PREFIX == "lib" and 'trees="$SYSTEM_TREES /lib*"' in text
    assert words("SHARED_HOMES") == list(render_worker.SHARED_HOMES)
    assert re.search(r"^SUB_MOUNTS=\$R(\S+)$", text, re.M).group(1) == names.SUB_MOUNTS_DIR


def test_placement_merge():
    merged = render_common.merge_placement(
        {"nodeSelector": {"pool": "slurm", "zone": "a"}, "tolerations": [{"key": "a", "operator": "Exists"}],
         "affinity": {"nodeAffinity": {"x": 1}, "podAffinity": {"y": 1}}},
        {"nodeSelector": {"zone": "b"}, "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b"}],
         "affinity": {"nodeAffinity": {"z": 1}}})
    assert merged == {"nodeSelector": {"pool": "slurm", "zone": "b"},
                      "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b"}],
                      "affinity": {"nodeAffinity": {"z": 1}, "podAffinity": {"y": 1}}}
    assert render_common.merge_placement(None, None) == {}


def test_per_nodeset_image_and_resources():
    cluster = make_cluster({"images": {"worker": "w:1"}, "controller": {"resources": {"limits": {"memory": "1Gi"}}}})
    objects = render.render_cluster(cluster, [make_nodeset("a", {"image": "custom:2"}), make_nodeset("b")])
    pod_spec = _by(objects, "StatefulSet", "demo-a")["spec"]["template"]["spec"]
    assert _container(pod_spec, "slurmd")["image"] == "custom:2"
    assert _container(_by(objects, "StatefulSet", "demo-b")["spec"]["template"]["spec"], "slurmd")["image"] == "w:1"
    ctld = _container(_by(objects, "StatefulSet", "demo-controller")["spec"]["template"]["spec"], "slurmctld")
    assert ctld["resources"] == {"limits": {"memory": "1Gi"}}


def test_invalid_input_raises_spec_errors():
    with pytest.raises(SpecErrors) as info:
        render.render_cluster(make_cluster({"slurm": {"slurmConf": {"ClusterName": "evil"}}}), [make_nodeset()])
    assert info.value.errors[0].path == "spec.slurm.slurmConf.ClusterName"
