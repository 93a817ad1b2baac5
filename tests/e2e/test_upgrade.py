"""Upgrading the collection in place: a cluster converged by the previous release, a job running, converged by
this checkout. The job survives, the keys and the jail are the same, the workers are replaced only by drain.

The previous release is a pinned commit of this repository: the last one whose workers rolled with the StatefulSet
default (RollingUpdate), so the upgrade also switches the update strategy under a running job. It runs its own
images, as a user's would: the collection version did not change between the two, so the previous tree gets a
version of its own (PREVIOUS_VERSION: its default images' tag) and its own hack/images.sh builds its images
(cached by their inputs like this checkout's) for the real node. Today's images in yesterday's pods are no release:
the jail plugin of today needs capabilities the previous worker pods do not grant.
"""

import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest
from conftest import E2E, ROOT, held_job, wait_until

from ansible_collections.soperator.slurm.plugins.module_utils import names

PREVIOUS_RELEASE = "743d96f"  # before rolling updates by drain (683cc71)
PREVIOUS_VERSION = "0.1.0-previous"
NAMESPACE = "e2e-upgrade"
TOOL = os.path.join(ROOT, "hack", "localcluster.py")


def _previous_collection(tmp):
    """The previous release's tree as an installed collection under ``tmp`` (its ANSIBLE_COLLECTIONS_PATH)."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", PREVIOUS_RELEASE], capture_output=True,
                             stdin=subprocess.DEVNULL)
    if archive.returncode:
        pytest.fail("the previous release %s is not in this clone's history (a shallow clone?): %s"
                    % (PREVIOUS_RELEASE, archive.stderr.decode()[-500:]))
    target = os.path.join(tmp, "ansible_collections", "soperator", "slurm")
    os.makedirs(target)
    tar_path = os.path.join(tmp, "previous.tar")
    with open(tar_path, "wb") as f:
        f.write(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(target, filter="data")
    for path, line in (("galaxy.yml", "version: %s"), ("plugins/module_utils/names.py", 'COLLECTION_VERSION = "%s"')):
        with open(os.path.join(target, path)) as f:
            text = f.read()
        assert line % names.COLLECTION_VERSION in text, (path, "the previous release's version is not where expected")
        with open(os.path.join(target, path), "w") as f:
            f.write(text.replace(line % names.COLLECTION_VERSION, line % PREVIOUS_VERSION, 1))
    return tmp


def _previous_images(tree, state_dir):
    """The previous release's images, built by its own hack/images.sh (a no-op when its inputs are cached),
    imported into the real node."""
    images_sh = os.path.join(tree, "hack", "images.sh")
    subprocess.run([images_sh, "build", "save"], check=True, stdin=subprocess.DEVNULL)
    listed = subprocess.run([images_sh, "list"], check=True, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL).stdout.split("\n")
    cache = os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator"))
    archives = [os.path.join(cache, "images", "%s-%s.tar" % (line.split()[0], PREVIOUS_VERSION))
                for line in listed if line.strip() and not line.startswith("slurm-base ")]
    subprocess.run([sys.executable, TOOL, "import-image"] + archives, check=True, stdin=subprocess.DEVNULL,
                   env=dict(os.environ, SOPERATOR_LOCALCLUSTER_DIR=state_dir))


def _job_field(cluster, job, field):
    found = re.search(r"\b%s=(\S+)" % field, cluster.slurm("scontrol show job %s" % job).stdout)
    return found and found.group(1)


def _conditions(cluster):
    status = (cluster.get("slurmcluster", "demo") or {}).get("status") or {}
    return dict((c["type"], c) for c in status.get("conditions") or [])


def test_upgrade_from_the_previous_release_keeps_jobs_keys_and_jail(real_node_cluster):
    cluster = E2E(real_node_cluster, namespace=NAMESPACE)
    tmp = tempfile.mkdtemp(prefix="soperator-previous-")
    old = E2E(real_node_cluster, namespace=NAMESPACE)
    old.env["ANSIBLE_COLLECTIONS_PATH"] = _previous_collection(tmp)
    tree = os.path.join(tmp, "ansible_collections", "soperator", "slurm")
    _previous_images(tree, real_node_cluster)
    playbook = os.path.join(tree, "playbooks", "site.yml")
    try:
        docs = cluster.definition(replicas=1)
        # The previous release ran root's jobs and knew no spec.slurm.disableRootJobs (its validation refuses an
        # unknown field): its user's definition lacks the key this one needs to keep them (the changelog says so).
        del docs[0]["spec"]["slurm"]["disableRootJobs"]
        old.site(docs, playbook=playbook)
        cluster.wait_idle(["demo-cpu-0"])
        sts = cluster.get("statefulset", "demo-cpu")
        assert sts["spec"]["updateStrategy"]["type"] == "RollingUpdate", "not the previous release's workers"
        assert sts["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":" + PREVIOUS_VERSION)
        keys = dict((name, cluster.get("secret", name)["data"]) for name in ("demo-munge-key", "demo-ssh-host-keys"))
        jail = cluster.get("pvc", "demo-jail")["metadata"]["uid"]
        assert cluster.jail("echo written-before-the-upgrade > /root/upgrade.marker").returncode == 0
        worker = cluster.get("pod", "demo-cpu-0")["metadata"]["uid"]
        # A job that runs until the test has seen the worker drained for the upgrade, its pod still there.
        job, release = held_job(cluster, "demo-cpu-0", "upgrade")
        wait_until(lambda: _job_field(cluster, job, "JobState") == "RUNNING", 60, "the job running",
                   cluster.explain)

        t0 = time.monotonic()
        converge = cluster.site(cluster.definition(replicas=1), background=True)
        try:
            drained = wait_until(lambda: (lambda n: "DRAIN" in n and n)(cluster.node("demo-cpu-0")), 300,
                                 "demo-cpu-0 drained for the upgrade", cluster.explain)
            assert "Reason=soperator: update" in drained, drained
            assert _job_field(cluster, job, "JobState") == "RUNNING"
            assert cluster.get("pod", "demo-cpu-0")["metadata"]["uid"] == worker
            released = time.monotonic()
        finally:
            release()
        output, _ = converge.communicate(timeout=600)
        assert converge.returncode == 0, output[-5000:]
        new = wait_until(lambda: (lambda p: p and p["metadata"]["uid"] != worker and p)(
            cluster.get("pod", "demo-cpu-0")), 300, "the worker replaced", cluster.explain)
        cluster.wait_idle(["demo-cpu-0"])
        print("\ne2e: upgraded from %s with a job running in %.1f s, %.1f s after the job was let finish"
              % (PREVIOUS_RELEASE, time.monotonic() - t0, time.monotonic() - released))
        assert _job_field(cluster, job, "JobState") == "COMPLETED" and _job_field(cluster, job, "ExitCode") == "0:0"
        assert cluster.jail("cat /root/upgrade.out").stdout.strip() == "finished-on-demo-cpu-0"
        assert new["metadata"]["creationTimestamp"].rstrip("Z") >= _job_field(cluster, job, "EndTime")
        assert cluster.get("statefulset", "demo-cpu")["spec"]["updateStrategy"]["type"] == "OnDelete"
        assert new["spec"]["containers"][0]["image"].endswith(names.default_image("worker"))
        assert dict((name, cluster.get("secret", name)["data"]) for name in keys) == keys
        assert cluster.get("pvc", "demo-jail")["metadata"]["uid"] == jail
        assert cluster.jail("cat /root/upgrade.marker").stdout.strip() == "written-before-the-upgrade"

        # The previous release ran slurmctld as root. A running slurmd takes RPCs only from root and the SlurmUser
        # of the configuration it fetched, so slurmctld stays root while workers run, and the status says so; the
        # next maintenance (everything drained and stopped) switches it to slurm.
        condition = _conditions(cluster).get("SlurmUserUpToDate") or {}
        assert condition.get("status") == "False" and "maintenance" in condition.get("message", ""), condition
        assert cluster.slurmctld_uids() == ["0"] * 4
        docs = cluster.definition(replicas=1)
        docs[0]["spec"]["maintenance"] = True
        cluster.site(docs)
        wait_until(lambda: (cluster.get("slurmcluster", "demo").get("status") or {}).get("phase") == "Maintenance",
                   300, "maintenance reached", cluster.explain)
        cluster.site(cluster.definition(replicas=1))
        cluster.wait_idle(["demo-cpu-0"])
        assert cluster.slurmctld_uids() == [str(names.SLURM_UID)] * 4
        assert "SlurmUserUpToDate" not in _conditions(cluster)
        wait_until(lambda: cluster.jail("true").returncode == 0, 180, "the login pod back", cluster.explain)
        done = cluster.jail("cd /root && timeout 120 sbatch --wait -w demo-cpu-0 -o /root/after.out --wrap 'echo ok'")
        assert done.returncode == 0 and cluster.jail("cat /root/after.out").stdout.strip() == "ok", done.stderr
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
