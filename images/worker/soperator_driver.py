# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's user space of a GPU worker, shown to every job in the jail (``soperator-driver``).

On a GPU node the NVIDIA container toolkit puts the driver's libraries and tools (libcuda, libnvidia-ml, nvidia-smi,
...) into slurmd's container. Jobs run in the jail, a volume every node shares, which must never get a node's driver
files (drivers differ per node, and a job user writes there). So, as root in slurmd's container, before slurmd starts:

``expose`` (the worker entrypoint)
  1. Finds them. Libraries: the entries of the container's loader cache (``ldconfig -p``; the toolkit runs ldconfig in
     the container in both its legacy hook and its CDI ``update-ldcache`` hook) whose names are the driver's
     (:func:`is_driver_library`), and those in ``/usr/local/nvidia/lib64`` (GKE's layout, which has no cache entry);
     each resolved to its file, kept only when it is an ELF object of this machine's class and architecture (no 32-bit
     compatibility copies). Tools: :data:`TOOLS` in :data:`TOOL_DIRS`, each an ELF program of this machine's class
     too; a small shell wrapper (``/usr/bin/nvidia-smi`` that sets LD_LIBRARY_PATH and execs
     ``/usr/local/nvidia/bin/nvidia-smi``) is followed to the program it execs (:func:`wrapped_program`), else
     skipped with a log line: a script cannot run in the jail (no shell of the node there, and it names paths outside
     the jail).
  2. Binds each file (no copy) at ``DRIVER_DIR/lib/<its name>`` and ``DRIVER_DIR/bin/<tool>``, read-only, with the
     other names the cache listed for it (``libcuda.so.1``) as relative links. ``DRIVER_DIR`` is in the container's
     own ``/run``, which the jail plugin binds into every task (read-only, with every mount below it): each task sees
     this node's driver at ``/run/soperator/nvidia`` and nothing of it lands in the jail.
  3. Writes ``DRIVER_DIR/ld.so.cache``: the jail's own loader cache plus ``DRIVER_DIR/lib``. plugstack.conf binds it
     over the jail's ``/etc/ld.so.cache`` in every task of a cluster with GPUs (``optional``: CPU nodes have none), so
     the loader finds ``libcuda.so.1`` and ``ldconfig -p`` in a job lists it. It is made by the container's ldconfig,
     run as nobody (no capability, no_new_privs) in a private mount namespace where the jail's ``/run`` is the
     container's and its ``/tmp`` a fresh tmpfs for the output; ``ldconfig -r`` reads the jail as its root and writes
     nothing else (``-X``: no links, ``-i``: no auxiliary cache). Root only opens jail paths without following a
     symlink (a job user writes in the jail) and mounts only in that namespace.
``refresh`` (the health program, at each run): the cache again when the jail's loader configuration changed (an
  administrator ran ldconfig in the jail), so that libraries added to the jail reach GPU jobs without a restart.
``list``: what ``expose`` would bind, as JSON.

