# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where things live on a node, as the daemons and the jail see it: the trees users write, the images' program
trees, the system trees a jail sub-mount may not take, sit below or hide, and what the slurmd container may mirror.
Pure: paths are compared as normalised absolute paths, nothing is read.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import fnmatch
from typing import Iterable

from ansible_collections.soperator.slurm.plugins.module_utils import names


# Where users (or jobs) can write, in the containers that run these programs: the jail (controller, workers,
# logins), the homes and root's home mirrored from it, temporary and runtime trees, /proc (/proc/<pid>/root is
# another process's root: a job's jail), the slurmd spool (job scripts belong to their users). A program or a
# written file there is theirs, whoever runs it; the installer's prefixes cannot allow it.
USER_WRITABLE_TREES = (names.JAIL_MOUNT, "/tmp", "/var/tmp", "/dev", "/run", "/var/run", "/var/lock", "/proc",
                       "/home", "/root", names.SLURMD_SPOOL)
# Where the images keep programs: trees of the image, written by nobody at run time, which no jail sub-mount may
# take (SUB_MOUNT_SYSTEM_TREES) and the operator mounts nothing writable into. The default of the installer's
# allowed_program_prefixes.
IMAGE_PROGRAM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/etc", "/opt")


# A sub-mount is a volume jobs may write (an emptyDir, a claim, a writable host path) or whose files come from
# outside the images. It is mounted in the jail, where setuid programs (sudo, su, their PAM modules, libraries and
# configuration) and root's sessions execute, load and trust the operating system's trees, and the slurmd
# container mirrors it at the same path for slurmstepd, where root processes (slurmd, its Prolog and health
# program, the readiness probe the kubelet runs) do the same. So a sub-mount may not take, sit below, or hide (be
# a parent of) a system tree: every top-level directory of a Debian system but /home, /media, /mnt and /srv (which
# hold data), the system trees of other distributions a jail image may be built on, and soperator's jail mount.
# The slurmd container's own mounts (/run/munge, /var/spool/slurmd, /etc/soperator, /opt/soperator, /dev/shm) all
# lie inside these trees: a path the validator accepts is also one the entrypoint may mirror
# (DAEMON_MIRROR_REFUSED_TREES, may_mirror).
SUB_MOUNT_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/opt", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp",
                          "/usr", "/var", names.JAIL_MOUNT, names.SUB_MOUNTS_DIR, "/nix", "/gnu", "/snap")
# The loader's library trees are an open family (lib, lib32, lib64, libx32, libexec, lib.usr-is-merged, ...):
# every top-level name starting with this is a system tree too.
SUB_MOUNT_SYSTEM_NAME_PREFIX = "lib"
# Directories whose children belong to users: a mount point below such a child could be replaced by its owner
# with a symlink before a pod starts, and the runtime follows it (runc resolves a mount point inside the
# container's root: a link to /usr/sbin would mount the volume over the slurmd container's /usr/sbin). Below
# another sub-mount is the same (refused separately: its volume may be theirs).
USER_OWNED_PARENTS = ("/home",)
# Trees the slurmd container must never get a sub-mount's volume at: the same trees (and every top-level "lib*").
# The worker entrypoint refuses them too, whatever its manifest asks: its own copy of the list (SYSTEM_TREES in
# images/lib/soperator-entrypoint), which a unit test keeps equal to this one.
DAEMON_MIRROR_REFUSED_TREES = SUB_MOUNT_SYSTEM_TREES


def system_tree(path: str) -> str | None:
    """The system tree ``path`` (a normalised absolute path) takes, lies below or would hide; None when it is
    none's."""
    first = path.split("/")[1] if path.startswith("/") else ""
    if first.startswith(SUB_MOUNT_SYSTEM_NAME_PREFIX):
        return "/" + first
    for tree in SUB_MOUNT_SYSTEM_TREES:
        if overlaps(path, tree):
            return tree
    return None


