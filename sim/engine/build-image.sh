#!/usr/bin/env bash
# Build the stand-in engine's docker image from a minimal Debian root file system, cached by recipe hash.
#
# Usage: sim/engine/build-image.sh
#
# The image holds Debian bookworm (debootstrap --variant=minbase --include=python3,openssh-client), every Python package folder
# of sim/engine (standin_engine with its flag catalogs, sglang, vllm) under /opt/standin, and real Ray with its
# dependencies (ray-requirements.txt) under /opt/standin/site; PYTHONPATH=/opt/standin:/opt/standin/site.
# Commands in the image: `python3 -m sglang.launch_server ...`, `sglang serve ...`, `vllm serve ...`,
# `python3 -m vllm.entrypoints.openai.api_server ...`, `ray start ...` (console scripts in /usr/local/bin).
#
# Environment:
#   XDG_CACHE_HOME   cache root (default ~/.cache); everything lives under $XDG_CACHE_HOME/spark-llm/
#   DEBIAN_MIRROR    Debian mirror for debootstrap (default: the bookworm source in /etc/apt/sources.list*)
#   STANDIN_RAY      1 (default): include Ray; 0: an image without Ray (`--distributed-executor-backend ray` then
#                    fails with a message saying so), about 180 MB smaller and no PyPI download
#   PIP              the pip that downloads Ray's wheels (default: python3 -m pip)
#
# Outputs (stdout, last two lines; progress goes to stderr):
#   spark-llm/standin-engine:<recipe-hash>
#   $XDG_CACHE_HOME/spark-llm/images/standin-engine-<recipe-hash>.tar   (docker save of that tag)
# Both are reused when they exist. Also cached:
#   $XDG_CACHE_HOME/spark-llm/debootstrap/bookworm-minbase-<package-list-hash>.tar   the root file system
#   $XDG_CACHE_HOME/spark-llm/ray/ray-<version>-cp311-<arch>-<requirements-hash>/     Ray's installed wheels
set -euo pipefail

