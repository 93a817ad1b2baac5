"""The jail connection's fixed script and host names (slurm/jail_shell.py)."""

import subprocess

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import jail_shell


def test_a_jail_is_named_namespace_slash_cluster():
    assert jail_shell.host_name("slurm", "demo") == "slurm/demo"
    assert jail_shell.parse_host("slurm/demo") == ("slurm", "demo")


@pytest.mark.parametrize("host", ["demo", "slurm/", "/demo", "Slurm/demo", "slurm/demo/x", "slurm/-demo", "",
                                  None, "slurm/" + "a" * 64])
def test_anything_else_is_refused_naming_the_form(host):
    with pytest.raises(ValueError, match="<namespace>/<SlurmCluster name>"):
        jail_shell.parse_host(host)


def test_the_argv_carries_the_command_and_the_byte_count_never_the_input():
    argv = jail_shell.enter_argv("/bin/sh -c 'echo ~'", 42)
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3:] == ["soperator-jail", "42", "/bin/sh -c 'echo ~'"]
    assert "chroot /mnt/jail" in argv[2] and "--bounding-set=-sys_admin" in argv[2]
    assert argv[2].index("-sys_admin") < argv[2].index("-setpcap") < argv[2].index("chroot")


def test_the_script_is_valid_sh_and_refuses_a_bad_count():
    assert subprocess.run(["sh", "-n", "-c", jail_shell.ENTER_SCRIPT]).returncode == 0
    res = subprocess.run(["sh", "-c", jail_shell.ENTER_SCRIPT, "soperator-jail", "x", "true"], capture_output=True,
                         text=True)
    assert res.returncode == 125 and "x is not a byte count" in res.stderr
