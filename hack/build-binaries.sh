#!/usr/bin/env bash
# Build the pinned Kubernetes control plane, kubectl, etcd and kwok from the Go module proxy.
# Cached under ${SOPERATOR_CACHE:-~/.cache/soperator}/<component>-<version>/bin; a cached build is reused.
# Usage: hack/build-binaries.sh [control-plane|node|kind|ansible-operator|slurm-exporter|versitygw|all]
#   node = what `hack/localcluster.py up --real-node` needs: kubelet, kube-proxy, CoreDNS (a build with only
#   the plugins we use, hack/realnode/coredns/main.go) and the static pause binary (hack/realnode/pause.c).
#   kind = what the kind node image (hack/kind.sh) is made of: the kind binary, kubeadm, kubelet, kubectl, crictl,
#   the control plane and kube-proxy, and etcd and CoreDNS at the versions this kubeadm deploys (it is asked:
#   `kubeadm config images list`), CoreDNS with the plugins kubeadm's Corefile uses (hack/kind/coredns/main.go).
#   slurm-exporter = our Prometheus exporter for Slurm (exporter/), which the exporter image carries; prints its path.
#   versitygw = an S3-compatible server (posix backend), the jail backup tests' S3 repository; prints its path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$here/versions.env"
cache=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
what=${1:-control-plane}
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

