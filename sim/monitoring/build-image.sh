#!/usr/bin/env bash
# Build the sim's monitoring image: Prometheus, the node exporter and Alertmanager from Debian bookworm's packages (pinned in
# packages.txt) on the sim's minimal Debian root file system, cached by recipe hash. One image for both roles:
# spark-llm:monitoring names its binaries by their paths in the upstream images (prom/prometheus: /bin/prometheus;
# prom/node-exporter: /bin/node_exporter; prom/alertmanager: /bin/alertmanager), which this image keeps (bookworm's
# /bin is /usr/bin).
#
# Usage: sim/monitoring/build-image.sh
#
# Environment:
#   XDG_CACHE_HOME   cache root (default ~/.cache); everything lives under $XDG_CACHE_HOME/spark-llm/
#   DEBIAN_MIRROR    Debian mirror for debootstrap (default: the bookworm source in /etc/apt/sources.list*)
#
# Outputs (stdout, last two lines; progress goes to stderr):
#   spark-llm/monitoring:<recipe-hash>
#   $XDG_CACHE_HOME/spark-llm/images/monitoring-<recipe-hash>.tar   (docker save of that tag)
# Both are reused when they exist. Also cached: the packages' .deb files under $XDG_CACHE_HOME/spark-llm/monitoring/.
set -euo pipefail

if [[ $# -ne 0 ]]; then
  echo "Usage: $0" >&2
  exit 2
fi

MONITORING_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$MONITORING_DIR/../.." && pwd)"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm"
IMAGE_DIR="$CACHE_DIR/images"
ROOTFS_DIR="$CACHE_DIR/debootstrap"
DEB_DIR="$CACHE_DIR/monitoring"
LOCK_WAIT_SECONDS=900
IMAGE_NAME=spark-llm/monitoring
PACKAGES="$MONITORING_DIR/packages.txt"
# The stand-in engine's recipe (sim/engine/build-image.sh): one cached root file system serves every sim image.
SUITE=bookworm
VARIANT=minbase
INCLUDE_PACKAGES=python3,openssh-client

log() { printf '[monitoring-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=sim/image-steps.sh
source "$REPO_DIR/sim/image-steps.sh"

ARCH="$(dpkg --print-architecture)"
ROOTFS_TAR="$(rootfs_tar_path "$ROOTFS_DIR" "$SUITE" "$VARIANT" "$INCLUDE_PACKAGES")"
mapfile -t PINS < <(grep -v '^#' "$PACKAGES" | grep .)
[[ ${#PINS[@]} -gt 0 ]] || die "no PACKAGE=VERSION lines in $PACKAGES"
RECIPE_HASH="$(
  {
    printf 'rootfs %s\n' "${ROOTFS_TAR##*/}"
    printf 'arch %s\n' "$ARCH"
    printf 'recipe '; sha256sum <"${BASH_SOURCE[0]}"
    printf 'steps '; sha256sum <"$REPO_DIR/sim/image-steps.sh"
    printf 'packages '; sha256sum <"$PACKAGES"
  } | sha256sum | cut -c1-16
)"
TAG="$IMAGE_NAME:$RECIPE_HASH"
IMAGE_TAR="$IMAGE_DIR/monitoring-$RECIPE_HASH.tar"

mkdir -p "$IMAGE_DIR" "$ROOTFS_DIR" "$DEB_DIR"
# The engine first, before the lock exists: a dockerd started while fd 9 is open would hold the lock for its life.
docker info >/dev/null 2>&1 || bash "$REPO_DIR/sim/docker-engine.sh" ensure >&2
exec 9>"$CACHE_DIR/monitoring-image.lock"
flock -w "$LOCK_WAIT_SECONDS" 9 || die "another build held $CACHE_DIR/monitoring-image.lock for ${LOCK_WAIT_SECONDS} s"

WORK_DIR="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
cleanup() { rm -rf "$WORK_DIR"; }
trap cleanup EXIT

# Each pinned package's .deb, downloaded once into the cache (apt checks it against the archive's signed index).
deb_path() {
  local pin=$1 name version
  name="${pin%%=*}" version="${pin#*=}"
  printf '%s/%s_%s_%s.deb\n' "$DEB_DIR" "$name" "${version//:/%3a}" "$ARCH"
}

ensure_debs() {
  local pin missing=()
  for pin in "${PINS[@]}"; do
    [[ -f "$(deb_path "$pin")" ]] || missing+=("$pin")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  log "downloading ${missing[*]} from Debian"
  if ! (cd "$WORK_DIR" && apt-get download "${missing[@]}") >"$WORK_DIR/apt.log" 2>&1; then
    log "apt-get download failed; updating the package lists once and trying again"
    apt-get update >>"$WORK_DIR/apt.log" 2>&1 || true
    (cd "$WORK_DIR" && apt-get download "${missing[@]}") >>"$WORK_DIR/apt.log" 2>&1 || {
      tail -n 20 "$WORK_DIR/apt.log" >&2
      die "apt-get could not download ${missing[*]} (last lines above)"
    }
  fi
  for pin in "${missing[@]}"; do
    mv -f "$WORK_DIR/$(basename "$(deb_path "$pin")")" "$(deb_path "$pin")"
  done
}

build_image() {
  ensure_rootfs_tar "$ROOTFS_TAR" "$SUITE" "$VARIANT" "$INCLUDE_PACKAGES" "$WORK_DIR"
  ensure_debs
  local rootfs="$WORK_DIR/rootfs" pin
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  for pin in "${PINS[@]}"; do
    # Through tar, keeping the root's links: bookworm's /lib and /bin are links into /usr, which a plain
    # `dpkg-deb -x` replaces with the package's directories (the image's loader then gone).
    dpkg-deb --fsys-tarfile "$(deb_path "$pin")" | tar -x --keep-directory-symlink -C "$rootfs"
  done
  # The upstream images' paths (bookworm's /bin is a link to /usr/bin), and Prometheus's data directory, nobody's.
  ln -sf prometheus-node-exporter "$rootfs/usr/bin/node_exporter"
  ln -sf prometheus-alertmanager "$rootfs/usr/bin/alertmanager"
  install -d -o 65534 -g 65534 -m 0755 "$rootfs/prometheus"
  # Nothing here runs Python or ssh (the shared root file system has them for the other images): a smaller load
  # into every node.
  rm -rf "$rootfs/usr/share/doc"/prometheus* "$rootfs/etc/init.d" "$rootfs/lib/systemd" "$rootfs"/usr/lib/python3* \
    "$rootfs"/usr/bin/python3* "$rootfs"/usr/share/python3 "$rootfs"/usr/lib/openssh "$rootfs"/usr/bin/ssh*
  log "importing $TAG"
  tar --numeric-owner -C "$rootfs" -c . | docker import \
    --change 'USER 65534:65534' \
    --change 'ENTRYPOINT ["/bin/prometheus"]' \
    --change "LABEL org.spark-llm.monitoring.packages=${PINS[*]}" \
    --message "spark-llm monitoring (${PINS[*]}), recipe $RECIPE_HASH" \
    - "$TAG" >/dev/null
  local smoke="/bin/prometheus --version && /bin/node_exporter --version && /bin/alertmanager --version"
  if ! docker run --rm --network none --entrypoint sh "$TAG" -ec "$smoke" >"$WORK_DIR/smoke.log" 2>&1; then
    cat "$WORK_DIR/smoke.log" >&2
    docker image rm "$TAG" >/dev/null 2>&1 || true
    die "the new image failed its smoke test ($smoke)"
  fi
}

finish_image "$TAG" "$IMAGE_TAR" "$WORK_DIR" build_image
