"""The backup image's program (images/backup/soperator-backup): what it accepts, the credentials it takes, restic's
modes and times read back, and where a restore writes (staged, handed over, never through a symlink). Real restic runs
it in tests/images/test_backup_image.py and tests/e2e/test_backup.py."""

import importlib.machinery
import importlib.util
import json
import os
import stat

import pytest
from prerequisites import require_root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
loader = importlib.machinery.SourceFileLoader("soperator_backup", os.path.join(ROOT, "images", "backup",
                                                                              "soperator-backup"))
spec = importlib.util.spec_from_loader("soperator_backup", loader)
program = importlib.util.module_from_spec(spec)
loader.exec_module(program)

from ansible_collections.soperator.slurm.plugins.module_utils import names  # noqa: E402


def test_its_constants_are_the_collections():
    assert program.SOURCE == names.JAIL_MOUNT and program.TAG == names.BACKUP_TAG
    assert program.STAGING == names.RESTORE_STAGING
    assert program.CREDENTIAL_NAMES == names.BACKUP_S3_KEYS + names.BACKUP_REST_KEYS


def test_it_parses_what_the_renderer_writes():
    opts = program.parse(["backup", "--host", "demo", "--retry-lock", "2h", "--exclude=/mnt/jail/x y", "--exclude=*"])
    assert opts == {"command": "backup", "host": "demo", "retry-lock": "2h", "exclude": ["/mnt/jail/x y", "*"]}
    opts = program.parse(["restore", "--host", "demo", "--snapshot", "latest", "--source", "/mnt/jail/home",
                          "--target", "/mnt/jail/restore/home"])
    assert opts["snapshot"] == "latest" and opts["target"] == "/mnt/jail/restore/home"
    assert program.parse(["check", "--read-data"])["read-data"] is True


@pytest.mark.parametrize("argv", [
    [], ["rm"], ["backup", "--host"], ["backup", "--bogus", "x"], ["backup", "--retry-lock", "1 h"],
    ["forget", "--keep-daily", "-1"], ["restore", "--snapshot", "latest;id"], ["restore", "--snapshot", "latest\n"],
    ["backup", "--retry-lock", "2h\n"], ["forget", "--keep-daily", "7\n"],
    ["restore", "--snapshot", "latest", "--source", "/etc"],
    ["restore", "--snapshot", "latest", "--source", "/mnt/jail/../etc"],
    ["restore", "--snapshot", "latest", "--target", "/mnt/jailbreak"],
    ["restore", "--snapshot", "latest", "--source", "/mnt/jail/home", "--target", "/mnt/jail/restore/"],
    ["restore", "--snapshot", "latest", "--source", "/mnt/jail/home", "--target", "/mnt/jail//restore"],
    ["restore", "--snapshot", "latest", "--source", "/mnt/jail/home", "--target", "/mnt/jail/./restore"],
    ["restore", "--snapshot", "latest", "--source", "/mnt/jail/home", "--target", "/mnt/jail/.soperator-restore/x"],
    ["restore", "--snapshot", "latest", "--source", "/mnt/jail/home", "--target", "/mnt/jail"],
])
def test_it_refuses_anything_else(argv):
    with pytest.raises(program.Failed):
        program.parse(argv)


def test_only_the_known_credentials_are_read(tmp_path, monkeypatch):
    for name, value in (("AWS_ACCESS_KEY_ID", "k\n"), ("AWS_SECRET_ACCESS_KEY", "s"), ("LD_PRELOAD", "/evil.so")):
        (tmp_path / name).write_text(value)
    monkeypatch.setenv("SOPERATOR_BACKUP_CREDENTIALS", str(tmp_path))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    env = program.restic_env()
    assert env["AWS_ACCESS_KEY_ID"] == "k" and env["AWS_SECRET_ACCESS_KEY"] == "s"
    assert "LD_PRELOAD" not in env and "SOPERATOR_BACKUP_CREDENTIALS" not in env


