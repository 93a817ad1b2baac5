#!/usr/bin/env bash
# The one test command (`make test`, `.ci/run`). Stages in order; the local cluster is started once and
# always stopped at the end (unless the developer already had one running, which is then left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"
ANSIBLE_COLLECTIONS_PATH=$(hack/collection-link.sh)
export ANSIBLE_COLLECTIONS_PATH
export ANSIBLE_PYTHON_INTERPRETER="$root/.venv/bin/python"
py=.venv/bin/python

started_cluster=0 started_real=0
declare -A track_pid=() track_log=()
# The image engine is shared by the tracks below (the image tests beside the end-to-end suite, which builds images
# too): while it is held, a suite's `hack/images.sh stop` leaves it running; it is stopped at the end if it was not
# running before.
engine_was_up=0
if command -v docker >/dev/null && DOCKER_HOST=$(hack/images.sh env | sed 's/^export DOCKER_HOST=//') \
  docker version >/dev/null 2>&1; then engine_was_up=1; fi
export SOPERATOR_ENGINE_HELD=images
cleanup() {
  # A failed stage ends the script: a track still running is interrupted (SIGINT: pytest's fixtures stop daemons).
  local pid
  for pid in "${track_pid[@]}"; do pkill -INT -P "$pid" || true; wait "$pid" 2>/dev/null || true; done
  if [ "$started_real" = 1 ]; then SOPERATOR_LOCALCLUSTER_DIR=$real_dir python3 hack/localcluster.py down || true; fi
  if [ "$started_cluster" = 1 ]; then python3 hack/localcluster.py down || true; fi
  if [ "$engine_was_up" = 0 ]; then SOPERATOR_ENGINE_HELD='' hack/images.sh stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
stage() { printf '\n=== %s === (at %d s)\n' "$*" "$SECONDS"; }

# Tracks: stages that run beside the main sequence (2 cores; most stages mostly wait on daemons), each in the
# background with its output kept in a log that is printed when the track is joined.
start_track() {  # start_track NAME FUNCTION
  track_log[$1]=$(mktemp)
  (set -e; "$2") >"${track_log[$1]}" 2>&1 &
  track_pid[$1]=$!
}
join_track() {  # join_track NAME: wait for it, print its output, stop here if it failed
  local rc=0
  wait "${track_pid[$1]}" || rc=$?
  unset "track_pid[$1]"
  stage "the $1 track, which ran beside the stages above (exit $rc)"
  cat "${track_log[$1]}"
  rm -f "${track_log[$1]}"
  [ "$rc" = 0 ] || { echo "the $1 track failed (exit $rc)" >&2; exit "$rc"; }
}

# The static track (one core) beside the unit tests (the other).
static_track() {
  stage "ansible-lint (production profile)"
  ansible-lint
  stage "ruff and mypy"
  ruff check .
  hack/typecheck.sh
  stage "collection: ansible-test sanity, galaxy build, install, ansible-doc"
  hack/collection-checks.sh
  stage "spank_chroot: C unit tests, also under ASan/UBSan"
  make -C spank_chroot test asan
}
start_track static static_track

stage "unit tests (branch coverage of the pure core >= 90%)"
$py -m pytest -q -ra -p no:cacheprovider tests/unit --cov --cov-config=.coveragerc --cov-report=term \
  --cov-fail-under=90
# The collection's own checks early: a sanity finding (pep8, validate-modules) should not wait for an hour of
# cluster tests to be reported.
join_track static

# The side track: real Slurm and Debian's OpenSSH on this machine (no Kubernetes), then the images run on the
# host, then kind (its own engine, its own three kubelets). These mostly wait (on daemons, on Slurm's timers, on
# kubelets), so they run beside the cluster stages below, which mostly wait too; its output is printed when it is
# joined, after the end-to-end stage. In sequence they made a cold run 70 minutes (the kind stage 6, the images 6.5).
side_track() {
  stage "the exporter: Go unit tests on recorded Slurm outputs, static build (cached)"
  hack/build-binaries.sh slurm-exporter
  stage "real Slurm 24.11: the SPANK jail with munge, slurmctld and two slurmd; accounting (MariaDB, slurmdbd), slurmrestd, the exporter"
  hack/slurm-rootfs.sh
  $py -m pytest -q -ra -p no:cacheprovider tests/slurm
  stage "login into the jail: Debian's OpenSSH with the rendered sshd_config"
  $py -m pytest -q -ra -p no:cacheprovider tests/login
  stage "images: built (cached; the main sequence builds them), entrypoints on the host, then the images run"
  hack/images.sh build save
  $py -m pytest -q -ra -p no:cacheprovider tests/images
  stage "molecule kind scenario, then the README's kind lines and the multi-node steps (kind from local parts: docs/kind.md)"
  hack/molecule-kind.sh
}
start_track side side_track

stage "real node: kubelet, containerd, CNI, kube-proxy, CoreDNS on a private local cluster (and a clean down)"
hack/build-binaries.sh node
$py -m pytest -q -ra -p no:cacheprovider tests/realnode

# One local cluster for every suite from here on, with a real node (so that real Slurm runs in pods): the one
# already running if any (make demo's), else started now and stopped at the end. A running cluster without a real
# node (make cluster-up) is used by the kwok suites and left alone; the real-node suites then get one of their own.
state_dir=${SOPERATOR_LOCALCLUSTER_DIR:-$HOME/.local/state/soperator/localcluster}
has_real_node() { grep -q '"real_node"' "$1/state.json" 2>/dev/null; }
real_dir=$state_dir
if [ -n "${SOPERATOR_KUBECONFIG:-}" ]; then
  real_dir=""
elif ! python3 hack/localcluster.py status >/dev/null 2>&1; then
  stage "local cluster up, with a real node"
  python3 hack/localcluster.py up --real-node
  started_cluster=1
elif ! has_real_node "$state_dir"; then
  real_dir=$root/.cache/test-realnode
  if ! SOPERATOR_LOCALCLUSTER_DIR=$real_dir python3 hack/localcluster.py status >/dev/null 2>&1; then
    stage "a second local cluster, with a real node (the running one has none)"
    SOPERATOR_LOCALCLUSTER_DIR=$real_dir python3 hack/localcluster.py up --real-node --nodes 1 --gpu-nodes 0
    started_real=1
  fi
fi
kubeconfig=${SOPERATOR_KUBECONFIG:-$(python3 hack/localcluster.py kubeconfig)}
export K8S_AUTH_KUBECONFIG=$kubeconfig
k8s_version=$(sed -n 's/^KUBERNETES_VERSION=//p' hack/versions.env)
export KUBECTL="$HOME/.cache/soperator/kubernetes-$k8s_version/bin/kubectl"

stage "images: built (cached), imported into the real node"
hack/images.sh build save
if [ -n "$real_dir" ]; then
  export SOPERATOR_E2E_DIR=$real_dir
  mapfile -t archives < <(hack/images.sh archives)
  SOPERATOR_LOCALCLUSTER_DIR=$real_dir python3 hack/localcluster.py import-image "${archives[@]}"
fi

stage "integration tests against the real kube-apiserver"
SOPERATOR_KEEP_CLUSTER=1 $py -m pytest -q -ra -p no:cacheprovider tests/integration

stage "operator: runtime unit tests, the runtime on the host, and upstream's ansible-operator"
hack/build-binaries.sh ansible-operator
SOPERATOR_KEEP_CLUSTER=1 $py -m pytest -q -ra -p no:cacheprovider tests/operator

stage "end to end on the real node: site.yml, then the operator image in-cluster, kubectl only"
$py -m pytest -q -ra -s -p no:cacheprovider --durations=30 tests/e2e

stage "molecule default scenario (real Slurm on the real node)"
K8S_AUTH_KUBECONFIG=${real_dir:+$real_dir/kubeconfig} molecule test -s default

join_track side
