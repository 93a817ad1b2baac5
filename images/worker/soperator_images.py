# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container jobs' image cache on a worker (``soperator-images``): pull an OCI image once per node, unpack it once,
share it between every job of the node that runs the same image digest, evict the least recently used ones above a
size limit.

The jail plugin (spank_chroot, ``--container-image``) runs ``pull`` once per step and node, as the cache's owner (a uid
of no account, no capability, no_new_privs, an empty environment): this program never runs as root. The registry's
credentials come on file descriptor 3 (a memfd the plugin filled from the cluster's registry Secret, which only root may
read), never in an argument or the environment. What it does:

1. Resolves the reference to the digest of this node's image (``skopeo inspect --raw``; an index or manifest list is
   resolved to its ``linux/<this machine>`` manifest): a tag is looked up every time (a new push is seen), a digest
   is not.
2. When that digest is cached, touches it (least recently used comes from that) and says so: nothing is pulled.
3. Else takes the digest's lock (a second step asking for it waits, then finds it cached: one pull however many steps
   start at once), copies the image into a private work directory (``skopeo copy`` to an OCI layout), refuses an
   image of another OS or architecture before unpacking, unpacks it as this unprivileged user (``umoci unpack
   --rootless``: no device node, no setuid file, no file of another owner, every path confined to the directory) and
   moves the root filesystem into the cache. Any failure removes the work directory: nothing is left behind.
4. Evicts the least recently used images, never one a running container holds (a shared lock the plugin takes on
   ``images/<digest>.lock`` while its container lives) nor one given with ``--in-use`` (named containers kept for a
   job), until the cache is within its limit.

