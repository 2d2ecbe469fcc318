# shellcheck shell=bash
# Source this to use the project's own toolchain: `. tools/env.sh` (the Makefile does it for every target).
# Puts the built Pulumi CLI, the Python language host and the venv on PATH, and runs Pulumi fully offline:
# a local file backend, no update check, no plugin downloads.
_spark_llm_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tools/versions.env
. "$_spark_llm_repo/tools/versions.env"
export SPARK_LLM_CACHE="${SPARK_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm}"
export PATH="$_spark_llm_repo/tools/bin:$SPARK_LLM_CACHE/pulumi/v$PULUMI_VERSION/bin:$_spark_llm_repo/.venv/bin:$PATH"
export PULUMI_HOME="${PULUMI_HOME:-$SPARK_LLM_CACHE/pulumi-home}"
# State stays on this machine unless the user chose a backend.
if [ -z "${PULUMI_BACKEND_URL:-}" ]; then
  mkdir -p "$_spark_llm_repo/.pulumi-state"
  export PULUMI_BACKEND_URL="file://$_spark_llm_repo/.pulumi-state"
fi
# Secrets in state are encrypted with this passphrase. The empty default suits the sim stack only: for a real
# stack set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) before sourcing this file.
if [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="${PULUMI_CONFIG_PASSPHRASE-}"
fi
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK=false
unset _spark_llm_repo
