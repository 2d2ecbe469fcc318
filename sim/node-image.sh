#!/usr/bin/env bash
# Purpose: build the sim node image (Debian bookworm with sshd and its own Docker engine) once per recipe.
#   The tag is a hash of the recipe (sim/node/* and this script), so a changed recipe builds a new image
#   and an unchanged one is reused. The root file system comes from debootstrap and Debian's
#   packages (no registry image can be pulled here), then `docker import`.
# Usage: sim/node-image.sh ensure   build the image unless it exists; print its name on stdout
#        sim/node-image.sh name     print the image name the current recipe gives, build nothing
# Environment:
#   SIM_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the one apt uses on this machine,
#                      else http://deb.debian.org/debian)
#   SIM_BUILD_DIR      parent of the temporary build folder (default /var/tmp)
# Outputs: the image spark-llm/sim-node:<recipe-hash> in the local engine; its name on stdout;
#   progress on stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly HERE
readonly RECIPE_DIR="${HERE}/node"
readonly IMAGE_REPO="spark-llm/sim-node"
readonly SUITE="bookworm"
readonly ENTRYPOINT_PATH="/usr/local/sbin/spark-llm-node-entrypoint"
readonly LOCK_FILE="/var/lock/spark-llm-sim-node-image.lock"

log() { echo "[node-image] $*" >&2; }
die() { echo "[node-image] error: $*" >&2; exit 1; }

usage() {
  echo "Usage: $0 ensure|name" >&2
  exit 2
}

# Hash of every file that decides the image's content.
recipe_hash() {
  (
    cd "${HERE}"
    sha256sum node/packages.txt node/entrypoint.sh node/sshd_config node-image.sh
  ) | sha256sum | cut -c1-12
}

image_name() {
  echo "${IMAGE_REPO}:$(recipe_hash)"
}

# The Debian archive apt uses here (deb822 .sources or one-line .list), so debootstrap reaches
# the same mirror as apt-get does.
debian_mirror() {
  if [[ -n "${SIM_DEBIAN_MIRROR:-}" ]]; then
    echo "${SIM_DEBIAN_MIRROR}"
    return 0
  fi
  local -a sources=()
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f "${f}" ]] && sources+=("${f}")
  done
  local mirror=""
  if [[ "${#sources[@]}" -gt 0 ]]; then
    mirror="$(awk '
      /^[[:space:]]*#/ { next }
      $1 == "deb" || $1 == "URIs:" {
        for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):\/\/.*\/debian\/?$/) { print $i; exit }
      }' "${sources[@]}")"
  fi
  echo "${mirror:-http://deb.debian.org/debian}"
}

packages_csv() {
  grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "${RECIPE_DIR}/packages.txt" | paste -sd, -
}

BUILD_DIR=""
cleanup() {
  [[ -n "${BUILD_DIR}" && -d "${BUILD_DIR}" ]] || return 0
  # An interrupted debootstrap can leave proc/sys mounted in the target: unmount before deleting.
  local mount_point
  awk -v dir="${BUILD_DIR}/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r mount_point; do umount -l "${mount_point}" || true; done
  rm -rf --one-file-system "${BUILD_DIR}"
}

build() {
  local image="$1"
  local mirror
  mirror="$(debian_mirror)"
  BUILD_DIR="$(mktemp -d "${SIM_BUILD_DIR:-/var/tmp}/spark-llm-sim-node.XXXXXX")"
  trap cleanup EXIT
  local rootfs="${BUILD_DIR}/rootfs"
  local started="${SECONDS}"

  log "debootstrap ${SUITE} from ${mirror} (about a minute)"
  if ! debootstrap --variant=minbase --include="$(packages_csv)" "${SUITE}" "${rootfs}" "${mirror}" \
    >"${BUILD_DIR}/debootstrap.log" 2>&1; then
    tail -n 30 "${BUILD_DIR}/debootstrap.log" >&2
    die "debootstrap failed (log above)"
  fi

  install -m 0755 "${RECIPE_DIR}/entrypoint.sh" "${rootfs}${ENTRYPOINT_PATH}"
  install -m 0644 "${RECIPE_DIR}/sshd_config" "${rootfs}/etc/ssh/sshd_config.d/spark-llm-sim.conf"
  install -d -m 0700 "${rootfs}/root/.ssh"
  # openssh-server's postinst made host keys: drop them so that every node makes its own.
  rm -f "${rootfs}"/etc/ssh/ssh_host_*
  # Nothing in a node installs packages: drop the caches to keep the image small.
  rm -rf "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/lib/apt/lists/*
  : >"${rootfs}/etc/machine-id"

  log "docker import ${image}"
  tar -C "${rootfs}" --numeric-owner -c . |
    docker import \
      --change "CMD [\"${ENTRYPOINT_PATH}\"]" \
      --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      --message "spark-llm sim node, recipe $(recipe_hash)" \
      - "${image}" >/dev/null
  log "built ${image} in $((SECONDS - started))s"
}

ensure() {
  local image
  image="$(image_name)"
  if docker image inspect "${image}" >/dev/null 2>&1; then
    log "reusing ${image}"
    echo "${image}"
    return 0
  fi
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: run sim/docker-engine.sh ensure"
  # Two sims started at once must not both build: the second waits, then finds the image.
  mkdir -p "$(dirname "${LOCK_FILE}")"
  exec 9>"${LOCK_FILE}"
  if ! flock -w 600 9; then
    die "gave up after 600s waiting for another build to release ${LOCK_FILE}"
  fi
  if ! docker image inspect "${image}" >/dev/null 2>&1; then
    build "${image}"
  else
    log "another build made ${image}"
  fi
  echo "${image}"
}

[[ "$#" -eq 1 ]] || usage
case "$1" in
  ensure) ensure ;;
  name) image_name ;;
  *) usage ;;
esac
