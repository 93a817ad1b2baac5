# shellcheck shell=bash
# Sets up a shell for this checkout, e.g. a new one after `make demo`:   . hack/env.sh
# (bash; sourced, not run). Then ansible-playbook is the venv's (make venv), the collection soperator.slurm is this
# checkout (ANSIBLE_COLLECTIONS_PATH: hack/collection-link.sh), kubectl is the pinned one (make binaries) and, while
# the local cluster runs, KUBECONFIG is its kubeconfig (hack/localcluster.py env). Sourcing it twice changes nothing.
_soperator_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANSIBLE_COLLECTIONS_PATH=$("$_soperator_root/hack/collection-link.sh")
export ANSIBLE_COLLECTIONS_PATH
eval "$(python3 "$_soperator_root/hack/localcluster.py" env --path "$PATH")"
case ":$PATH:" in
  *":$_soperator_root/.venv/bin:"*) ;;
  *) export PATH="$_soperator_root/.venv/bin:$PATH" ;;
esac
unset _soperator_root
