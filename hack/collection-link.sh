#!/usr/bin/env bash
# This checkout as the collection soperator.slurm: .cache/collections/ansible_collections/soperator/slurm -> the
# checkout, what ANSIBLE_COLLECTIONS_PATH and Python's `import ansible_collections.soperator.slurm` need. Prints
# the collections path. The one place that makes the link: the Makefile (target `collection`), hack/env.sh,
# hack/test.sh, hack/typecheck.sh, tests/conftest.py and the benchmarks call it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=$root/.cache/collections
link=$base/ansible_collections/soperator/slurm
if [ "$(readlink "$link" 2>/dev/null)" != "$root" ]; then
  mkdir -p "$(dirname "$link")"
  ln -sfn "$root" "$link"
fi
echo "$base"
