#!/usr/bin/env bash
# Build the kind node image from local parts (docs/kind.md): Debian bookworm with systemd, containerd, runc and
# the CNI plugins (debootstrap, cached), this directory's files (entrypoint, units, containerd configuration,
# kind's manifests), the pinned kubelet, kubeadm, kubectl and crictl, and the control-plane images kubeadm deploys
# preloaded into containerd's k8s.io namespace (hack/kind/images.py, from the project's own builds).
#
# Usage: hack/kind/node-image.sh      (run by hack/kind.sh build, with DOCKER_HOST set to the engine to load into)
# Prints the image reference. The image is tagged soperator/kind-node:<kubernetes>-<inputs key> and
# soperator/kind-node:<kubernetes>; an image whose inputs are unchanged is not built again.
#
# Needs root (debootstrap, the rootfs's owners, a short-lived containerd of our own for the preload) and the
# binaries of `hack/build-binaries.sh kind`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hack=$(cd "$here/.." && pwd)
# shellcheck source=/dev/null
. "$hack/versions.env"
cache=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work_root=$cache/kind
repo=soperator/kind-node
# bookworm: systemd 252 still boots on cgroup v1 (systemd >= 256 refuses it unless forced), and its containerd
# 1.6 and runc 1.1 are what the local cluster's real node already runs kubelet 1.34 with on these hosts.
suite=bookworm
packages=(systemd containerd runc containernetworking-plugins iptables nftables conntrack iproute2 ethtool kmod
  procps ca-certificates python3)
DOCKER=${DOCKER:-docker}

log() { printf 'kind-node: %s\n' "$*" >&2; }

mapfile -t bin_dirs < <("$hack/build-binaries.sh" kind-dirs)
binary() {  # binary NAME: its path among the kind build's directories
  local d
  for d in "${bin_dirs[@]}"; do [[ -x $d/$1 ]] && { echo "$d/$1"; return 0; }; done
  log "error: $1 is not built (run: hack/build-binaries.sh kind)"
  exit 1
}
mapfile -t refs < <("$(binary kubeadm)" config images list --kubernetes-version "$KUBERNETES_VERSION")

# ------------------------------------------------------------------------------------------------ inputs
rootfs_key=$(printf '%s\n' "$suite" "$mirror" "${packages[*]}" | sha256sum | cut -c1-12)
inputs_key() {
  {
    printf '%s\n' "$rootfs_key" "$KUBERNETES_VERSION" "${refs[@]}"
    local name
    for name in kubelet kubeadm kubectl crictl kube-apiserver kube-controller-manager kube-scheduler kube-proxy \
        etcd coredns pause; do
      sha256sum "$(binary "$name")" | cut -d' ' -f1
    done
    cd "$here"
    find node images.py node-image.sh -type f -print0 | sort -z | xargs -0 sha256sum
    find node -printf '%p %m\n' | sort
    sha256sum "$hack/realnode/image.py"
  } | sha256sum | cut -c1-12
}
key=$(inputs_key)
tag=$repo:$KUBERNETES_VERSION-$key
if "$DOCKER" image inspect "$tag" >/dev/null 2>&1; then
  "$DOCKER" tag "$tag" "$repo:$KUBERNETES_VERSION"
  log "up to date: $tag"
  echo "$tag"
  exit 0
fi

