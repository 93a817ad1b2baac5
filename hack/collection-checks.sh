#!/usr/bin/env bash
# ansible-test sanity on the collection laid out as ansible_collections/soperator/slurm (no ignore files),
# then `ansible-galaxy collection build`, an install into a temporary path, and `ansible-doc` of every module, inventory,
# connection and filter.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One run at a time on a machine: ansible-test keeps its sanity venvs in ~/.ansible/test, and two runs building one
# at once break it (a pip temp file missing: a cold make test failed so beside a developer's run).
mkdir -p "$HOME/.ansible"
exec 8>"$HOME/.ansible/.soperator-collection-checks.lock"
flock 8

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

# Build the artifact users get from what git tracks, install it, and run every check on the installed tree
# (laid out as ansible_collections/soperator/slurm, as ansible-test requires).
src=$work/src
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$src"
ansible-galaxy collection build --output-path "$work/dist" "$src" >/dev/null
artifact=$(ls "$work"/dist/soperator-slurm-*.tar.gz)
echo "built $(basename "$artifact") ($(du -k "$artifact" | cut -f1) KiB, $(tar -tzf "$artifact" | grep -vc '/$') files)"
ansible-galaxy collection install --force --no-deps -p "$work/installed" "$artifact" >/dev/null
dest=$work/installed/ansible_collections/soperator/slurm
if [ -d "$dest/tests/sanity" ] && grep -rqv '^[[:space:]]*$' "$dest/tests/sanity"; then
  echo "sanity ignore files must stay empty"; exit 1
fi
(cd "$dest" && ansible-test sanity --python "$(python -c 'import sys;print("%d.%d"%sys.version_info[:2])')" \
   --requirements --color no 2>&1 | grep -v "^WARNING: Skipping sanity test '.*' on unsupported Python")

for m in "$dest"/plugins/modules/*.py; do
  name=soperator.slurm.$(basename "$m" .py)
  ANSIBLE_COLLECTIONS_PATH="$work/installed" ansible-doc "$name" >/dev/null
  echo "ansible-doc $name: ok"
done
# The other plugins with documentation: the jail's inventory and connection, the filters (their .yml files).
for kind in inventory connection filter; do
  for p in "$dest/plugins/$kind"/*.py "$dest/plugins/$kind"/*.yml; do
    [ -e "$p" ] || continue
    case $kind:$p in filter:*.py) continue ;; esac  # a filter's documentation is its .yml file
    name=soperator.slurm.$(basename "${p%.*}")
    ANSIBLE_COLLECTIONS_PATH="$work/installed" ansible-doc -t "$kind" "$name" >/dev/null
    echo "ansible-doc -t $kind $name: ok"
  done
done
ANSIBLE_COLLECTIONS_PATH="$work/installed" ansible-doc -t role -l soperator.slurm | sed 's/^/role: /'
