#!/usr/bin/env bash
# ansible-test sanity on the collection laid out as ansible_collections/soperator/slurm (no ignore files),
# then `ansible-galaxy collection build`, an install into a temporary path, and `ansible-doc` of every module.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Sanity needs the collection at .../ansible_collections/<ns>/<name>; copy what git tracks (what users get).
dest=$work/src/ansible_collections/soperator/slurm
mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$dest"
test ! -e "$dest/tests/sanity" || { ls "$dest/tests/sanity"; ! grep -rqv '^\s*$' "$dest/tests/sanity" || {
  echo "sanity ignore files must stay empty"; exit 1; }; }
(cd "$dest" && ansible-test sanity --python "$(python -c 'import sys;print("%d.%d"%sys.version_info[:2])')" \
   --requirements --color no 2>&1 | grep -v "^WARNING: Skipping sanity test '.*' on unsupported Python" )

# Build and install the artifact users get, then read every module's docs from the installed copy.
(cd "$work" && ansible-galaxy collection build --output-path "$work/dist" "$dest" >/dev/null)
artifact=$(ls "$work"/dist/soperator-slurm-*.tar.gz)
echo "built $(basename "$artifact") ($(du -k "$artifact" | cut -f1) KiB)"
ansible-galaxy collection install --no-deps -p "$work/installed" "$artifact" >/dev/null
for m in "$work"/installed/ansible_collections/soperator/slurm/plugins/modules/*.py; do
  name=soperator.slurm.$(basename "$m" .py)
  ANSIBLE_COLLECTIONS_PATH="$work/installed" ansible-doc "$name" >/dev/null
  echo "ansible-doc $name: ok"
done
ANSIBLE_COLLECTIONS_PATH="$work/installed" ansible-doc -t role -l soperator.slurm | sed 's/^/role: /'
