"""Pure: bash that moves the engine image head -> worker through a short-lived registry, layer by layer.

A worker's image step (spark_llm.plan.image) runs on the head. When the worker lacks the head's image ID and the head
has Debian's/Ubuntu's `docker-registry` (the distribution registry), the step:

1. starts that registry on 127.0.0.1:<free port>, storing under the login user's
   ~/.cache/spark-llm/registry (kept between runs: the next image's push finds the layers it already holds);
2. `docker push`es the image into it: docker uploads only the layers the registry lacks (gzip, once per layer);
3. on the worker, `docker pull 127.0.0.1:<port>/spark-llm/engine@<manifest digest>` through a reverse tunnel
   over the pinned fabric ssh (`ssh -R`): docker fetches only the layers the worker lacks (docker treats
   127.0.0.0/8 registries as insecure-allowed, so no daemon setting is needed); pulling by digest makes docker
   check every byte against the pushed manifest;
4. tags the pulled image as the configured reference on the worker and drops the registry's name; the step's
   verify then checks the worker's image ID is the head's (a pulled image's ID is its config digest, the ID the
   head pushed);
5. stops the registry, and when no other step's registry runs, keeps only the current image's tag and lets
   `docker-registry garbage-collect` drop the blobs no tag needs (the cache holds about one compressed image).

Without `docker-registry` on the head the step falls back to `docker save | docker load` (the whole image) and says
what to install. Progress: a line every PROGRESS_SECONDS with bytes, MB/s and, where the size is known, an ETA; the
bytes are what the registry process wrote (/proc/PID/io: the stored upload while pushing, what it served while
pulling).
"""

from __future__ import annotations

# The distribution registry's binary as Debian and Ubuntu ship it (package docker-registry).
REGISTRY_BINARY = "docker-registry"
# What the fallback's warning and the README tell the operator to install on the head.
INSTALL_HINT = "sudo apt install docker-registry"
# The registry's storage on the head, under the login user's cache (kept between runs for layer reuse).
REGISTRY_ROOT = "${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm/registry"
# The repository every image is pushed to (its tag: the image ID's hex).
REPOSITORY = "spark-llm/engine"
# Bounded waits: for the registry to listen, for another step's push or garbage collection (seconds).
START_WAIT_SECONDS = 20
LOCK_WAIT_SECONDS = 3600
# Attempts at a free port: on the head for the registry, on the worker for the tunnel's end.
PORT_ATTEMPTS = 5

# Progress lines, shared with the `docker save | docker load` path. `watch_bytes PID WHAT COUNTER [TOTAL [HOW]]`
# waits for PID, printing every PROGRESS_SECONDS what COUNTER (a function printing bytes so far) says, with the
# percentage and time left when TOTAL is known (HOW: `about` or `at most`); returns PID's exit status.
PROGRESS_FUNCTIONS = r"""# 1234567 -> "1.2 MB" (decimal units, as the weights' progress lines).
human() {
  local n=$1 unit=B div=1
  if ((n >= 1000000000)); then unit=GB div=1000000000; elif ((n >= 1000000)); then unit=MB div=1000000
  elif ((n >= 1000)); then unit=kB div=1000; fi
  if ((div == 1)); then echo "$n B"; else echo "$((n / div)).$((n % div * 10 / div)) $unit"; fi
}

progress_line() {
  local what=$1 moved=$2 elapsed=$3 total=${4:-0} how=${5:-about} rate left
  ((elapsed > 0)) || elapsed=1
  rate=$((moved / elapsed))
  if ((total > 0)); then
    if ((moved >= total)); then
      left="all sent"  # the receiving docker still unpacks
    elif ((rate == 0)); then
      left="?:?? left"
    else
      left=$(((total - moved) / rate))
      left="$((left / 60)):$(printf '%02d' $((left % 60))) left"
    fi
    echo "image $NODE: $((moved >= total ? 100 : 100 * moved / total))% $(human "$moved") of $how" \
      "$(human "$total"), $(human "$rate")/s, $left, $what"
  else
    echo "image $NODE: $(human "$moved"), $(human "$rate")/s, $what"
  fi
}

watch_bytes() {
  local pid=$1 what=$2 counter=$3 total=${4:-0} how=${5:-about} start=$SECONDS last=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS - last >= PROGRESS_SECONDS)); then
      last=$SECONDS
      progress_line "$what" "$("$counter")" $((SECONDS - start)) "$total" "$how"
    fi
  done
  wait "$pid"
}
"""

