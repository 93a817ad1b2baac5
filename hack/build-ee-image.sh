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
inputs=$( { sha256sum images/ee/*; cat "$cache/images/operator-$version.tar.inputs"; } | sha256sum | cut -c1-16)
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
  docker image inspect "$tag" >/dev/null 2>&1 || docker load -q -i "$archive" >/dev/null
  echo "EE image $tag: up to date (inputs $inputs) in $archive"
  exit 0
fi
docker image inspect "soperator/operator:$version" >/dev/null 2>&1 ||
  docker load -q -i "$cache/images/operator-$version.tar" >/dev/null
DOCKER_BUILDKIT=0 docker build -q --build-arg OPERATOR_IMAGE="soperator/operator:$version" -t "$tag" -f images/ee/Containerfile images/ee >/dev/null
docker save -o "$archive.tmp" "$tag"
mv "$archive.tmp" "$archive"
echo "$inputs" >"$archive.inputs"
echo "EE image $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MB", $1/1e6}')) saved to $archive"