``pull`` prints ``key value`` lines on stdout (``digest``, ``rootfs``, ``workdir``, ``env`` for each of the image's
variables, ``pulled <seconds>`` or ``cached``); failures print ``error: <what, naming the image and the cause>`` on
stderr and exit 1. ``stats`` prints the cache's counters (``pulls``, ``hits``, ``evictions``, ``failures``) and what it
holds, as JSON. Python 3 standard library only (the worker image's python3), with Debian's ``skopeo`` and ``umoci``.
"""

import argparse
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

MANIFEST_LIST_TYPES = ("application/vnd.oci.image.index.v1+json",
                       "application/vnd.docker.distribution.manifest.list.v2+json")
# uname -m -> the OCI architecture name.
ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# registry[:port]/path[:tag][@digest], as the plugin normalised it (docker.io spelled out).
REFERENCE = re.compile(r"(?P<name>[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+)"
                       r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(@(?P<digest>sha256:[0-9a-f]{64}))?")
AUTH_FD = 3
STATS = ("pulls", "hits", "evictions", "failures")
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# Work directories older than this are a crashed pull's: removed by the next one.
STALE_WORK_SECONDS = 24 * 3600


class ImageError(Exception):
    """A failure to report to the job: the message names the image and the cause."""


# ---- pure parts ---------------------------------------------------------------------------------------------------
def parse_reference(ref):
    """(name, tag, digest) of a normalised reference (``registry/path[:tag][@sha256:...]``); ImageError otherwise."""
    match = REFERENCE.fullmatch(ref or "")
    if not match or "/" not in match.group("name"):
        raise ImageError("%r is not an image reference of the form registry/name[:tag][@sha256:digest]" % ref)
    tag, digest = match.group("tag"), match.group("digest")
    if not tag and not digest:
        tag = "latest"
    return match.group("name"), tag, digest


def parse_size(text):
    """Bytes of ``50G``, ``512M``, ``1048576``; ValueError otherwise."""
    match = re.fullmatch(r"([0-9]+)([KMGT]?)I?B?", text.strip().upper())
    if not match:
        raise ValueError("%r is not a size (e.g. 50G, 512M, 1048576)" % text)
    return int(match.group(1)) * SIZE_UNITS[match.group(2)]


def node_platform(machine=None):
    """``(os, architecture)`` of this node in OCI's words."""
    machine = machine or platform.machine()
    return "linux", ARCHITECTURES.get(machine, machine)


def choose_manifest(raw, want):
    """The digest of the manifest for platform ``want`` (``(os, arch)``) in a raw manifest; None when ``raw`` is a
    single image's manifest (its digest is the raw bytes'); ImageError naming the platforms an index offers when none
    is ``want``."""
    document = json.loads(raw)
    media = document.get("mediaType") or ""
    if media not in MANIFEST_LIST_TYPES and "manifests" not in document:
        return None
    offered = []
    for entry in document.get("manifests") or ():
        plat = entry.get("platform") or {}
        pair = (plat.get("os"), plat.get("architecture"))
        if pair[0] and pair[1]:
            offered.append("%s/%s" % pair)
        if pair == want and DIGEST.fullmatch(entry.get("digest") or ""):
            return entry["digest"]
    raise ImageError("it has no %s/%s image (it has: %s)" % (want + (", ".join(sorted(set(offered))) or "none",)))


def skopeo_message(stderr):
    """The cause in skopeo's error output, without its restatement of the reference."""
    found = re.findall(r'msg="((?:[^"\\]|\\.)*)"', stderr)
    text = (found[-1].replace('\\"', '"') if found else stderr.strip().splitlines()[-1:] and
            stderr.strip().splitlines()[-1]) or "failed"
    for prefix in (r'Error parsing image name "[^"]*": ', r"initializing source [^ ]*: ",
                   r"Error reading manifest [^ ]* in [^ ]*: "):
        text = re.sub("^" + prefix, "", text)
    return text


def eviction_order(entries, keep):
    """The cached images that may be evicted, least recently used first: ``entries`` are dicts with ``digest`` and
    ``last_used``; digests in ``keep`` never are. The caller evicts in this order, skipping those a container holds,
    until the cache is within its limit."""
    return [e["digest"] for e in sorted(entries, key=lambda e: (e["last_used"], e["digest"]))
            if e["digest"] not in keep]


def result_lines(digest, rootfs, config, pulled_seconds):
    """What ``pull`` prints for the plugin (one ``key value`` per line; variables with a newline are left out)."""
    lines = ["digest %s" % digest, "rootfs %s" % rootfs]
    workdir = config.get("WorkingDir") or ""
    if workdir.startswith("/") and "\n" not in workdir:
        lines.append("workdir %s" % workdir)
    lines.extend("env %s" % item for item in config.get("Env") or ()
                 if isinstance(item, str) and "=" in item and "\n" not in item and not item.startswith("="))
    lines.append("pulled %.3f" % pulled_seconds if pulled_seconds is not None else "cached")
    return lines


# ---- the cache ----------------------------------------------------------------------------------------------------
class Cache:
    """The cache directory: ``images/<hex>/`` (``rootfs/``, ``image.json``, ``last-used``), ``images/<hex>.lock``,
    ``tmp/`` (work directories, and skopeo's temporary files), ``stats.json`` and its ``.lock``."""

    def __init__(self, root):
        self.root = root
        self.images = os.path.join(root, "images")
        self.tmp = os.path.join(root, "tmp")
        for path in (self.images, self.tmp):
            os.makedirs(path, mode=0o755, exist_ok=True)

    def entry(self, digest):
        return os.path.join(self.images, digest.split(":", 1)[1])

    @contextlib.contextmanager
    def locked(self, path, mode=fcntl.LOCK_EX):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield fd
        finally:
            os.close(fd)

    def lookup(self, digest):
        """The entry's metadata when it is complete (``image.json`` is written last), else None."""
        try:
            with open(os.path.join(self.entry(digest), "image.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def touch(self, digest):
        path = os.path.join(self.entry(digest), "last-used")
        with open(path, "a"):
            pass
        os.utime(path)

    def count(self, **increments):
        with self.locked(os.path.join(self.root, "stats.lock")):
            stats = self.stats()
            for key, value in increments.items():
                stats[key] = stats.get(key, 0) + value
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".stats-")
            with os.fdopen(fd, "w") as f:
                json.dump(stats, f, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, os.path.join(self.root, "stats.json"))

    def stats(self):
        try:
            with open(os.path.join(self.root, "stats.json")) as f:
                stats = json.load(f)
        except (OSError, ValueError):
            stats = {}
        return {key: int(stats.get(key, 0)) for key in STATS}

    def entries(self):
        found = []
        for name in os.listdir(self.images):
            digest = "sha256:" + name
            if not DIGEST.fullmatch(digest):
                continue
            meta = self.lookup(digest)
            if meta is None:
                continue
            try:
                used = os.stat(os.path.join(self.entry(digest), "last-used")).st_mtime
            except OSError:
                used = 0.0
            found.append({"digest": digest, "size": int(meta.get("size", 0)), "last_used": used,
                          "references": meta.get("references", [])})
        return found

    def remove_tree(self, path):
        """Remove a directory umoci unpacked (its files may be read-only to their owner: made writable first)."""
        def writable(func, target, _exc):
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(target), 0o700)
                os.chmod(target, 0o700)
            func(target)
        shutil.rmtree(path, onerror=writable)

    def evict(self, limit, keep, log):
        """Evict the least recently used images not in ``keep`` and held by no container, until within ``limit``."""
        entries = self.entries()
        order = eviction_order(entries, keep)
        sizes = {e["digest"]: e["size"] for e in entries}
        total = sum(sizes.values())
        for digest in order:
            if total <= limit:
                break
            lock = self.entry(digest) + ".lock"
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                        continue  # a container uses it
                    raise
                doomed = tempfile.mkdtemp(dir=self.tmp, prefix="evict-")
                os.rename(self.entry(digest), os.path.join(doomed, "entry"))
                self.remove_tree(doomed)
                total -= sizes[digest]
                self.count(evictions=1)
                log("evicted %s (%d MiB, last used %s)" % (digest, sizes[digest] >> 20,
                                                            time.strftime("%Y-%m-%dT%H:%M:%S")))
            finally:
                os.close(fd)
        if total > limit:
            log("the cache holds %d MiB, above its limit of %d MiB: the rest is in use" % (total >> 20, limit >> 20))

    def clean_stale_work(self):
        now = time.time()
        for name in os.listdir(self.tmp):
            path = os.path.join(self.tmp, name)
            with contextlib.suppress(OSError):
                if now - os.lstat(path).st_mtime > STALE_WORK_SECONDS:
                    self.remove_tree(path) if os.path.isdir(path) else os.unlink(path)


def tree_size(path):
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


# ---- the tools ----------------------------------------------------------------------------------------------------
class Tools:
    """skopeo and umoci, with the credentials on fd 3 when the plugin passed them."""

    def __init__(self, cache, authfile):
        self.cache = cache
        self.auth = ["--authfile", authfile] if authfile else []
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": cache.root, "TMPDIR": cache.tmp, "LANG": "C.UTF-8"}

    def run(self, argv, what):
        done = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, pass_fds=(AUTH_FD,) if self.auth else ())
        if done.returncode != 0:
            cause = skopeo_message(done.stderr.decode(errors="replace"))
            raise ImageError("%s: %s" % (what, cause))
        return done.stdout

    def raw_manifest(self, name, tag, digest):
        ref = "docker://%s%s" % (name, "@" + digest if digest else ":" + tag)
        return self.run(["skopeo", "inspect", "--raw", "--retry-times", "2", *self.auth, ref], "cannot read it")

    def copy(self, name, digest, layout):
        self.run(["skopeo", "copy", "--quiet", "--retry-times", "2", *self.auth, "docker://%s@%s" % (name, digest),
                  "oci:%s:image" % layout], "cannot pull it")

    def unpack(self, layout, bundle):
        self.run(["umoci", "unpack", "--rootless", "--image", "%s:image" % layout, bundle], "cannot unpack it")


