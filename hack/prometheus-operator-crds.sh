#!/usr/bin/env bash
# Print the directory of prometheus-operator's CRDs (monitoring.coreos.com: ServiceMonitor, PodMonitor, ...) at the
# pinned version (hack/versions.env). The Go module github.com/prometheus-operator/prometheus-operator carries them
# in example/prometheus-operator-crd/; `go mod download` fetches it once from the Go module proxy into Go's module
# cache (read-only there; nothing is copied into this repository). The tests install them into the real
# kube-apiserver to validate the ServiceMonitor and PodMonitor the collection renders.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's/^PROMETHEUS_OPERATOR_VERSION=//p' "$here/versions.env")
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
PATH=$PATH:/usr/local/go/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dir=$(cd "$work" && go mod download -json "github.com/prometheus-operator/prometheus-operator@$version" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
crds=$dir/example/prometheus-operator-crd
[ -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ] || { echo "no CRDs in $dir" >&2; exit 1; }
echo "$crds"