if [[ $# -ne 0 ]]; then
  echo "Usage: $0" >&2
  exit 2
fi

ENGINE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$ENGINE_DIR/../.." && pwd)"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm"
IMAGE_DIR="$CACHE_DIR/images"
ROOTFS_DIR="$CACHE_DIR/debootstrap"
DOCKERD_LOG=/var/log/spark-llm-dockerd.log
DOCKER_WAIT_SECONDS=60
LOCK_WAIT_SECONDS=900

SUITE=bookworm
VARIANT=minbase
# openssh-client: the group's supervisor (scripts/supervisor.py) runs in the engine image and reaches the workers
# over ssh, as an NGC image (which carries it for MPI) does.
INCLUDE_PACKAGES=python3,openssh-client
IMAGE_NAME=spark-llm/standin-engine
RAY_REQUIREMENTS="$ENGINE_DIR/ray-requirements.txt"
RAY_CACHE_DIR="$CACHE_DIR/ray"
STANDIN_RAY="${STANDIN_RAY:-1}"
# Ray's libraries the stand-in never imports (Java jars, RLlib, Tune, Train, Data, Serve, LLM): ~90 MB less image.
RAY_UNUSED=(ray/jars ray/rllib ray/tune ray/train ray/data ray/serve ray/llm bin)

log() { printf '[build-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The root file system both sim images start from, and how both end (saved, printed).
# shellcheck source=sim/image-steps.sh
source "$REPO_DIR/sim/image-steps.sh"

ensure_docker() {
  docker info >/dev/null 2>&1 && return
  if [[ -f "$REPO_DIR/sim/docker-engine.sh" ]]; then
    log "docker engine not answering; starting it with sim/docker-engine.sh ensure"
    # 9>&-: dockerd outlives this script; it must not inherit (and so hold forever) the build lock on fd 9.
    bash "$REPO_DIR/sim/docker-engine.sh" ensure >&2 9>&-
  else
    log "docker engine not answering; starting dockerd (log: $DOCKERD_LOG)"
    setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &
  fi
  local waited
  for ((waited = 0; waited < DOCKER_WAIT_SECONDS; waited++)); do
    docker info >/dev/null 2>&1 && return
    sleep 1
  done
  die "the docker engine did not answer 'docker info' within ${DOCKER_WAIT_SECONDS} s (see $DOCKERD_LOG)"
}

# The flag catalogs are the program's own (spark_llm/config/engine_catalogs, the one copy): the image gets them at
# standin_engine/catalogs, where the stand-in's parsers read them.
CATALOG_SOURCE="$REPO_DIR/spark_llm/config/engine_catalogs"
CATALOG_TARGET="standin_engine/catalogs"

# Every Python package folder beside this script goes into the image (standin_engine, sglang, vllm).
image_files() {
  (cd "$ENGINE_DIR" && find . -mindepth 2 -path '*/__pycache__' -prune -o -type f \( -name '*.py' -o -name '*.json' \) \
    -print | sed 's|^\./||' | LC_ALL=C sort)
}

# Ray's wheels (cp311, the image's Python; manylinux for this machine's architecture) installed once into the cache
# with the operator's pip, keyed by Ray's version and the pinned requirements.
ensure_ray_site() {
  [[ -d "$RAY_SITE" ]] && return
  local pip_cmd target="$WORK_DIR/ray-site" started=$SECONDS
  read -r -a pip_cmd <<<"${PIP:-python3 -m pip}"
  "${pip_cmd[@]}" --version >/dev/null 2>&1 \
    || die "no pip to download Ray with ('${pip_cmd[*]}'); install python3-pip, set PIP, or build with STANDIN_RAY=0"
  log "downloading Ray $RAY_VERSION and its pinned dependencies ($RAY_PLATFORM, cp311) into the cache"
  if ! "${pip_cmd[@]}" install --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
    --platform "$RAY_PLATFORM" --python-version 3.11 --implementation cp --abi cp311 \
    --target "$target" -r "$RAY_REQUIREMENTS" >"$WORK_DIR/pip.log" 2>&1; then
    tail -n 30 "$WORK_DIR/pip.log" >&2
    die "pip could not install Ray's wheels (last lines above); STANDIN_RAY=0 builds the image without Ray"
  fi
  (cd "$target" && rm -rf "${RAY_UNUSED[@]}")
  mkdir -p "$RAY_CACHE_DIR"
  mv "$target" "$RAY_SITE"
  log "cached Ray in $RAY_SITE ($(du -sh "$RAY_SITE" | cut -f1), $((SECONDS - started)) s)"
}

ARCH="$(dpkg --print-architecture)"
case "$ARCH" in
  amd64) RAY_PLATFORM=manylinux2014_x86_64 ;;
  arm64) RAY_PLATFORM=manylinux2014_aarch64 ;;
  *) RAY_PLATFORM="" ;;
esac
case "$STANDIN_RAY" in
  0) RAY_KEY=none ;;
  1)
    [[ -n "$RAY_PLATFORM" ]] || die "no Ray wheels for architecture $ARCH; build with STANDIN_RAY=0"
    RAY_VERSION="$(sed -n 's/^ray==//p' "$RAY_REQUIREMENTS")"
    RAY_KEY="ray-$RAY_VERSION-cp311-$ARCH-$(sha256sum <"$RAY_REQUIREMENTS" | cut -c1-12)"
    RAY_SITE="$RAY_CACHE_DIR/$RAY_KEY"
    ;;
  *) die "STANDIN_RAY must be 0 or 1, got '$STANDIN_RAY'" ;;
esac
ROOTFS_TAR="$(rootfs_tar_path "$ROOTFS_DIR" "$SUITE" "$VARIANT" "$INCLUDE_PACKAGES")"

