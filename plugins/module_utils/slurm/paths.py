# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where things live on a node, as the daemons and the jail see it: the trees users write, the images' program
trees, the system trees a jail sub-mount may not take, sit below or hide, and what the slurmd container may mirror.
Pure: paths are compared as normalised absolute paths, nothing is read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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


def system_tree(path):
    """The system tree ``path`` (a normalised absolute path) takes, lies below or would hide; None when it is
    none's."""
    first = path.split("/")[1] if path.startswith("/") else ""
    if first.startswith(SUB_MOUNT_SYSTEM_NAME_PREFIX):
        return "/" + first
    for tree in SUB_MOUNT_SYSTEM_TREES:
        if overlaps(path, tree):
            return tree
    return None


def sub_mount_problem(path, others=()):
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


def may_mirror(path):
    """Whether the slurmd container may mount a jail path's volume at the same path: only outside
    DAEMON_MIRROR_REFUSED_TREES (exactly where a sub-mount may go, so every accepted sub-mount may be mirrored)."""
    return system_tree(path) is None


def under(path, tree):
    """``path`` is ``tree`` or below it (both normalised absolute paths)."""
    return path == tree or tree == "/" or path.startswith(tree + "/")


def overlaps(one, other):
    """One of the two paths is the other or below it."""
    return under(one, other) or under(other, one)
