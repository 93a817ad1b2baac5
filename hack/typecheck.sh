#!/usr/bin/env bash
# mypy over the operator runtime and the collection's pure core (and, through their imports, its adapters).
set -euo pipefail
cd "$(dirname "$0")/.."
collections=$(hack/collection-link.sh)
mods=()
# Every module of module_utils, in its folder (api/, render/, ...): path -> dotted name.
while IFS= read -r f; do
  f=${f%.py}
  mods+=(-m "ansible_collections.soperator.slurm.${f//\//.}")
done < <(find plugins/module_utils -name '*.py' ! -name '__init__.py' | sort)
MYPYPATH=$collections:operator exec "${MYPY:-mypy}" --config-file mypy.ini -p soperator_operator "${mods[@]}"
