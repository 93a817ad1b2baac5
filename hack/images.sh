#!/usr/bin/env bash
# Build the Slurm container images (images/) with a Docker engine of our own, and save them as archives.
#
# Usage: hack/images.sh COMMAND...     (several commands run in order with one engine start)
#   build    debootstrap (cached) a Debian trixie minbase rootfs, import it, build every image whose inputs
#            changed, in dependency order: slurm-base -> controller, worker, login, jail, slurmdbd, slurmrestd,
#            slurm-exporter; populate-jail, mariadb, backup, sssd, openldap (a test directory)
#   save     write each image as a docker-archive to ~/.cache/soperator/images/<name>-<version>.tar
#            (`ctr images import` loads them into containerd; `docker load` into Docker)
#   start    start the engine and leave it running (prints the DOCKER_HOST to use)
#   stop     stop the engine and remove what it leaves on the host: its bridge, its iptables rules,
#            its cgroup directories (alias: clean); a no-op while SOPERATOR_ENGINE_HELD names this engine
#   shell    start the engine, open $SHELL with DOCKER_HOST set, stop the engine when the shell exits
#   env      print `export DOCKER_HOST=...` for the engine
#   list     the images this script builds, one `name tag` per line
#   archives the archive paths `save` writes (the images pods run), one per line: what a node imports
# `build` and `save` stop the engine at the end unless it was already running (or SOPERATOR_KEEP_ENGINE=1).
#
# Environment:
#   SOPERATOR_CACHE      cache root (default ~/.cache/soperator): rootfs tarball, engine data, image archives
#   DEBIAN_MIRROR        Debian mirror for debootstrap and apt in the builds (default http://deb.debian.org/debian)
#   BASE_IMAGE           build FROM this image instead of the local trixie minbase (must already be in the
#                        engine: `docker load`/`docker import` it first). Debian >= trixie or Ubuntu >= 24.04.
#   SLURM_APT_SOURCE     an extra apt source line for the Slurm packages (default: none, the base's own)
#   SLURM_APT_KEY        path of the armored key of that source (copied into the build context)
#   SLURM_VERSION        pin the Slurm packages to this Debian version (default: the newest available)
#   SOPERATOR_ENGINE     which of the project's engines: `images` (default) or `kind`, a second one that runs only
#                        kind clusters (hack/kind.sh), so that stopping the image builds' engine never stops them
#   SOPERATOR_ENGINE_HELD  an engine (`images` or `kind`) whose lifecycle the caller owns: `stop` leaves it running.
#                        make test sets it for its tracks, which share the engine: one suite's `stop` would remove
#                        another's containers mid-test.
#
# Needs root. Debian packages docker.io (dockerd, containerd, runc), debootstrap, zstd, iptables are installed
# when missing. Builds use the classic builder (DOCKER_BUILDKIT=0): Docker 20.10 here has no buildx.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE_ROOT=${SOPERATOR_CACHE:-$HOME/.cache/soperator}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
VERSION=$(sed -n 's/^version: *//p' "$ROOT/galaxy.yml")
SUITE=trixie
# Bump when the base recipe changes in a way the variables below do not show.
BASE_RECIPE=2

# The engine: every path is our own, so it never meets another Docker or containerd on the host. Each of the
# project's engines has its own paths, bridge, address pool (of its default bridge and user-defined networks),
# cgroup parent and iptables rule tag.
# The kind engine's runtime is runc behind hack/kind/runc-bounded: kind's --privileged nodes would otherwise ask
# Docker 20.10 for capabilities this host's root lacks.
case ${SOPERATOR_ENGINE:-images} in
  images) ENGINE_SUFFIX="" BRIDGE=soperator0 BRIDGE_ADDR=172.31.255.1/24 POOL=172.31.0.0/16 RUNTIME=(runc) ;;
  kind) ENGINE_SUFFIX=-kind BRIDGE=soperator1 BRIDGE_ADDR=172.30.255.1/24 POOL=172.30.0.0/16
    RUNTIME=(soperator-runc --add-runtime "soperator-runc=$ROOT/hack/kind/runc-bounded") ;;
  *) echo "images: unknown SOPERATOR_ENGINE=$SOPERATOR_ENGINE (images or kind)" >&2; exit 2 ;;