def layout_config(layout):
    """The image configuration in an OCI layout of one image (tag ``image``)."""
    def blob(digest):
        algorithm, hexa = digest.split(":", 1)
        with open(os.path.join(layout, "blobs", algorithm, hexa), "rb") as f:
            return json.load(f)
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    manifest = blob(index["manifests"][0]["digest"])
    return blob(manifest["config"]["digest"])


def pull(cache, tools, ref, limit, keep, log, want=None):
    """Make sure the image of ``ref`` for this node is in the cache; the result lines. ImageError on failure."""
    want = want or node_platform()
    name, tag, digest = parse_reference(ref)
    raw = tools.raw_manifest(name, tag, digest)
    chosen = choose_manifest(raw, want)
    if chosen:
        digest = chosen
    elif not digest:
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    meta = cache.lookup(digest)
    if meta is None:
        with cache.locked(cache.entry(digest) + ".lock"):
            meta = cache.lookup(digest)  # a concurrent pull may have finished meanwhile
            if meta is None:
                started = time.monotonic()
                meta = unpack_into_cache(cache, tools, ref, name, digest, limit, want)
                seconds = time.monotonic() - started
                cache.touch(digest)
                cache.count(pulls=1)
                log("pulled %s (%s) in %.1f s, %d MiB unpacked" % (ref, digest, seconds, meta["size"] >> 20))
                cache.evict(limit, set(keep) | {digest}, log)
                return result_lines(digest, os.path.join(cache.entry(digest), "rootfs"), meta["config"], seconds)
    cache.touch(digest)
    cache.count(hits=1)
    log("%s (%s) is cached" % (ref, digest))
    return result_lines(digest, os.path.join(cache.entry(digest), "rootfs"), meta["config"], None)


