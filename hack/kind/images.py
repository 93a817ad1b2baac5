#!/usr/bin/env python3
"""The images a kind node preloads, made from the project's own builds (hack/build-binaries.sh kind).

    hack/kind/images.py OUT_DIR ROOTFS BIN_DIR... < tags

reads the image references kubeadm deploys (`kubeadm config images list`, one per line) and writes one
docker-archive per reference into OUT_DIR (single layer, deterministic: hack/realnode/image.py). The binaries
are looked up in the BIN_DIRs. kube-proxy runs iptables and conntrack: its image also carries Debian's
packages of those (with their library dependencies) from ROOTFS, the node's own Debian root, and a wrapper
that points the iptables commands at the backend the node uses. Prints the archives' paths. Stdlib only.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from realnode import image  # noqa: E402

# Image name (after registry.k8s.io/) -> (binary, where the image has it, entrypoint).
BINARIES = {
    "kube-apiserver": ("kube-apiserver", "usr/local/bin/kube-apiserver", None),
    "kube-controller-manager": ("kube-controller-manager", "usr/local/bin/kube-controller-manager", None),
    "kube-scheduler": ("kube-scheduler", "usr/local/bin/kube-scheduler", None),
    "kube-proxy": ("kube-proxy", "usr/local/bin/kube-proxy", None),
    "etcd": ("etcd", "usr/local/bin/etcd", None),
    "coredns/coredns": ("coredns", "coredns", ["/coredns"]),
    "pause": ("pause", "pause", ["/pause"]),
}
# Debian packages kube-proxy execs (iptables, ip6tables and their -save/-restore; conntrack), and a shell for
# the wrapper; their dependencies are added from the ROOTFS's dpkg database.
KUBE_PROXY_PACKAGES = ("iptables", "conntrack", "dash")
IPTABLES_NAMES = ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore")
WRAPPER = b"""#!/bin/sh
# iptables, ip6tables and their -save/-restore in soperator's kube-proxy image (hack/kind/images.py): the backend
# the node uses -- the one holding kubelet's KUBE-IPTABLES-HINT chain, else the one with more rules -- found at the
# first call and kept in /run/iptables-mode. Shell builtins only: the image has no other tools.
hint() { case $("$1" -t mangle 2>/dev/null) in *KUBE-IPTABLES-HINT*) return 0 ;; esac; return 1; }
rules() { "$1" 2>/dev/null | { n=0; while read -r line; do case $line in -*) n=$((n + 1)) ;; esac; done; echo $n; }; }
if ! read -r mode 2>/dev/null </run/iptables-mode; then
  mode=nft
  if ! hint iptables-nft-save; then
    if hint iptables-legacy-save || [ "$(rules iptables-legacy-save)" -gt "$(rules iptables-nft-save)" ]; then
      mode=legacy
    fi
  fi
  echo "$mode" >/run/iptables-mode
fi
name=${0##*/}
family=${name%%-*}
exec "/usr/sbin/$family-$mode${name#"$family"}" "$@"
"""


def dpkg(rootfs, *args):
    return subprocess.run(["dpkg-query", "--admindir", os.path.join(rootfs, "var/lib/dpkg"), *args],
                          capture_output=True, text=True, check=True).stdout


def depends(field):
    """Package names of a Depends/Pre-Depends value, the first of each alternative (versions, arches dropped)."""
    names = []
    for clause in field.split(","):
        first = clause.split("|")[0].strip()
        if first:
            names.append(re.split(r"[\s(:]", first, maxsplit=1)[0])
    return names


def closure(rootfs, roots):
    """The installed packages `roots` need, roots included."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        out = dpkg(rootfs, "-W", "-f", "${Status}\t${Pre-Depends},${Depends}", name)
        status, _, deps = out.partition("\t")
        if "installed" not in status:
            raise SystemExit("%s is not installed in %s" % (name, rootfs))
        todo += [d for d in depends(deps) if d not in seen]
    return sorted(seen)


def usr_path(rootfs, path):
    """Where a dpkg path lives in a merged-/usr root (/lib/x -> usr/lib/x when /lib is a link to usr/lib)."""
    rel = path.lstrip("/")
    top, _, rest = rel.partition("/")
    link = os.path.join(rootfs, top)
    if rest and os.path.islink(link):
        return os.path.join(os.readlink(link).lstrip("/"), rest)
    return rel


def package_entries(rootfs, packages):
    """Layer entries of every file, link and directory the packages ship, plus the merged-/usr top links."""
    entries = {}
    for top in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink(os.path.join(rootfs, top)):
            entries[top] = ("symlink", os.readlink(os.path.join(rootfs, top)))
    for pkg in packages:
        for path in dpkg(rootfs, "-L", pkg).splitlines():
            if path in ("/", "/.") or " " in path:  # the root; "diverted by" lines
                continue
            rel = usr_path(rootfs, path)
            if rel.startswith(("usr/share/doc", "usr/share/man")):
                continue
            full = os.path.join(rootfs, rel)
            if os.path.islink(full):
                entries[rel] = ("symlink", os.readlink(full))
            elif os.path.isdir(full):
                entries[rel] = ("dir", 0o755)
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    entries[rel] = ("file", os.stat(full).st_mode & 0o7777, f.read())
    return entries


def find_binary(name, bin_dirs):
    for d in bin_dirs:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    raise SystemExit("no %s in %s" % (name, " ".join(bin_dirs)))


def build(out_dir, rootfs, bin_dirs, ref):
    name, _, _ = ref.partition("registry.k8s.io/")[2].rpartition(":")
    if name not in BINARIES:
        raise SystemExit("kubeadm deploys %s, which this project does not build" % ref)
    binary, where, entrypoint = BINARIES[name]
    with open(find_binary(binary, bin_dirs), "rb") as f:
        entries = dict(image.base_entries())
        entries[where] = ("file", 0o755, f.read())
    if name == "kube-proxy":
        entries.update(package_entries(rootfs, closure(rootfs, KUBE_PROXY_PACKAGES)))
        entries.setdefault("usr/bin/sh", ("symlink", "dash"))
        entries["run"] = ("dir", 0o755)
        entries["usr/sbin/iptables-wrapper"] = ("file", 0o755, WRAPPER)
        entries.update({"usr/sbin/" + n: ("symlink", "iptables-wrapper") for n in IPTABLES_NAMES})
    # Every parent directory of every entry, so the layer unpacks the same anywhere.
    for path in list(entries):
        parent = os.path.dirname(path)
        while parent and parent not in entries:
            entries[parent] = ("dir", 0o755)
            parent = os.path.dirname(parent)
    out = os.path.join(out_dir, name.replace("/", "_") + ".tar")
    image.docker_archive(out, ref, image.layer_tar(list(entries.items())), entrypoint=entrypoint)
    return out


def main(argv):
    if len(argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    out_dir, rootfs, bin_dirs = argv[1], argv[2], argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    for ref in sys.stdin.read().split():
        print(build(out_dir, rootfs, bin_dirs, ref))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
