#!/usr/bin/env bash
# Make the pinned Pulumi plugins available: Pulumi's Python language host, pulumi-command and pulumi-docker.
#
# Usage:   tools/build-plugins.sh           # after tools/build-pulumi.sh, with `pulumi` on PATH
# Env:     SPARK_LLM_CACHE          cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm)
#          SPARK_LLM_PLUGIN_SOURCES where the plugins' upstream sources are (default: ../shared/vendor beside
#                                   the checkout); used only when Pulumi's own download cannot be reached
#          PULUMI_HOME              where `pulumi plugin install` puts the providers (Pulumi's default: ~/.pulumi)
# Outputs: `pulumi plugin ls` lists resource command and docker at the pinned versions; pulumi-language-python
#          sits beside the CLI; the last line on stdout is that directory.
#
# For each plugin, in this order (the first that works wins):
#   1. already there: `pulumi plugin ls` lists the provider; a `pulumi-language-python` beside the CLI (the
#      official CLI ships one);
#   2. Pulumi's own path: `pulumi plugin install resource NAME VERSION` (downloads; a user with internet ends here);
#   3. the offline path (for the language host the only one: it ships with the CLI, and ours is built from
#      source too): build from the upstream sources in SPARK_LLM_PLUGIN_SOURCES with the Go module proxy and
#      the go.mod/go.sum pinned in tools/go/<plugin>/, cache the binary, `pulumi plugin install ... --file`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${SPARK_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm}
sources=${SPARK_LLM_PLUGIN_SOURCES:-$repo/../shared/vendor}
langhost_bin="$cache/pulumi-language-python/v$LANGHOST_VERSION/bin"

