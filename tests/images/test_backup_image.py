"""The backup image with Debian's real restic, outside Kubernetes: a restore never writes through a symlink a user of
the jail put in its way.

The jail is populated from the jail image (test_smoke's fixture); the backup and restore containers run the program
with the command, environment and capabilities the rendered CronJob and restore Job give them, the jail mounted as
they mount it (read-only for the backup), a host directory as the repository (a claim's). alice (uid 1001) owns
/srv/users/alice. What must not change is checked by a manifest of the jail's system trees (every entry's mode,
owner, size, mtime and ctime: a chmod, chown, setxattr, utime or write through a link changes a ctime) before and after
each restore. The engine and the skip rules are test_smoke.py's.
"""

import json
import os
import stat

import pytest
from resources import make_cluster
from test_smoke import Docker, engine, jail  # noqa: F401  (fixtures used here)

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api.spec import validate_cluster_with_nodesets
from ansible_collections.soperator.slurm.plugins.module_utils.render import backup as render_backup
from ansible_collections.soperator.slurm.plugins.module_utils.render.common import ClusterContext

IMAGE = names.default_image("backup")
PASSWORD = "repo-pass-9Xk2"
SYSTEM_TREES = ("etc", "usr", "bin", "sbin", "lib", "lib64", "opt", "var", "root")
ALICE = 1001


def context():
    cluster = make_cluster({"jail": {"storageClassName": "standard", "size": "1Gi", "backup": {
        "schedule": "0 2 * * *", "passwordSecretRef": {"name": "pw"},
        "repository": {"claim": {"claimName": "repo", "path": "demo"}}}}})
    valid, dummy = validate_cluster_with_nodesets(cluster, [])
    return ClusterContext(valid, [])