def unpack_into_cache(cache, tools, ref, name, digest, limit, want):
    work = tempfile.mkdtemp(dir=cache.tmp, prefix="pull-")
    try:
        layout = os.path.join(work, "layout")
        tools.copy(name, digest, layout)
        config = layout_config(layout)
        have = (config.get("os") or "?", config.get("architecture") or "?")
        if have != want:
            raise ImageError("it is an image for %s/%s; this node runs %s/%s" % (have + want))
        bundle = os.path.join(work, "bundle")
        tools.unpack(layout, bundle)
        size = tree_size(os.path.join(bundle, "rootfs"))
        if size > limit:
            raise ImageError("it is %d MiB unpacked, more than this node's image cache may hold (%d MiB)"
                             % (size >> 20, limit >> 20))
        entry = os.path.join(work, "entry")
        os.mkdir(entry, 0o755)
        os.rename(os.path.join(bundle, "rootfs"), os.path.join(entry, "rootfs"))
        meta = {"digest": digest, "references": [ref], "size": size, "pulled": int(time.time()),
                "config": {k: config.get("config", {}).get(k) for k in ("Env", "WorkingDir")}}
        with open(os.path.join(entry, "image.json"), "w") as f:
            json.dump(meta, f, sort_keys=True)
        os.rename(entry, cache.entry(digest))
        return meta
    finally:
        if os.path.exists(work):
            cache.remove_tree(work)


# ---- entry --------------------------------------------------------------------------------------------------------
def main(argv=None):
    parser = argparse.ArgumentParser(prog="soperator-images", description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pull", help="make sure an image is in the cache; print where")
    p.add_argument("--cache", required=True)
    p.add_argument("--limit", required=True, help="the cache's size limit (50G, 512M, bytes)")
    p.add_argument("--auth-fd", action="store_true", help="registry credentials (auth.json) on file descriptor 3")
    p.add_argument("--in-use", action="append", default=[], metavar="DIGEST", help="never evict this image")
    p.add_argument("reference")
    s = sub.add_parser("stats", help="the cache's counters and images, as JSON")
    s.add_argument("--cache", required=True)
    args = parser.parse_args(argv)
    os.umask(0o022)
    cache = Cache(args.cache)
    if args.command == "stats":
        json.dump(dict(cache.stats(), images=sorted(cache.entries(), key=lambda e: -e["last_used"])), sys.stdout,
                  indent=2, sort_keys=True)
        print()
        return 0

    def log(message):
        print("soperator-images: %s" % message, file=sys.stderr, flush=True)

    try:
        limit = parse_size(args.limit)
    except ValueError as exc:
        print("error: --limit: %s" % exc, file=sys.stderr)
        return 2
    cache.clean_stale_work()
    authfile = "/proc/self/fd/%d" % AUTH_FD if args.auth_fd else None
    try:
        lines = pull(cache, Tools(cache, authfile), args.reference, limit,
                     {d for d in args.in_use if DIGEST.fullmatch(d)}, log)
    except ImageError as exc:
        cache.count(failures=1)
        print("error: %s" % exc, file=sys.stderr)
        return 1
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
