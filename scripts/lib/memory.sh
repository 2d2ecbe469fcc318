# shellcheck shell=bash
# The one reading of a node's memory for the memory admission (spark_llm.plan.memory): the program's probe, the
# admission step before the group stops, `spark-llm preflight` and the supervisor all carry it. Read-only. Not run
# on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header up to the first empty
# line). `memory_probe MODEL_PATH` prints three `SECTION<TAB>VALUE` lines:
#   mem-info     MemTotal=KB MemFree=KB MemAvailable=KB Active(file)=KB Inactive(file)=KB   (or `!why`)
#   mem-weights  bytes of the weight files at the top of MODEL_PATH (absent: no such directory)
#   mem-gpu      =PID:MIB:CONTAINER ... from nvidia-smi, CONTAINER `-` for a host process (or `!why`)

memory_probe() {
  local info
  info=$(awk '/^(MemTotal|MemFree|MemAvailable|Active\(file\)|Inactive\(file\)):/ {
    sub(":", "", $1); printf "%s%s=%s", sep, $1, $2; sep = " " }' /proc/meminfo 2>/dev/null) || info=""
  if [ -n "$info" ]; then
    printf 'mem-info\t%s\n' "$info"
  else
    printf 'mem-info\t!cannot read /proc/meminfo\n'
  fi
  # The weight files (safetensors shards, else every file) at the top of the weights' directory: kept versions
  # and manifests live below or beside it and are not loaded.
  if [ -d "$1" ]; then
    local bytes
    bytes=$(find "$1" -maxdepth 1 -type f -name '*.safetensors' -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
    if [ "$bytes" = 0 ]; then
      bytes=$(find "$1" -maxdepth 1 -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
    fi
    printf 'mem-weights\t%s\n' "$bytes"
  fi
  # Processes holding GPU memory (on a GB10 nvidia-smi's memory totals read [N/A]; per process it answers), each
  # with the container its cgroup names.
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    printf 'mem-gpu\t!nvidia-smi not found\n'
    return 0
  fi
  local apps out="" pid mib cid name
  if ! apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>&1); then
    printf 'mem-gpu\t!nvidia-smi failed: %s\n' "$(printf '%s' "$apps" | tr -s '\t\n' '  ' | head -c 300)"
    return 0
  fi
  while IFS=', ' read -r pid mib; do
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    case "$mib" in '' | *[!0-9]*) mib=0 ;; esac
    # The innermost container (a docker-in-docker path names the outer one first).
    cid=$(grep -oE '[0-9a-f]{64}' "/proc/$pid/cgroup" 2>/dev/null | tail -n 1) || cid=""
    name=""
    if [ -n "$cid" ]; then name=$(docker inspect -f '{{.Name}}' "$cid" 2>/dev/null | tr -d '/') || name=""; fi
    out+="$pid:$mib:${name:--} "
  done <<< "$apps"
  printf 'mem-gpu\t=%s\n' "$out"
}
