# shellcheck shell=sh
# spark-llm:monitoring's node writer on every node (spark_llm.plan.monitoring.node_agents): POSIX sh, for the busybox
# of the upstream node-exporter image it runs in. Not run on its own: the plan reads it as text (bash_lib drops this
# header) and runs `gpu_readings ROOTFS DIR SECONDS POWER TEMPERATURE CLOCK FREE SIZE [PATH...]` as the container's
# command: every SECONDS, the node's own `nvidia-smi --query-gpu=power.draw,temperature.gpu,clocks.sm` and the disk
# of each weights PATH (`df -Pk` of it, or of its nearest existing parent before the first copy), both chrooted into
# ROOTFS (the node's own tools), written to DIR/gpu.prom by a rename, each reading a gauge named by the family names
# given (Prometheus's base units: the clock in Hz, the disk in bytes, labelled by path). A reading the node does not
# give (`[N/A]`) has no line: `gpu_put NAME VALUE SCALE HELP [LABELS]` writes a family's lines, or nothing when VALUE
# is not a number.

gpu_put() {
  case "$2" in "" | *[!0-9.]*) return 0 ;; esac
  printf '# HELP %s %s\n# TYPE %s gauge\n%s %s\n' "$1" "$4" "$1" "$1" \
    "$(awk -v v="$2" -v s="$3" 'BEGIN { printf "%.6g", v * s }')"
}

disk_put() {
  # One family's samples for every weights path (HELP and TYPE once): `disk_put NAME FIELD HELP` with the paths'
  # `df -Pk` lines in $disks (FIELD: 2, the size; 4, the space available).
  printf '%s\n' "$disks" | awk -v name="$1" -v field="$2" -v help="$3" '
    NF >= 6 && $field ~ /^[0-9]+$/ {
      if (!said) { printf "# HELP %s %s\n# TYPE %s gauge\n", name, help, name; said = 1 }
      path = $0; sub(/^[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +/, "", path)
      gsub(/\\/, "\\\\", path); gsub(/"/, "\\\"", path)
      printf "%s{path=\"%s\"} %.6g\n", name, path, $field * 1024
    }'
}

gpu_readings() {
  rootfs=$1 dir=$2 seconds=$3 power=$4 temperature=$5 clock=$6 free=$7 size=$8
  shift 8
  while :; do
    disks=""
    for path in "$@"; do
      # Before the first copy the directory is not there: its nearest existing parent is on the same disk.
      seen=$path
      while [ ! -e "$rootfs$seen" ] && [ "$seen" != / ]; do
        seen=${seen%/*}
        seen=${seen:-/}
      done
      line=$(chroot "$rootfs" df -Pk "$seen" 2>/dev/null | tail -n 1)
      # The path as configured, not the parent read: a rule names the weights, whichever directory df was given.
      [ -n "$line" ] && disks="$disks${line% *} $path
"
    done
    reading=$(chroot "$rootfs" nvidia-smi --query-gpu=power.draw,temperature.gpu,clocks.sm \
      --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -d ' ')
    watts=${reading%%,*}
    rest=${reading#*,}
    celsius=${rest%%,*}
    mhz=${rest#*,}
    {
      gpu_put "$power" "$watts" 1 "GPU power draw (nvidia-smi power.draw)"
      gpu_put "$temperature" "$celsius" 1 "GPU temperature (nvidia-smi temperature.gpu)"
      gpu_put "$clock" "$mhz" 1e6 "GPU SM clock (nvidia-smi clocks.sm)"
      disk_put "$free" 4 "Space available on the disk of the weights path (df)"
      disk_put "$size" 2 "Size of the disk of the weights path (df)"
    } >"$dir/gpu.prom.tmp" && mv -f "$dir/gpu.prom.tmp" "$dir/gpu.prom"
    sleep "$seconds"
  done
}