mapfile -t IMAGE_FILES < <(image_files)
[[ ${#IMAGE_FILES[@]} -gt 0 ]] || die "no Python packages found under $ENGINE_DIR"
mapfile -t CATALOG_FILES < <(cd "$CATALOG_SOURCE" && find . -maxdepth 1 -name '*.json' -printf '%f\n' | LC_ALL=C sort)
[[ ${#CATALOG_FILES[@]} -gt 0 ]] || die "no flag catalogs (*.json) in $CATALOG_SOURCE"
RECIPE_HASH="$(
  {
    printf 'rootfs %s\n' "${ROOTFS_TAR##*/}"
    printf 'ray %s\n' "$RAY_KEY"
    printf 'recipe '; sha256sum <"${BASH_SOURCE[0]}"
    printf 'steps '; sha256sum <"$REPO_DIR/sim/image-steps.sh"
    printf 'ray-requirements '; sha256sum <"$RAY_REQUIREMENTS"
    for file in "${IMAGE_FILES[@]}"; do
      printf 'file %s ' "$file"; sha256sum <"$ENGINE_DIR/$file"
    done
    for file in "${CATALOG_FILES[@]}"; do
      printf 'catalog %s ' "$file"; sha256sum <"$CATALOG_SOURCE/$file"
    done
  } | sha256sum | cut -c1-16
)"
TAG="$IMAGE_NAME:$RECIPE_HASH"
IMAGE_TAR="$IMAGE_DIR/standin-engine-$RECIPE_HASH.tar"

mkdir -p "$IMAGE_DIR" "$ROOTFS_DIR"
# The engine first, before the lock exists: a dockerd started while fd 9 is open would hold the lock for its lifetime
# (CI once waited the full lock timeout for a build that had finished 20 minutes earlier).
ensure_docker
# One build at a time per cache: a second caller waits, then finds the first one's results.
exec 9>"$CACHE_DIR/standin-engine.lock"
flock -w "$LOCK_WAIT_SECONDS" 9 || die "another build held $CACHE_DIR/standin-engine.lock for ${LOCK_WAIT_SECONDS} s"

WORK_DIR="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
cleanup() { rm -rf "$WORK_DIR"; }
trap cleanup EXIT

build_image() {
  ensure_rootfs_tar "$ROOTFS_TAR" "$SUITE" "$VARIANT" "$INCLUDE_PACKAGES" "$WORK_DIR"
  local rootfs="$WORK_DIR/rootfs" file
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  for file in "${IMAGE_FILES[@]}"; do
    install -D -m 0644 "$ENGINE_DIR/$file" "$rootfs/opt/standin/$file"
  done
  for file in "${CATALOG_FILES[@]}"; do
    install -D -m 0644 "$CATALOG_SOURCE/$file" "$rootfs/opt/standin/$CATALOG_TARGET/$file"
  done
  if [[ "$STANDIN_RAY" == 1 ]]; then
    ensure_ray_site
    # -a keeps the modification times, so the .pyc files pip compiled (cp311) stay valid in the image.
    cp -a "$RAY_SITE" "$rootfs/opt/standin/site"
    install_console_script "$rootfs" ray ray.scripts.scripts
  else
    mkdir -p "$rootfs/opt/standin/site"
  fi
  install_console_script "$rootfs" sglang sglang.cli.main
  install_console_script "$rootfs" vllm vllm.entrypoints.cli.main
  log "importing $TAG"
  tar --numeric-owner -C "$rootfs" -c . | docker import \
    --change 'ENV PYTHONPATH=/opt/standin:/opt/standin/site' \
    --change 'ENV PYTHONUNBUFFERED=1' \
    --change 'CMD ["python3", "-m", "sglang.launch_server", "--help"]' \
    --message "spark-llm stand-in engine, recipe $RECIPE_HASH" \
    - "$TAG" >/dev/null
  # Every entry point, and the ray CLI when Ray is in, must start in the new image before it is saved.
  local smoke='python3 -m sglang.launch_server --help >/dev/null; sglang serve --help >/dev/null; vllm serve --help >/dev/null'
  if [[ "$STANDIN_RAY" == 1 ]]; then
    smoke+='; ray --version'
  fi
  if ! docker run --rm --network none "$TAG" sh -ec "$smoke" >"$WORK_DIR/smoke.log" 2>&1; then
    cat "$WORK_DIR/smoke.log" >&2
    docker image rm "$TAG" >/dev/null 2>&1 || true
    die "the new image failed its smoke test ($smoke)"
  fi
}

# A console script like pip's, without the build machine's interpreter in its shebang: `NAME ARGS` runs
# `python3 -m MODULE ARGS` with the image's Python.
install_console_script() {
  local rootfs=$1 name=$2 module=$3
  mkdir -p "$rootfs/usr/local/bin"
  printf '#!/bin/sh\nexec python3 -m %s "$@"\n' "$module" >"$rootfs/usr/local/bin/$name"
  chmod 0755 "$rootfs/usr/local/bin/$name"
}

finish_image "$TAG" "$IMAGE_TAR" "$WORK_DIR" build_image
