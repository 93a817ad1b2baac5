"""The backup image's program (images/backup/soperator-backup): what it accepts, the credentials it takes, restic's
modes and times read back. Real restic runs it in tests/e2e/test_backup.py."""

import importlib.machinery
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
loader = importlib.machinery.SourceFileLoader("soperator_backup", os.path.join(ROOT, "images", "backup",
                                                                              "soperator-backup"))
spec = importlib.util.spec_from_loader("soperator_backup", loader)
program = importlib.util.module_from_spec(spec)
loader.exec_module(program)

from ansible_collections.soperator.slurm.plugins.module_utils import names  # noqa: E402


def test_its_constants_are_the_collections():
    assert program.SOURCE == names.JAIL_MOUNT and program.TAG == names.BACKUP_TAG
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
