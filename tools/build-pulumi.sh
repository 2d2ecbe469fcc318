#!/usr/bin/env bash
# Build (or reuse) the pinned Pulumi CLI from the Go module proxy, into a cache outside the checkout.
#
# Usage:   tools/build-pulumi.sh            # prints the bin directory to put on PATH
# Env:     SPARK_LLM_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm)
# Outputs: $SPARK_LLM_CACHE/pulumi/v$PULUMI_VERSION/bin/{pulumi,pulumi-language-python-exec,
#          pulumi-resource-pulumi-python}; the last line on stdout is that bin directory.
#
# Why a build: the Pulumi installer and plugin downloads cannot reach their servers here; the Go module proxy can.
# pkg/v3 has `replace` directives, so `go install pkg@version` is refused; tools/go/pulumi-cli is a wrapper
# module (pinned go.sum) that requires it and repeats its one non-local replace.
# A `pulumi` already on PATH at or above the pinned version is used as it is (what a user with internet has).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${SPARK_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm}
bin="$cache/pulumi/v$PULUMI_VERSION/bin"

log() { printf 'build-pulumi: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

version_at_least() { # $1 >= $2, both X.Y.Z
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]
}

# 1. A pulumi on PATH (outside our own cache) that is new enough wins.
if existing=$(command -v pulumi 2>/dev/null) && [ "$(dirname "$existing")" != "$bin" ]; then
  have=$(pulumi version 2>/dev/null | sed 's/^v//')
  if [ -n "$have" ] && version_at_least "$have" "$PULUMI_VERSION"; then
    log "using $existing (v$have >= v$PULUMI_VERSION)"
    dirname "$existing"
    exit 0
  fi
  log "ignoring $existing (version '${have:-none}' < v$PULUMI_VERSION)"
fi

if [ -x "$bin/pulumi" ] && [ -x "$bin/pulumi-language-python-exec" ] && [ -x "$bin/pulumi-resource-pulumi-python" ]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || die "no pulumi >= v$PULUMI_VERSION on PATH, and no Go to build one. Install the official Pulumi CLI (https://www.pulumi.com/docs/install/: no root, into ~/.pulumi/bin) and put it on PATH, or install Go >= 1.26 to build github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION here"
export GOFLAGS=-mod=mod
stage=$(mktemp -d "$cache/.stage.XXXXXX" 2>/dev/null || { mkdir -p "$cache" && mktemp -d "$cache/.stage.XXXXXX"; })
trap 'rm -rf "$stage"' EXIT

module=github.com/pulumi/pulumi/pkg/v3
log "building $module/cmd/pulumi@v$PULUMI_VERSION (first time: module download + a few minutes of compile)"
start=$SECONDS
if ! (cd "$here/go/pulumi-cli" && CGO_ENABLED=0 go build -trimpath -tags osusergo,grpcnotrace \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      -o "$stage/pulumi" "$module/cmd/pulumi") >"$stage/build.log" 2>&1; then
  tail -n 30 "$stage/build.log" >&2
  die "could not build $module@v$PULUMI_VERSION (log above). Check the Go module proxy is reachable (go env GOPROXY) and Go >= the go line of tools/go/pulumi-cli/go.mod."
fi
log "built in $((SECONDS - start)) s"

# The Python pieces Pulumi ships beside its CLI live in the sdk/v3 module zip: the program runner used by the
# language host, and the dynamic-provider plugin launcher.
sdk=$(cd "$here/go/pulumi-cli" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3) \
  || die "could not locate github.com/pulumi/pulumi/sdk/v3 in the module cache"
install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$stage/"
install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$stage/"

got=$("$stage/pulumi" version)
[ "$got" = "v$PULUMI_VERSION" ] || die "built CLI reports version '$got', expected v$PULUMI_VERSION (missing -X ldflag?)"

# Atomic install: the bin directory appears whole or not at all.
mkdir -p "$(dirname "$bin")"
rm -f "$stage/build.log"
rm -rf "$bin.old"
[ -d "$bin" ] && mv "$bin" "$bin.old"
mv "$stage" "$bin"
trap - EXIT
rm -rf "$bin.old"
echo "$bin"
