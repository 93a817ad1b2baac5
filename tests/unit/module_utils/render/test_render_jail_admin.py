"""The jail's administration Job (render/jail.py admin_job): the login pod's image, capabilities, jail and
sub-mounts, nothing else."""

import pytest
import yaml

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.render import cluster as render
from ansible_collections.soperator.slurm.plugins.module_utils.render import jail


def login_sts(sub_mounts=(), identity=False):
    docs = [d for d in yaml.safe_load_all(open(_example())) if d]
    docs[0]["spec"]["jail"]["subMounts"] = list(sub_mounts)
    docs[0]["metadata"]["uid"] = "uid-1"
    objects = render.render_cluster(docs[0], docs[1:])
    return next(o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "demo-login")


def _example():
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))))
    return os.path.join(root, "examples", "cpu-cluster-local.yaml")


def test_the_administration_pod_is_the_login_container_without_sshd():
    sts = login_sts([{"name": "scratch", "mountPath": "/scratch", "emptyDir": True}])
    job = jail.admin_job(sts, 120)
    assert job["metadata"]["name"] == "demo-jail-admin" and job["metadata"]["namespace"] == "slurm"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels[names.LABEL_COMPONENT] == names.COMPONENT_JAIL_ADMIN
    assert labels[names.LABEL_MANAGED_BY] == names.MANAGED_BY_JAIL_CONNECTION and names.LABEL_CLUSTER not in labels
    assert job["spec"]["ttlSecondsAfterFinished"] == 0 and job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    sshd = next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "sshd")
    (container,) = pod["containers"]
    assert "initContainers" not in pod and pod["restartPolicy"] == "Never"
    assert container["image"] == sshd["image"] and container["securityContext"] == sshd["securityContext"]
    assert container["args"][-1] == "120" and {"name": "SOPERATOR_ROLE", "value": "login"} in container["env"]
    assert [m["mountPath"] for m in container["volumeMounts"]] == [names.JAIL_MOUNT, names.SUB_MOUNTS_DIR + "/scratch"]
    assert sorted(v["name"] for v in pod["volumes"]) == ["jail", "submount-scratch"]
    assert [e["name"] for e in container["env"]] == ["SOPERATOR_ROLE", "SOPERATOR_JAIL_SUB_MOUNTS"]
    assert pod["nodeSelector"] == {"soperator.dev/localcluster": "real"}
    assert pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize("label", [None, "other"])
def test_a_login_statefulset_not_labelled_for_its_cluster_makes_no_job(label):
    """The Job's name and instance label say which cluster's jail connection enters it: taken from a label that is
    gone (a Job None-jail-admin, which demo's connection never finds) or names another cluster (other's connection
    would enter demo's jail), they are refused, naming the label."""
    sts = login_sts()
    if label is None:
        del sts["metadata"]["labels"][names.LABEL_INSTANCE]
    else:
        sts["metadata"]["labels"][names.LABEL_INSTANCE] = label
    with pytest.raises(ValueError, match="StatefulSet slurm/demo-login: its label %s is %r" % (
            names.LABEL_INSTANCE, label)):
        jail.admin_job(sts, 120)


def test_the_idle_script_is_valid_sh():
    import subprocess

    assert subprocess.run(["sh", "-n", "-c", jail.ADMIN_IDLE_SCRIPT]).returncode == 0


def test_the_idle_script_ends_once_no_other_process_runs(tmp_path):
    """Run as a PID namespace's init it ends after its idle time, and not while another process runs."""
    import subprocess
    import time

    from prerequisites import require_root

    require_root("a PID namespace of its own (unshare --pid --mount-proc)")
    started = time.monotonic()
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", jail.ADMIN_IDLE_SCRIPT, "x",
                           "3"], timeout=30)
    assert done.returncode == 0 and 1.5 < time.monotonic() - started < 10
    started = time.monotonic()
    busy = ("(sleep 5 &) ; exec sh -c '%s' x 2" % jail.ADMIN_IDLE_SCRIPT.replace("'", "'\\''"))
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", busy], timeout=30)
    assert done.returncode == 0 and time.monotonic() - started > 6
