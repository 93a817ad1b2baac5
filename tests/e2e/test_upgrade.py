"""Upgrading the collection in place: a cluster converged by the previous release, a job running, converged by
this checkout. The job survives, the keys and the jail are the same, the workers are replaced only by drain.

The previous release is a pinned commit of this repository (the collection version did not change between them;
both run the same images): the last one whose workers rolled with the StatefulSet default (RollingUpdate), so
the upgrade also switches the update strategy under a running job. A release's default images carry its
version as their tag, so its workers' pod template differs from the previous one's: the same images retagged (as a
rebuild under the next version would be) stand for that here.
"""

import os
import re
import subprocess
import tarfile
import tempfile
import time

import pytest
from conftest import E2E, ROOT, wait_until

PREVIOUS_RELEASE = "743d96f"  # before rolling updates by drain (683cc71)
NAMESPACE = "e2e-upgrade"


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
    return tmp


def _job_field(cluster, job, field):
    found = re.search(r"\b%s=(\S+)" % field, cluster.slurm("scontrol show job %s" % job).stdout)
    return found and found.group(1)


def test_upgrade_from_the_previous_release_keeps_jobs_keys_and_jail(real_node_cluster):
    cluster = E2E(real_node_cluster, namespace=NAMESPACE)
    tmp = tempfile.mkdtemp(prefix="soperator-previous-")
    old = E2E(real_node_cluster, namespace=NAMESPACE)
    old.env["ANSIBLE_COLLECTIONS_PATH"] = _previous_collection(tmp)
    playbook = os.path.join(tmp, "ansible_collections", "soperator", "slurm", "playbooks", "site.yml")
    try:
        docs = cluster.definition(replicas=1)
        # The previous release ran root's jobs and knew no spec.slurm.disableRootJobs (its validation refuses an
        # unknown field): its user's definition lacks the key this one needs to keep them (the changelog says so).
        del docs[0]["spec"]["slurm"]["disableRootJobs"]
        old.site(docs, playbook=playbook)
        cluster.wait_idle(["demo-cpu-0"])
        sts = cluster.get("statefulset", "demo-cpu")
        assert sts["spec"]["updateStrategy"]["type"] == "RollingUpdate", "not the previous release's workers"
        keys = dict((name, cluster.get("secret", name)["data"]) for name in ("demo-munge-key", "demo-ssh-host-keys"))
        jail = cluster.get("pvc", "demo-jail")["metadata"]["uid"]
        assert cluster.jail("echo written-before-the-upgrade > /root/upgrade.marker").returncode == 0
        worker = cluster.get("pod", "demo-cpu-0")["metadata"]["uid"]
        submit = cluster.jail("cd /root && sbatch --parsable -w demo-cpu-0 -o /root/upgrade.out "
                              "--wrap 'sleep 30; echo finished'")
        assert submit.returncode == 0, submit.stderr
        job = submit.stdout.strip()
        wait_until(lambda: _job_field(cluster, job, "JobState") == "RUNNING", 60, "the job running",
                   cluster.explain)

        t0 = time.monotonic()
        cluster.worker_image = cluster.retag_image("soperator/slurm-worker:0.1.0", "0.1.0-next")
        cluster.site(cluster.definition(replicas=1))
        new = wait_until(lambda: (lambda p: p and p["metadata"]["uid"] != worker and p)(
            cluster.get("pod", "demo-cpu-0")), 300, "the worker replaced", cluster.explain)
        cluster.wait_idle(["demo-cpu-0"])
        print("\ne2e: upgraded from %s with a 30 s job running in %.1f s" % (PREVIOUS_RELEASE, time.monotonic() - t0))
        assert _job_field(cluster, job, "JobState") == "COMPLETED" and _job_field(cluster, job, "ExitCode") == "0:0"
        assert cluster.jail("cat /root/upgrade.out").stdout.strip() == "finished"
        assert new["metadata"]["creationTimestamp"].rstrip("Z") >= _job_field(cluster, job, "EndTime")
        assert cluster.get("statefulset", "demo-cpu")["spec"]["updateStrategy"]["type"] == "OnDelete"
        assert dict((name, cluster.get("secret", name)["data"]) for name in keys) == keys
        assert cluster.get("pvc", "demo-jail")["metadata"]["uid"] == jail
        assert cluster.jail("cat /root/upgrade.marker").stdout.strip() == "written-before-the-upgrade"
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
