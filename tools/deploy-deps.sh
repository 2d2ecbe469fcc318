#!/usr/bin/env bash
# Check that this machine has the programs deploying from it needs; install nothing (no root, nothing system-wide).
#
# Usage:   tools/deploy-deps.sh          (`make deploy-tools` runs it first)
# Needs:   nothing: it only looks.
# Checks:  python3 >= 3.11 with its venv module (the project venv), ssh (every step on a node, the docker
#          providers' ssh:// connections), rsync (the weights' upload).
# Outputs: nothing when all are there; else, on stderr, what is missing and the apt-get command that installs
#          it (for the machine's administrator, or you with sudo), and exit 1.
#
# Why only look: deploying runs as the operator's own user. tools/system-deps.sh (make tools: developing, the sim,
# the tests) is the one that installs Debian packages, as root.
set -euo pipefail

missing=()
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
if ! command -v python3 >/dev/null 2>&1; then
  missing+=(python3 python3-venv)
elif ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "deploy-deps: python3 is $(python3 -c 'import platform; print(platform.python_version())'); the project needs" \
    "Python >= 3.11 on PATH as python3 (e.g. sudo apt-get install python3.11 python3.11-venv)" >&2
  exit 1
elif ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  # Debian splits the venv module's pip bootstrap into its own package.
  missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deploy-deps: missing ${missing[*]} (nothing was installed). Install them with:" >&2
  echo "  sudo apt-get install ${missing[*]}" >&2
  echo "then run make deploy-tools again." >&2
  exit 1
fi
