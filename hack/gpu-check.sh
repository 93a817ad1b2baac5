#!/usr/bin/env bash
# hack/gpu-check.sh: soperator's GPU path on a machine with a real NVIDIA GPU; no Kubernetes, Slurm or network.
#
# Each stage is timed; everything runs in one private mount namespace (nothing stays mounted) and writes only OUT
# and a temporary directory:
#   1 preflight   an NVIDIA GPU (/proc/driver/nvidia/gpus lists one: the driver is loaded), nvidia-smi, root,
#                 python3 >= 3.7. Without a GPU it stops here: exit 2, "no NVIDIA GPU", nothing checked.
#   2 record      the real nvidia-smi outputs the health program reads (and this machine's `ldconfig -p`, which the
#                 driver tool reads), as test fixtures with their source named: OUT/fixtures/{gpu,driver}/*.yaml
#   3 jail        a minimal jail from this machine's own files, as the jail image would be: python3 and its
#                 standard library, ldconfig, the C libraries they and the driver need, its own loader cache, the
#                 image's link /usr/local/bin/nvidia-smi; no driver file (checked)
#   4 expose      the product's exposure, unchanged: images/worker/soperator_driver.py expose (the worker
#                 entrypoint's step), this machine standing for slurmd's container
#   5 job         into the jail as the jail plugin puts a task (fresh /proc, /dev, /sys and the container's /run
#                 read-only, the node's loader cache over the jail's /etc/ld.so.cache; chroot; as nobody):
#                 `ldconfig -p` lists libcuda.so.1, `nvidia-smi` runs, and a CUDA program (hack/gpu_check.py cuda:
#                 libcuda.so.1 found by the loader, a PTX kernel adds two vectors of 2^20 floats on GPU 0, the
#                 result checked); then the same program without the node's cache must NOT find libcuda
#   6 health      the worker image's health program's GPU checks (and DCGM's when dcgmi exists) on the real
#                 nvidia-smi with the product's default thresholds: a healthy GPU passes every check
#   7 slurm       the product's real Slurm 24.11 on the GPU (hack/gpu_slurm.py run): slurmctld and one dynamic slurmd
#                 from the archive `make gpu-check-bundle` builds (.gpu-check/slurm-rootfs.tar.xz), configured by the
#                 collection's own rendering, started as the worker starts it after its `soperator-driver expose`,
#                 stage 3's jail at /mnt/jail: GRES at the first registration, a CUDA step in the jail through the jail
#                 plugin, the device cgroup, the health program as slurmd's HealthCheckProgram
# OUT/report.txt has every stage's output and time, and for a failed stage the command that failed and its exit
# status; the exit status is 0 only when every stage passed.
#
# Usage: hack/gpu-check.sh [OUT]        OUT: default $OUT (set by the device tool), else ./gpu-check-out
#   GPU_CHECK_SLURM_ARCHIVE   stage 7's archive (default: .gpu-check/slurm-rootfs.tar.xz in this checkout)
#
# With the device tool (a session whose task was lent a GPU machine), from the repository root: first, here,
# `make gpu-check-bundle` (the archive, ~50 MiB, into the ignored .gpu-check/), then
#   run(command='bash hack/gpu-check.sh "$OUT"', carry=['.gpu-check'], timeout_s=600)
# It takes about two minutes. Then copy the recorded fixtures (files_at/.../fixtures/gpu/*.yaml and
# fixtures/driver/*.yaml) into tests/unit/fixtures/gpu and tests/unit/fixtures/driver: the unit tests check every
# fixture whose source is hack/gpu-check.sh (docs/gpu.md, "The check on a real GPU").
set -Eeuo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(realpath -m "${1:-${OUT:-./gpu-check-out}}")
REPORT=$OUT/report.txt
SLURM_ARCHIVE=$(realpath -m "${GPU_CHECK_SLURM_ARCHIVE:-$REPO/.gpu-check/slurm-rootfs.tar.xz}")

say() { printf 'gpu-check: %s\n' "$*" | tee -a "$REPORT" >&2; }
die() {
  _code=$1
  shift
  say "error: $*"
  exit "$_code"
}