log() { printf 'build-plugins: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v pulumi >/dev/null || die "no pulumi on PATH; run tools/build-pulumi.sh first (make tools does both)"

# $1 plugin kind, $2 name, $3 version: true when `pulumi plugin ls` lists exactly that plugin.
plugin_listed() {
  pulumi plugin ls --json 2>/dev/null | python3 -c '
import json, sys
kind, name, version = sys.argv[1:]
plugins = json.load(sys.stdin) or []
sys.exit(0 if any(p["kind"] == kind and p["name"] == name and p["version"] == version for p in plugins) else 1)
' "$1" "$2" "$3"
}

# $1 vendored folder, $2 the pinned module dir under tools/go (names the copy): a private copy of the sources.
stage_sources() {
  local from="$sources/$1" stage
  [ -d "$from" ] || die "no sources at $from. Set SPARK_LLM_PLUGIN_SOURCES to the folder that holds $1, or install the plugins with Pulumi's own download (pulumi plugin install) on a machine that reaches it."
  stage=$(mktemp -d "$cache/.stage-$2.XXXXXX")
  # A copy: shared/ is read-only, and the docker build patches and generates files in place.
  cp -R "$from/." "$stage/"
  chmod -R u+w "$stage"
  echo "$stage"
}

# $1 name, $2 stage dir, $3 log file, then the build command: run it, show the log's tail on failure.
build_in() {
  local name=$1 dir=$2 logfile=$3
  shift 3
  local start=$SECONDS
  if ! (cd "$dir" && "$@") >>"$logfile" 2>&1; then
    tail -n 30 "$logfile" >&2
    die "could not build $name (log above, whole log in $logfile). Check the Go module proxy is reachable (go env GOPROXY)."
  fi
  log "built $name in $((SECONDS - start)) s"
}

# $1 name, $2 version, $3 the built binary (into the cache, atomically), then installed into PULUMI_HOME.
install_provider() {
  local name=$1 version=$2 built=$3 dest="$cache/plugins/pulumi-resource-$1-v$2"
  if [ ! -x "$dest/pulumi-resource-$name" ]; then
    mkdir -p "$(dirname "$dest")"
    local tmp
    tmp=$(mktemp -d "$dest.XXXXXX")
    install -m 0755 "$built" "$tmp/pulumi-resource-$name"
    rm -rf "$dest"
    mv "$tmp" "$dest"
  fi
  pulumi plugin install resource "$name" "$version" --file "$dest/pulumi-resource-$name" >&2
}

# pulumi-docker's own build applies its patches to the Terraform provider it wraps (its `upstream` submodule) and
# generates the schema it embeds. $1: the stage.
prepare_docker() {
  local patch
  for patch in "$1"/patches/*.patch; do
    (cd "$1/upstream" && patch -s -p1 <"$patch") || die "could not apply $(basename "$patch")"
  done
  build_in "pulumi-docker schema" "$1/provider/cmd/pulumi-resource-docker" "$1.log" \
    env GOFLAGS=-mod=readonly VERSION="$DOCKER_VERSION" go generate ./
}

# $1 name (command|docker), $2 version, $3 vendored folder, $4 Go package of the version variable.
build_provider() {
  local name=$1 version=$2 stage
  stage=$(stage_sources "$3" "pulumi-resource-$name") || exit 1  # its die() ends only the $(...)
  cp "$here/go/pulumi-resource-$name/go.mod" "$here/go/pulumi-resource-$name/go.sum" "$stage/provider/"
  if declare -F "prepare_$name" >/dev/null; then "prepare_$name" "$stage"; fi
  build_in "pulumi-resource-$name $version" "$stage/provider" "$stage.log" \
    env GOFLAGS=-mod=readonly go build -trimpath -o "$stage/bin/pulumi-resource-$name" \
    -ldflags "-s -w -X $4.Version=$version" "./cmd/pulumi-resource-$name"
  echo "$stage"
}

build_langhost() {
  local stage
  stage=$(stage_sources "pulumi-language-python-$LANGHOST_VERSION" pulumi-language-python) || exit 1
  # Upstream's go.mod points pkg/v3 and sdk/v3 at the monorepo; the pinned one uses the served modules.
  cp "$here/go/pulumi-language-python/go.mod" "$here/go/pulumi-language-python/go.sum" "$stage/"
  build_in "pulumi-language-python $LANGHOST_VERSION" "$stage" "$stage.log" \
    env GOFLAGS=-mod=readonly go build -trimpath -o "$stage/bin/pulumi-language-python" \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$LANGHOST_VERSION" .
  # The host runs programs with Pulumi's Python runner, which must sit beside it (else "missing executor").
  local sdk
  sdk=$(cd "$stage" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3) \
    || die "could not locate github.com/pulumi/pulumi/sdk/v3 in the module cache"
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$stage/bin/"
  echo "$stage"
}

mkdir -p "$cache"
stages=()
cleanup() { local s; for s in "${stages[@]}"; do rm -rf "$s" "$s.log"; done; }
trap cleanup EXIT

# ---- providers ----
# "NAME VERSION FOLDER VERSION-PACKAGE" for each provider.
for spec in "command $COMMAND_VERSION pulumi-command-$COMMAND_VERSION github.com/pulumi/pulumi-command/provider/pkg/version" \
  "docker $DOCKER_VERSION pulumi-docker-$DOCKER_VERSION github.com/pulumi/pulumi-docker/provider/v5/pkg/version"; do
  read -r name version folder version_pkg <<<"$spec"
  if plugin_listed resource "$name" "$version"; then
    continue
  fi
  if [ -x "$cache/plugins/pulumi-resource-$name-v$version/pulumi-resource-$name" ]; then
    install_provider "$name" "$version" "$cache/plugins/pulumi-resource-$name-v$version/pulumi-resource-$name"
    continue
  fi
  log "installing resource plugin $name $version with Pulumi's download"
  if timeout 120 pulumi plugin install resource "$name" "$version" >/dev/null 2>"$cache/.download-$name.log"; then
    continue
  fi
  log "download unreachable ($(tail -n 1 "$cache/.download-$name.log" | cut -c1-160)); building from $sources"
  command -v go >/dev/null || die "Go is not installed; it is needed to build pulumi-resource-$name from source"
  stage=$(build_provider "$name" "$version" "$folder" "$version_pkg")
  stages+=("$stage")
  install_provider "$name" "$version" "$stage/bin/pulumi-resource-$name"
done

# ---- the Python language host ----
# The official CLI ships Pulumi's language host beside itself. Ours gets one built from source, installed beside
# it too: the CLI looks there first (a host found only on PATH works, but every command then warns about it).
cli_dir=$(dirname "$(command -v pulumi)")
if [ -x "$cli_dir/pulumi-language-python" ]; then
  echo "$cli_dir"
  exit 0
fi
[ "$cli_dir" = "$cache/pulumi/v$PULUMI_VERSION/bin" ] \
  || die "$cli_dir/pulumi has no pulumi-language-python beside it. Install the official Pulumi CLI (it ships one), or unset it from PATH so that make tools builds the project's own."
if [ ! -x "$langhost_bin/pulumi-language-python" ] || [ ! -x "$langhost_bin/pulumi-language-python-exec" ]; then
  command -v go >/dev/null || die "Go is not installed; it is needed to build pulumi-language-python from source"
  stage=$(build_langhost)
  stages+=("$stage")
  mkdir -p "$(dirname "$langhost_bin")"
  rm -rf "$langhost_bin"
  mv "$stage/bin" "$langhost_bin"
fi
# The runner (pulumi-language-python-exec) is already there: build-pulumi.sh puts it beside the CLI.
install -m 0755 "$langhost_bin/pulumi-language-python" "$cli_dir/pulumi-language-python.tmp"
mv -f "$cli_dir/pulumi-language-python.tmp" "$cli_dir/pulumi-language-python"
echo "$cli_dir"