Without any driver file (a CPU node, or a GPU node without the NVIDIA runtime) ``expose`` does nothing and says so.
Python 3 standard library only (the worker image's python3); hack/gpu-check.sh runs this same file on a GPU machine.
"""

import argparse
import ctypes
import errno
import json
import os
import posixpath
import re
import shutil
import stat
import struct
import subprocess
import sys

# Where a GPU worker shows its driver, in its container and (through /run) in every task (names.GPU_DRIVER_DIR).
DRIVER_DIR = "/run/soperator/nvidia"
JAIL = "/mnt/jail"
NOBODY = 65534
# The driver's tools a job may call; the jail image links /usr/local/bin/<tool> to DRIVER_DIR/bin/<tool>.
TOOLS = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
         "nvidia-cuda-mps-server")
# /usr/bin: the container toolkit's place (legacy hook and CDI); /usr/local/nvidia/bin: GKE's layout, and machines
# whose /usr/bin tools are wrappers around it (an H200 machine of this project's: tests/unit/fixtures/driver).
TOOL_DIRS = ("/usr/bin", "/usr/local/nvidia/bin", "/usr/sbin")
# A wrapper is read only when it is this small, a regular file no one but its owner may write.
WRAPPER_MAX_BYTES = 4096
UNCACHED_LIBRARY_DIRS = ("/usr/local/nvidia/lib64",)
LDCONFIG = ("/sbin/ldconfig", "/usr/sbin/ldconfig")
# The jail's loader configuration: refresh rebuilds the cache when one of these changed.
JAIL_LOADER_FILES = ("etc/ld.so.cache", "etc/ld.so.conf", "etc/ld.so.conf.d")
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# The NVIDIA driver's user-space libraries by name: CUDA (libcuda, libcudadebugger), NVML and the rest of
# libnvidia-* (but the container toolkit's own libnvidia-container*), video (libnvcuvid), OptiX, and the vendor
# libraries of GL/EGL/GLES (lib*_nvidia). Never CUDA toolkit libraries (libcudart, libnvrtc, ...): the jail has those.
_LIBRARY = re.compile(r"^lib(?:cuda|cudadebugger|nvidia-(?!container)[A-Za-z0-9_.+-]+|nvcuvid|nvoptix"
                      r"|[A-Za-z0-9]+_nvidia)\.so(?:\.[0-9][0-9.]*)?$")
_CACHE_LINE = re.compile(r"^\s+(\S+) \(([^)]*)\) => (/\S*)\s*$")


class DriverError(Exception):
    pass


# ------------------------------------------------------------------------------------------------ pure
def is_driver_library(name):
    return bool(_LIBRARY.match(name))


def parse_ldconfig(text):
    """``ldconfig -p`` -> [(name, path)], in the cache's order (the loader's preference)."""
    found = []
    for line in text.splitlines():
        match = _CACHE_LINE.match(line)
        if match:
            found.append((match.group(1), match.group(3)))
    return found


def elf_identity(header):
    """(class, byte order, machine) of an ELF file's first 20 bytes; None when it is not ELF."""
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    order = "<" if header[5] == 1 else ">"
    return header[4], header[5], struct.unpack(order + "H", header[18:20])[0]