mkdir -p "$OUT"
if [ -z "${GPU_CHECK_IN_NAMESPACE:-}" ]; then
  : >"$REPORT"
  # ---------------------------------------------------------------------------------------- 1 preflight
  shopt -s nullglob
  gpus=(/proc/driver/nvidia/gpus/*)
  shopt -u nullglob
  [ "${#gpus[@]}" -gt 0 ] || die 2 "no NVIDIA GPU on this machine: /proc/driver/nvidia/gpus lists none (no NVIDIA" \
    "driver loaded); nothing was checked"
  command -v nvidia-smi >/dev/null || die 2 "no nvidia-smi on PATH, although the driver lists ${#gpus[@]} GPU(s)"
  [ "$(id -u)" = 0 ] || die 2 "must run as root (mounts and chroot, as slurmd's container does them)"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 7))' 2>/dev/null || die 2 "needs python3 >= 3.7"
  for tool in unshare mount umount chroot ldd findmnt; do
    command -v "$tool" >/dev/null || die 2 "needs $tool"
  done
  say "stage 1 preflight: PASS (${#gpus[@]} GPU(s) in /proc/driver/nvidia/gpus; $(uname -r); $(python3 -V 2>&1))"
  export GPU_CHECK_IN_NAMESPACE=${#gpus[@]}
  exec unshare --mount --propagation private "$BASH" "${BASH_SOURCE[0]}" "$OUT"
fi

NGPUS=$GPU_CHECK_IN_NAMESPACE
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
chmod 0755 "$WORK" # the jail's loader cache is made as nobody, who must reach the jail
ROOTP=$WORK/root   # stands for slurmd's container: its /run and its jail mount (soperator_driver --root)
J=$ROOTP/mnt/jail
mkdir -p "$ROOTP/run" "$J"
mount -t tmpfs -o mode=0755 tmpfs "$ROOTP/run" # the container's own /run, as a runtime gives it
failed=()
t_all=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

cleanup() {
  umount -R "$ROOTP/run" 2>/dev/null || true
  # Whole outputs read (no grep -q, head, awk exit): with pipefail an early reader's writer dies of SIGPIPE (141).
  if [ -n "$(findmnt -rn -o TARGET | grep "^$WORK" || true)" ]; then
    say "left $WORK in place: something is still mounted below it"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# stage N NAME FUNCTION: run it (errexit holds: in the background, not in an `if`), its output into the report;
# PASS or FAIL with its time. A command that ends the stage is named, with its exit status and line, in the report
# and on the FAIL line (the ERR trap, inherited by the stage's functions through set -E): no stage ends silently.
stage() {
  _n=$1 _name=$2
  shift 2
  printf '\n=== stage %s %s\n' "$_n" "$_name" >>"$REPORT"
  _t=$(date +%s.%N)
  _why=$WORK/why-$_n
  (
    # shellcheck disable=SC2154  # _rc is set by the trap itself
    trap '_rc=$?; printf "line %s: \`%s\` exited %s\n" "$LINENO" "$BASH_COMMAND" "$_rc" | tee -a "$_why"' ERR
    "$@"
  ) >>"$REPORT" 2>&1 &
  if wait $!; then
    _v=PASS
  else
    _v="FAIL${_why:+$(test -s "$_why" && printf ': %s' "$(head -n 1 "$_why")")}"
    failed+=("$_n $_name")
  fi
  say "stage $_n $_name: $_v ($(elapsed "$_t")s)"
}

# ------------------------------------------------------------------------------------------------- 2 record
record() {
  python3 "$REPO/hack/gpu_check.py" record "$OUT"
}

# ------------------------------------------------------------------------------------------------- 3 jail
is_driver_file() { case ${1##*/} in libcuda.* | libcudadebugger.* | libnvidia-* | libnvcuvid.* | libnvoptix.* | *_nvidia.*) return 0 ;; esac; return 1; }

