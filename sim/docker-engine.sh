#!/usr/bin/env bash
# Purpose: make sure a Docker engine runs on this machine; the sim cluster's nodes are its containers.
#   Installs what the sim needs from Debian when missing (docker.io, debootstrap, rsync, openssh-client),
#   starts dockerd in the background when `docker info` fails, and waits until it answers.
#   Idempotent: a running engine is left alone. Safe to run concurrently (pytest-xdist workers each ensure the
#   engine): the check-and-start holds a lock, so exactly one dockerd is started. Two would race for containerd's
#   metadata database and the loser's containerd times out ("waiting for response from boltdb open").
# Usage: sim/docker-engine.sh ensure
# Environment:
#   SIM_DOCKER_WAIT_SECONDS  how long to wait for `docker info` after starting dockerd (default 60)
#   SIM_DOCKERD_LOG          dockerd's log file (default /var/log/spark-llm-dockerd.log)
# Outputs: progress lines on stderr; exit 0 once `docker info` works, non-zero otherwise.
set -euo pipefail

readonly WAIT_SECONDS="${SIM_DOCKER_WAIT_SECONDS:-60}"
readonly DOCKERD_LOG="${SIM_DOCKERD_LOG:-/var/log/spark-llm-dockerd.log}"
readonly DOCKERD_PID_FILE="/var/run/docker.pid"
readonly LOCK_FILE="${SIM_DOCKER_LOCK:-/var/run/spark-llm-docker-engine.lock}"

log() { echo "[docker-engine] $*" >&2; }
die() { echo "[docker-engine] error: $*" >&2; exit 1; }

usage() {
  echo "Usage: $0 ensure" >&2
  exit 2
}

# Debian package that provides each command the sim uses on the host.
install_missing_packages() {
  local -a missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v rsync >/dev/null 2>&1 || missing+=(rsync)
  command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
  if [[ "${#missing[@]}" -eq 0 ]]; then
    return 0
  fi
  [[ "$(id -u)" -eq 0 ]] || die "missing ${missing[*]} and not root: install them first"
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The host's own dockerd, by its pid file: `pgrep dockerd` would also match the engines inside
# the sim nodes, which share this machine's process list.
host_dockerd_running() {
  local pid
  pid="$(cat "${DOCKERD_PID_FILE}" 2>/dev/null || true)"
  [[ -n "${pid}" && "$(cat "/proc/${pid}/comm" 2>/dev/null || true)" == "dockerd" ]]
}

start_dockerd() {
  log "starting dockerd (log: ${DOCKERD_LOG})"
  mkdir -p "$(dirname "${DOCKERD_LOG}")"
  # setsid: the engine must outlive this script and the shell that ran it. It must also not inherit the caller's
  # open descriptors: a build lock (flock) held on one would stay held for as long as dockerd runs.
  (
    for fd in /proc/"${BASHPID}"/fd/*; do
      fd=${fd##*/}
      if ((fd > 2)); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
    done
    exec setsid dockerd >>"${DOCKERD_LOG}" 2>&1 < /dev/null
  ) &
  disown || true
}

wait_for_engine() {
  local deadline=$((SECONDS + WAIT_SECONDS))
  until docker info >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "[docker-engine] error: gave up after ${WAIT_SECONDS}s waiting for 'docker info' to answer;" \
        "last lines of ${DOCKERD_LOG}:" >&2
      tail -n 20 "${DOCKERD_LOG}" >&2 || true
      exit 1
    fi
    sleep 1
  done
}

ensure() {
  # One caller at a time: apt-get and dockerd both refuse (or corrupt) a second concurrent run.
  # The descriptor is closed in dockerd's subshell (start_dockerd), so the lock ends with this script.
  exec 8>"${LOCK_FILE}"
  flock 8
  install_missing_packages
  if docker info >/dev/null 2>&1; then
    log "engine already running"
    return 0
  fi
  if host_dockerd_running; then
    log "dockerd is running but not answering yet"
  else
    start_dockerd
  fi
  wait_for_engine
  log "engine ready ($(docker info --format '{{.ServerVersion}} {{.Driver}}'))"
}

[[ "$#" -eq 1 ]] || usage
case "$1" in
  ensure) ensure ;;
  *) usage ;;
esac
