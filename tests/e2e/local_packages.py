"""Debian packages and a Python wheel a jail on the real node can install, served from the host.

Pods on the local cluster reach no mirror (the real node's bridge has no route out: no masquerade), the host does. So
the host resolves what the jail lacks against the jail's own dpkg status (read from the jail), downloads those
packages from Debian's mirror with its own apt (a private state directory, nothing of the host's apt changes) and a
wheel from PyPI with pip, and serves them as a flat apt repository and a pip links page over HTTP on the bridge's
address (the host's, which the pods reach). Cached under ~/.cache/soperator/jail-software-e2e by what was asked and the
jail's status, so a warm run downloads nothing.
"""

import functools
import gzip
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading

CACHE = os.path.join(os.environ.get("SOPERATOR_CACHE", os.path.expanduser("~/.cache/soperator")), "jail-software-e2e")
SUITE = "trixie"
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def _apt(state, *args):
    """The host's apt-get on a private state (lists, archives, sources) and the jail's dpkg status."""
    options = ["-o", "Dir::Etc::sourcelist=" + os.path.join(state, "sources.list"),
               "-o", "Dir::Etc::sourceparts=/nonexistent", "-o", "Dir::Etc::preferencesparts=/nonexistent",
               "-o", "Dir::State::Lists=" + os.path.join(state, "lists"),
               "-o", "Dir::State::status=" + os.path.join(state, "status"),
               "-o", "Dir::Cache=" + os.path.join(state, "cache"),
               "-o", "Dir::Cache::archives=" + os.path.join(state, "archives"),
               "-o", "APT::Architecture=amd64", "-o", "APT::Architectures::=amd64", "-o", "Debug::NoLocking=1",
               "-o", "Acquire::Languages=none", "-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
               "-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
               "-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
               "-o", "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false", "-o", "APT::Sandbox::User=root"]
    res = subprocess.run(["apt-get", "-q"] + options + list(args), capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def debs(jail_status, packages):
    """The .deb files (paths) of ``packages`` and what they need that the jail (its dpkg status text) lacks."""
    key = hashlib.sha256((jail_status + "\0" + " ".join(sorted(packages))).encode()).hexdigest()[:12]
    state = os.path.join(CACHE, "apt")
    archives = os.path.join(CACHE, "debs-" + key)
    if not os.path.isdir(archives):
        for sub in ("lists/partial", "cache", "archives/partial"):
            os.makedirs(os.path.join(state, sub), exist_ok=True)
        with open(os.path.join(state, "sources.list"), "w") as f:
            f.write("deb [signed-by=%s] %s %s main\n" % (KEYRING, MIRROR, SUITE))
        with open(os.path.join(state, "status"), "w") as f:
            f.write(jail_status)
        for old in os.listdir(os.path.join(state, "archives")):
            if old.endswith(".deb"):
                os.unlink(os.path.join(state, "archives", old))
        _apt(state, "update")
        _apt(state, "install", "-y", "--download-only", "--no-install-recommends", *packages)
        tmp = archives + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for name in os.listdir(os.path.join(state, "archives")):
            if name.endswith(".deb"):
                shutil.copy2(os.path.join(state, "archives", name), tmp)
        os.rename(tmp, archives)
    return sorted(os.path.join(archives, n) for n in os.listdir(archives))


def wheel(requirement):
    """A wheel from PyPI (no dependencies), in the cache; its path."""
    where = os.path.join(CACHE, "wheels")
    name = requirement.replace("==", "-")
    found = [n for n in os.listdir(where) if n.lower().startswith(name.lower())] if os.path.isdir(where) else []
    if not found:
        res = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                              "-d", where, requirement], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr
        found = [n for n in os.listdir(where) if n.lower().startswith(name.lower())]
    return os.path.join(where, found[0])


def _stanza(path):
    control = subprocess.run(["dpkg-deb", "--field", path], check=True, capture_output=True,
                             text=True).stdout.rstrip("\n")
    with open(path, "rb") as f:
        data = f.read()
    return "%s\nFilename: ./%s\nSize: %d\nMD5sum: %s\nSHA256: %s\n" % (
        control, os.path.basename(path), len(data), hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest())


def repository(root, deb_files, wheel_files):
    """A flat apt repository (Packages, Packages.gz, Release) and a ``wheels/`` directory in ``root``."""
    os.makedirs(os.path.join(root, "wheels"), exist_ok=True)
    for path in deb_files:
        shutil.copy2(path, root)
    for path in wheel_files:
        shutil.copy2(path, os.path.join(root, "wheels"))
    packages = "\n".join(_stanza(os.path.join(root, os.path.basename(p))) for p in deb_files)
    with open(os.path.join(root, "Packages"), "w") as f:
        f.write(packages)
    with gzip.open(os.path.join(root, "Packages.gz"), "wt") as f:
        f.write(packages)
    lines = []
    for name in ("Packages", "Packages.gz"):
        with open(os.path.join(root, name), "rb") as f:
            data = f.read()
        lines.append(" %s %d %s" % (hashlib.sha256(data).hexdigest(), len(data), name))
    with open(os.path.join(root, "Release"), "w") as f:
        f.write("Origin: soperator-e2e\nLabel: soperator-e2e\nSuite: local\nCodename: local\nSHA256:\n%s\n"
                % "\n".join(lines))


class Server(object):
    """``root`` over HTTP on ``address`` (a free port), in a thread of this process, until :meth:`stop`."""

    def __init__(self, root, address):
        handler = functools.partial(_Quiet, directory=root)
        self.httpd = http.server.ThreadingHTTPServer((address, 0), handler)
        self.url = "http://%s:%d" % (address, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.requests = _Quiet.requests

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requests = []

    def log_message(self, fmt, *args):
        _Quiet.requests.append(self.path)