def test_restic_modes_and_times():
    # Go's os.FileMode as restic writes it: ModeDir|0755, setuid 04755, setgid dir 02775, sticky 01777.
    assert program.go_mode(2147484141) == 0o755
    assert program.go_mode((1 << 23) | 0o755) == 0o4755
    assert program.go_mode((1 << 31) | (1 << 22) | 0o775) == 0o2775
    assert program.go_mode((1 << 31) | (1 << 20) | 0o777) == 0o1777
    assert program.epoch_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert program.epoch_ns("2026-11-26T11:21:56.605516426Z") % 10 ** 9 == 605516426
    assert program.epoch_ns("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(program.Failed):
        program.epoch_ns("yesterday")


# --- a restore never writes through a symlink of the jail ----------------------------------------------------------
# restic itself runs in the backup image (tests/images/test_backup_image.py, tests/e2e/test_backup.py); here a stand-in
# records where it was told to write and writes there as restic would, so that what the program does around it (the
# staging, the handover, the refusals) is checked on this machine's filesystem, as root.
DIR_0700 = (1 << 31) | 0o700  # Go's os.FileMode of a 0700 directory, as restic ls prints it


class Restic(object):
    """restic for :func:`program.restore`: ``restore`` makes, in its --target, the entry --include names as restic
    would (alice's 0700 directory with an attribute and a time, a file in it; ``during`` runs first), or writes into
    --target itself without --include; ``ls`` answers the source's node."""

    def __init__(self, during=None):
        self.targets, self.calls, self.during = [], [], during

    def __call__(self, args, env, capture=True):
        self.calls.append(args)
        if args[0] == "restore":
            target = args[args.index("--target") + 1]
            self.targets.append(target)
            if self.during:
                self.during(target)
            top = os.path.join(target, args[args.index("--include") + 1].lstrip("/")) if "--include" in args \
                else target
            os.makedirs(top, exist_ok=True)
            with open(os.path.join(top, "notes"), "w") as f:
                f.write("restored\n")
            os.chown(top, 1001, 1001)
            os.chmod(top, 0o700)
            os.setxattr(top, "user.owner", b"alice")
            os.utime(top, ns=(0, program.epoch_ns("2026-01-02T03:04:05.5Z")))
            return 0, '{"message_type":"summary","files_restored":1,"bytes_restored":9}\n', ""
        if args[0] == "ls":
            node = {"struct_type": "node", "path": args[-1], "uid": 1001, "gid": 1001, "mode": DIR_0700,
                    "atime": "2026-01-02T03:04:05Z", "mtime": "2026-01-02T03:04:05.5Z"}
            return 0, json.dumps(node) + "\n", ""
        raise AssertionError(args)


def system_manifest(jail):
    """(path, mode, uid, gid, mtime, entries) of the jail's system tree /etc, and what is in it."""
    found = []
    for top, dirs, files in os.walk(os.path.join(jail, "etc")):
        for name in [""] + sorted(dirs + files):
            st = os.lstat(os.path.join(top, name))
            found.append((os.path.join(top, name), st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns))
    return found


@pytest.fixture
def jail(tmp_path, monkeypatch):
    require_root("the restore sets owners as the restore pod does")
    root = tmp_path / "jail"
    (root / "etc").mkdir(parents=True, mode=0o755)
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "home" / "alice").mkdir(parents=True)
    os.chown(root / "home" / "alice", 1001, 1001)
    os.chmod(root / "home" / "alice", 0o700)
    monkeypatch.setattr(program, "SOURCE", str(root))
    return str(root)


def restore(jail, source="/home/alice", target="/home/alice/restored"):
    opts = program.parse(["restore", "--snapshot", "latest", "--source", jail + source, "--target", jail + target])
    return program.restore(opts, {})


