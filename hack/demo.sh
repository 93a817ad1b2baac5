#!/usr/bin/env bash
# `make demo`: the local Kubernetes with a real node, the project's images, the collection built and installed
# like a user would, and site.yml converging the CPU example until sinfo shows the workers idle; then a job
# step and a batch job through the jail.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"
ns=slurm

if python3 hack/localcluster.py status >/dev/null 2>&1 &&
   ! grep -q '"real_node"' "${SOPERATOR_LOCALCLUSTER_DIR:-$HOME/.local/state/soperator/localcluster}/state.json"; then
  echo "demo: a local cluster without a real node is running; restarting it with one"
  python3 hack/localcluster.py down
fi
t0=$(date +%s)
python3 hack/localcluster.py up --real-node
export K8S_AUTH_KUBECONFIG
K8S_AUTH_KUBECONFIG=$(python3 hack/localcluster.py kubeconfig)
k8s_version=$(sed -n 's/^KUBERNETES_VERSION=//p' hack/versions.env)
kubectl="$HOME/.cache/soperator/kubernetes-$k8s_version/bin/kubectl --kubeconfig $K8S_AUTH_KUBECONFIG"

# The images (built once, cached), loaded into the real node's containerd: there is no registry.
hack/images.sh build save
mapfile -t archives < <(hack/images.sh archives)
python3 hack/localcluster.py import-image "${archives[@]}"

# The collection artifact (not the checkout), as `ansible-galaxy collection install` users get it.
dist=$root/.cache/demo/dist
rm -rf "$dist" && mkdir -p "$dist"
ansible-galaxy collection build --force --output-path "$dist" . >/dev/null
export ANSIBLE_COLLECTIONS_PATH=$root/.cache/demo/collections
ansible-galaxy collection install --force --no-deps -p "$ANSIBLE_COLLECTIONS_PATH" "$dist"/soperator-slurm-*.tar.gz >/dev/null
echo "installed $(basename "$dist"/soperator-slurm-*.tar.gz) into $ANSIBLE_COLLECTIONS_PATH"

t_apply=$(date +%s)
ansible-playbook soperator.slurm.site \
  -e "{\"soperator_clusters\": [{\"manifest_file\": \"$root/examples/cpu-cluster-local.yaml\", \"wait\": true}]}"

slurm() { $kubectl exec -n "$ns" demo-controller-0 -c slurmctld -- "$@"; }
jail() { $kubectl exec -n "$ns" demo-login-0 -c sshd -- chroot /mnt/jail sh -c "$1"; }
echo "waiting until sinfo shows the workers idle..."
for _ in $(seq 1 120); do
  [ "$(slurm sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 2
done
echo "ready: $(( $(date +%s) - t0 )) s in all, $(( $(date +%s) - t_apply )) s from applying the example"

echo; echo "=== kubectl get slurmclusters,nodesets,pods -n $ns ==="
$kubectl get slurmclusters,nodesets -n "$ns"
$kubectl get pods -n "$ns" -o wide
echo; echo "=== sinfo ==="
slurm sinfo
echo; echo "=== srun -N2 hostname (a step on each worker, inside the jail) ==="
jail "timeout 120 srun -N2 --immediate=60 sh -c 'echo \$(hostname): / is \$(cat /etc/soperator/jail-image)'"
echo; echo "=== sbatch through the jail ==="
jail "cd /root && printf '#!/bin/sh\necho hello from \$(hostname) at \$(date)\n' > hello.sh &&
      timeout 150 sbatch --wait -o /root/hello.out hello.sh && echo '/root/hello.out in the jail:' && cat /root/hello.out"
cat <<TXT

Look around (in a new shell, from $root):
  . hack/env.sh        # ansible-playbook, this checkout's collection, the pinned kubectl, KUBECONFIG
  kubectl exec -it -n $ns demo-login-0 -c sshd -- chroot /mnt/jail bash -l    # a shell in the jail: sinfo, srun, sbatch
  kubectl get configmap demo-slurm-config -n $ns -o jsonpath='{.data.slurm\.conf}'
  kubectl explain slurmcluster.spec.partitions
Batch output lands in the jail (here /root/hello.out), shared by every worker and login pod.
Scale: change "replicas:" in examples/cpu-cluster-local.yaml and rerun make demo (nodes are drained before
their pods go). With the operator, "kubectl scale nodeset cpu -n $ns --replicas=3" is enough.
Stop everything: make cluster-down
TXT
