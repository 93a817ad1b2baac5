"""A restore of a stored SlurmCluster's jail is judged as its converge judges it (plan/restore.py): the installer's
policy and the Secrets' marks refuse the Job before it is rendered, with the converge's own messages; the request's
own problems name the role's variables."""

import pytest
from resources import make_cluster

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import policy as policies
from ansible_collections.soperator.slurm.plugins.module_utils.api.errors import SpecErrors
from ansible_collections.soperator.slurm.plugins.module_utils.plan import converge, restore
from ansible_collections.soperator.slurm.plugins.module_utils.render import backup as render_backup

MARK = {names.LABEL_BACKUP_SECRET: "demo"}
MARKED = {"pw": MARK, "s3": MARK}
S3 = {"s3": {"endpoint": "https://s3.example.com", "bucket": "jails", "credentialsSecretRef": {"name": "s3"}}}


def stored(images=None, repository=S3):
    spec = {"jail": {"storageClassName": "standard", "size": "10Gi", "backup": {
        "schedule": "0 2 * * *", "repository": repository, "passwordSecretRef": {"name": "pw"}}}}
    if images:
        spec["images"] = images
    obj = make_cluster(spec, uid="u1")
    obj["status"] = {"phase": "Ready"}
    return obj


def refusal(cluster, secrets=None, policy=None, into="/restore/alice"):
    with pytest.raises(SpecErrors) as e:
        restore.restore_job(cluster, MARKED if secrets is None else secrets, policies.normalize(policy), "latest",
                            "/home/alice", into)
    return e.value


def converge_refusal(cluster, secrets=None, policy=None):
    with pytest.raises(SpecErrors) as e:
        converge.validate(cluster, [], policy=policies.normalize(policy),
                          secrets=MARKED if secrets is None else secrets)
    return e.value


def test_an_accepted_restore_is_the_rendered_job():
    job = restore.restore_job(stored(), MARKED, policies.normalize({"allowed_registries": ["docker.io/soperator"]}),
                              "latest", "/home/alice", "/restore/alice")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == names.default_image("backup")
    assert container["securityContext"]["capabilities"]["add"] == render_backup.RESTORE_CAPABILITIES
    assert container["command"][-2:] == ["--target", "/mnt/jail/restore/alice"]


@pytest.mark.parametrize("case,cluster,secrets,policy,field", [
    ("a backup image from a registry the installer does not allow", stored({"backup": "evil.example.com/backup:1"}),
     None, {"allowed_registries": ["docker.io/soperator"]}, "spec.images.backup"),
    ("the default backup image under a policy without its registry", stored(), None,
     {"allowed_registries": ["registry.example.com"]}, "spec.images.backup"),
    ("a password Secret not marked for the cluster", stored(), {"pw": {}, "s3": MARK}, None,
     "spec.jail.backup.passwordSecretRef.name"),
    ("credentials marked for another cluster", stored(), {"pw": MARK, "s3": {names.LABEL_BACKUP_SECRET: "other"}},
     None, "spec.jail.backup.repository.s3.credentialsSecretRef.name"),
    ("a Secret that does not exist", stored(), {"s3": MARK}, None, "spec.jail.backup.passwordSecretRef.name"),
    ("a host path the installer does not allow", dict(stored(), spec=dict(stored()["spec"], jail=dict(
        stored()["spec"]["jail"], subMounts=[{"name": "d", "mountPath": "/data", "hostPath": "/srv"}]))), None, None,
     "spec.jail.subMounts[0].hostPath"),
])
def test_what_the_converge_refuses_the_restore_refuses_with_the_same_words(case, cluster, secrets, policy, field):
    refused = refusal(cluster, secrets, policy)
    assert field in [e.path for e in refused.errors], case
    assert str(refused) == str(converge_refusal(cluster, secrets, policy)), case


def test_the_requests_own_problems_name_the_roles_variables_first():
    refused = refusal(stored({"backup": "evil.example.com/backup:1"}), policy={"allowed_registries": ["x.example"]},
                      into="/home/alice")
    assert [e.path for e in refused.errors] == ["jail_restore_into"]
