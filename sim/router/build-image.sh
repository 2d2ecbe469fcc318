#!/usr/bin/env bash
# Build the router's docker image for the sim: smg (the Shepherd Model Gateway, an OpenAI-compatible router in
# Rust) from PyPI on the sim's minimal Debian root file system, cached by recipe hash.
#
# Usage: sim/router/build-image.sh
#
# The image holds Debian bookworm (the root file system of the stand-in engine's image: sim/image-steps.sh), the
# wheels pinned with their hashes in requirements.txt (cp311 manylinux, this machine's architecture, installed by
# the operator's pip with --target) under /opt/router/site, and launch.py, which starts smg with its API key read
# from a file. Command in the image: `spark-llm-router SMG-FLAGS...` (the key: SPARK_LLM_ROUTER_API_KEY_FILE).
#
# Environment:
#   XDG_CACHE_HOME   cache root (default ~/.cache); everything lives under $XDG_CACHE_HOME/spark-llm/
#   DEBIAN_MIRROR    Debian mirror for debootstrap (default: the bookworm source in /etc/apt/sources.list*)
#   PIP              the pip that downloads the wheels (default: python3 -m pip)
#
# Outputs (stdout, last two lines; progress goes to stderr):
#   spark-llm/router:<recipe-hash>
#   $XDG_CACHE_HOME/spark-llm/images/router-<recipe-hash>.tar   (docker save of that tag)
# Both are reused when they exist. Also cached:
#   $XDG_CACHE_HOME/spark-llm/debootstrap/bookworm-minbase-<package-list-hash>.tar   the root file system (shared)
#   $XDG_CACHE_HOME/spark-llm/router/site-cp311-<arch>-<requirements-hash>/           the installed wheels
set -euo pipefail

if [[ $# -ne 0 ]]; then
  echo "Usage: $0" >&2
  exit 2
fi

ROUTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$ROUTER_DIR/../.." && pwd)"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm"
IMAGE_DIR="$CACHE_DIR/images"
ROOTFS_DIR="$CACHE_DIR/debootstrap"
SITE_CACHE_DIR="$CACHE_DIR/router"
LOCK_WAIT_SECONDS=900
IMAGE_NAME=spark-llm/router
REQUIREMENTS="$ROUTER_DIR/requirements.txt"
LAUNCHER="$ROUTER_DIR/launch.py"
# The stand-in engine's recipe (sim/engine/build-image.sh): one cached root file system serves both images.
SUITE=bookworm
VARIANT=minbase
INCLUDE_PACKAGES=python3,openssh-client

log() { printf '[router-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=sim/image-steps.sh
source "$REPO_DIR/sim/image-steps.sh"

ARCH="$(dpkg --print-architecture)"
case "$ARCH" in
  amd64) PLATFORM=manylinux2014_x86_64 ;;
  # smg's aarch64 wheel is manylinux_2_28 (glibc 2.28; bookworm has 2.36).
  arm64) PLATFORM=manylinux_2_28_aarch64 ;;
  *) die "no router wheels for architecture $ARCH (smg publishes x86_64 and aarch64)" ;;
esac
ROOTFS_TAR="$(rootfs_tar_path "$ROOTFS_DIR" "$SUITE" "$VARIANT" "$INCLUDE_PACKAGES")"
SITE_DIR="$SITE_CACHE_DIR/site-cp311-$ARCH-$(sha256sum <"$REQUIREMENTS" | cut -c1-12)"
SMG_VERSION="$(sed -n 's/^smg==\([^ ]*\).*/\1/p' "$REQUIREMENTS")"
[[ -n "$SMG_VERSION" ]] || die "no smg==VERSION line in $REQUIREMENTS"
RECIPE_HASH="$(
  {
    printf 'rootfs %s\n' "${ROOTFS_TAR##*/}"
    printf 'arch %s\n' "$ARCH"
    printf 'recipe '; sha256sum <"${BASH_SOURCE[0]}"
    printf 'steps '; sha256sum <"$REPO_DIR/sim/image-steps.sh"
    printf 'requirements '; sha256sum <"$REQUIREMENTS"
    printf 'launcher '; sha256sum <"$LAUNCHER"
  } | sha256sum | cut -c1-16
)"
TAG="$IMAGE_NAME:$RECIPE_HASH"
IMAGE_TAR="$IMAGE_DIR/router-$RECIPE_HASH.tar"

