#!/usr/bin/env bash
# Run the pinned uv (PyPI's `uv`, UV_VERSION in tools/versions.env), installing it first into a cache outside the
# checkout: `make venv` fills the developers' venv with it (the same pins pip would install, in ~8 s instead of ~43:
# a fresh clone's `make test` used to wait on pip with one core busy). The deploy path (`make deploy-tools`, run as
# the operator's own user) keeps python3's venv and pip: uv leaves a build lock in /tmp (uv-setuptools-*.lock).
#
# Usage:   tools/uv.sh ARGS...          e.g. tools/uv.sh pip install --python .venv/bin/python -r requirements.txt
# Env:     SPARK_LLM_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm)
#          PIP_INDEX_URL, PIP_FIND_LINKS  passed on as uv's UV_DEFAULT_INDEX and UV_FIND_LINKS (a machine that
#          reaches PyPI through a mirror has said so to pip)
# Outputs: uv's own; uv itself in $SPARK_LLM_CACHE/uv/$UV_VERSION (a venv made by python3 -m venv).
#
# Needs python3 with its venv module and pip, and PyPI; no root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${SPARK_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm}
home="$cache/uv/$UV_VERSION"
uv="$home/bin/uv"

if [ ! -x "$uv" ]; then
  echo "uv: installing uv $UV_VERSION from PyPI into $home" >&2
  # Built beside its place and moved in whole: an interrupted install leaves no half venv that looks finished (uv is
  # a binary: the venv's script paths do not matter to it). Another make that finished first keeps its own.
  mkdir -p "$(dirname "$home")"
  partial=$(mktemp -d "$home.partial.XXXXXX")
  trap 'rm -rf "$partial"' EXIT
  python3 -m venv "$partial"
  "$partial/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  mv -T "$partial" "$home" 2>/dev/null || [ -x "$uv" ]
  rm -rf "$partial" # what lost the race (the trap does not run: exec below replaces this shell)
fi

# Python only as this machine has it (uv would otherwise download one); the system's CA certificates, as pip uses.
export UV_PYTHON_DOWNLOADS=never UV_NATIVE_TLS=1
if [ -n "${PIP_INDEX_URL:-}" ]; then export UV_DEFAULT_INDEX="$PIP_INDEX_URL"; fi
if [ -n "${PIP_FIND_LINKS:-}" ]; then export UV_FIND_LINKS="$PIP_FIND_LINKS"; fi
exec "$uv" "$@"