def test_a_restore_into_a_directory_is_staged_where_no_user_reaches_and_handed_over_complete(jail, monkeypatch):
    def during(target):  # what restic is told, and what exists while it writes
        assert target.startswith(jail + program.STAGING + "/")
        staging = os.stat(jail + program.STAGING)
        assert staging.st_uid == 0 and stat.S_IMODE(staging.st_mode) == 0o700
        assert not os.path.lexists(jail + "/home/alice/restored")
    restic = Restic(during)
    monkeypatch.setattr(program, "restic", restic)
    report = restore(jail)
    assert report["result"] == "Succeeded" and report["files"] == 1
    # restic restores alice's directory itself, from its parent: its owner, mode, times and attributes are restic's.
    assert restic.calls == [["restore", "--json", "latest:%s/home" % jail, "--target", restic.targets[0],
                             "--include", "/alice"]]
    st = os.lstat(jail + "/home/alice/restored")
    assert stat.S_ISDIR(st.st_mode) and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1001, 1001, 0o700)
    assert st.st_mtime_ns == program.epoch_ns("2026-01-02T03:04:05.5Z")
    assert os.getxattr(jail + "/home/alice/restored", "user.owner") == b"alice"
    with open(jail + "/home/alice/restored/notes") as f:
        assert f.read() == "restored\n"
    assert os.listdir(jail + program.STAGING) == []


def test_a_target_a_user_replaced_by_a_symlink_is_never_written_through(jail, monkeypatch):
    before = system_manifest(jail)
    # Before the restore: the target exists (a link to the jail's /etc).
    os.symlink("../../etc", jail + "/home/alice/restored")
    monkeypatch.setattr(program, "restic", Restic())
    with pytest.raises(program.Failed, match="exists; a restore goes into a new directory"):
        restore(jail)
    os.unlink(jail + "/home/alice/restored")
    # While restic writes: the user puts the link in place; the handover (rename) fails on it and follows nothing.
    restic = Restic(lambda target: os.symlink("../../etc", jail + "/home/alice/restored"))
    monkeypatch.setattr(program, "restic", restic)
    with pytest.raises(program.Failed, match="complete in .* but cannot be moved"):
        restore(jail)
    assert os.readlink(jail + "/home/alice/restored") == "../../etc"
    assert system_manifest(jail) == before


@pytest.mark.parametrize("target", ["/home/alice/link/restored", "/home/alice/link"])
def test_a_symlink_on_the_way_is_refused_before_restic_runs(jail, monkeypatch, target):
    before = system_manifest(jail)
    os.symlink("../../etc", jail + "/home/alice/link")
    restic = Restic()
    monkeypatch.setattr(program, "restic", restic)
    with pytest.raises(program.Failed, match="a symlink|exists"):
        restore(jail, target=target)
    assert restic.targets == [] and system_manifest(jail) == before


def test_in_place_a_symlink_at_the_target_is_refused_before_restic_runs(jail, monkeypatch):
    # In maintenance: /home/alice/proj was a directory when it was backed up; its owner left a link to /etc there.
    before = system_manifest(jail)
    os.symlink("../../../etc", jail + "/home/alice/proj")
    restic = Restic()
    monkeypatch.setattr(program, "restic", restic)
    with pytest.raises(program.Failed, match="proj is a symlink"):
        restore(jail, source="/home/alice/proj", target="/home/alice/proj")
    assert restic.targets == [] and system_manifest(jail) == before


def test_a_failed_restore_leaves_nothing_behind(jail, monkeypatch):
    def fail(args, env, capture=True):
        target = args[args.index("--target") + 1]
        os.mkdir(os.path.join(target, "half"))
        os.symlink("/etc", os.path.join(target, "half", "link"))
        return 1, "", "Fatal: the repository is gone"
    monkeypatch.setattr(program, "restic", fail)
    with pytest.raises(program.Failed, match="repository is gone"):
        restore(jail)
    assert os.listdir(jail + program.STAGING) == [] and not os.path.lexists(jail + "/home/alice/restored")
