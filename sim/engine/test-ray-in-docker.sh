#!/usr/bin/env bash
# End-to-end check of the stand-in's vLLM + Ray profile in the stand-in image, on a private docker network.
#
# Usage: sim/engine/test-ray-in-docker.sh [IMAGE_TAG]
#
# Starts a head and two workers from the image (default: the one sim/engine/build-image.sh builds) on an internal
# docker network, the way a launch script does on the nodes:
#   workers: ray start --address HEAD:6379 --num-gpus 1 --block
#   head:    ray start --head --port 6379 --num-gpus 1 && exec vllm serve MODEL --distributed-executor-backend ray -tp 3
# and checks, one scenario at a time:
#   formed        the group forms, the head serves a completion
#   worker-lost   a worker container is killed: the head exits 1 naming the node that left
#   crash-at-init STANDIN_CRASH_AT_INIT=2 in every node's environment: rank 2's actor fails in init_torch_distributed,
#                 the head exits 1 with that traceback
#   missing       only one worker joins: the head exits 1 after the dist timeout, saying what is missing
# Environment: SCENARIOS (default "formed worker-lost crash-at-init missing")
# Outputs: one line per scenario with its timings, then "N passed, N failed"; exit 1 when any failed. The containers
#          and the network are removed on exit (they are named standin-ray-test-<pid>-*).
set -euo pipefail

