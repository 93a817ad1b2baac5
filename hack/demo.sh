#!/usr/bin/env bash
# `make demo`: the local Kubernetes, the collection built and installed like a user would, and site.yml
# converging the CPU example cluster. Prints what was created and how to look at it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"

python3 hack/localcluster.py up
export K8S_AUTH_KUBECONFIG
K8S_AUTH_KUBECONFIG=$(python3 hack/localcluster.py kubeconfig)
k8s_version=$(sed -n 's/^KUBERNETES_VERSION=//p' hack/versions.env)
kubectl="$HOME/.cache/soperator/kubernetes-$k8s_version/bin/kubectl --kubeconfig $K8S_AUTH_KUBECONFIG"

# Build and install the collection artifact (not the checkout), as `ansible-galaxy collection install` users get it.
dist=$root/.cache/demo/dist
rm -rf "$dist" && mkdir -p "$dist"
ansible-galaxy collection build --force --output-path "$dist" . >/dev/null
export ANSIBLE_COLLECTIONS_PATH=$root/.cache/demo/collections
ansible-galaxy collection install --force --no-deps -p "$ANSIBLE_COLLECTIONS_PATH" "$dist"/soperator-slurm-*.tar.gz >/dev/null
echo "installed $(basename "$dist"/soperator-slurm-*.tar.gz) into $ANSIBLE_COLLECTIONS_PATH"

ansible-playbook soperator.slurm.site \
  -e "{\"soperator_clusters\": [{\"manifest_file\": \"$root/examples/cpu-cluster.yaml\", \"wait\": true}]}"

echo
echo "=== what was created (namespace slurm) ==="
$kubectl get slurmclusters,nodesets -n slurm
$kubectl get statefulsets,services,pods,persistentvolumeclaims,configmaps,secrets -n slurm
cat <<TXT

Look around:
  export KUBECONFIG=$K8S_AUTH_KUBECONFIG
  alias kubectl='$HOME/.cache/soperator/kubernetes-$k8s_version/bin/kubectl'
  kubectl get configmap demo-slurm-config -n slurm -o jsonpath='{.data.slurm\.conf}'
  kubectl explain slurmcluster.spec.partitions
Scale: change "replicas:" of the NodeSet in examples/cpu-cluster.yaml and rerun make demo (site.yml treats the
file as the source of truth; with the operator, "kubectl scale nodeset cpu -n slurm --replicas=3" is enough).
The pods run on kwok's fake nodes: Kubernetes objects are real, no Slurm daemon runs yet.
Stop everything: make cluster-down
TXT
