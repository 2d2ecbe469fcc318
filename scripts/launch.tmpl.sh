#!/usr/bin/env bash
# spark-llm launch script: the engine container's entrypoint, and what the node reports about that container.
#
# Rendered by spark_llm/plan.py from scripts/launch.tmpl.sh; byte-identical on every node of the group. Pulumi's
# docker provider creates each node's container (components/engine_group.py: image, host network, GPUs, mounts,
# the engine's command line); this script, mounted read-only at /spark-llm/launch.sh, is what that container runs.
#
# Usage:   launch.sh run NODE CMD...            (in the container) load the engine env file, then exec CMD
#          launch.sh watch NODE                 (on the node) fail with the container's last log lines if it stops
#                                               within STARTUP_GRACE seconds; else print its ID
#          launch.sh status NODE                print "running ID STARTED REVISION", "exited CODE ID" or "absent"
#          launch.sh logs NODE [LINES]          print the container's last log lines
# Env:     secrets and engine variables come from the env file (mode 0600, mounted read-only), never from
#          this script, argv or the container's configuration.
set -euo pipefail

# ---- rendered values (do not edit on the node: `pulumi up` rewrites this file) ----
CONTAINER=@@CONTAINER@@
GROUP_REVISION=@@GROUP_REVISION@@
# Where the container sees the engine env file (docker --env-file format: KEY=value a line, no quoting).
ENV_FILE=@@ENV_FILE@@
STARTUP_GRACE=@@STARTUP_GRACE@@
# Engine profile (spark_llm/engines) and release, for the start line in the engine's log.
PROFILE=@@PROFILE@@
declare -A NODE_RANK=@@NODE_RANK@@
# ---- end of rendered values ----

usage() {
  echo "Usage: $0 run NODE CMD... | watch NODE | status NODE | logs NODE [LINES]" >&2
  exit 2
}
die() { echo "launch.sh: $*" >&2; exit 1; }

[ $# -ge 2 ] || usage
mode=$1
node=$2
shift 2
[ -n "${NODE_RANK[$node]+x}" ] || die "unknown node '$node' (known: ${!NODE_RANK[*]})"
rank=${NODE_RANK[$node]}

container_state() {
  local out
  # docker inspect prints an empty line before failing on a missing container: use its exit code, not its output.
  local fmt='{{.State.Status}} {{.State.ExitCode}} {{.Id}} {{.State.StartedAt}} {{index .Config.Labels "spark-llm.group-revision"}}'
  if out=$(docker inspect -f "$fmt" "$CONTAINER" 2>/dev/null); then
    echo "$out"
  else
    echo "absent 0 - - -"
  fi
}

case "$mode" in
  run)
    [ $# -ge 1 ] || usage
    # One variable a line, taken literally (as docker's --env-file would): values may hold spaces and quotes.
    if [ -r "$ENV_FILE" ]; then
      while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in '' | '#'*) continue ;; esac
        export "${line?}"
      done <"$ENV_FILE"
    fi
    echo "starting $CONTAINER on $node: rank=$rank profile=$PROFILE revision=$GROUP_REVISION"
    exec "$@" ;;
  watch)
    # "Created" is not "running": a bad flag or a crash at init exits within seconds. Watch for STARTUP_GRACE.
    for _ in $(seq 1 "$STARTUP_GRACE"); do
      read -r state code _ _ _ < <(container_state)
      if [ "$state" != running ]; then
        echo "---- last lines of $CONTAINER on $node ----" >&2
        docker logs --tail 40 "$CONTAINER" >&2 2>&1 || true
        die "$CONTAINER on $node stopped during startup ($state, exit code $code)"
      fi
      sleep 1
    done
    read -r state code id _ _ < <(container_state)
    [ "$state" = running ] || die "$CONTAINER on $node stopped during startup ($state, exit code $code)"
    echo "$CONTAINER on $node: running after $STARTUP_GRACE s ($id)" ;;
  status)
    read -r state code id started revision < <(container_state)
    case "$state" in
      running) echo "running $id $started $revision" ;;
      absent) echo absent ;;
      *) echo "exited $code $id" ;;
    esac ;;
  logs)
    docker logs --tail "${1:-50}" "$CONTAINER" 2>&1 || true ;;
  *) usage ;;
esac
