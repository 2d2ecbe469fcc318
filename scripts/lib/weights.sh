# shellcheck shell=bash
# The bash functions of every weights step (spark_llm.plan.weights_sync.COMMON): progress lines, errors, sizes.
# Not run on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib, which drops this header up to
# the first empty line) and puts it at the top of each step's script, which a node runs from stdin.
# Uses: WHAT (what a progress line starts with), RSYNC_LOG (rsync_progress), set by the step before calling.

say() { printf '%s\n' "$*"; }
die() { printf 'weights: %s\n' "$*" >&2; exit 1; }
human() { numfmt --to=si --round=nearest --suffix=B "$1" 2>/dev/null || echo "$1B"; }
now_ns() { python3 -c 'import time; print(time.time_ns())'; }
PROGRESS_SECONDS=5
# While PID runs, print REPORTER's line every PROGRESS_SECONDS (the first one after PROGRESS_SECONDS).
watch_progress() {
  local pid=$1 reporter=$2 ticks=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    ticks=$((ticks + 1))
    if [ $((ticks % (PROGRESS_SECONDS * 5))) -eq 0 ]; then
      "$reporter"
    fi
  done
}
# The newest `rsync --info=progress2` line of $RSYNC_LOG, shortened: "LABEL: 45% 1.2GB 640MB/s 0:01:23 left".
rsync_progress() {
  local line done_bytes pct rate eta
  line=$(tail -c 512 "$RSYNC_LOG" | tr '\r' '\n' | grep -E '^ *[0-9][0-9,.]* +[0-9]+%' | tail -n 1 || true)
  if [ -n "$line" ]; then
    read -r done_bytes pct rate eta _ <<< "$line"
    say "$WHAT: $pct $(human "${done_bytes//,/}") $rate $eta left"
  fi
}