# Runs on the head (the step's `on_node`/`tunnel_to_node` reach the worker over the fabric). Uses NODE,
# IMAGE_REF, HEAD_IMAGE_ID, SOURCE_NAME, die, on_node and the progress functions above.
_SEND = r"""registry_pid='' registry_port='' registry_dir='' registry_base=0 pushed_digest=''

registry_stop() {
  if [ -n "$registry_pid" ]; then
    kill "$registry_pid" 2>/dev/null || true
    wait "$registry_pid" 2>/dev/null || true
  fi
  registry_pid=''
}

# Bytes the registry process has written (/proc/PID/io): the layers it stored, then the bytes it served.
registry_wchar() {
  local wrote
  wrote=$(sed -n 's/^wchar: //p' "/proc/$registry_pid/io" 2>/dev/null) || wrote=''
  echo "${wrote:-$registry_base}"
}

# ... since registry_base (the start of the push, then of the pull).
registry_written() { echo $(($(registry_wchar) - registry_base)); }

# The registry on 127.0.0.1:<a free port> over REGISTRY_ROOT, for this step only (the lock fds stay here).
registry_start() {
  local try waited
  for ((try = 1; try <= PORT_ATTEMPTS; try++)); do
    registry_port=$((20000 + RANDOM % 40000))
    printf '%s\n' 'version: 0.1' 'log:' '  level: info' 'storage:' '  filesystem:' \
      "    rootdirectory: $REGISTRY_ROOT" '  maintenance:' '    uploadpurging:' '      enabled: false' \
      'http:' "  addr: 127.0.0.1:$registry_port" >"$registry_dir/config.yml"
    "$REGISTRY_BIN" serve "$registry_dir/config.yml" >"$registry_dir/registry.log" 2>&1 </dev/null 7>&- 8>&- &
    registry_pid=$!
    # Whatever ends this script (even SIGKILL), the registry follows within seconds.
    (
      while kill -0 "$$" 2>/dev/null && kill -0 "$registry_pid" 2>/dev/null; do sleep 2; done
      kill "$registry_pid" 2>/dev/null
    ) </dev/null >/dev/null 2>&1 7>&- 8>&- &
    for ((waited = 0; waited < START_WAIT_SECONDS * 5; waited++)); do
      kill -0 "$registry_pid" 2>/dev/null || break
      grep -q "listening on 127.0.0.1:$registry_port" "$registry_dir/registry.log" && return 0
      sleep 0.2
    done
    registry_stop
    grep -q 'address already in use' "$registry_dir/registry.log" || break
  done
  tail -n 5 "$registry_dir/registry.log" >&2
  die "$NODE: $REGISTRY_BIN did not start on the head (its last lines are above; storage: $REGISTRY_ROOT)." \
    "Nothing was sent. Run pulumi up again, or remove docker-registry from the head to send with docker save."
}

# Sum of the sizes a manifest lists (its config and layers, compressed): the most a pull can fetch.
manifest_bytes() {
  local hex=${1#sha256:} sum=0 n
  while read -r n; do
    sum=$((sum + n))
  done < <(grep -o '"size": *[0-9]*' "$REGISTRY_ROOT/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data" \
    2>/dev/null | grep -o '[0-9]*$')
  echo "$sum"
}

# Pushes IMAGE_REF into the registry (one push at a time on the head: the next finds the layers stored);
# sets pushed_digest, the manifest's digest.
registry_push() {
  local tag="127.0.0.1:$registry_port/$REGISTRY_REPO:${HEAD_IMAGE_ID#sha256:}" log="$registry_dir/push.log"
  exec 7>>"$REGISTRY_ROOT/.push.lock"
  flock -w "$LOCK_WAIT_SECONDS" 7 || die "$NODE: another image push on the head held $REGISTRY_ROOT/.push.lock" \
    "for ${LOCK_WAIT_SECONDS}s; nothing was sent. Run pulumi up again."
  docker tag "$IMAGE_REF" "$tag"
  registry_base=$(registry_wchar)
  echo "$NODE: pushing $IMAGE_REF into a registry on $SOURCE_NAME (only the layers it lacks)"
  docker push "$tag" >"$log" 2>&1 </dev/null &
  if ! watch_bytes $! "pushing into the registry on $SOURCE_NAME" registry_written; then
    sed 's/^/  /' "$log" >&2
    docker rmi "$tag" >/dev/null 2>&1 || true
    die "$NODE: docker push into the registry on $SOURCE_NAME failed (output above); nothing was sent to $NODE." \
      "Run pulumi up again."
  fi
  docker rmi "$tag" >/dev/null
  exec 7>&-
  pushed_digest=$(sed -n 's/.*: digest: \(sha256:[0-9a-f]\{64\}\) size: .*/\1/p' "$log" | tail -n 1)
  [ -n "$pushed_digest" ] || die "$NODE: docker push printed no digest:" "$(tail -n 3 "$log")"
  echo "$NODE: the registry took $(grep -c ': Pushed$' "$log") new layers" \
    "($(human "$(registry_written)")), had $(grep -c ': Layer already exists$' "$log")"
}

# The worker pulls pushed_digest through `ssh -R <its port>:127.0.0.1:<registry port>`; a port taken there is
# tried again with another.
registry_pull() {
  local total try port ref='' log="$registry_dir/pull.log" start=$SECONDS received
  total=$(manifest_bytes "$pushed_digest")
  for ((try = 1; try <= PORT_ATTEMPTS; try++)); do
    port=$((20000 + RANDOM % 40000))
    ref="127.0.0.1:$port/$REGISTRY_REPO@$pushed_digest"
    registry_base=$(registry_wchar)
    tunnel_to_node "$port:127.0.0.1:$registry_port" docker pull "$ref" >"$log" 2>&1 &
    watch_bytes $! "pulling from the registry on $SOURCE_NAME" registry_written "$total" "at most" && break
    if ! grep -q 'remote port forwarding failed' "$log" || ((try == PORT_ATTEMPTS)); then
      sed 's/^/  /' "$log" >&2
      die "$NODE: docker pull from the registry on $SOURCE_NAME (ssh -R over the fabric) failed; the lines" \
        "above say why. Run pulumi up again."
    fi
  done
  received=$(registry_written)
  on_node docker tag "$ref" "$IMAGE_REF"
  on_node docker rmi "$ref" >/dev/null
  echo "$NODE: received $received bytes in $((SECONDS - start)) s ($(grep -c ': Pull complete$' "$log") layers;" \
    "$(grep -c ': Already exists$' "$log") it had)"
}

# Keep only this image's tag and drop unreferenced blobs, when no other step's registry runs (else the last does).
registry_collect() {
  local tags="$REGISTRY_ROOT/docker/registry/v2/repositories/$REGISTRY_REPO/_manifests/tags" keep tag
  exec 8>&-
  exec 8>>"$REGISTRY_ROOT/.in-use.lock"
  flock -n -x 8 || return 0
  keep=${HEAD_IMAGE_ID#sha256:}
  for tag in "$tags"/*; do
    [ "${tag##*/}" = "$keep" ] || [ ! -d "$tag" ] || rm -rf "$tag"
  done
  "$REGISTRY_BIN" garbage-collect --delete-untagged "$registry_dir/config.yml" >"$registry_dir/gc.log" 2>&1 \
    || echo "warning: $REGISTRY_BIN garbage-collect failed on the head (the transfer is done):" \
      "$(tail -n 1 "$registry_dir/gc.log")"
}

send_with_registry() {
  mkdir -p "$REGISTRY_ROOT" && chmod 700 "$REGISTRY_ROOT"
  registry_dir=$(mktemp -d)
  # Replaces fabric_ssh_setup's trap: remove its known_hosts file too.
  trap 'registry_stop; rm -rf "$registry_dir" "${fabric_kh:-}"' EXIT
  trap 'exit 129' HUP
  trap 'exit 143' TERM
  exec 8>>"$REGISTRY_ROOT/.in-use.lock"
  flock -w "$LOCK_WAIT_SECONDS" -s 8 || die "$NODE: $REGISTRY_ROOT/.in-use.lock stayed taken" \
    "for ${LOCK_WAIT_SECONDS}s (a garbage collection of the head's registry?); nothing was sent. Run pulumi up again."
  registry_start
  registry_push
  registry_pull
  mkdir -p "$LOG_DIR"
  cat "$registry_dir/push.log" "$registry_dir/pull.log" >"$LOG_DIR/image-$NODE.log"
  registry_stop
  registry_collect
}

# The image to the node: layer by layer through the registry, or whole (docker save | load) without one. Warnings go
# to stdout: `pulumi up` shows a step's stdout as it runs, its stderr only when it fails.
send_image() {
  if command -v "$REGISTRY_BIN" >/dev/null 2>&1; then
    send_with_registry
  else
    echo "warning: $REGISTRY_BIN is not on $SOURCE_NAME: sending all of $IMAGE_REF with docker save | docker load." \
      "\`$INSTALL_HINT\` there makes a changed image move only its new layers."
    transfer
  fi
}
"""


def _q(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def send_functions(log_dir: str) -> str:
    """Bash defining `send_image` (and what it uses), for a worker's step on the head; full output in `log_dir`.

    Needs, defined before it: NODE, IMAGE_REF, HEAD_IMAGE_ID, SOURCE_NAME, die, on_node, tunnel_to_node
    (`tunnel_to_node FORWARD CMD...`: CMD on the worker with `ssh -R FORWARD`), `transfer` (the fallback) and
    PROGRESS_FUNCTIONS.
    """
    return (
        f"REGISTRY_BIN={REGISTRY_BINARY}\n"
        f'REGISTRY_ROOT="{REGISTRY_ROOT}"\n'
        f"REGISTRY_REPO={REPOSITORY}\n"
        f"INSTALL_HINT={_q(INSTALL_HINT)}\n"
        f"START_WAIT_SECONDS={START_WAIT_SECONDS}\n"
        f"LOCK_WAIT_SECONDS={LOCK_WAIT_SECONDS}\n"
        f"PORT_ATTEMPTS={PORT_ATTEMPTS}\n"
        f"LOG_DIR={_q(log_dir)}\n" + _SEND
    )
