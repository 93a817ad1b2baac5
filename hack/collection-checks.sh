#!/usr/bin/env bash
# ansible-test sanity on the collection laid out as ansible_collections/soperator/slurm (no ignore files),
# then `ansible-galaxy collection build`, an install into a temporary path, and `ansible-doc` of every module.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ansible-test bootstraps pip in its sanity venvs with a get-pip script from a host this machine cannot
# reach; a cached script is used instead when present. Ours installs pip with ensurepip and lets it fetch the
# pinned packages from PyPI (get-pip's --no-setuptools/--no-wheel mean "skip those": dropping them does that).
pipver=$(python - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
import sys
print(get_venv_packages(NativePythonConfig(version="%d.%d" % sys.version_info[:2], path=sys.executable))["pip"])
PY
)
getpip=$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py
if [ ! -s "$getpip" ]; then
  mkdir -p "$(dirname "$getpip")"
  cat >"$getpip" <<'PY'
# soperator.slurm stand-in for ansible-test's get-pip bootstrap (its download host is unreachable here).
import subprocess
import sys

if __name__ == "__main__":
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "-q"] + args))
PY
fi

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