k8s_dir=$cache/kubernetes-$KUBERNETES_VERSION
etcd_dir=$cache/etcd-$ETCD_VERSION
kwok_dir=$cache/kwok-$KWOK_VERSION
coredns_dir=$cache/coredns-$COREDNS_VERSION
ansible_operator_dir=$cache/ansible-operator-$ANSIBLE_OPERATOR_VERSION
versitygw_dir=$cache/versitygw-$VERSITYGW_VERSION
kind_dir=$cache/kind-$KIND_VERSION
crictl_dir=$cache/crictl-$CRICTL_VERSION
# The pause binary is our own source: keyed by its hash, so an edit rebuilds it.
pause_dir=$cache/pause-$(sha256sum "$here/realnode/pause.c" | cut -c1-12)
kubeget_dir=$cache/kubeget-$(sha256sum "$here/realnode/kubeget/main.go" | cut -c1-12)
# Our exporter: keyed by its sources, its module files and the Go version (an edit rebuilds it).
exporter_src=$here/../exporter
exporter_key=$( (cd "$exporter_src" && cat go.mod go.sum ./*.go && go version) | sha256sum | cut -c1-12)
exporter_dir=$cache/slurm-exporter-$exporter_key

# A wrapper module: k8s.io/kubernetes replaces its staging modules with ./staging paths that do not
# exist in the published module, so point each at its published v0.x.y twin.
k8s_wrapper() {
  local dir=$1 minor=${KUBERNETES_VERSION#v1.}
  mkdir -p "$dir"
  local stage=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
    csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
    pod-security-admission sample-apiserver sample-cli-plugin sample-controller)
  {
    echo "module soperator.local/k8sbuild"
    echo "go 1.24.0"
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    for m in "${stage[@]}"; do echo "replace k8s.io/$m => k8s.io/$m v0.$minor"; done
  } >"$dir/go.mod"
}

build_k8s() {
  local out=$1; shift
  local missing=()
  for c in "$@"; do [ -x "$out/$c" ] || missing+=("$c"); done
  [ ${#missing[@]} -gt 0 ] || { echo "cached: $* in $out"; return 0; }
  local work; work=$(mktemp -d)
  k8s_wrapper "$work"
  local v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ld+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  local pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  mkdir -p "$out"
  (cd "$work" && go get "k8s.io/kubernetes@$KUBERNETES_VERSION" >/dev/null &&
   go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}")
  rm -rf "$work"
  echo "built: ${missing[*]} -> $out"
}

build_etcd() {  # build_etcd [VERSION DIR]: the local cluster's etcd, or the one a kubeadm deploys
  local version=${1:-$ETCD_VERSION} dir=${2:-$etcd_dir}
  [ -x "$dir/bin/etcd" ] && { echo "cached: etcd in $dir/bin"; return 0; }
  # etcd's server module has replace directives too: build it as a dependency of a wrapper module.
  local work; work=$(mktemp -d)
  printf 'module soperator.local/etcdbuild\ngo 1.23\nrequire go.etcd.io/etcd/server/v3 %s\n' "$version" >"$work/go.mod"
  mkdir -p "$dir/bin"
  (cd "$work" && go get "go.etcd.io/etcd/server/v3@$version" >/dev/null 2>&1 &&
   go build -trimpath -ldflags "-s -w" -o "$dir/bin/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$work"
  echo "built: etcd -> $dir/bin"
}

build_kwok() {
  [ -x "$kwok_dir/bin/kwok" ] && { echo "cached: kwok in $kwok_dir/bin"; return 0; }
  mkdir -p "$kwok_dir/bin"
  GOBIN="$kwok_dir/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  echo "built: kwok -> $kwok_dir/bin"
}

# operator-sdk's ansible-operator (github.com/operator-framework/ansible-operator-plugins), for the upstream tests.
build_ansible_operator() {
  [ -x "$ansible_operator_dir/bin/ansible-operator" ] && { echo "cached: ansible-operator in $ansible_operator_dir/bin"; return 0; }
  local work; work=$(mktemp -d)
  printf 'module soperator.local/aobuild\ngo 1.22\nrequire github.com/operator-framework/ansible-operator-plugins %s\n' \
    "$ANSIBLE_OPERATOR_VERSION" >"$work/go.mod"
  mkdir -p "$ansible_operator_dir/bin"
  # The checksum database answers 404 for this module here (the proxy serves it): skip it for this module only.
  (cd "$work" && export GOTOOLCHAIN=auto GONOSUMDB=github.com/operator-framework/ansible-operator-plugins &&
   go get "github.com/operator-framework/ansible-operator-plugins@$ANSIBLE_OPERATOR_VERSION" >/dev/null &&
   go build -trimpath -ldflags "-s -w" -o "$ansible_operator_dir/bin/ansible-operator" \
     github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator)
  rm -rf "$work"
  echo "built: ansible-operator -> $ansible_operator_dir/bin"
}

build_coredns() {  # build_coredns [VERSION DIR MAIN]: the real node's CoreDNS, or the kind node's
  local version=${1:-$COREDNS_VERSION} dir=${2:-$coredns_dir} main=${3:-$here/realnode/coredns/main.go}
  [ -x "$dir/bin/coredns" ] && { echo "cached: coredns in $dir/bin"; return 0; }
  local work; work=$(mktemp -d)
  cp "$main" "$work/main.go"
  printf 'module soperator.local/corednsbuild\ngo 1.25.0\nrequire github.com/coredns/coredns %s\n' \
    "$version" >"$work/go.mod"
  mkdir -p "$dir/bin"
  (cd "$work" && go get "github.com/coredns/coredns@$version" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1 &&
   go build -trimpath -ldflags "-s -w" -o "$dir/bin/coredns.tmp" . && mv "$dir/bin/coredns.tmp" "$dir/bin/coredns")
  rm -rf "$work"
  echo "built: coredns -> $dir/bin"
}

build_pause() {
  [ -x "$pause_dir/pause" ] && { echo "cached: pause in $pause_dir"; return 0; }
  mkdir -p "$pause_dir"
  gcc -static -Os -s -Wall -Werror -o "$pause_dir/pause" "$here/realnode/pause.c"
  echo "built: pause -> $pause_dir"
}

# Static (no cgo): the image and the test rootfs run it as it is. Dependencies from the Go module proxy, checked
# against the committed go.sum.
build_slurm_exporter() {
  if [ ! -x "$exporter_dir/slurm-exporter" ]; then
    mkdir -p "$exporter_dir"
    (cd "$exporter_src" && GOFLAGS=-mod=readonly go test ./... >&2 &&
     go build -trimpath -ldflags "-s -w -X main.version=$exporter_key" -o "$exporter_dir/slurm-exporter.tmp" .)
    mv "$exporter_dir/slurm-exporter.tmp" "$exporter_dir/slurm-exporter"
    echo "built: slurm-exporter -> $exporter_dir" >&2
  fi
  echo "$exporter_dir/slurm-exporter"
}

# The test image's in-cluster API client (stdlib Go, static).
build_kubeget() {
  [ -x "$kubeget_dir/kubeget" ] && { echo "cached: kubeget in $kubeget_dir"; return 0; }
  local work; work=$(mktemp -d)
  cp "$here/realnode/kubeget/main.go" "$work/"
  printf 'module soperator.local/kubeget\ngo 1.22\n' >"$work/go.mod"
  mkdir -p "$kubeget_dir"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$kubeget_dir/kubeget" .)
  rm -rf "$work"
  echo "built: kubeget -> $kubeget_dir"
}

# The backup tests' S3 server (tests/e2e/test_backup.py runs it in a pod of the backup image). Static.
build_versitygw() {
  if [ ! -x "$versitygw_dir/versitygw" ]; then
    local work; work=$(mktemp -d)
    printf 'module soperator.local/versitygwbuild\ngo 1.24\nrequire github.com/versity/versitygw %s\n' \
      "$VERSITYGW_VERSION" >"$work/go.mod"
    mkdir -p "$versitygw_dir"
    (cd "$work" && export GOTOOLCHAIN=auto && go get "github.com/versity/versitygw@$VERSITYGW_VERSION" >/dev/null 2>&1 &&
     go build -trimpath -ldflags "-s -w" -o "$versitygw_dir/versitygw.tmp" github.com/versity/versitygw/cmd/versitygw) >&2
    mv "$versitygw_dir/versitygw.tmp" "$versitygw_dir/versitygw"
    rm -rf "$work"
    echo "built: versitygw -> $versitygw_dir" >&2
  fi
  echo "$versitygw_dir/versitygw"
}

build_kind() {
  [ -x "$kind_dir/bin/kind" ] && { echo "cached: kind in $kind_dir/bin"; return 0; }
  mkdir -p "$kind_dir/bin"
  GOBIN="$kind_dir/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
  echo "built: kind -> $kind_dir/bin"
}

build_crictl() {
  [ -x "$crictl_dir/bin/crictl" ] && { echo "cached: crictl in $crictl_dir/bin"; return 0; }
  mkdir -p "$crictl_dir/bin"
  GOBIN="$crictl_dir/bin" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  echo "built: crictl -> $crictl_dir/bin"
}

# The image tag kubeadm deploys for NAME (etcd, coredns/coredns, pause), asked of the pinned kubeadm itself.
kubeadm_tag() {
  "$k8s_dir/bin/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null |
    sed -n "s#^registry.k8s.io/$1:##p"
}

# etcd and CoreDNS at the versions kubeadm deploys (etcd's tag is <version>-<image revision>): their directories.
kind_addon_dirs() {
  local etcd_v coredns_v
  etcd_v=v$(kubeadm_tag etcd); etcd_v=${etcd_v%-*}
  coredns_v=$(kubeadm_tag coredns/coredns)
  if [ "$etcd_v" = v ] || [ -z "$coredns_v" ]; then echo "kubeadm names no etcd/CoreDNS image" >&2; exit 1; fi
  echo "$etcd_v $cache/etcd-$etcd_v"
  echo "$coredns_v $cache/coredns-kubeadm-$coredns_v-$(sha256sum "$here/kind/coredns/main.go" | cut -c1-12)"
}

build_kind_addons() {
  local etcd coredns
  { read -r -a etcd; read -r -a coredns; } < <(kind_addon_dirs)
  build_etcd "${etcd[@]}"
  build_coredns "${coredns[@]}" "$here/kind/coredns/main.go"
}

case $what in
  control-plane)
    build_k8s "$k8s_dir/bin" kube-apiserver kube-controller-manager kube-scheduler kubectl
    build_etcd
    build_kwok ;;
  node)
    build_k8s "$k8s_dir/bin" kubelet kube-proxy
    build_coredns
    build_pause
    build_kubeget ;;
  kind)
    build_k8s "$k8s_dir/bin" kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kubeadm
    build_kind_addons
    build_kind
    build_crictl
    build_pause ;;
  kind-dirs)  # where `kind` put them (nothing is built): one directory per line, for hack/kind/node-image.sh
    echo "$k8s_dir/bin"
    kind_addon_dirs | while read -r _ dir; do echo "$dir/bin"; done
    echo "$kind_dir/bin"; echo "$crictl_dir/bin"; echo "$pause_dir" ;;
  ansible-operator)
    build_ansible_operator ;;
  slurm-exporter)
    build_slurm_exporter ;;
  versitygw)
    build_versitygw ;;
  all) "$0" control-plane; "$0" node ;;
  *) echo "usage: $0 [control-plane|node|kind|ansible-operator|slurm-exporter|versitygw|all]" >&2; exit 2 ;;
esac