# ------------------------------------------------------------------------------------------------ rootfs
mkdir -p "$work_root"
rootfs_tar=$work_root/rootfs-$suite-$rootfs_key.tar.zst
if [[ ! -f $rootfs_tar ]]; then
  started=$SECONDS
  dir=$work_root/.rootfs-build
  rm -rf "$dir"
  mkdir -p "$dir"
  log "debootstrap --variant=minbase $suite with ${packages[*]}"
  if ! debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" "$suite" "$dir/rootfs" "$mirror" \
      >"$dir/debootstrap.log" 2>&1; then
    tail -n 30 "$dir/debootstrap.log" >&2
    log "error: debootstrap failed (log: $dir/debootstrap.log)"
    exit 1
  fi
  r=$dir/rootfs
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* "$r"/usr/share/man/* \
    "$r"/usr/share/info/*
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  tar -C "$r" --numeric-owner --xattrs -cf - . | zstd -q -T0 -3 -o "$rootfs_tar.tmp"
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$dir"
  log "rootfs $rootfs_tar in $((SECONDS - started)) s"
fi

# ------------------------------------------------------------------------------------------------ node
started=$SECONDS
build=$work_root/.node-build
containerd_pid=""
cleanup() {
  if [[ -n $containerd_pid ]] && kill -0 "$containerd_pid" 2>/dev/null; then
    kill "$containerd_pid"
    wait "$containerd_pid" 2>/dev/null || true
  fi
  rm -rf "$build"
}
trap cleanup EXIT
rm -rf "$build"
mkdir -p "$build/rootfs"
r=$build/rootfs
zstd -q -d -c "$rootfs_tar" | tar -C "$r" --numeric-owner --xattrs -xf -

# This directory's files, owned by root, readable by all (executables keep their bit).
tar -C "$here/node" --owner=0 --group=0 --mode='u+rwX,go+rX,go-w' -cf - . | tar -C "$r" -xf -
for name in kubelet kubeadm kubectl crictl; do install -m 0755 "$(binary "$name")" "$r/usr/bin/$name"; done
printf '%s' "$KUBERNETES_VERSION" >"$r/kind/version"
ln -sf /lib/systemd/systemd "$r/sbin/init"
rm -f "$r/etc/machine-id"  # the entrypoint makes each node's own

# systemd: only what a node runs. Debian's packages enabled their units at install; we enable ours.
rm -f "$r"/etc/systemd/system/*.wants/* "$r"/lib/systemd/system/multi-user.target.wants/* \
  "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
  "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/sysinit.target.wants/systemd-udev*
mkdir -p "$r/etc/systemd/journald.conf.d"
# journald must not read the host's kernel log (every node would copy it).
printf '[Journal]\nReadKMsg=no\n' >"$r/etc/systemd/journald.conf.d/10-soperator-kind.conf"
systemctl --root="$r" --quiet enable containerd.service kubelet.service soperator-kind-network.service \
  soperator-kind-storage.path soperator-kind-cgroups-undo.service
# binfmt_misc is the host's: a node must not register interpreters there.
systemctl --root="$r" --quiet mask systemd-binfmt.service getty@tty1.service

# The control-plane images, preloaded into containerd's k8s.io namespace (content only, unpacked on first use, as
# kind's own images do; pinned so that kubelet's image garbage collection keeps them). The importing containerd is
# Debian's on this host (the same package version the node runs), with every path in the build directory.
mkdir -p "$build/images" "$build/containerd"
printf '%s\n' "${refs[@]}" | python3 "$here/images.py" "$build/images" "$r" "${bin_dirs[@]}" >"$build/archives"
cat >"$build/containerd/config.toml" <<EOF
version = 2
root = "$r/var/lib/containerd"
state = "$build/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$build/containerd/containerd.sock"
[ttrpc]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$build/containerd/opt"
EOF
containerd --config "$build/containerd/config.toml" >"$build/containerd/log" 2>&1 &
containerd_pid=$!
ctr=(ctr --address "$build/containerd/containerd.sock" --namespace k8s.io)
for ((i = 0; i < 50; i++)); do "${ctr[@]}" version >/dev/null 2>&1 && break; sleep 0.2; done
while read -r archive; do "${ctr[@]}" images import --no-unpack "$archive" >/dev/null; done <"$build/archives"
for ref in "${refs[@]}"; do "${ctr[@]}" images label "$ref" io.cri-containerd.pinned=pinned >/dev/null; done
"${ctr[@]}" images list -q | sed 's/^/kind-node: preloaded /' >&2
kill "$containerd_pid"
wait "$containerd_pid" 2>/dev/null || true
containerd_pid=""

log "importing $tag"
tar -C "$r" --numeric-owner --xattrs -cf - . | "$DOCKER" import - "$tag-rootfs" >/dev/null
# What `docker import` cannot set (STOPSIGNAL) comes from a build that adds no layer; SIGRTMIN+3 halts systemd.
printf '%s\n' "FROM $tag-rootfs" 'ENV container=docker' 'STOPSIGNAL SIGRTMIN+3' \
  'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "LABEL dev.soperator.inputs=$key" |
  DOCKER_BUILDKIT=0 "$DOCKER" build -q -t "$tag" - >"$build/docker-build.log" 2>&1 || {
    cat "$build/docker-build.log" >&2
    exit 1
  }
"$DOCKER" rmi "$tag-rootfs" >/dev/null
"$DOCKER" tag "$tag" "$repo:$KUBERNETES_VERSION"
# Older builds of this Kubernetes version go.
while read -r old; do
  [[ -z $old || $old == "$tag" || $old == "$repo:$KUBERNETES_VERSION" ]] || "$DOCKER" rmi "$old" >/dev/null 2>&1 || true
done < <("$DOCKER" images --format '{{.Repository}}:{{.Tag}}' "$repo")
log "built $tag in $((SECONDS - started)) s, $("$DOCKER" image inspect -f '{{.Size}}' "$tag" | numfmt --to=si)B"
echo "$tag"
