# shellcheck shell=bash
# The bash functions of an engine-image transfer (spark_llm.plan.image): runs where the image is (the head, or the
# operator's machine) and pipes docker save | dd (counts the bytes) | the node's docker load, a progress line
# every PROGRESS_SECONDS (the image's unpacked size, about what the tar stream carries, gives the ETA).
# `transfer` sends the whole image; `transfer_layers DIFF_ID...` (a worker's step, scripts/lib/image_layers.sh)
# only those layers, through LAYER_FILTER: the node holds the others, and `docker load` takes them from its own
# store. Not run on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header).
# Uses, besides scripts/lib/image.sh: PROGRESS_SECONDS, SOURCE_NAME, ROUTE, LAYER_FILTER (transfer_layers).
# `load_on_node`: docker load on the node the step is about, reading the archive from stdin, through LOAD_SSH (the
# step's ssh and user@host): a connection of its own, not the fabric's ControlMaster, through which every byte
# would take one more hop.

load_on_node() { "${LOAD_SSH[@]}" docker load; }

# The step's EXIT trap: stops an early docker save, ends the fabric's ControlMaster (a worker's step: mux_dir
# set), removes the temp files (fabric_ssh_setup's known_hosts file too: this trap replaces its own).
step_cleanup() {
  [ -z "${save_pid:-}" ] || kill "$save_pid" 2>/dev/null || true
  [ -z "${mux_dir:-}" ] || "${FABRIC_SSH[@]}" "${FABRIC_MUX[@]}" -O exit "$FABRIC_TARGET" >/dev/null 2>&1 || true
  rm -rf "${mux_dir:-}" "${fabric_kh:-}" "${progress_log:-}"
}

# 1234567 -> "1.2 MB" (decimal units, as the weights' progress lines).
human_size() {
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
    echo "image $NODE: $((moved >= total ? 100 : 100 * moved / total))% $(human_size "$moved") of $how" \
      "$(human_size "$total"), $(human_size "$rate")/s, $left, $what"
  else
    echo "image $NODE: $(human_size "$moved"), $(human_size "$rate")/s, $what"
  fi
}

# `watch_bytes PID WHAT COUNTER [TOTAL [HOW]]` waits for PID, printing every PROGRESS_SECONDS what COUNTER (a
# function printing bytes so far) says, with the percentage and time left when TOTAL is known (HOW: `about` or
# `at most`); returns PID's exit status.
watch_bytes() {
  local pid=$1 what=$2 counter=$3 total=${4:-0} how=${5:-about} start=$SECONDS printer status=0
  # The lines come from a side process: the wait below returns the moment PID ends (a polling loop would add up
  # to its period to every transfer). Its sleep holds no output: killed mid-sleep, the side process leaves
  # the sleep behind, which must not keep the step's output open.
  (
    while sleep "$PROGRESS_SECONDS" >/dev/null 2>&1; do
      progress_line "$what" "$("$counter")" $((SECONDS - start)) "$total" "$how"
    done
  ) &
  printer=$!
  wait "$pid" || status=$?
  kill "$printer" 2>/dev/null || true
  wait "$printer" 2>/dev/null || true
  return "$status"
}

sent_bytes() {
  local sent
  sent=$(tr '\r' '\n' <"$progress_log" | sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' | tail -n 1)
  echo "${sent:-0}"
}

# A worker's step starts docker save once it knows the worker lacks the image (`save_early`), before it asks which
# layers the worker holds: docker spends the first seconds of a save writing the image to a temp dir before the
# first byte, which covers that ssh round trip. Not before the first check: a save that is started and stopped still
# writes the whole image once (2.2 s of the head's CPU for the sim's 300 MB; minutes of disk for a 20 GB image), on
# every step that finds the worker up to date. It runs on the head only; nothing crosses the fabric until `send`
# reads it, and the step's cleanup stops it when nothing does.
save_early() {
  exec {saved_fd}< <(exec docker save "$IMAGE_REF")
  save_pid=$!
}

# The archive docker save writes (the early one if any), filtered to the given layers after `some`; `send` reads
# the early one itself when it sends all of it (one copy less).
save_image() {
  if [ "$1" = all ]; then
    docker save "$IMAGE_REF"
  elif shift && [ -n "${saved_fd:-}" ]; then
    python3 -c "$LAYER_FILTER" "$@" <&"$saved_fd"
  else
    docker save "$IMAGE_REF" | python3 -c "$LAYER_FILTER" "$@"
  fi
}

# send all | send some DIFF_ID...
send() {
  local size how=about
  size=$(docker image inspect --format '{{.Size}}' "$IMAGE_REF")
  # Global, for the EXIT trap (step_cleanup).
  progress_log=$(mktemp)
  if [ "$1" = all ]; then
    echo "$NODE: sending $IMAGE_REF ($((size / 1000000)) MB unpacked) from $SOURCE_NAME $ROUTE"
  else
    how='at most'
    echo "$NODE: sending $(($# - 1)) layers of $IMAGE_REF (at most $((size / 1000000)) MB unpacked) from" \
      "$SOURCE_NAME $ROUTE"
  fi
  if [ "$1" = all ] && [ -n "${saved_fd:-}" ]; then
    (dd if="/dev/fd/$saved_fd" bs=1M status=progress 2>"$progress_log" | load_on_node) &
  else
    (save_image "$@" | dd bs=1M status=progress 2>"$progress_log" | load_on_node) &
  fi
  watch_bytes $! "docker save | docker load $ROUTE" sent_bytes "$size" "$how" \
    || fail "$NODE: the transfer failed (docker save on $SOURCE_NAME | docker load on $NODE);" \
      "the lines above say which side. Run pulumi up again to retry."
  echo "$NODE: sent $(tr '\r' '\n' <"$progress_log" | grep ' copied, ' | tail -n 1)"
}

transfer() { send all; }
transfer_layers() { send some "$@"; }
