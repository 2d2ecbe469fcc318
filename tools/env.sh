# shellcheck shell=bash
# Source this to use the project's toolchain: `. tools/env.sh` (the Makefile does it for every target).
# Puts the venv on PATH, and the Pulumi CLI tools/build-pulumi.sh built (with the Python language host
# tools/build-plugins.sh put beside it) when no official CLI is installed (one on PATH is used as it is).
# It leaves PULUMI_HOME and plugin downloads alone: `pulumi plugin install` and the engine's own plugin
# acquisition work as Pulumi's documentation says, and the providers the build scripts installed from source
# sit in the same PULUMI_HOME.
_spark_llm_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tools/versions.env
. "$_spark_llm_repo/tools/versions.env"
export SPARK_LLM_CACHE="${SPARK_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm}"
# The CLI tools/build-pulumi.sh built, with the language host tools/build-plugins.sh put beside it; only when it
# was built (a machine with the official CLI never builds one).
_spark_llm_bin="$SPARK_LLM_CACHE/pulumi/v$PULUMI_VERSION/bin"
if [ -d "$_spark_llm_bin" ]; then
  case ":$PATH:" in *":$_spark_llm_bin:"*) ;; *) PATH="$_spark_llm_bin:$PATH" ;; esac
fi
export PATH="$_spark_llm_repo/.venv/bin:$PATH"
# State stays on this machine unless the user chose a backend. `metadata=skip`: the file backend's library
# (gocloud.dev fileblob) otherwise rewrites a `<file>.attrs` sidecar next to every state file in place, unlike the
# file itself (a temp file, renamed); a CLI killed inside that window leaves it empty, and every later command on the
# stack then fails with "failed to load checkpoint: EOF". Pulumi needs nothing from those sidecars.
# A backend this file set for another checkout (sourced there earlier in the same shell) is not the user's choice:
# this checkout's state replaces it, or the second checkout would read and write the first one's stacks.
_spark_llm_backend="file://$_spark_llm_repo/.pulumi-state?metadata=skip"
if [ -z "${PULUMI_BACKEND_URL:-}" ] || [ "$PULUMI_BACKEND_URL" = "${SPARK_LLM_BACKEND_SET:-}" ]; then
  if [ -n "${PULUMI_BACKEND_URL:-}" ] && [ "$PULUMI_BACKEND_URL" != "$_spark_llm_backend" ]; then
    echo "tools/env.sh: the state is now this checkout's ($_spark_llm_backend), no longer $PULUMI_BACKEND_URL" >&2
  fi
  mkdir -p "$_spark_llm_repo/.pulumi-state"
  export PULUMI_BACKEND_URL="$_spark_llm_backend"
  export SPARK_LLM_BACKEND_SET="$PULUMI_BACKEND_URL"
fi
# Secrets in state are encrypted with this passphrase. The empty default suits the sim stack only: for a real
# stack set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) before sourcing this file.
if [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="${PULUMI_CONFIG_PASSPHRASE-}"
fi
# The CLI's "a newer version is available" check only adds a network round trip to every command.
export PULUMI_SKIP_UPDATE_CHECK=true
unset _spark_llm_repo _spark_llm_bin _spark_llm_backend
