#!/usr/bin/env bash
# Build the Execution Environment image soperator/ee:<version> (images/ee/Containerfile) FROM the operator image
# (hack/build-operator-image.sh: the project's own Debian trixie base, the collection at the built version), with
# the project's own Docker engine, and save it to ~/.cache/soperator/images/ee-<version>.tar. Cached: unchanged
# inputs (images/ee and the operator image's inputs) reuse the saved archive. Leaves the image in the engine.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version: *//p' galaxy.yml)
cache=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
archive=$cache/images/ee-$version.tar
tag=soperator/ee:$version
hack/build-operator-image.sh >/dev/null
inputs=$( { sha256sum images/ee/*; cat "$cache/images/operator-$version.tar.inputs";
            cat /usr/local/share/ca-certificates/*.crt 2>/dev/null; } | sha256sum | cut -c1-16)
# The engine's lock (hack/images.sh takes the same one): nobody stops the engine under this build.
mkdir -p "$cache"
exec 9>"$cache/.images.lock"
flock 9
export SOPERATOR_IMAGES_LOCK_HELD=1
running=0
[ -S /run/soperator-docker/docker.sock ] && docker -H unix:///run/soperator-docker/docker.sock info >/dev/null 2>&1 && running=1
[ "$running" = 1 ] || hack/images.sh start >/dev/null
eval "$(hack/images.sh env)"
trap '[ "$running" = 1 ] || hack/images.sh stop >/dev/null' EXIT
if [ -f "$archive" ] && [ "$(cat "$archive.inputs" 2>/dev/null)" = "$inputs" ]; then
  # The engine's image of that tag may be another build's (another checkout): the archive's is loaded then.
  [ "$(docker image inspect -f '{{index .Config.Labels "dev.soperator.inputs"}}' "$tag" 2>/dev/null)" = "$inputs" ] ||
    docker load -q -i "$archive" >/dev/null
  echo "EE image $tag: up to date (inputs $inputs) in $archive"
  exit 0
fi
# The operator archive is this checkout's (its inputs are part of ours); the engine's tag may be another's.
docker load -q -i "$cache/images/operator-$version.tar" >/dev/null
# The context: images/ee and the host's local CA certificates (a TLS-intercepting proxy in front of PyPI).
ctx=$(mktemp -d /tmp/soperator-ee-context.XXXXXX)
trap 'rm -rf "$ctx"; [ "$running" = 1 ] || hack/images.sh stop >/dev/null' EXIT
cp -a images/ee/. "$ctx/"
mkdir -p "$ctx/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$ctx/ca-certificates/" 2>/dev/null || true
DOCKER_BUILDKIT=0 docker build -q --build-arg OPERATOR_IMAGE="soperator/operator:$version" \
  --label "dev.soperator.inputs=$inputs" -t "$tag" \
  -f "$ctx/Containerfile" "$ctx" >/dev/null
docker save -o "$archive.tmp" "$tag"
mv "$archive.tmp" "$archive"
echo "$inputs" >"$archive.inputs"
echo "EE image $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MB", $1/1e6}')) saved to $archive"
