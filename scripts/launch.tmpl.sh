#!/usr/bin/env bash
# spark-llm launch script: starts, stops or inspects this node's engine container.
#
# Rendered by spark_llm/plan.py from scripts/launch.tmpl.sh; byte-identical on every node of the group, so the
# node says who it is on the command line and looks up its rank in the table below.
#
# Usage:   launch.sh start head|worker NODE     start the engine container (replacing an old one)
#          launch.sh stop NODE                  remove the engine container (no-op when absent)
#          launch.sh status NODE                print "running ID STARTED REVISION", "exited CODE ID" or "absent"
#          launch.sh logs NODE [LINES]          print the container's last log lines
# Env:     secrets and engine variables come from ENV_FILE (mode 0600), never from this script or argv.
# Outputs: `start` prints the container ID on its last line once the container is still running after
#          STARTUP_GRACE seconds; it exits 1 with the container's last log lines if it stopped before.
set -euo pipefail

# ---- rendered values (do not edit on the node: `pulumi up` rewrites this file) ----
IMAGE=@@IMAGE@@
CONTAINER=@@CONTAINER@@
GROUP_REVISION=@@GROUP_REVISION@@
ENV_FILE=@@ENV_FILE@@
# The head's engine config file with the API key (empty: no key); mounted read-only for the API-serving rank.
API_CONFIG=@@API_CONFIG@@
CACHE_DIR=@@CACHE_DIR@@
MODEL_PATH=@@MODEL_PATH@@
STARTUP_GRACE=@@STARTUP_GRACE@@
# Engine profile (spark_llm/engines) and release; the release also tells the sim's stand-in which flags exist.
PROFILE=@@PROFILE@@
ENGINE_VERSION=@@ENGINE_VERSION@@
declare -A NODE_RANK=@@NODE_RANK@@
DOCKER_ARGS=@@DOCKER_ARGS@@

# Per node: the container's command (CMD) and its non-secret environment (NODE_ENV, as docker -e options).
# shellcheck disable=SC2016  # a command may be a `bash -c` script whose $ expand in the container, not here
node_launch() {
  CMD=()
  NODE_ENV=()
  case "$1" in
    # @@NODE_LAUNCH@@ (one case per node, rendered by the plan)
    *) ;;
  esac
}
# ---- end of rendered values ----

usage() {
  echo "Usage: $0 start head|worker NODE | stop NODE | status NODE | logs NODE [LINES]" >&2
  exit 2
}
die() { echo "launch.sh: $*" >&2; exit 1; }

[ $# -ge 2 ] || usage
mode=$1
case "$mode" in
  start) [ $# -eq 3 ] || usage; role=$2; node=$3 ;;
  stop|status) [ $# -eq 2 ] || usage; node=$2 ;;
  logs) [ $# -ge 2 ] || usage; node=$2 ;;
  *) usage ;;
esac
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
  stop)
    # Stop gracefully first so the engine can leave the group, then remove.
    docker stop -t 10 "$CONTAINER" >/dev/null 2>&1 || true
    docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
    echo "stopped $CONTAINER on $node"
    exit 0 ;;
  status)
    read -r state code id started revision < <(container_state)
    case "$state" in
      running) echo "running $id $started $revision" ;;
      absent) echo absent ;;
      *) echo "exited $code $id" ;;
    esac
    exit 0 ;;
  logs)
    docker logs --tail "${3:-50}" "$CONTAINER" 2>&1 || true
    exit 0 ;;
esac

case "$role" in
  head) [ "$rank" -eq 0 ] || die "node $node has rank $rank; only rank 0 is the head" ;;
  worker) [ "$rank" -gt 0 ] || die "node $node is the head (rank 0); start it with role head" ;;
  *) usage ;;
esac
[ -r "$ENV_FILE" ] || die "env file $ENV_FILE missing; run 'pulumi up' to recreate it"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "image $IMAGE is not on $node; run 'pulumi up' (EngineImage) first"

node_launch "$node"
[ ${#CMD[@]} -gt 0 ] || die "no launch command for node '$node' in this script"
MOUNTS=(-v "$MODEL_PATH:$MODEL_PATH:ro" -v "$CACHE_DIR:/root/.cache")
if [ -n "$API_CONFIG" ] && [ "$rank" -eq 0 ]; then
  [ -r "$API_CONFIG" ] || die "API key file $API_CONFIG missing; run 'pulumi up' to recreate it"
  MOUNTS+=(-v "$API_CONFIG:$API_CONFIG:ro")
fi

docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
# Compile/JIT caches survive restarts: a relaunch after a crash does not pay the warm-up again.
mkdir -p "$CACHE_DIR"
echo "starting $CONTAINER on $node: role=$role rank=$rank profile=$PROFILE revision=$GROUP_REVISION"
docker run -d --name "$CONTAINER" \
  --label "spark-llm.group-revision=$GROUP_REVISION" --label "spark-llm.role=$role" --label "spark-llm.node=$node" \
  --env-file "$ENV_FILE" -e "SPARK_LLM_NODE=$node" -e "SPARK_LLM_ENGINE_VERSION=$ENGINE_VERSION" "${NODE_ENV[@]}" \
  "${MOUNTS[@]}" \
  "${DOCKER_ARGS[@]}" \
  "$IMAGE" "${CMD[@]}" >/dev/null

# "Launched" is not "running": a bad flag or a crash at init exits within seconds. Watch for STARTUP_GRACE.
for _ in $(seq 1 "$STARTUP_GRACE"); do
  sleep 1
  read -r state code _ _ _ < <(container_state)
  if [ "$state" != running ]; then
    echo "---- last lines of $CONTAINER on $node ----" >&2
    docker logs --tail 40 "$CONTAINER" >&2 2>&1 || true
    die "$CONTAINER on $node stopped during startup ($state, exit code $code)"
  fi
done
docker inspect -f '{{.Id}}' "$CONTAINER"
