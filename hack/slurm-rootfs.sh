#!/usr/bin/env bash
# Build (once) and unpack a Debian trixie root filesystem with real Slurm (24.11) in it.
#
# The tests in tests/slurm/ run munge, slurmctld and several slurmd inside this tree with
# chroot, and compile spank_chroot/ inside it against trixie's libslurm-dev, so the host's
# Debian release does not matter. The tree is built with debootstrap (minbase plus the
# packages below) and cached as a tarball keyed by the recipe, so later runs only unpack it.
#
# Usage:
#   hack/slurm-rootfs.sh                 build the cached tarball if missing, print its path
#   hack/slurm-rootfs.sh --extract DIR   the same, then unpack it into DIR (must be empty or absent)
#
# Environment:
#   SOPERATOR_CACHE   cache root (default: ~/.cache/soperator)
#   DEBIAN_MIRROR     Debian mirror (default: http://deb.debian.org/debian)
# Needs root (debootstrap, chroot, file ownership in the tarball).
set -euo pipefail

SUITE=trixie
# busybox-static: the test jail is built from it, and its `ip` brings up loopback in the
# tests' network namespace. util-linux (in minbase) brings runuser, setpriv, nsenter. python3: the worker image's
# health program (images/worker/soperator_health.py) runs under real slurmd in tests/slurm. slurmdbd, slurmrestd
# and mariadb-server: the accounting tests run Debian's MariaDB, slurmdbd and the REST API (auth/jwt from
# slurm-wlm-jwt-plugin) as the images do. skopeo and umoci: container jobs pull and unpack images with them, as the
# worker image does (netavark: debootstrap does not resolve virtual packages, and skopeo's containers-common needs
# a container-network-stack); docker-registry: the container tests' local registry, holding the images they build.
PACKAGES=(slurmctld slurmd slurm-client munge libslurm-dev gcc make libc6-dev busybox-static python3
  slurmdbd slurmrestd slurm-wlm-jwt-plugin mariadb-server mariadb-client skopeo netavark umoci docker-registry)
# Bump when the recipe changes in a way the package list does not show.
RECIPE_VERSION=2

CACHE_ROOT=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { printf 'slurm-rootfs: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root (debootstrap and chroot need it)"

extract_to=
case "${1:-}" in
  "") ;;
  --extract)
    [[ -n "${2:-}" ]] || die "--extract needs a directory"
    extract_to=$2 ;;
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
  *) die "unknown argument: $1" ;;
esac

key=$(printf '%s\n' "$SUITE" "$RECIPE_VERSION" "${PACKAGES[@]}" | sha256sum | cut -c1-12)
cache_dir=$CACHE_ROOT/slurm-rootfs-$SUITE-$key
tarball=$cache_dir/rootfs.tar.zst

# Host tools from the host's Debian: debootstrap (build), zstd (tarball).
ensure_tools() {
  local missing=() tool
  for tool in debootstrap zstd; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
  }
}

# Kill processes whose root is inside $1: a package's maintainer script may have started a
# daemon in the chroot. Only processes rooted in our own build tree are touched.
kill_rooted_in() {
  local dir pid root
  dir=$(realpath "$1")
  for pid in /proc/[0-9]*; do
    root=$(readlink "$pid/root" 2>/dev/null) || continue
    if [[ $root == "$dir" || $root == "$dir"/* ]]; then
      log "stopping leftover process ${pid#/proc/} rooted in the build tree"
      kill -9 "${pid#/proc/}" 2>/dev/null || true
    fi
  done
}

build() {
  local build_dir=$cache_dir.build
  local started=$SECONDS
  rm -rf "$build_dir"
  mkdir -p "$build_dir/rootfs"
  trap 'kill_rooted_in "$build_dir/rootfs"; umount -R "$build_dir/rootfs/proc" "$build_dir/rootfs/sys" 2>/dev/null || true' EXIT
  log "debootstrap $SUITE (minbase + ${PACKAGES[*]}) from $MIRROR"
  local include
  include=$(IFS=,; echo "${PACKAGES[*]}")
  if ! debootstrap --variant=minbase --include="$include" "$SUITE" "$build_dir/rootfs" "$MIRROR" \
      >"$build_dir/debootstrap.log" 2>&1; then
    tail -n 30 "$build_dir/debootstrap.log" >&2
    tail -n 30 "$build_dir/rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    die "debootstrap failed (log: $build_dir/debootstrap.log)"
  fi
  kill_rooted_in "$build_dir/rootfs"
  local r=$build_dir/rootfs
  # Smaller tarball, faster unpack: nothing below is needed to run or build.
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* \
         "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/*
  chroot "$r" dpkg-query -W -f='${Version}\n' slurmd >"$build_dir/slurm-version"
  log "packing $(du -sh "$r" | cut -f1) tree"
  tar -C "$r" --numeric-owner --xattrs -cf - . | zstd -q -T0 -3 -o "$build_dir/rootfs.tar.zst"
  rm -rf "$r"
  rm -rf "$cache_dir"
  mv "$build_dir" "$cache_dir"
  trap - EXIT
  log "built $tarball (Slurm $(cat "$cache_dir/slurm-version")) in $((SECONDS - started)) s"
}

mkdir -p "$CACHE_ROOT"
ensure_tools
# One builder at a time: a second caller waits for the first one's tarball.
exec 9>"$CACHE_ROOT/.slurm-rootfs.lock"
flock 9
[[ -f $tarball ]] || build
flock -u 9

if [[ -n $extract_to ]]; then
  mkdir -p "$extract_to"
  [[ -z $(ls -A "$extract_to") ]] || die "$extract_to is not empty"
  zstd -q -d -c "$tarball" | tar -C "$extract_to" --numeric-owner --xattrs -xf -
  log "unpacked into $extract_to"
fi
echo "$tarball"