esac
ENGINE_DATA=$CACHE_ROOT/docker$ENGINE_SUFFIX
ENGINE_RUN=/run/soperator-docker$ENGINE_SUFFIX
ENGINE_SOCK=$ENGINE_RUN/docker.sock
ENGINE_PID=$ENGINE_RUN/dockerd.pid
ENGINE_LOG=$CACHE_ROOT/dockerd$ENGINE_SUFFIX.log
CGROUP_PARENT=soperator-docker$ENGINE_SUFFIX
RULE_TAG=soperator-images$ENGINE_SUFFIX
export DOCKER_HOST=unix://$ENGINE_SOCK
# Debian's client (the docker.io package), whatever else is first on PATH.
DOCKER=/usr/bin/docker
export DOCKER_BUILDKIT=0

# name, directory under images/, parent image name (built first; "" = the base image)
IMAGES=(
  "slurm-base images/slurm-base -"
  "slurm-controller images/controller slurm-base"
  "slurm-worker images/worker slurm-base"
  "slurm-login images/login slurm-base"
  "jail images/jail slurm-base"
  "populate-jail images/populate-jail -"
  "slurmdbd images/slurmdbd slurm-base"
  "slurmrestd images/slurmrestd slurm-base"
  "slurm-exporter images/slurm-exporter slurm-base"
  "mariadb images/mariadb -"
  "backup images/backup -"
  "sssd images/sssd -"
  "openldap images/openldap -"
)

log() { printf 'images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ensure_tools() {
  local missing=() pkg
  for pkg in docker.io debootstrap zstd iptables; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  }
}

# ------------------------------------------------------------------------------------------------ engine
engine_up() { [[ -S $ENGINE_SOCK ]] && "$DOCKER" version >/dev/null 2>&1; }

ipt_rule() {  # ipt_rule -C|-I|-D TABLE CHAIN ARGS...: one of our rules, tagged with a comment
  local op=$1 table=$2 chain=$3
  shift 3
  iptables -w -t "$table" "$op" "$chain" "$@" -m comment --comment "$RULE_TAG"
}

# Our iptables rules: masquerade outbound traffic of the engine's networks, accept their forwarding (the
# engine's own iptables management is off: it would add chains shared with any other Docker on the host).
net_rules() {
  local op=$1 rule
  for rule in "nat POSTROUTING -s $POOL ! -d $POOL -j MASQUERADE" \
              "filter FORWARD -s $POOL -j ACCEPT" \
              "filter FORWARD -d $POOL -j ACCEPT"; do
    # shellcheck disable=SC2086  # the rule is a word list
    if [[ $op == add ]]; then
      ipt_rule -C $rule 2>/dev/null || ipt_rule -I $rule
    else
      while ipt_rule -C $rule 2>/dev/null; do ipt_rule -D $rule; done
    fi
  done
}

engine_start() {
  if engine_up; then return 0; fi
  ensure_tools
  mkdir -p "$ENGINE_DATA" "$ENGINE_RUN"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$BRIDGE_ADDR" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  # Containers reach the Debian mirror through the host (left on: any container engine needs it).
  sysctl -qw net.ipv4.ip_forward=1
  net_rules add
  log "starting dockerd (data $ENGINE_DATA, socket $ENGINE_SOCK, log $ENGINE_LOG)"
  # setsid: the engine must not die with this script's process group (`start`, `shell`).
  setsid dockerd \
    --data-root "$ENGINE_DATA" --exec-root "$ENGINE_RUN/exec" --pidfile "$ENGINE_PID" -H "$DOCKER_HOST" \
    --bridge "$BRIDGE" --default-address-pool "base=$POOL,size=24" --iptables=false --ip-masq=false \
    --cgroup-parent "/$CGROUP_PARENT" --exec-opt native.cgroupdriver=cgroupfs --storage-driver overlay2 \
    --default-runtime "${RUNTIME[@]}" >>"$ENGINE_LOG" 2>&1 </dev/null 9>&- &
  local i
  for ((i = 0; i < 60; i++)); do
    engine_up && { log "dockerd ready"; return 0; }
    kill -0 $! 2>/dev/null || break
    sleep 1
  done
  tail -n 20 "$ENGINE_LOG" >&2
  die "dockerd did not start (log: $ENGINE_LOG)"
}

