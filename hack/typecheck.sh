#!/usr/bin/env bash
# mypy over the operator runtime and the collection's pure core (and, through their imports, its adapters).
set -euo pipefail
cd "$(dirname "$0")/.."
collections=$(hack/collection-link.sh)
mods=()
for f in plugins/module_utils/[a-z]*.py; do
  mods+=(-m "ansible_collections.soperator.slurm.plugins.module_utils.$(basename "$f" .py)")
done
MYPYPATH=$collections:operator exec "${MYPY:-mypy}" --config-file mypy.ini -p soperator_operator "${mods[@]}"