def container_of(obj):
    template = obj["spec"]["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob" else obj["spec"]["template"]
    return template["spec"]["containers"][0]


def system_manifest(root):
    """{path: (mode, uid, gid, size, mtime, ctime)} of every entry of the jail's system trees."""
    found = {}
    for tree in SYSTEM_TREES:
        top_path = os.path.join(root, tree)
        if not os.path.lexists(top_path):
            continue
        for top, dirs, files in os.walk(top_path):
            for name in [""] + dirs + files:
                path = os.path.join(top, name) if name else top
                st = os.lstat(path)
                found[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns,
                                                      st.st_ctime_ns)
    return found


class Backups(object):
    """The backup and restore containers of the demo cluster, on ``jail`` with the repository ``repo``."""

    def __init__(self, docker, jail_dir, tmp):
        self.docker, self.jail, self.c = docker, jail_dir, context()
        self.repo = os.path.join(tmp, "repository")
        self.password = os.path.join(tmp, "password")
        os.makedirs(self.repo)
        os.makedirs(self.password)
        with open(os.path.join(self.password, "repository-password"), "w") as f:
            f.write(PASSWORD)
        os.chmod(os.path.join(self.password, "repository-password"), 0o400)
        self.runs = 0

    def run(self, obj):
        """Run the container of the rendered CronJob or Job ``obj`` to its end: (exit code, the program's report)."""
        ctr = container_of(obj)
        read_only = next(m for m in ctr["volumeMounts"] if m["name"] == "jail").get("readOnly", False)
        options = ["--read-only", "--tmpfs", "/tmp", "--tmpfs", names.BACKUP_CACHE_DIR, "--user", "0:0",
                   "--security-opt", "no-new-privileges", "--entrypoint", ctr["command"][0]]
        for env in ctr["env"]:
            options += ["-e", "%s=%s" % (env["name"], env["value"])]
        self.runs += 1
        name = "%s-%d" % (ctr["name"], self.runs)
        result = self.docker.run(name, IMAGE, ctr["command"][1:], ctr["securityContext"]["capabilities"].get("add", []),
                                 volumes=[(self.jail, names.JAIL_MOUNT + (":ro" if read_only else "")),
                                          (self.repo, names.BACKUP_REPOSITORY_MOUNT),
                                          (self.password, names.BACKUP_PASSWORD_MOUNT + ":ro")],
                                 options=options, detach=True)
        assert result.returncode == 0, result.stderr
        code = int(self.docker("wait", self.docker.name(name), timeout=600).stdout.strip())
        out = self.docker("logs", self.docker.name(name)).stdout
        return code, json.loads(out.strip().splitlines()[-1])

    def backup(self):
        return self.run(render_backup.backup_cronjob(self.c))

    def restore(self, path, into):
        return self.run(render_backup.restore_job(self.c, "latest", path, into))


@pytest.fixture(scope="module")
def backups(engine, jail, tmp_path_factory):  # noqa: F811
    docker = Docker(engine)
    users = os.path.join(jail, "srv", "users")
    alice = os.path.join(users, "alice")
    os.makedirs(os.path.join(alice, "proj"))
    with open(os.path.join(alice, "proj", "notes"), "w") as f:
        f.write("alice's notes\n")
    with open(os.path.join(alice, "private"), "w") as f:
        f.write("alice's secret\n")
    os.chmod(os.path.join(alice, "private"), 0o600)
    for top, dirs, files in os.walk(alice):
        for name in [""] + dirs + files:
            os.chown(os.path.join(top, name), ALICE, ALICE)
    os.chmod(alice, 0o700)
    os.setxattr(alice, "user.owner", b"alice")
    b = Backups(docker, jail, str(tmp_path_factory.mktemp("backups")))
    try:
        b.alice_mtime = os.lstat(alice).st_mtime_ns
        code, report = b.backup()
        assert code == 0 and report["result"] == "Succeeded" and report["unreadable"] == 0, report
        yield b
    finally:
        docker.cleanup()


def as_alice(*paths):
    for path in paths:
        os.chown(path, ALICE, ALICE, follow_symlinks=False)


def test_a_target_the_user_replaced_by_a_symlink_to_etc_is_refused_and_nothing_outside_changes(backups):
    root = backups.jail
    link = os.path.join(root, "srv/users/alice/restored")
    os.symlink("../../../etc", link)
    as_alice(link)
    before = system_manifest(root)
    code, report = backups.restore("/srv/users/alice", "/srv/users/alice/restored")
    assert code == 1 and "exists; a restore goes into a new directory" in report["message"], report
    # A link on the way to the target, too.
    code, report = backups.restore("/srv/users/alice", "/srv/users/alice/restored/x")
    assert code == 1 and "restored is a symlink" in report["message"], report
    after = system_manifest(root)
    os.unlink(link)
    assert after == before
    staging = os.path.join(root, names.RESTORE_STAGING.strip("/"))
    assert not os.path.exists(staging) or os.listdir(staging) == []  # refused before anything was staged


def test_a_restore_into_the_users_tree_is_handed_over_complete_with_the_snapshots_owner(backups):
    root = backups.jail
    before = system_manifest(root)
    code, report = backups.restore("/srv/users/alice", "/srv/users/alice/restored")
    assert code == 0 and report["result"] == "Succeeded", report
    restored = os.path.join(root, "srv/users/alice/restored")
    st = os.lstat(restored)
    assert stat.S_ISDIR(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (ALICE, 0o700)
    assert st.st_mtime_ns == backups.alice_mtime and os.getxattr(restored, "user.owner") == b"alice"  # the snapshot's
    with open(os.path.join(restored, "proj", "notes")) as f:
        assert f.read() == "alice's notes\n"
    private = os.lstat(os.path.join(restored, "private"))
    assert (private.st_uid, stat.S_IMODE(private.st_mode)) == (ALICE, 0o600)
    staging = os.lstat(os.path.join(root, names.RESTORE_STAGING.strip("/")))
    assert (staging.st_uid, stat.S_IMODE(staging.st_mode)) == (0, 0o700)
    assert os.listdir(os.path.join(root, names.RESTORE_STAGING.strip("/"))) == []
    assert system_manifest(root) == before


def test_in_place_a_users_symlink_is_not_written_through(backups):
    """In maintenance: alice replaced her directory proj, which the snapshot holds, by a link to the jail's /etc."""
    root = backups.jail
    proj = os.path.join(root, "srv/users/alice/proj")
    os.rename(proj, proj + ".moved")
    os.symlink("../../../etc", proj)
    as_alice(proj)
    before = system_manifest(root)
    # The target itself a link: refused before restic runs.
    code, report = backups.restore("/srv/users/alice/proj", "")
    assert code == 1 and "proj is a symlink" in report["message"], report
    assert system_manifest(root) == before
    # A link below the target: restic's own writes.
    code, report = backups.restore("/srv/users/alice", "")
    assert system_manifest(root) == before, report
    assert not os.path.exists(os.path.join(root, "etc", "notes"))
