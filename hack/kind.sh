#!/usr/bin/env bash
# kind from local parts (docs/kind.md): the pinned kind binary, a node image the project builds, and clusters
# made of them that tests and users create, find and delete by name.
#
# Usage: hack/kind.sh COMMAND [NAME]     (NAME: the cluster's, default "soperator")
#   build        kind, kubectl and the node image (hack/build-binaries.sh kind, hack/kind/node-image.sh; cached)
#   env          print the exports a shell needs: PATH with kind and kubectl, DOCKER_HOST, SOPERATOR_KIND_IMAGE
#   up [NAME]    create the cluster (1 control plane and $SOPERATOR_KIND_WORKERS workers, default 2) with a host
#                directory mounted into every node at /soperator-shared, which the StorageClass `standard` serves
#                volumes from; wait until every node is Ready. A cluster NAME that answers is reused.
#   kubeconfig [NAME]   print the path of its kubeconfig (written by `up`)
#   status [NAME]       its nodes (exit 1 when it does not exist or does not answer)
#   load [NAME] [ARCHIVE...]   `kind load image-archive` each archive (default: the project's, hack/images.sh archives)
#   down [NAME]  delete the cluster and its state (kubeconfig, shared directory)
#   engine-stop  stop the project's kind engine (see below), removing what it leaves on the host
#
# The engine: the Docker that DOCKER_HOST names, else the system's (/var/run/docker.sock) if it answers, else the
# project's own engine for kind (SOPERATOR_ENGINE=kind hack/images.sh start), started here when needed and left
# running for the clusters on it. State: ${SOPERATOR_KIND_DIR:-~/.local/state/soperator/kind}/NAME/.
set -euo pipefail
hack=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$hack/versions.env"
cache=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
state_root=${SOPERATOR_KIND_DIR:-$HOME/.local/state/soperator/kind}
kind=$cache/kind-$KIND_VERSION/bin/kind
kubectl=$cache/kubernetes-$KUBERNETES_VERSION/bin/kubectl
image=soperator/kind-node:$KUBERNETES_VERSION
workers=${SOPERATOR_KIND_WORKERS:-2}

