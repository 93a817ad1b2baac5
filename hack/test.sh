#!/usr/bin/env bash
# The one test command (`make test`, `.ci/run`). Stages in order; the local cluster is started once and
# always stopped at the end (unless the developer already had one running, which is then left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$root/.cache/collections"
export ANSIBLE_PYTHON_INTERPRETER="$root/.venv/bin/python"
py=.venv/bin/python
mkdir -p .cache/collections/ansible_collections/soperator
ln -sfn "$root" .cache/collections/ansible_collections/soperator/slurm

started_cluster=0
cleanup() {
  if [ "$started_cluster" = 1 ]; then python3 hack/localcluster.py down || true; fi
}
trap cleanup EXIT
stage() { printf '\n=== %s ===\n' "$*"; }

stage "ansible-lint (production profile)"
ansible-lint

stage "spank_chroot: C unit tests, also under ASan/UBSan"
make -C spank_chroot test asan

stage "unit tests (branch coverage of the pure core >= 90%)"
$py -m pytest -q -ra -p no:cacheprovider tests/unit --cov --cov-config=.coveragerc --cov-report=term \
  --cov-fail-under=90

if [ -z "${SOPERATOR_KUBECONFIG:-}" ] && ! python3 hack/localcluster.py status >/dev/null 2>&1; then
  stage "local cluster up"
  python3 hack/localcluster.py up
  started_cluster=1
fi
kubeconfig=${SOPERATOR_KUBECONFIG:-$(python3 hack/localcluster.py kubeconfig)}
export K8S_AUTH_KUBECONFIG=$kubeconfig
k8s_version=$(sed -n 's/^KUBERNETES_VERSION=//p' hack/versions.env)
export KUBECTL="$HOME/.cache/soperator/kubernetes-$k8s_version/bin/kubectl"

stage "integration tests against the real kube-apiserver"
SOPERATOR_KEEP_CLUSTER=1 $py -m pytest -q -ra -p no:cacheprovider tests/integration

stage "operator: runtime unit tests and runs against the real kube-apiserver"
SOPERATOR_KEEP_CLUSTER=1 $py -m pytest -q -ra -p no:cacheprovider tests/operator

stage "real Slurm 24.11: the SPANK jail with munge, slurmctld and two slurmd"
hack/slurm-rootfs.sh
$py -m pytest -q -ra -p no:cacheprovider tests/slurm

stage "login into the jail: Debian's OpenSSH with the rendered sshd_config"
$py -m pytest -q -ra -p no:cacheprovider tests/login

stage "images: entrypoints on the host, then the five images built (cached) and run"
$py -m pytest -q -ra -p no:cacheprovider tests/images

stage "real node: kubelet, containerd, CNI, kube-proxy, CoreDNS on a private local cluster"
hack/build-binaries.sh node
$py -m pytest -q -ra -p no:cacheprovider tests/realnode

stage "end to end: Slurm jobs in pods on the real node, through the jail; scale, reconfigure, tear down"
$py -m pytest -q -ra -s -p no:cacheprovider tests/e2e

stage "molecule default scenario"
molecule test -s default

stage "molecule kind scenario"
hack/molecule-kind.sh

stage "collection: ansible-test sanity, galaxy build, install, ansible-doc"
hack/collection-checks.sh