mkdir -p "$IMAGE_DIR" "$ROOTFS_DIR" "$SITE_CACHE_DIR"
# The engine first, before the lock exists: a dockerd started while fd 9 is open would hold the lock for its life.
docker info >/dev/null 2>&1 || bash "$REPO_DIR/sim/docker-engine.sh" ensure >&2
# One build at a time per cache: a second caller waits, then finds the first one's results.
exec 9>"$CACHE_DIR/router-image.lock"
flock -w "$LOCK_WAIT_SECONDS" 9 || die "another build held $CACHE_DIR/router-image.lock for ${LOCK_WAIT_SECONDS} s"

WORK_DIR="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
cleanup() { rm -rf "$WORK_DIR"; }
trap cleanup EXIT

# The pinned wheels (binary only, every file's hash checked) installed once into the cache for the image's Python.
ensure_site() {
  [[ -d "$SITE_DIR" ]] && return
  local pip_cmd target="$WORK_DIR/site" started=$SECONDS
  read -r -a pip_cmd <<<"${PIP:-python3 -m pip}"
  "${pip_cmd[@]}" --version >/dev/null 2>&1 || die "no pip to download the router with ('${pip_cmd[*]}'); set PIP"
  log "downloading smg $SMG_VERSION and its pinned dependencies ($PLATFORM, cp311) into the cache"
  if ! "${pip_cmd[@]}" install --disable-pip-version-check --quiet --no-deps --only-binary=:all: --require-hashes \
    --platform "$PLATFORM" --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    --target "$target" -r "$REQUIREMENTS" >"$WORK_DIR/pip.log" 2>&1; then
    tail -n 30 "$WORK_DIR/pip.log" >&2
    die "pip could not install the router's wheels (last lines above)"
  fi
  mv "$target" "$SITE_DIR"
  log "cached the router's wheels in $SITE_DIR ($(du -sh "$SITE_DIR" | cut -f1), $((SECONDS - started)) s)"
}

build_image() {
  ensure_rootfs_tar "$ROOTFS_TAR" "$SUITE" "$VARIANT" "$INCLUDE_PACKAGES" "$WORK_DIR"
  ensure_site
  local rootfs="$WORK_DIR/rootfs"
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  mkdir -p "$rootfs/opt/router"
  # -a keeps the modification times, so the .pyc files pip compiled stay valid in the image.
  cp -a "$SITE_DIR" "$rootfs/opt/router/site"
  install -D -m 0644 "$LAUNCHER" "$rootfs/opt/router/launch.py"
  mkdir -p "$rootfs/usr/local/bin"
  printf '#!/bin/sh\nexec python3 /opt/router/launch.py "$@"\n' >"$rootfs/usr/local/bin/spark-llm-router"
  chmod 0755 "$rootfs/usr/local/bin/spark-llm-router"
  log "importing $TAG"
  tar --numeric-owner -C "$rootfs" -c . | docker import \
    --change 'ENV PYTHONPATH=/opt/router/site' \
    --change 'ENV PYTHONUNBUFFERED=1' \
    --change "LABEL org.spark-llm.router.smg-version=$SMG_VERSION" \
    --change 'CMD ["spark-llm-router", "--help"]' \
    --message "spark-llm router (smg $SMG_VERSION), recipe $RECIPE_HASH" \
    - "$TAG" >/dev/null
  # The gateway's Rust extension must load and its parser answer in the new image before it is saved.
  local smoke="python3 -c 'import smg.smg_rs' && SPARK_LLM_ROUTER_API_KEY_FILE=/etc/hostname spark-llm-router --help >/dev/null"
  if ! docker run --rm --network none "$TAG" sh -ec "$smoke" >"$WORK_DIR/smoke.log" 2>&1; then
    cat "$WORK_DIR/smoke.log" >&2
    docker image rm "$TAG" >/dev/null 2>&1 || true
    die "the new image failed its smoke test ($smoke)"
  fi
}

finish_image "$TAG" "$IMAGE_TAR" "$WORK_DIR" build_image
