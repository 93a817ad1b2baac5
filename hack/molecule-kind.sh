#!/usr/bin/env bash
# molecule's `kind` scenario, for users with Docker and kind. Where either is missing it says so and skips.
set -euo pipefail
cd "$(dirname "$0")/.."
why=()
command -v kind >/dev/null 2>&1 || why+=("kind is not installed (go install sigs.k8s.io/kind@latest)")
if ! command -v docker >/dev/null 2>&1; then
  why+=("docker is not installed")
elif ! docker info >/dev/null 2>&1; then
  why+=("no Docker engine answers (docker info failed)")
fi
if [ ${#why[@]} -gt 0 ]; then
  printf 'molecule kind scenario SKIPPED: %s\n' "$(IFS=';'; echo "${why[*]}")"
  exit 0
fi
hack/images.sh build save  # the archives create.yml loads into kind
exec .venv/bin/molecule test -s kind
