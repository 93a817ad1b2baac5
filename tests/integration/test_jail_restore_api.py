"""A restore (playbooks/jail-restore.yml) of a SlurmCluster stored in a real API server is judged before a Job exists:
the installer's policy (soperator_policy, as site.yml is given it) and the marks of the Secrets its backups take
refuse it naming the SlurmCluster's field, with nothing created; an accepted one creates its Job, as rendered.

The SlurmClusters are stored as their authors would write them (no converge: the restore reads what is stored). kwok
pods run nothing, so the accepted restore's Job never ends: the play is given 5 s to wait for it.
"""

import json
import os
import subprocess

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils import names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.cluster
POLICY = {"allowed_registries": ["docker.io/soperator"], "allowed_backup_endpoints": ["https://s3.example.com"]}


@pytest.fixture(scope="module")
def crds(apply_crds):
    apply_crds("restore-test")


def store(kubectl, namespace, images=None, endpoint="https://s3.example.com", password_mark="demo"):
    """The SlurmCluster demo with backups to S3, and its Secrets (the password marked for ``password_mark``)."""
    spec = {"jail": {"storageClassName": "standard", "size": "1Gi", "backup": {
        "schedule": "0 2 * * *", "passwordSecretRef": {"name": "backup-password"},
        "repository": {"s3": {"endpoint": endpoint, "bucket": "jails",
                              "credentialsSecretRef": {"name": "backup-s3"}}}}},
        "placement": {"nodeSelector": {"soperator.dev/localcluster": "kwok"}}}
    if images:
        spec["images"] = images
    objects = [
        {"apiVersion": names.API_VERSION, "kind": names.CLUSTER_KIND, "metadata": {"name": "demo"}, "spec": spec},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "backup-password", "labels": (
            {names.LABEL_BACKUP_SECRET: password_mark} if password_mark else {})}, "stringData": {"password": "p"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "backup-s3", "labels": {
            names.LABEL_BACKUP_SECRET: "demo"}},
         "stringData": {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}},
    ]
    kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                     "items": objects}))


def restore(kubeconfig, collections_path, namespace, policy):
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=kubeconfig, ANSIBLE_COLLECTIONS_PATH=collections_path,
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    extra = {"slurm_cluster": "demo", "slurm_namespace": namespace, "path": "/home/alice", "into": "/restore/alice",
             "soperator_policy": policy, "jail_restore_timeout": 5}
    return subprocess.run(["ansible-playbook", os.path.join(ROOT, "playbooks", "jail-restore.yml"), "-e",
                           json.dumps(extra)], env=env, capture_output=True, text=True)


def jobs(kubectl, namespace):
    return json.loads(kubectl("get", "jobs", "-n", namespace, "-o", "json").stdout)["items"]


@pytest.mark.parametrize("case,stored,field", [
    ("a backup image from another registry", {"images": {"backup": "registry.evil.example/backup:1"}},
     "spec.images.backup"),
    ("a password Secret not marked for the cluster", {"password_mark": ""}, "spec.jail.backup.passwordSecretRef.name"),
    ("a password Secret marked for another cluster", {"password_mark": "other"},
     "spec.jail.backup.passwordSecretRef.name"),
    ("a repository elsewhere", {"endpoint": "https://jails.evil.example"}, "spec.jail.backup.repository.s3.endpoint"),
])
def test_a_restore_the_policy_or_the_marks_refuse_fails_naming_the_field_before_a_job_exists(
        crds, kubeconfig, collections_path, kubectl, namespace, case, stored, field):
    store(kubectl, namespace, **stored)
    res = restore(kubeconfig, collections_path, namespace, POLICY)
    assert res.returncode != 0, case
    assert "the restore is refused: %s:" % field in res.stdout, (case, res.stdout[-3000:])
    assert jobs(kubectl, namespace) == [], case


def test_an_accepted_restore_creates_its_job(crds, kubeconfig, collections_path, kubectl, namespace):
    store(kubectl, namespace)
    res = restore(kubeconfig, collections_path, namespace, POLICY)
    assert "the restore is refused" not in res.stdout, res.stdout[-3000:]
    found = jobs(kubectl, namespace)
    assert len(found) == 1 and found[0]["metadata"]["name"].startswith("demo-restore-")
    container = found[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == names.default_image("backup")
    assert container["command"][-4:] == ["--source", "/mnt/jail/home/alice", "--target", "/mnt/jail/restore/alice"]