# copy_path PATH: PATH into the jail at the same place, with the links that lead to it.
copy_path() {
  _p=$1
  for _hop in 1 2 3 4 5 6 7 8; do
    mkdir -p "$J${_p%/*}"
    if [ -L "$_p" ]; then
      [ -e "$J$_p" ] || [ -L "$J$_p" ] || cp -P "$_p" "$J$_p"
      _t=$(readlink "$_p")
      case $_t in /*) _p=$_t ;; *) _p=$(realpath -ms "${_p%/*}/$_t") ;; esac
    else
      [ -e "$J$_p" ] || cp -p "$_p" "$J$_p"
      return 0
    fi
  done
}

# copy_closure FILE...: each file and the shared libraries it loads (ldd), none of the driver's.
copy_closure() {
  for _f in "$@"; do
    copy_path "$_f"
    # ldd refuses some files (a static one, another architecture's): nothing to copy for them
    { ldd "$_f" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r _lib; do
      if is_driver_file "$_lib"; then continue; fi
      copy_path "$_lib"
    done
  done
}

build_jail() {
  # The top-level links of a merged /usr, relative ones only (an absolute one would lead out of the jail).
  for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [ -L "$d" ]; then case $(readlink "$d") in /*) ;; *)
      cp -P "$d" "$J$d"
      mkdir -p "$J/$(readlink "$d")" ;;
    esac; fi
  done
  mkdir -p "$J"/{proc,dev,sys,run,tmp,etc/ld.so.conf.d,usr/local/bin,opt/gpu-check}
  chmod 1777 "$J/tmp"
  py=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
  stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
  platlib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("platstdlib"))')
  copy_closure "$py"
  for d in "$stdlib" "$platlib"; do
    mkdir -p "$J$d"
    tar -C "$d" --exclude=site-packages --exclude=dist-packages --exclude=test --exclude=tests --exclude=idlelib \
      --exclude=tkinter --exclude=ensurepip -cf - . | tar -C "$J$d" -xf -
  done
  find "$J$stdlib" "$J$platlib" -name '*.so' | while read -r so; do copy_closure "${so#"$J"}"; done
  # ldconfig as the jail has it (Ubuntu's /sbin/ldconfig is a script around ldconfig.real).
  for c in /sbin/ldconfig.real /usr/sbin/ldconfig.real /sbin/ldconfig /usr/sbin/ldconfig; do
    if [ -f "$c" ] && [ "$(head -c 4 "$c" | od -An -c | tr -d ' ')" = '177ELF' ]; then ldconfig_bin=$c; break; fi
  done
  [ -n "${ldconfig_bin:-}" ] || { echo "no ldconfig ELF binary on this machine"; return 1; }
  mkdir -p "$J/sbin"
  cp -p "$ldconfig_bin" "$J/sbin/ldconfig"
  copy_closure_deps "$ldconfig_bin"
  # The C libraries the driver's user space needs (a jail image has the whole C library), never the driver.
  drv_files=$(python3 "$REPO/images/worker/soperator_driver.py" list | python3 -c '
import json, sys
plan = json.load(sys.stdin)
print("\n".join(list(plan["libraries"].values()) + list(plan["tools"].values())))')
  for f in $drv_files; do copy_closure_deps "$f"; done
  for lib in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
    p=$(ldconfig -p | awk -v n="$lib" '$1 == n && /x86-64|AArch64/ && !p {p = $NF} END {print p}')
    [ -z "$p" ] || copy_path "$p"
  done
  cp -p /etc/ld.so.conf "$J/etc/ld.so.conf" 2>/dev/null || echo 'include /etc/ld.so.conf.d/*.conf' >"$J/etc/ld.so.conf"
  cp -p /etc/ld.so.conf.d/*.conf "$J/etc/ld.so.conf.d/" 2>/dev/null || true
  chroot "$J" /sbin/ldconfig
  ln -sfn /run/soperator/nvidia/bin/nvidia-smi "$J/usr/local/bin/nvidia-smi"  # as the jail image links it
  echo "image=gpu-check" >"$J/.soperator-populated"  # as the populate Job marks a jail (the health program reads it)
  cp -p "$REPO/hack/gpu_check.py" "$J/opt/gpu-check/gpu_check.py"
  echo "$py" >"$WORK/python"
  found=$(find "$J" -xdev \( -name 'libcuda*' -o -name 'libnvidia-*' -o -name 'nvidia-smi' \) ! -type l -print)
  [ -z "$found" ] || { echo "driver files in the jail: $found"; return 1; }
  echo "jail: $(du -sh "$J" | cut -f1), python $py, ldconfig $ldconfig_bin; no driver file in it"
  chroot "$J" /sbin/ldconfig -p | sed -n 1p
}

# copy_closure_deps FILE: only what FILE loads (not FILE: the driver's files never go into the jail).
copy_closure_deps() {
  { ldd "$1" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r _lib; do
    if is_driver_file "$_lib"; then continue; fi
    copy_path "$_lib"
  done
}

# ------------------------------------------------------------------------------------------------- 4 expose
expose() {
  python3 "$REPO/images/worker/soperator_driver.py" list | tee "$OUT/driver-list.json"
  python3 "$REPO/images/worker/soperator_driver.py" expose --root "$ROOTP"
  ls -l "$ROOTP/run/soperator/nvidia" "$ROOTP/run/soperator/nvidia/lib" "$ROOTP/run/soperator/nvidia/bin"
}

# ------------------------------------------------------------------------------------------------- 5 job
# in_jail yes|no USER COMMAND...: COMMAND in the jail as a task of a job sees it; yes: with the node's loader cache.
in_jail() {
  # shellcheck disable=SC2016  # the inner script expands its own arguments
  unshare --mount --propagation private bash -c '
    set -e
    J=$1 R=$2 cache=$3 user=$4
    shift 4
    mount --bind "$J" "$J"
    mount -t proc proc "$J/proc"
    mount --rbind /dev "$J/dev"
    mount --rbind /sys "$J/sys" && mount -o remount,bind,ro "$J/sys"
    mount --rbind "$R/run" "$J/run" && mount -o remount,bind,ro "$J/run"
    mount -t tmpfs -o mode=1777 tmpfs "$J/tmp"
    if [ "$cache" = yes ]; then mount --bind -o ro "$R/run/soperator/nvidia/ld.so.cache" "$J/etc/ld.so.cache"; fi
    exec env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp LANG=C \
      chroot --userspec="$user" "$J" "$@"
  ' in-jail "$J" "$ROOTP" "$@"
}

job() {
  py=$(cat "$WORK/python")
  ok=0
  echo "--- ldconfig -p in the jail, with the node's cache"
  listing=$(in_jail yes 65534:65534 /sbin/ldconfig -p)
  echo "$listing" | grep -E 'libcuda|libnvidia' || true
  grep -q 'libcuda.so.1 .*=> /run/soperator/nvidia/lib/' <<<"$listing" || { echo "FAIL: libcuda.so.1 not listed"; ok=1; }
  echo "--- nvidia-smi in the jail, as nobody"
  if ! in_jail yes 65534:65534 /usr/local/bin/nvidia-smi | tee "$OUT/nvidia-smi-in-jail.txt"; then
    echo "FAIL: nvidia-smi as nobody; as root:"
    in_jail yes 0:0 /usr/local/bin/nvidia-smi || true
    ok=1
  fi
  echo "--- the CUDA program in the jail, as nobody"
  in_jail yes 65534:65534 "$py" -I -S /opt/gpu-check/gpu_check.py cuda || { echo "FAIL: the CUDA program"; ok=1; }
  echo "--- the same without the node's cache: must not find libcuda"
  rc=0
  in_jail no 65534:65534 "$py" -I -S /opt/gpu-check/gpu_check.py cuda || rc=$?
  if [ "$rc" != 3 ]; then echo "FAIL: without the node's cache the jail program exited $rc, not 3 (not found)"; ok=1; fi
  return $ok
}

# ------------------------------------------------------------------------------------------------- 6 health
health() {
  python3 "$REPO/hack/gpu_check.py" health "$NGPUS"
}

# ------------------------------------------------------------------------------------------------- 7 slurm
slurm() {
  if [ ! -f "$SLURM_ARCHIVE" ]; then
    echo "no $SLURM_ARCHIVE: run \`make gpu-check-bundle\` where the project builds, and send .gpu-check with the" \
      "checkout (the device tool: carry=['.gpu-check'])"
    return 1
  fi
  python3 "$REPO/hack/gpu_slurm.py" run "$SLURM_ARCHIVE" "$J" "$(cat "$WORK/python")"
}

stage 2 record record
stage 3 jail build_jail
if [[ " ${failed[*]:-} " != *" 3 jail "* ]]; then
  stage 4 expose expose
  if [[ " ${failed[*]:-} " != *" 4 expose "* ]]; then stage 5 job job; else say "stage 5 job: SKIPPED (expose failed)"; fi
else
  say "stage 4 expose, stage 5 job: SKIPPED (no jail)"
fi
stage 6 health health
if [[ " ${failed[*]:-} " != *" 3 jail "* ]]; then stage 7 slurm slurm; else say "stage 7 slurm: SKIPPED (no jail)"; fi
say "total $(elapsed "$t_all")s; report: $REPORT; fixtures: $OUT/fixtures"
if [ "${#failed[@]}" -gt 0 ]; then die 1 "failed: ${failed[*]}"; fi
say "every stage passed"
