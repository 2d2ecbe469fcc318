# shellcheck shell=bash
# spark-llm:memory.dropCaches: drop a node's page cache just before its engine starts, so an engine whose start gate
# judges MemFree (vLLM before PR #35356, vllm#48140) does not count the last weights read as used. Not run on its
# own: the plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# As root, or with passwordless `sudo -n` for this one write; says what the cache held before.

drop_caches() {
  local before
  before=$(awk '/^(MemFree|Active\(file\)|Inactive\(file\)):/ {kb[$1] = $2}
    END {printf "MemFree %.1f GiB, page cache %.1f GiB", kb["MemFree:"] / 1048576,
      (kb["Active(file):"] + kb["Inactive(file):"]) / 1048576}' /proc/meminfo)
  sync
  if [ "$(id -u)" = 0 ]; then
    echo 3 > /proc/sys/vm/drop_caches
  elif ! echo 3 | sudo -n tee /proc/sys/vm/drop_caches > /dev/null; then
    echo "spark-llm: cannot drop the page cache on $(hostname): not root and no passwordless sudo for" \
      "\`tee /proc/sys/vm/drop_caches\` (or set spark-llm:memory.dropCaches false)" >&2
    return 1
  fi
  echo "spark-llm: page cache dropped on $(hostname) (before: ${before})"
}