if [[ $# -gt 1 ]]; then
  echo "Usage: $0 [IMAGE_TAG]" >&2
  exit 2
fi

ENGINE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX="standin-ray-test-$$"
NETWORK="$PREFIX-net"
MODEL=/models/standin-ray
WORLD=3
WAIT_SECONDS=120
DIST_TIMEOUT=60
SCENARIOS="${SCENARIOS:-formed worker-lost crash-at-init missing}"
RAY_COMMON=(--num-gpus 1 --num-cpus 1 --object-store-memory 100000000 --disable-usage-stats)

log() { printf '[ray-test %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [[ $# -eq 1 ]]; then
  IMAGE=$1
else
  IMAGE="$("$ENGINE_DIR/build-image.sh" | tail -n 2 | head -n 1)"
fi

cleanup() {
  local names
  names="$(docker ps -aq --filter "name=^$PREFIX-")"
  if [[ -n "$names" ]]; then
    # shellcheck disable=SC2086 # one container ID per word
    docker rm -f $names >/dev/null 2>&1 || true
  fi
  docker network rm "$NETWORK" >/dev/null 2>&1 || true
}
trap cleanup EXIT

docker network create --internal "$NETWORK" >/dev/null

now_ms() { date +%s%3N; }

# The container's whole log. Captured first and searched after: `docker logs | grep -q` under pipefail fails
# whenever grep stops reading early (SIGPIPE to docker logs).
container_log() { docker logs "$PREFIX-$1" 2>&1 || true; }

# log_has NAME TEXT: whether the container's log contains TEXT (fixed string).
log_has() {
  local text
  text="$(container_log "$1")"
  grep -qF -- "$2" <<<"$text"
}

# start_head NAME [ENV...]: the head container; its PID 1 becomes `vllm serve` once Ray's head is up.
start_head() {
  local name=$1
  shift
  local env_args=() item
  for item in "$@"; do env_args+=(-e "$item"); done
  docker run -d --name "$PREFIX-$name" --hostname "$name" --network "$NETWORK" --shm-size 256m \
    -e STANDIN_DIST_TIMEOUT_SECONDS="$DIST_TIMEOUT" "${env_args[@]}" "$IMAGE" sh -ec "
      started=\$(date +%s%3N)
      ray start --head --port 6379 --include-dashboard false ${RAY_COMMON[*]} >/tmp/ray-start.log 2>&1 \
        || { cat /tmp/ray-start.log; exit 1; }
      echo \"ray-start-ms \$((\$(date +%s%3N) - started))\"
      exec vllm serve $MODEL --served-model-name standin-ray --distributed-executor-backend ray -tp $WORLD \
        --host 0.0.0.0 --port 8000" >/dev/null
}

# start_worker NAME HEAD [ENV...]: a Ray worker node that joins HEAD's cluster and stays in the foreground.
start_worker() {
  local name=$1 head=$2
  shift 2
  local env_args=() item
  for item in "$@"; do env_args+=(-e "$item"); done
  docker run -d --name "$PREFIX-$name" --hostname "$name" --network "$NETWORK" --shm-size 256m \
    "${env_args[@]}" "$IMAGE" sh -ec "
      started=\$(date +%s%3N)
      until ray start --address $head:6379 ${RAY_COMMON[*]} >/tmp/ray-start.log 2>&1; do
        [ \$((\$(date +%s%3N) - started)) -lt ${WAIT_SECONDS}000 ] || { cat /tmp/ray-start.log; exit 1; }
        sleep 1
      done
      echo \"ray-start-ms \$((\$(date +%s%3N) - started))\"
      exec sleep infinity" >/dev/null
}

# wait_for_log NAME TEXT: bounded wait until the container's log contains TEXT; 1 when it stopped or timed out.
wait_for_log() {
  local name=$1 text=$2 waited
  for ((waited = 0; waited < WAIT_SECONDS; waited++)); do
    log_has "$name" "$text" && return 0
    [[ "$(docker inspect -f '{{.State.Running}}' "$PREFIX-$name" 2>/dev/null)" == true ]] || {
      log_has "$name" "$text"
      return
    }
    sleep 1
  done
  log "gave up after $WAIT_SECONDS s waiting for '$text' in $name's log"
  return 1
}

# wait_for_exit NAME: the container's exit code once it stopped (bounded), else 124.
wait_for_exit() {
  local name=$1 waited
  for ((waited = 0; waited < WAIT_SECONDS + DIST_TIMEOUT; waited++)); do
    if [[ "$(docker inspect -f '{{.State.Running}}' "$PREFIX-$name")" != true ]]; then
      docker inspect -f '{{.State.ExitCode}}' "$PREFIX-$name"
      return
    fi
    sleep 1
  done
  log "gave up after $((WAIT_SECONDS + DIST_TIMEOUT)) s waiting for $name to exit"
  echo 124
}

completion_in_head() {
  docker exec "$PREFIX-$1" python3 -c '
import json, urllib.request
request = urllib.request.Request("http://127.0.0.1:8000/v1/completions",
    data=json.dumps({"model": "standin-ray", "prompt": "ray across nodes", "max_tokens": 8}).encode(),
    headers={"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(request, timeout=10))["choices"][0]["text"])'
}

ray_start_ms() { container_log "$1" | sed -n 's/^ray-start-ms //p' | sed -n 1p; }

fail() {
  log "FAILED: $*"
  container_log "$scenario-head" | tail -n 40 >&2
  failed=$((failed + 1))
}

passed=0
failed=0
for scenario in $SCENARIOS; do
  head="$scenario-head"
  log "scenario $scenario"
  started=$(now_ms)
  case "$scenario" in
    formed | worker-lost)
      start_head "$head"
      start_worker "$scenario-w1" "$head"
      start_worker "$scenario-w2" "$head"
      if ! wait_for_log "$head" "Application startup complete."; then
        fail "$scenario: the group did not form"
        continue
      fi
      ready_ms=$(($(now_ms) - started))
      if ! text="$(completion_in_head "$head")"; then
        fail "$scenario: no completion from the head"
        continue
      fi
      if [[ "$scenario" == formed ]]; then
        log "formed: ready after ${ready_ms} ms (ray start: head $(ray_start_ms "$head") ms, worker" \
          "$(ray_start_ms "$scenario-w1") ms); completion:$text"
        passed=$((passed + 1))
        continue
      fi
      killed=$(now_ms)
      docker kill "$PREFIX-$scenario-w2" >/dev/null
      code=$(wait_for_exit "$head")
      head_log="$(container_log "$head")"
      lost="$(grep -o "rank [0-9] on [^)]*) left the Ray cluster\|the RayWorkerWrapper of rank [0-9][^:]*" <<<"$head_log" \
        | sed -n 1p)"
      if [[ "$code" == 1 && -n "$lost" ]]; then
        log "worker-lost: head exited 1 $(($(now_ms) - killed)) ms after the kill: $lost"
        passed=$((passed + 1))
      else
        fail "worker-lost: head exit code $code, or no line naming the lost node"
      fi
      ;;
    crash-at-init)
      start_head "$head" STANDIN_CRASH_AT_INIT=2
      start_worker "$scenario-w1" "$head" STANDIN_CRASH_AT_INIT=2
      start_worker "$scenario-w2" "$head" STANDIN_CRASH_AT_INIT=2
      code=$(wait_for_exit "$head")
      if [[ "$code" == 1 ]] && log_has "$head" "in init_torch_distributed" \
        && log_has "$head" "simulated crash of rank 2"; then
        log "crash-at-init: head exited 1 after $(($(now_ms) - started)) ms with rank 2's traceback"
        passed=$((passed + 1))
      else
        fail "crash-at-init: head exit code $code, or no traceback through init_torch_distributed"
      fi
      ;;
    missing)
      DIST_TIMEOUT=15 start_head "$head"
      start_worker "$scenario-w1" "$head"
      code=$(wait_for_exit "$head")
      head_log="$(container_log "$head")"
      if [[ "$code" == 1 ]] && grep -qF "missing 1 node(s) with a GPU" <<<"$head_log"; then
        log "missing: head exited 1 after $(($(now_ms) - started)) ms: $(grep -o \
          'Timed out after [0-9]* seconds waiting for [0-9]* GPUs[^;]*' <<<"$head_log" | sed -n 1p)"
        passed=$((passed + 1))
      else
        fail "missing: head exit code $code, or no line saying what is missing"
      fi
      ;;
    *)
      fail "unknown scenario '$scenario' (known: formed worker-lost crash-at-init missing)"
      ;;
  esac
  # Each scenario's containers go before the next one starts: 2 cores are shared.
  cleanup_names="$(docker ps -aq --filter "name=^$PREFIX-$scenario-")"
  # shellcheck disable=SC2086 # one container ID per word
  [[ -z "$cleanup_names" ]] || docker rm -f $cleanup_names >/dev/null
done

echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
