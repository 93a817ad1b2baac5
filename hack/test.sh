#!/usr/bin/env bash
# The one test command (`make test`, `.ci/run`). Stages in order; the local cluster is started once and
# always stopped at the end (unless the developer already had one running, which is then left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
py=.venv/bin/python

started_cluster=0
cleanup() {
  if [ "$started_cluster" = 1 ]; then python3 hack/localcluster.py down || true; fi
}
trap cleanup EXIT

stage() { printf '\n=== %s ===\n' "$*"; }

if [ -z "${SOPERATOR_KUBECONFIG:-}" ] && ! python3 hack/localcluster.py status >/dev/null 2>&1; then
  stage "local cluster up"
  python3 hack/localcluster.py up
  started_cluster=1
fi

stage "pytest: unit and integration"
SOPERATOR_KEEP_CLUSTER=1 $py -m pytest -q -ra tests/unit tests/integration