engine_stop() {
  if engine_up; then
    local ids=()
    mapfile -t ids < <("$DOCKER" ps -aq --filter label=soperator.test 2>/dev/null || true)
    ((${#ids[@]} == 0)) || "$DOCKER" rm -f "${ids[@]}" >/dev/null 2>&1 || true
    "$DOCKER" network prune -f >/dev/null 2>&1 || true
  fi
  if [[ -f $ENGINE_PID ]]; then
    local pid
    pid=$(cat "$ENGINE_PID")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping dockerd ($pid)"
      kill -TERM "$pid"
      local i
      for ((i = 0; i < 30 && $(kill -0 "$pid" 2>/dev/null && echo 1 || echo 0); i++)); do sleep 1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$ENGINE_PID"
  fi
  # What the engine leaves behind: our bridge (user-defined networks' br-* were pruned above), our iptables
  # rules, the cgroup directories under our parent (empty once every container is gone), its run dir.
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  net_rules del
  local dir
  for dir in /sys/fs/cgroup/*/"$CGROUP_PARENT" /sys/fs/cgroup/"$CGROUP_PARENT"; do
    [[ -d $dir ]] || continue
    find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || log "warning: could not remove $dir (busy)"
  done
  # Mounts below the run dir, deepest first: the netns dir, and the host's network namespace that a container on
  # the host's network (ansible-navigator's --net=host, tests/e2e/test_execution_environment.py) leaves as
  # exec/netns/default.
  local mnt
  while read -r mnt; do umount "$mnt" 2>/dev/null || umount -l "$mnt" || true; done < <(
    awk -v run="$ENGINE_RUN/" 'index($2, run) == 1 {print $2}' /proc/mounts | sort -r)
  rm -rf "$ENGINE_RUN"
}

# ------------------------------------------------------------------------------------------------ base image
base_tag() {
  local key
  key=$(printf '%s\n' "$SUITE" "$BASE_RECIPE" "$MIRROR" | sha256sum | cut -c1-12)
  echo "soperator/debian-$SUITE-minbase:$key"
}

build_base() {
  local tag tarball old
  tag=$(base_tag)
  tarball=$CACHE_ROOT/images/base-$SUITE-minbase-${tag##*:}.tar.zst
  # Bases of an older recipe or mirror: their tarballs and images go.
  for old in "$CACHE_ROOT"/images/base-"$SUITE"-minbase-*.tar.zst; do
    [[ ! -f $old || $old == "$tarball" ]] || { log "removing old base $old"; rm -f "$old"; }
  done
  while read -r old; do
    [[ -z $old || $old == "$tag" ]] || "$DOCKER" rmi "$old" >/dev/null 2>&1 || true
  done < <("$DOCKER" images --format '{{.Repository}}:{{.Tag}}' "soperator/debian-$SUITE-minbase")
  "$DOCKER" image inspect "$tag" >/dev/null 2>&1 && return 0
  mkdir -p "$CACHE_ROOT/images"
  if [[ ! -f $tarball ]]; then
    local dir=$CACHE_ROOT/images/.base-build started=$SECONDS
    rm -rf "$dir"
    mkdir -p "$dir"
    log "debootstrap --variant=minbase $SUITE from $MIRROR"
    if ! debootstrap --variant=minbase "$SUITE" "$dir/rootfs" "$MIRROR" >"$dir/debootstrap.log" 2>&1; then
      tail -n 30 "$dir/debootstrap.log" >&2
      die "debootstrap failed (log: $dir/debootstrap.log)"
    fi
    # Image hygiene: no package lists or caches; no documentation or translations, now or from packages
    # installed later (dpkg path excludes), except the copyright files.
    local r=$dir/rootfs
    printf '%s\n' '# soperator images: no documentation or translations (hack/images.sh)' \
      'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' 'path-exclude=/usr/share/man/*' \
      'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
      'path-include=/usr/share/locale/locale.alias' >"$r/etc/dpkg/dpkg.cfg.d/01-soperator-slim"
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* \
           "$r"/usr/share/man/* "$r"/usr/share/info/*
    find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    tar -C "$dir/rootfs" --numeric-owner --xattrs -cf - . | zstd -q -T0 -3 -o "$tarball.tmp"
    mv "$tarball.tmp" "$tarball"
    rm -rf "$dir"
    log "base rootfs $tarball in $((SECONDS - started)) s"
  fi
  log "importing $tag"
  zstd -q -d -c "$tarball" | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
}

# ------------------------------------------------------------------------------------------------ images
image_field() {  # image_field NAME FIELD(1=dir 2=parent)
  local entry
  for entry in "${IMAGES[@]}"; do
    read -r n d p <<<"$entry"
    [[ $n == "$1" ]] || continue
    case $2 in 1) echo "$d" ;; 2) echo "$p" ;; esac
    return 0
  done
  die "unknown image $1"
}

image_tag() { echo "soperator/$1:$VERSION"; }

build_args() {
  local base=${BASE_IMAGE:-$(base_tag)}
  printf '%s\n' "BASE_IMAGE=$base" "SOPERATOR_VERSION=$VERSION" "DEBIAN_MIRROR=$MIRROR" \
    "SLURM_APT_SOURCE=${SLURM_APT_SOURCE:-}" "SLURM_VERSION=${SLURM_VERSION:-}"
}

# The build context of an image: its directory, the shared scripts, and for slurm-base the plugin sources.
make_context() {
  local name=$1 ctx=$2 dir
  dir=$(image_field "$name" 1)
  cp -a "$ROOT/$dir/." "$ctx/"
  if [[ $name == slurm-base ]]; then
    cp -a "$ROOT/images/lib" "$ctx/lib"
    mkdir -p "$ctx/spank_chroot"
    (cd "$ROOT/spank_chroot" && cp -a Makefile ./*.c ./*.h spank_chroot.map "$ctx/spank_chroot/")
    mkdir -p "$ctx/apt"
    if [[ -n ${SLURM_APT_KEY:-} ]]; then cp "$SLURM_APT_KEY" "$ctx/apt/slurm.asc"; fi
  fi
  if [[ $name == mariadb || $name == sssd ]]; then
    mkdir -p "$ctx/lib"
    cp -a "$ROOT/images/lib/soperator-entrypoint" "$ctx/lib/"
  fi
  if [[ $name == slurm-exporter ]]; then
    # The static binary of exporter/, built (cached) from its sources: its bytes are part of the inputs hash.
    cp "$("$ROOT/hack/build-binaries.sh" slurm-exporter)" "$ctx/slurm-exporter"
  fi
}

# Inputs hash: the context's files (names, modes, contents), the build args and the parent's hash.
inputs_hash() {
  local name=$1 ctx=$2 parent
  parent=$(image_field "$name" 2)
  {
    (cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum && find . -printf '%p %m\n' | sort)
    build_args
    if [[ $parent != - ]]; then
      "$DOCKER" image inspect -f '{{index .Config.Labels "dev.soperator.inputs"}}' "$(image_tag "$parent")"
    fi
  } | sha256sum | cut -c1-16
}

build_image() {
  local name=$1 tag ctx hash have started=$SECONDS
  tag=$(image_tag "$name")
  ctx=$(mktemp -d "${TMPDIR:-/tmp}/soperator-image-context.XXXXXX")
  make_context "$name" "$ctx"
  hash=$(inputs_hash "$name" "$ctx")
  have=$("$DOCKER" image inspect -f '{{index .Config.Labels "dev.soperator.inputs"}}' "$tag" 2>/dev/null || true)
  local archive=$CACHE_ROOT/images/$name-$VERSION.tar
  if [[ $have != "$hash" && -f $archive && $(cat "$archive.inputs" 2>/dev/null) == "$hash" ]]; then
    log "$tag: loading the saved archive (inputs unchanged)"
    "$DOCKER" load -q -i "$archive" >/dev/null
    have=$hash
  fi
  if [[ $have == "$hash" ]]; then
    log "$tag: up to date (inputs $hash)"
    rm -rf "$ctx"
    return 0
  fi
  log "$tag: building (inputs $hash)"
  local args=() arg
  while IFS= read -r arg; do args+=(--build-arg "$arg"); done < <(build_args)
  if ! "$DOCKER" build -q "${args[@]}" --label "dev.soperator.inputs=$hash" -t "$tag" -f "$ctx/Containerfile" \
      "$ctx" >"$CACHE_ROOT/images/$name.build.log" 2>&1; then
    tail -n 40 "$CACHE_ROOT/images/$name.build.log" >&2
    rm -rf "$ctx"
    die "$tag: build failed (log: $CACHE_ROOT/images/$name.build.log)"
  fi
  rm -rf "$ctx"
  log "$tag: built in $((SECONDS - started)) s, $("$DOCKER" image inspect -f '{{.Size}}' "$tag" | numfmt --to=si)B"
}

cmd_build() {
  [[ -n ${BASE_IMAGE:-} ]] || build_base
  local entry n
  for entry in "${IMAGES[@]}"; do
    read -r n _ <<<"$entry"
    build_image "$n"
  done
  "$DOCKER" image prune -f >/dev/null  # dangling layers of replaced images
}

cmd_save() {
  local entry n tag archive id
  mkdir -p "$CACHE_ROOT/images"
  for entry in "${IMAGES[@]}"; do
    read -r n _ <<<"$entry"
    [[ $n == slurm-base ]] && continue  # a parent only, never run
    tag=$(image_tag "$n")
    archive=$CACHE_ROOT/images/$n-$VERSION.tar
    id=$("$DOCKER" image inspect -f '{{.Id}}' "$tag" 2>/dev/null) || die "$tag is not built (run: $0 build)"
    if [[ -f $archive && $(cat "$archive.id" 2>/dev/null) == "$id" ]]; then
      log "$archive: up to date"
      continue
    fi
    "$DOCKER" save -o "$archive.tmp" "$tag"
    mv "$archive.tmp" "$archive"
    echo "$id" >"$archive.id"
    "$DOCKER" image inspect -f '{{index .Config.Labels "dev.soperator.inputs"}}' "$tag" >"$archive.inputs"
    log "$archive: $(du -h "$archive" | cut -f1)"
  done
}

# The archives `save` writes (every image a pod runs), one path per line: what gets imported into a node.
cmd_archives() {
  local entry n
  for entry in "${IMAGES[@]}"; do
    read -r n _ <<<"$entry"
    [[ $n == slurm-base ]] && continue
    echo "$CACHE_ROOT/images/$n-$VERSION.tar"
  done
}

cmd_list() {
  local entry n
  for entry in "${IMAGES[@]}"; do
    read -r n _ <<<"$entry"
    echo "$n $(image_tag "$n")"
  done
}

# engine_stop, unless the caller holds the engine (SOPERATOR_ENGINE_HELD): then another user may be mid-test on it.
engine_release() {
  if [[ ${SOPERATOR_ENGINE_HELD:-} == "${SOPERATOR_ENGINE:-images}" ]]; then
    log "the engine is held by the caller (SOPERATOR_ENGINE_HELD): left running"
  else
    engine_stop
  fi
}

main() {
  (($#)) || { sed -n '2,34p' "$0"; exit 2; }
  [[ $1 == -h || $1 == --help ]] && { sed -n '2,34p' "$0"; exit 0; }
  [[ $1 == list ]] && { cmd_list; exit 0; }
  [[ $1 == archives ]] && { cmd_archives; exit 0; }
  [[ $1 == env ]] && { echo "export DOCKER_HOST=$DOCKER_HOST"; exit 0; }
  [[ $(id -u) == 0 ]] || die "must run as root (dockerd, debootstrap)"
  mkdir -p "$CACHE_ROOT"
  # One user of the engine's lifecycle at a time (builds, tests). A caller that holds the lock for longer (the
  # operator image build) says so, and its nested calls go on under its lock.
  if [[ ${SOPERATOR_IMAGES_LOCK_HELD:-} != 1 ]]; then
    exec 9>"$CACHE_ROOT/.images$ENGINE_SUFFIX.lock"
    flock 9
  fi
  local was_up=0 stop_at_end=0 cmd
  engine_up && was_up=1
  for cmd in "$@"; do
    case $cmd in
      build) engine_start; cmd_build; stop_at_end=1 ;;
      save) engine_start; cmd_save; stop_at_end=1 ;;
      start) engine_start; echo "export DOCKER_HOST=$DOCKER_HOST" ;;
      stop | clean) engine_release ;;
      shell)
        engine_start
        flock -u 9 2>/dev/null || true
        log "DOCKER_HOST=$DOCKER_HOST; the engine stops when this shell exits"
        "${SHELL:-/bin/bash}" || true
        [[ ${SOPERATOR_IMAGES_LOCK_HELD:-} == 1 ]] || flock 9
        engine_stop ;;
      *) die "unknown command $cmd (see $0 --help)" ;;
    esac
  done
  if ((stop_at_end && !was_up)) && [[ ${SOPERATOR_KEEP_ENGINE:-0} != 1 ]]; then engine_release; fi
}

main "$@"
