"""What the product owns in the jail (slurm/paths.py ``jail_owner``, ``owned_package``): one list, checked against
what the images and the entrypoint really put there."""

import os
import re

import pytest

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.slurm import paths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# The jail's own list, as slurm-base writes it (the head of a real one).
LISTED = """# Bound into the jail by soperator-entrypoint (generated when slurm-base was built)
/usr/bin/sbatch
/usr/bin/srun
/usr/lib/x86_64-linux-gnu/libmunge.so.2
/usr/lib/x86_64-linux-gnu/slurm-wlm
/usr/lib/x86_64-linux-gnu/slurm
"""


@pytest.mark.parametrize("path, word", [
    ("/etc/slurm", "is the product's: Slurm's configuration"),
    ("/etc/slurm/slurm.conf", "is in /etc/slurm, the product's"),
    (names.SPANK_CHROOT_PLUGIN, "is in /usr/lib/x86_64-linux-gnu/slurm, the product's: Slurm's plugins"),
    ("/etc/munge/munge.key", "is in /etc/munge"),
    ("/run/munge/munge.socket.2", "is in /run/munge"),
    ("/etc/hosts", "each pod binds its own"),
    ("/usr/local/bin/nvidia-smi", "where a GPU worker shows its node's driver"),
    ("/etc/soperator/jail-image", "is in /etc/soperator"),
    ("/.soperator-populated", "the populate Job's mark"),
    ("/proc/sys", "the kernel's"),
])
def test_what_the_product_owns_is_refused_naming_it(path, word):
    found = paths.jail_owner(path)
    assert found and word in found and found.startswith(path + " ")


@pytest.mark.parametrize("path", ["/etc/profile.d/tools.sh", "/opt/venvs/tools", "/usr/local/bin/hello",
                                  "/home/alice", "/etc/apt/sources.list.d/local.list", "/usr/lib/x86_64-linux-gnu",
                                  "/etc/slurm-tools", "/usr/bin/srun-wrapper"])
def test_the_rest_is_the_administrators(path):
    assert paths.jail_owner(path, paths.image_slurm_paths(LISTED)) is None


def test_the_jails_own_list_adds_the_clients_the_pods_bind():
    listed = paths.image_slurm_paths(LISTED)
    assert listed[:2] == ["/usr/bin/sbatch", "/usr/bin/srun"] and "#" not in "".join(listed)
    assert "jail-slurm-paths" in paths.jail_owner("/usr/bin/srun", listed)
    assert paths.jail_owner("/usr/bin/srun") is None  # only the jail's list names it


def test_a_path_above_what_the_product_owns_is_refused_only_when_it_is_replaced():
    assert paths.jail_owner("/usr/lib/x86_64-linux-gnu") is None
    found = paths.jail_owner("/usr/lib/x86_64-linux-gnu", replacing=True)
    assert found.startswith("/usr/lib/x86_64-linux-gnu holds /usr/lib/x86_64-linux-gnu/slurm, the product's")
    assert paths.jail_owner("/", replacing=True).startswith("/ holds /etc/slurm")


@pytest.mark.parametrize("path, ok", [("/", True), ("/etc/x", True), ("etc/x", False), ("/etc/../x", False),
                                      ("/etc//x", False), ("/etc/./x", False), ("/etc/", False), ("/a\nb", False),
                                      (None, False)])
def test_only_normalised_absolute_paths_are_compared(path, ok):
    assert paths.normalised(path) is ok


@pytest.mark.parametrize("name, pattern", [("slurm-client", "slurm*"), ("slurm-wlm=24.11.5-4", "slurm*"),
                                           ("libslurm42:amd64", "libslurm*"), ("munge", "munge"),
                                           ("libmunge2", "libmunge*"), ("libnss-sss", "libnss-sss"),
                                           ("sackd", "sackd"), ("hello", None), ("munge-tools", None)])
def test_the_products_packages(name, pattern):
    assert paths.owned_package(name) == pattern


def test_the_nvidia_tools_are_the_drivers_and_the_jail_images():
    import importlib.util

    spec = importlib.util.spec_from_file_location("driver", os.path.join(ROOT, "images", "worker",
                                                                         "soperator_driver.py"))
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    assert driver.TOOLS == paths.GPU_DRIVER_TOOLS
    with open(os.path.join(ROOT, "images", "jail", "Containerfile")) as f:
        loop = re.search(r"for tool in ([^;]*); do", f.read()).group(1).split()
    assert tuple(loop) == paths.GPU_DRIVER_TOOLS


def test_the_entrypoints_binds_and_links_are_in_the_list():
    """What soperator-entrypoint binds into the jail or links there (complete_jail, share_run_dirs, the login's
    rbinds) is the product's, and its marks are the paths named here."""
    with open(os.path.join(ROOT, "images", "lib", "soperator-entrypoint")) as f:
        text = f.read()
    assert "SENTINEL=$JAIL%s" % paths.JAIL_POPULATED in text
    assert "JAIL_SLURM_PATHS=$R%s" % paths.JAIL_SLURM_PATHS_FILE in text
    assert "for f in hosts resolv.conf hostname" in text
    for path in ("/etc/hosts", "/etc/resolv.conf", "/etc/hostname", "/run/munge", "/run/slurm", "/var/spool/slurmd",
                 "/dev", "/proc", "/sys", "/etc/slurm", names.SSS_PIPES_DIR):
        assert paths.jail_owner(path), path
    for share in re.findall(r"share_run_dirs ([^\n]*)", text):
        for path in share.split():
            if path.startswith("/"):
                assert paths.jail_owner(path), path