log() { printf 'kind: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Point DOCKER_HOST at the engine kind should use (see the header); start the project's when it is the one, unless
# told `nostart` (then return 1: a stopped engine holds no running cluster).
use_engine() {
  if [[ -z ${DOCKER_HOST:-} ]]; then
    if [[ -S /var/run/docker.sock ]] && docker info >/dev/null 2>&1; then return 0; fi
    eval "$(SOPERATOR_ENGINE=kind "$hack/images.sh" env)"
  fi
  docker info >/dev/null 2>&1 && return 0
  if [[ $DOCKER_HOST == "$(SOPERATOR_ENGINE=kind "$hack/images.sh" env | sed 's/^export DOCKER_HOST=//')" ]]; then
    [[ ${1:-} != nostart ]] || return 1
    SOPERATOR_ENGINE=kind "$hack/images.sh" start >/dev/null
  else
    die "no Docker engine answers at $DOCKER_HOST"
  fi
}

need_kind() { [[ -x $kind ]] || die "kind is not built (run: make kind)"; }

cmd_build() {
  "$hack/build-binaries.sh" kind >&2
  use_engine
  "$hack/kind/node-image.sh" >/dev/null
}

cmd_env() {
  use_engine
  # shellcheck disable=SC2016  # $PATH is for the shell that evaluates this
  printf 'export PATH=%q:%q:"$PATH"\n' "$(dirname "$kind")" "$(dirname "$kubectl")"
  printf 'export DOCKER_HOST=%q\n' "${DOCKER_HOST:-unix:///var/run/docker.sock}"
  printf 'export SOPERATOR_KIND_IMAGE=%q\n' "$image"
}

exists() { "$kind" get clusters 2>/dev/null | grep -qx "$1"; }
answers() { [[ -f $2/kubeconfig ]] && "$kubectl" --kubeconfig "$2/kubeconfig" --request-timeout=5s get nodes >/dev/null 2>&1; }

cluster_config() {  # cluster_config STATE_DIR: kind's configuration for `up`
  local role mount
  mount="    extraMounts: [{hostPath: \"$1/shared\", containerPath: /soperator-shared}]"
  echo "kind: Cluster"
  echo "apiVersion: kind.x-k8s.io/v1alpha4"
  echo "nodes:"
  for role in control-plane $(for ((i = 0; i < workers; i++)); do echo worker; done); do
    echo "  - role: $role"
    echo "$mount"
  done
}

cmd_up() {
  local name=$1 dir=$state_root/$1 started=$SECONDS
  need_kind
  use_engine
  if exists "$name"; then
    answers "$name" "$dir" || die "cluster $name exists but does not answer (hack/kind.sh down $name)"
    log "cluster $name is up (kubeconfig $dir/kubeconfig)"
    return 0
  fi
  docker image inspect "$image" >/dev/null 2>&1 || die "no node image $image in the engine (run: make kind)"
  # kind binds the host's /lib/modules into every node; Docker creates it where it is missing (these VMs have
  # none). Remembered, so that the last `down` removes it again.
  mkdir -p "$state_root"
  [[ -e /lib/modules ]] || touch "$state_root/.created-lib-modules"
  mkdir -p "$dir/shared"
  cluster_config "$dir" >"$dir/cluster.yaml"
  log "kind create cluster --name $name --image $image --config $dir/cluster.yaml --kubeconfig $dir/kubeconfig"
  "$kind" create cluster --name "$name" --image "$image" --config "$dir/cluster.yaml" \
    --kubeconfig "$dir/kubeconfig"
  # kind's own --wait only warns; a cluster whose nodes never turn Ready is a failure here.
  if ! "$kubectl" --kubeconfig "$dir/kubeconfig" wait --for=condition=Ready nodes --all --timeout=300s >&2; then
    "$kubectl" --kubeconfig "$dir/kubeconfig" get nodes,pods -A -o wide >&2 || true
    die "cluster $name: nodes not Ready after 300 s (its nodes: docker exec $name-control-plane journalctl)"
  fi
  log "cluster $name up in $((SECONDS - started)) s, every node Ready (kubeconfig $dir/kubeconfig)"
}

cmd_kubeconfig() {
  [[ -f $state_root/$1/kubeconfig ]] || die "no cluster $1 made by hack/kind.sh up"
  echo "$state_root/$1/kubeconfig"
}

cmd_status() {
  need_kind
  use_engine nostart || die "no kind cluster $1 (the project's kind engine is not running)"
  exists "$1" || die "no kind cluster $1"
  "$kubectl" --kubeconfig "$state_root/$1/kubeconfig" --request-timeout=10s get nodes -o wide
}

cmd_load() {
  local name=$1 archive started=$SECONDS
  shift
  need_kind
  use_engine
  local archives=("$@")
  ((${#archives[@]})) || mapfile -t archives < <("$hack/images.sh" archives)
  for archive in "${archives[@]}"; do
    [[ -f $archive ]] || die "$archive does not exist (run: make images)"
    "$kind" load image-archive --name "$name" "$archive"
  done
  log "${#archives[@]} archives loaded into $name in $((SECONDS - started)) s"
}

cmd_down() {
  local name=$1 up=1
  need_kind
  use_engine nostart || up=0
  if ((up)) && exists "$name"; then "$kind" delete cluster --name "$name" --kubeconfig "$state_root/$name/kubeconfig"; fi
  # The shared directory holds what the cluster's pods wrote (root's files among them).
  rm -rf "${state_root:?}/$name"
  if [[ -f $state_root/.created-lib-modules ]] && { ((!up)) || [[ -z $("$kind" get clusters 2>/dev/null) ]]; }; then
    rmdir /lib/modules 2>/dev/null || true
    rm -f "$state_root/.created-lib-modules"
  fi
}

cmd=${1:-}
[[ -n $cmd ]] || { sed -n '2,21p' "$0"; exit 2; }
shift
name=${1:-soperator}
case $cmd in
  build) cmd_build ;;
  env) cmd_env ;;
  up) cmd_up "$name" ;;
  kubeconfig) cmd_kubeconfig "$name" ;;
  status) cmd_status "$name" ;;
  load) shift || true; cmd_load "$name" "$@" ;;
  down) cmd_down "$name" ;;
  engine-stop) SOPERATOR_ENGINE=kind "$hack/images.sh" stop ;;
  -h | --help) sed -n '2,21p' "$0" ;;
  *) die "unknown command $cmd (hack/kind.sh --help)" ;;
esac