def wrapped_program(text, tool):
    """The program a shell wrapper of ``tool`` execs: the absolute path after ``exec`` (``env`` and environment
    assignments before it allowed, the path quoted or not) whose last component is ``tool``; None unless exactly one
    such line exists and it names a fixed path (no expansion or substitution in it)."""
    found = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "exec":
            continue
        rest = words[1:]
        if rest[:1] == ["env"] or rest[:1] == ["/usr/bin/env"]:
            rest = rest[1:]
        rest = [w for w in rest if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", w)]
        if not rest:
            continue
        target = rest[0]
        if len(target) > 2 and target[0] == target[-1] and target[0] in "'\"":
            target = target[1:-1]  # a quoted fixed path is the same path
        if re.fullmatch(r"(/[A-Za-z0-9._+-]+)+", target) and posixpath.basename(target) == tool \
                and ".." not in target.split("/"):
            found.append(target)
        else:
            return None
    return found[0] if len(found) == 1 else None


def plan(libraries, tools):
    """What to bind. ``libraries``: [(name, file)] in the loader's order of preference; ``tools``: [(name, file)].

    Each file is bound under its own name; every other name listed for it becomes a link to that name. A name
    already taken (by an earlier entry: the loader would take that one) is skipped, as is a second file of the
    same name.
    """
    files, links = {}, {}
    for name, real in libraries:
        base = posixpath.basename(real)
        if files.get(base, real) != real or name in links:
            continue
        files[base] = real
        if name != base:
            links[name] = base
    links = dict((name, base) for name, base in links.items() if name not in files)
    return {"libraries": files, "links": links, "tools": dict(tools)}


def cache_gaps(wanted, listing, lib_dir):
    """Names of ``wanted`` that the ``ldconfig -p`` ``listing`` of the new cache does not resolve into ``lib_dir``."""
    resolved = set(name for name, path in parse_ldconfig(listing) if posixpath.dirname(path) == lib_dir)
    return sorted(set(wanted) - resolved)


# ------------------------------------------------------------------------------------------------ I/O
def log(message):
    sys.stderr.write("soperator-driver: %s\n" % message)


def _run(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                              env={"PATH": PATH, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DriverError("%s: %s" % (argv[0], exc)) from exc


def ldconfig():
    for path in LDCONFIG:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise DriverError("no ldconfig in this container (%s)" % ", ".join(LDCONFIG))


def _identity(path):
    try:
        with open(path, "rb") as f:
            return elf_identity(f.read(20))
    except OSError:
        return None


def cached_driver_names(listing=None):
    """The driver's library names a loader cache lists (this container's, ``ldconfig -p``, unless ``listing`` is
    given), in its order, with their paths."""
    if listing is None:
        res = _run([ldconfig(), "-p"])
        if res.returncode != 0:
            raise DriverError("ldconfig -p exited %d: %s" % (res.returncode, res.stderr.strip()))
        listing = res.stdout
    return [(name, path) for name, path in parse_ldconfig(listing) if is_driver_library(name)]


def _native():
    return _identity(os.path.realpath(sys.executable)) or _identity("/proc/self/exe")


def _tool_program(root, directory, tool, native):
    """The ELF program for ``tool`` found in ``directory`` (below ``root``): the file itself, or the program its shell
    wrapper execs; None, with a log line for a file that is there but no program."""
    path = _in(root, posixpath.join(directory, tool))
    real = os.path.realpath(path)
    if not (os.path.isfile(real) and os.access(real, os.X_OK)):
        return None
    if _identity(real) == native:
        return real
    try:
        st = os.stat(real)
        with open(real, "rb") as f:
            head = f.read(WRAPPER_MAX_BYTES + 1)
    except OSError as exc:
        log("%s: not used (%s)" % (path, exc))
        return None
    target = None
    if head.startswith(b"#!") and len(head) <= WRAPPER_MAX_BYTES and stat.S_ISREG(st.st_mode) \
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        target = wrapped_program(head.decode("utf-8", "replace"), tool)
    program = os.path.realpath(_in(root, target)) if target else None
    if program and os.path.isfile(program) and _identity(program) == native:
        log("%s is a script: exposing the program it execs, %s" % (path, target))
        return program
    log("%s: not an ELF program of this machine%s: skipped" % (
        path, "" if not head.startswith(b"#!") else ", and no program it execs could be read from it"))
    return None


def discover(root="/", listing=None):
    """([(name, file)] of the driver's libraries, [(name, file)] of its tools) in this container; ``root`` and
    ``listing`` (an ``ldconfig -p`` text, with paths inside ``root``) stand for another machine's in tests."""
    entries = [(name, _in(root, path)) for name, path in cached_driver_names(listing)]
    for directory in UNCACHED_LIBRARY_DIRS:
        folder = _in(root, directory)
        if os.path.isdir(folder):
            entries += [(name, os.path.join(folder, name)) for name in sorted(os.listdir(folder))
                        if is_driver_library(name)]
    native = _native()
    libraries = []
    for name, path in entries:
        real = os.path.realpath(path)
        if os.path.isfile(real) and _identity(real) == native:
            libraries.append((name, real))
    tools = []
    for tool in TOOLS:
        for directory in TOOL_DIRS:
            program = _tool_program(root, directory, tool, native)
            if program:
                tools.append((tool, program))
                break
    return libraries, tools


# Mounts and namespaces through libc: python3's os module has neither mount(2) nor, before 3.12, unshare(2).
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)


def _b(text):
    return None if text is None else os.fsencode(text)


def _mount(source, target, fstype, flags, data=None, shown=None):
    if _libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)) != 0:
        err = ctypes.get_errno()
        raise DriverError("mount %s: %s" % (shown or target, os.strerror(err)))


