#!/usr/bin/env bash
# Build the operator image (operator/Containerfile) with the project's own Docker engine (hack/images.sh), FROM
# the local Debian trixie base, kubernetes.core taken from the `ansible` wheel (no Galaxy), and save it to
# ~/.cache/soperator/images/operator-<version>.tar. The host's local CA certificates go into the build context
# (a TLS-intercepting proxy in front of PyPI is common in companies, and here).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version: *//p' galaxy.yml)
cache=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
archive=$cache/images/operator-$version.tar
# The image is made of what git tracks: unchanged inputs reuse the saved archive (the tests build it twice).
inputs=$( { git ls-files -z | xargs -0 sha256sum; cat /usr/local/share/ca-certificates/*.crt 2>/dev/null; } |
          sha256sum | cut -c1-16)
if [ -f "$archive" ] && [ "$(cat "$archive.inputs" 2>/dev/null)" = "$inputs" ]; then
  echo "operator image soperator/operator:$version: up to date (inputs $inputs) in $archive"
  # A running engine (the image tests') gets the image too, should its store have lost it.
  if [ -S /run/soperator-docker/docker.sock ] &&
     ! docker -H unix:///run/soperator-docker/docker.sock image inspect "soperator/operator:$version" >/dev/null 2>&1; then
    docker -H unix:///run/soperator-docker/docker.sock load -q -i "$archive" >/dev/null
  fi
  exit 0
fi
# The engine's lock for the whole build (hack/images.sh takes the same one): another build or an image test
# must not stop the engine or replace the base image under this one.
mkdir -p "$cache"
exec 9>"$cache/.images.lock"
flock 9
export SOPERATOR_IMAGES_LOCK_HELD=1
hack/images.sh build
running=0
[ -S /run/soperator-docker/docker.sock ] && docker -H unix:///run/soperator-docker/docker.sock info >/dev/null 2>&1 && running=1
[ "$running" = 1 ] || hack/images.sh start >/dev/null
eval "$(hack/images.sh env)"
base=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^soperator/debian-trixie-minbase:' | head -n 1)
ctx=$(mktemp -d /tmp/soperator-operator-context.XXXXXX)
trap 'rm -rf "$ctx"; [ "$running" = 1 ] || hack/images.sh stop >/dev/null' EXIT
git ls-files -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$ctx"
cp /usr/local/share/ca-certificates/*.crt "$ctx/operator/ca-certificates/" 2>/dev/null || true
DOCKER_BUILDKIT=0 docker build -q -f "$ctx/operator/Containerfile" --build-arg BASE_IMAGE="$base" \
  --build-arg COLLECTION_SOURCE=pypi -t "soperator/operator:$version" "$ctx" >/dev/null
mkdir -p "$cache/images"
docker save -o "$archive" "soperator/operator:$version"
echo "$inputs" >"$archive.inputs"
echo "operator image soperator/operator:$version ($(docker image inspect -f '{{.Size}}' "soperator/operator:$version" | awk '{printf "%d MB", $1/1e6}')) saved to $cache/images/operator-$version.tar"
