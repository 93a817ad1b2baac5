#!/usr/bin/env bash
# molecule's `kind` scenario (make test's kind stage, beside its end-to-end suite; molecule/kind): kind from local parts (make kind), the
# project's images (make images), then `molecule test -s kind`, then the README's "Try it on kind" lines as written
# with the multi-node tests on their cluster before its last line, hack/kind.sh down (tests/kind).
#
# Docker: the engine DOCKER_HOST names or the system's, else the project's own engine for kind, which root starts
# (hack/kind.sh) and this script stops again if it started it. The scenario is skipped only where Docker cannot
# run at all: no engine answers and this user cannot start one (not root). It says why; under CI=true that skip
# is a failure, as for every other prerequisite (tests/prerequisites.py: a skipped suite is not a passed one).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$SECONDS

skip() {
  if [[ ${CI:-} == true ]]; then
    echo "molecule kind scenario FAILED: prerequisite missing under CI=true (a skip is not a pass): $*" >&2
    exit 1
  fi
  echo "molecule kind scenario SKIPPED: $*"
  exit 0
}

kind_engine=$(SOPERATOR_ENGINE=kind hack/images.sh env | sed 's/^export DOCKER_HOST=//')
engine_answers() { DOCKER_HOST=$1 docker info >/dev/null 2>&1; }
stop_engine=0
if [[ -n ${DOCKER_HOST:-} ]]; then
  engine_answers "$DOCKER_HOST" || skip "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST"
elif ! { [[ -S /var/run/docker.sock ]] && engine_answers unix:///var/run/docker.sock; }; then
  if ! engine_answers "$kind_engine"; then
    [[ $(id -u) == 0 ]] || skip "no Docker engine answers (DOCKER_HOST unset, /var/run/docker.sock silent)" \
      "and starting the project's own (dockerd) needs root"
    stop_engine=1
  fi
fi
cleanup() {
  if ((stop_engine)); then SOPERATOR_ENGINE=kind hack/images.sh stop || true; fi
}
trap cleanup EXIT

echo "=== kind and its node image (make kind; cached) ==="
hack/kind.sh build
eval "$(hack/kind.sh env)"
echo "=== the project's images (cached) ==="
hack/images.sh build save
echo "=== molecule test -s kind (prepared in $((SECONDS - started)) s) ==="
export SOPERATOR_KIND_DIR=${SOPERATOR_KIND_DIR:-$HOME/.local/state/soperator/kind}
export PATH="$root/.venv/bin:$PATH"
molecule_started=$SECONDS
molecule test -s kind
echo "molecule kind scenario passed in $((SECONDS - molecule_started)) s"
echo "=== the README's \"Try it on kind\" lines, as written in a new shell, and the multi-node tests on their cluster ==="
readme_started=$SECONDS
python -m pytest -q -s -ra -p no:cacheprovider tests/kind   # -s: the figures (kind-multinode: lines)
echo "README lines passed in $((SECONDS - readme_started)) s; this stage took $((SECONDS - started)) s in all"