def _unshare_mounts(jail):
    """A mount namespace of this process's own, whose mounts never propagate back: / made private (the jail's
    mount, where / is no mount point: a chroot in tests)."""
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise DriverError("unshare(CLONE_NEWNS): %s" % os.strerror(ctypes.get_errno()))
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE, shown="/ (private)")
    except DriverError:
        _mount(None, jail, None, MS_REC | MS_PRIVATE, shown=jail + " (private)")


def open_beneath(rootfd, path, create_dirs=False):
    """An O_PATH descriptor of directory ``path`` below ``rootfd``, reached without following any symlink (the jail
    is written by its users: a link must not turn root's mount onto the node's files). Missing directories are
    made (root's, 0755) when ``create_dirs``."""
    fd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=rootfd)
    try:
        for name in [part for part in path.split("/") if part]:
            if name in (".", ".."):
                raise DriverError("%s: no '.' or '..' in jail paths" % path)
            try:
                nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create_dirs:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                raise OSError(errno.ELOOP, "a symlink in the jail", path)
            if not stat.S_ISDIR(mode):
                raise OSError(errno.ENOTDIR, "not a directory", path)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _fd_path(fd):
    return "/proc/self/fd/%d" % fd


def loader_signature(jail):
    """What identifies the jail's loader configuration now: {path: [inode, size, mtime] or None}."""
    signature = {}
    rootfd = os.open(jail, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for rel in JAIL_LOADER_FILES:
            parent, name = posixpath.split(rel)
            try:
                dirfd = open_beneath(rootfd, parent)
            except (OSError, DriverError):
                signature[rel] = None
                continue
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                signature[rel] = [st.st_ino, st.st_size, st.st_mtime_ns]
            except OSError:
                signature[rel] = None
            finally:
                os.close(dirfd)
    finally:
        os.close(rootfd)
    return signature


def _ldconfig_as_nobody(binary, jail):
    """In this (private) mount namespace: ldconfig of the jail plus DRIVER_DIR/lib, as nobody; (rc, its words)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.dup2(write, 1)
            os.dup2(write, 2)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                os._exit(125)
            os.execve(binary, [binary, "-X", "-i", "-r", jail, "-C", "/tmp/ld.so.cache", DRIVER_DIR + "/lib"],
                      {"PATH": PATH, "LC_ALL": "C"})
        finally:
            os._exit(126)
    os.close(write)
    with os.fdopen(read, "r", errors="replace") as f:
        words = f.read()
    _, status = os.waitpid(pid, 0)
    return (os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode")
            else (status >> 8 if os.WIFEXITED(status) else 128)), words


def _build_cache(jail, run_dir, out):
    """The child of make_cache: a private mount namespace, the jail's /run and /tmp, ldconfig as nobody, the
    result copied to ``out`` (in the container's /run). Exit code of the child."""
    binary = ldconfig()
    _unshare_mounts(jail)
    jailfd = os.open(jail, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    runfd = open_beneath(jailfd, "run", create_dirs=True)
    _mount(run_dir, _fd_path(runfd), None, MS_BIND | MS_REC, shown=jail + "/run")
    tmpfd = open_beneath(jailfd, "tmp", create_dirs=True)
    _mount("tmpfs", _fd_path(tmpfd), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           "mode=0700,uid=%d,gid=%d,size=64m" % (NOBODY, NOBODY), shown=jail + "/tmp")
    rc, words = _ldconfig_as_nobody(binary, jail)
    if rc != 0:
        raise DriverError("ldconfig of the jail exited %d: %s" % (rc, words.strip()))
    tmpdir = open_beneath(jailfd, "tmp")  # now the tmpfs
    fd = os.open("/proc/self/fd/%d/ld.so.cache" % tmpdir, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
        os.fchmod(dst.fileno(), 0o644)
    return 0


def make_cache(root="/", wanted=()):
    """DRIVER_DIR/ld.so.cache from the jail's loader configuration and DRIVER_DIR/lib; DriverError unless it
    resolves every name of ``wanted`` into DRIVER_DIR/lib."""
    jail, ddir = _in(root, JAIL), _in(root, DRIVER_DIR)
    out, final = ddir + "/ld.so.cache.new", ddir + "/ld.so.cache"
    signature = loader_signature(jail)  # before the build: a change during it makes the next refresh build again
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _build_cache(jail, _in(root, "/run"), out)
        except (OSError, DriverError) as exc:
            log("error: the jail's loader cache: %s" % exc)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        raise DriverError("no loader cache for the jail (see above)")
    listing = _run([ldconfig(), "-p", "-C", out])
    gaps = cache_gaps(wanted, listing.stdout, DRIVER_DIR + "/lib")
    if listing.returncode != 0 or gaps:
        raise DriverError("the jail's new loader cache lacks %s: %s" % (", ".join(gaps) or "everything",
                                                                        listing.stderr.strip()))
    os.replace(out, final)
    with open(ddir + "/ld.so.cache.source", "w") as f:
        json.dump({"jail": signature, "names": sorted(wanted)}, f)


def _in(root, path):
    return path if root in ("", "/") else root.rstrip("/") + path


def _bind_file(source, target):
    """``source`` bound read-only at ``target`` (a new empty file of the container's /run, never the jail's)."""
    if os.path.lexists(target):
        return  # bound by an earlier expose in this container
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    os.close(fd)
    _mount(source, target, None, MS_BIND)
    _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def expose(root="/"):
    libraries, tools = discover()
    if not libraries and not tools:
        log("no NVIDIA driver library or tool in this container (a CPU node, or no NVIDIA container runtime): "
            "nothing to expose")
        return
    todo = plan(libraries, tools)
    ddir = _in(root, DRIVER_DIR)
    for sub in ("", "/lib", "/bin"):
        path = ddir + sub
        if os.path.islink(path):
            raise DriverError("%s is a symlink" % path)
        os.makedirs(path, 0o755, exist_ok=True)
        os.chmod(path, 0o755)
    for base, real in sorted(todo["libraries"].items()):
        _bind_file(real, "%s/lib/%s" % (ddir, base))
    for name, base in sorted(todo["links"].items()):
        link = "%s/lib/%s" % (ddir, name)
        if not os.path.lexists(link):
            os.symlink(base, link)
    for name, real in sorted(todo["tools"].items()):
        _bind_file(real, "%s/bin/%s" % (ddir, name))
    wanted = sorted(set(name for name, _path in cached_driver_names()) &
                    (set(todo["libraries"]) | set(todo["links"])))
    if todo["libraries"]:
        make_cache(root, wanted)
    log("exposed %d driver libraries (%s) and %d tools (%s) at %s%s" % (
        len(todo["libraries"]), ", ".join(sorted(todo["libraries"])), len(todo["tools"]),
        ", ".join(sorted(todo["tools"])) or "none", DRIVER_DIR,
        "; the jail's loader cache with them at %s/ld.so.cache" % DRIVER_DIR if todo["libraries"] else ""))


def refresh(root="/"):
    """The cache again when the jail's loader configuration changed since it was made; True when rebuilt."""
    ddir = _in(root, DRIVER_DIR)
    try:
        with open(ddir + "/ld.so.cache.source") as f:
            source = json.load(f)
    except (OSError, ValueError):
        return False  # nothing exposed on this node
    if source.get("jail") == loader_signature(_in(root, JAIL)):
        return False
    make_cache(root, source.get("names") or ())
    log("the jail's loader configuration changed: %s/ld.so.cache made again" % DRIVER_DIR)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="soperator-driver", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("expose", "refresh", "list"))
    parser.add_argument("--root", default="/", help="the container's root (tests); default /")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            libraries, tools = discover()
            json.dump(plan(libraries, tools), sys.stdout, indent=2, sort_keys=True)
            sys.stdout.write("\n")
        elif args.command == "expose":
            expose(args.root)
        else:
            refresh(args.root)
    except (DriverError, OSError) as exc:
        log("error: %s" % exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
