#!/usr/bin/env bash
# Install the Debian packages the project needs when they are missing (a fresh machine has none of them).
#
# Usage:   tools/system-deps.sh
# Needs:   root (apt-get); the machine reaches Debian's package mirror.
# Installs: docker.io (node engines and the sim), rsync (weights), openssh-client, shellcheck (lint),
#           debootstrap (sim images), curl, postgresql (the tests' private state server: the DIY postgres:// backend;
#           its binaries stay off PATH, in /usr/lib/postgresql/<major>/bin), prometheus (the generated scrape
#           config and alert rules are checked against a real Prometheus: tests/unit/sim/test_standin_prometheus.py).
set -euo pipefail

declare -A need=(
  [docker]=docker.io [dockerd]=docker.io [rsync]=rsync [ssh]=openssh-client
  [shellcheck]=shellcheck [debootstrap]=debootstrap [curl]=curl [prometheus]=prometheus
)
missing=()
for cmd in "${!need[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    missing+=("${need[$cmd]}")
  fi
done
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
  exit 1
fi
echo "system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
