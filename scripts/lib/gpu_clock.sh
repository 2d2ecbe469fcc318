# shellcheck shell=bash
# spark-llm:nodes[].smClockCapMhz on a node (spark_llm.plan.gpu_clock): the GPU's SM clock capped with
# `nvidia-smi --lock-gpu-clocks=0,CAP`, and a record of it under /run (a tmpfs: a reboot clears it, as it clears the
# lock: nvidia-smi reads back the clock, not the lock) and one in the login user's spark-llm directory (what `up`
# applied, which a reboot keeps). Not run on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib
# drops this header). `gc_apply CAP TOKEN APPLIED` locks and records (APPLIED: the kept record's path);
# `gc_remove APPLIED` resets the lock (`--reset-gpu-clocks`) and removes both; `gc_read APPLIED` prints the probe's
# sections. nvidia-smi changes clocks as root only: a login user other than root runs it with `sudo -n`.

GC_RECORD=/run/spark-llm/gpu-clock-cap

gc_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo -n "$@"
  fi
}

gc_check() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "spark-llm:nodes smClockCapMhz: nvidia-smi is not on $(hostname): install NVIDIA's driver there, or unset" \
      "the node's smClockCapMhz" >&2
    return 1
  fi
  if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
    echo "spark-llm:nodes smClockCapMhz: nvidia-smi changes clocks as root only, and $(id -un) on $(hostname)" \
      "cannot run sudo without a password: allow it (a sudoers line for $(command -v nvidia-smi)), or unset the" \
      "node's smClockCapMhz" >&2
    return 1
  fi
}

gc_apply() {
  local cap=$1 token=$2 applied=$3
  gc_check
  if ! gc_root nvidia-smi --lock-gpu-clocks="0,$cap"; then
    echo "spark-llm:nodes smClockCapMhz: nvidia-smi refused the cap $cap MHz on $(hostname) (above); nothing" \
      "changed" >&2
    return 1
  fi
  # Written by a rename: a probe never reads half a record. (The inner sh expands $1, the record's path.)
  # shellcheck disable=SC2016
  printf '%s %s\n' "$token" "$cap" |
    gc_root sh -c 'mkdir -p "${1%/*}" && cat >"$1.tmp" && mv -f "$1.tmp" "$1"' record "$GC_RECORD"
  mkdir -p "${applied%/*}"
  printf '%s %s\n' "$token" "$cap" >"$applied.tmp" && mv -f "$applied.tmp" "$applied"
  echo "spark-llm: the GPU's SM clock on $(hostname) capped at $cap MHz"
}

gc_remove() {
  local applied=$1
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    # No driver left to hold a lock (it was removed with it): nothing to reset, and a destroy must not stop here.
    gc_root rm -f "$GC_RECORD" 2>/dev/null || true
    rm -f "$applied"
    echo "spark-llm: no nvidia-smi on $(hostname): no GPU clock lock to reset; its records removed"
    return 0
  fi
  gc_check
  gc_root nvidia-smi --reset-gpu-clocks
  gc_root rm -f "$GC_RECORD"
  rm -f "$applied"
  echo "spark-llm: the GPU's SM clock cap on $(hostname) removed (the driver's own clocks again)"
}

gc_read() {
  # `gpu_clock_applied TOKEN CAP` (what `up` applied; no value: never, or removed), `gpu_clock_record TOKEN CAP`
  # (in force since the node booted; no value: not), `gpu_clock_now MHz`, `gpu_clock_range MIN MAX` (MIN: the
  # lowest supported graphics clock where the GPU lists them, else 0).
  local applied=$1 now max min
  printf 'gpu_clock_applied\t%s\n' "$(head -c 200 "$applied" 2>/dev/null | tr -d '\n\t' || true)"
  printf 'gpu_clock_record\t%s\n' "$(head -c 200 "$GC_RECORD" 2>/dev/null | tr -d '\n\t' || true)"
  now=$(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -d ' ')
  max=$(nvidia-smi --query-gpu=clocks.max.sm --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -d ' ')
  min=$(nvidia-smi --query-supported-clocks=graphics --format=csv,noheader,nounits 2>/dev/null |
    tr -d ' ' | grep -E '^[0-9]+$' | sort -n | head -n 1)
  printf 'gpu_clock_now\t%s\n' "${now:-unknown}"
  printf 'gpu_clock_range\t%s %s\n' "${min:-0}" "${max:-unknown}"
}
