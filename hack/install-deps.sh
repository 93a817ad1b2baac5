#!/usr/bin/env bash
# Debian packages the tests and tools need; installs only what is missing (CI runs on a fresh machine).
set -euo pipefail
pkgs=(openssl openssh-client openssh-server debootstrap rsync git make gcc libc6-dev iproute2 procps shellcheck
  # the real node (hack/localcluster.py up --real-node): container runtime, CNI plugins, kube-proxy's iptables,
  # and the static busybox the test image is made of
  containerd runc containernetworking-plugins iptables nftables conntrack busybox-static
  # Prometheus and promtool: the dashboard's queries are evaluated by a real Prometheus (tests/prometheus_server.py)
  prometheus)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