def sub_mount_problem(path: str, others: Iterable[str] = ()) -> str | None:
    """Why a jail sub-mount may not be mounted at ``path`` (normalised, absolute), or None. ``others``: the
    mount paths of the cluster's other sub-mounts."""
    tree = system_tree(path)
    if tree is not None:
        where = ("%s is a system tree" % path if path == tree else "%s is in %s, a system tree" % (path, tree)
                 if under(path, tree) else "%s would hide %s, a system tree" % (path, tree))
        return ("%s: privileged programs in the jail and in the slurmd container (which mounts every sub-mount at "
                "the same path) run, load and trust files there; mount data elsewhere (/home, /scratch, /data, "
                "/mnt/<name>, ...)" % where)
    for parent in USER_OWNED_PARENTS:
        if path.startswith(parent + "/") and "/" in path[len(parent) + 1:]:
            return ("%s lies inside %s, a directory its user owns: they could replace the mount point with a "
                    "link before a pod starts (mount at %s/<name> or outside %s)" % (
                        path, "/".join(path.split("/")[:3]), parent, parent))
    for other in others:
        if other != path and under(path, other):
            return ("%s lies inside the sub-mount %s, whose volume jobs may write: they could replace the mount "
                    "point with a link before a pod starts" % (path, other))
    return None


def may_mirror(path: str) -> bool:
    """Whether the slurmd container may mount a jail path's volume at the same path: only outside
    DAEMON_MIRROR_REFUSED_TREES (exactly where a sub-mount may go, so every accepted sub-mount may be mirrored)."""
    return system_tree(path) is None


def under(path: str, tree: str) -> bool:
    """``path`` is ``tree`` or below it (both normalised absolute paths)."""
    return path == tree or tree == "/" or path.startswith(tree + "/")


def overlaps(one: str, other: str) -> bool:
    """One of the two paths is the other or below it."""
    return under(one, other) or under(other, one)


# Files slurm-base writes (every image and the jail has them): the Slurm client paths each login and worker pod binds
# over the jail's (soperator-entrypoint's complete_jail), the Slurm version, the jail image's name; and the mark the
# populate Job leaves in a populated jail.
JAIL_SLURM_PATHS_FILE = "/etc/soperator/jail-slurm-paths"
SLURM_VERSION_FILE = "/etc/soperator/slurm-version"
JAIL_IMAGE_FILE = "/etc/soperator/jail-image"
JAIL_POPULATED = "/.soperator-populated"
# The NVIDIA driver's tools a job may call: the jail image links each /usr/local/bin/<tool> to
# names.GPU_DRIVER_DIR/bin/<tool> (soperator_driver.TOOLS and images/jail/Containerfile; a unit test keeps them equal).
GPU_DRIVER_TOOLS = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
                    "nvidia-cuda-mps-server")
GPU_DRIVER_TOOL_LINKS_DIR = "/usr/local/bin"

# What the product owns in the jail, each with why: paths every login and worker pod binds its own files over (the
# Slurm clients and plugins, munge's and Slurm's runtime directories, name resolution, the kernel's trees), links the
# images make and the pods fill (Slurm's configuration, the NVIDIA tools), and the images' own files and marks. An
# administrator's change to the jail (roles/jail_software) may not write, replace or remove them: the pods would hide
# it, or a daemon would read it. The Slurm client files the pods bind are also listed in the jail's own
# JAIL_SLURM_PATHS_FILE (written when slurm-base was built): :func:`jail_owner` takes them as ``image_paths``.
SLURM_PLUGIN_DIRS = (names.SPANK_CHROOT_PLUGIN.rsplit("/", 1)[0], names.SPANK_CHROOT_PLUGIN.rsplit("/", 1)[0] + "-wlm")
JAIL_OWNED = (
    (names.SLURM_CONFIG_DIR, "Slurm's configuration: a link to %s/conf, which each pod's slurmd or sackd fills"
     % names.SLURM_RUN_DIR),
    (SLURM_PLUGIN_DIRS[0], "Slurm's plugins, the jail plugin among them: each pod binds its own over them"),
    (SLURM_PLUGIN_DIRS[1], "Slurm's libraries: each pod binds its own over them"),
    ("/etc/munge", "munge's: the key lives in the pods' munge sidecars, never in the jail"),
    ("/var/lib/munge", "munge's"),
    (names.MUNGE_RUN_DIR, "munge's socket: each pod binds its own, read-only"),
    ("/run", "each pod's and each node's runtime files: jobs get the node's /run, read-only"),
    ("/var/run", "a link to /run"),
    (names.SLURMD_SPOOL, "slurmd's spool: each worker binds its own, read-only"),
    ("/etc/hosts", "each pod binds its own"),
    ("/etc/resolv.conf", "each pod binds its own"),
    ("/etc/hostname", "each pod binds its own"),
    ("/dev", "the kernel's: each pod and each job binds the node's"),
    ("/proc", "the kernel's: each pod and each job mounts its own"),
    ("/sys", "the kernel's: each pod and each job binds the node's, read-only"),
    ("/etc/soperator", "the images' lists and marks (the jail image's name, the Slurm client paths and version)"),
    (names.SSS_PIPES_DIR, "sssd's sockets: each pod binds its own, read-only"),
    (names.NCCL_RESULTS_DIR, "the NCCL check's results"),
    (JAIL_POPULATED, "the populate Job's mark: without it no pod starts"),
    (names.RESTORE_STAGING, "where restores are staged"),
) + tuple((GPU_DRIVER_TOOL_LINKS_DIR + "/" + tool, "a link to where a GPU worker shows its node's driver (%s/bin)"
           % names.GPU_DRIVER_DIR) for tool in GPU_DRIVER_TOOLS)
# Debian packages the product owns in the jail: its Slurm and munge (the pods bind their own over the jail's files),
# and the name service module of a directory (spec.identity). fnmatch patterns (the slurm-base pin's included).
JAIL_OWNED_PACKAGES = ("slurm*", "libslurm*", "libpmi*", "sackd", "munge", "libmunge*", "libnss-sss")


def image_slurm_paths(text: str | None) -> list[str]:
    """The paths of the jail's JAIL_SLURM_PATHS_FILE (one absolute path a line, ``#`` comments)."""
    found: list[str] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and line.startswith("/"):
            found.append(line)
    return found


def normalised(path: object) -> bool:
    """Whether ``path`` is an absolute path with no empty, ``.`` or ``..`` component, no trailing ``/`` (but ``/``
    itself) and no line break or NUL: the only form :func:`jail_owner` compares."""
    if not isinstance(path, str) or not path.startswith("/") or any(c in path for c in "\n\r\x00"):
        return False
    return path == "/" or all(part not in ("", ".", "..") for part in path[1:].split("/"))


def jail_owner(path: str, image_paths: Iterable[str] = (), replacing: bool = False) -> str | None:
    """Why ``path`` (normalised, absolute) of the jail is the product's, or None. A path is refused when it is an
    owned path or lies below one; with ``replacing`` (the path is removed, or replaced by a link or another
    directory) also when an owned path lies below it."""
    why_listed = "a Slurm client file each pod binds its own over (%s)" % JAIL_SLURM_PATHS_FILE
    owned = list(JAIL_OWNED) + [(p, why_listed) for p in image_paths]
    for owned_path, why in owned:
        if path == owned_path:
            return "%s is the product's: %s" % (path, why)
        if under(path, owned_path):
            return "%s is in %s, the product's: %s" % (path, owned_path, why)
    if replacing:
        for owned_path, why in owned:
            if under(owned_path, path):
                return "%s holds %s, the product's: %s" % (path, owned_path, why)
    return None


def owned_package(name: str) -> str | None:
    """The pattern of JAIL_OWNED_PACKAGES that Debian package ``name`` (``pkg``, ``pkg=1.0``, ``pkg:amd64``) matches,
    or None."""
    base = name.split("=", 1)[0].split(":", 1)[0].strip()
    for pattern in JAIL_OWNED_PACKAGES:
        if fnmatch.fnmatchcase(base, pattern):
            return pattern
    return None
