# shellcheck shell=sh
# spark-llm:monitoring's GPU writer on every node (spark_llm.plan.monitoring.node_agents): POSIX sh, for the busybox
# of the upstream node-exporter image it runs in. Not run on its own: the plan reads it as text (bash_lib drops this
# header) and runs `gpu_readings ROOTFS DIR SECONDS POWER TEMPERATURE CLOCK` as the container's command: every
# SECONDS, the node's own `nvidia-smi --query-gpu=power.draw,temperature.gpu,clocks.sm` (chrooted into ROOTFS: the
# node's driver and libraries) written to DIR/gpu.prom by a rename, each reading a gauge named by the three family
# names given (Prometheus's base units: the clock in Hz). A reading nvidia-smi does not give (`[N/A]`) has no line:
# `gpu_put NAME VALUE SCALE HELP` writes a family's lines, or nothing when VALUE is not a number.

gpu_put() {
  case "$2" in "" | *[!0-9.]*) return 0 ;; esac
  printf '# HELP %s %s\n# TYPE %s gauge\n%s %s\n' "$1" "$4" "$1" "$1" \
    "$(awk -v v="$2" -v s="$3" 'BEGIN { printf "%.6g", v * s }')"
}

gpu_readings() {
  rootfs=$1 dir=$2 seconds=$3 power=$4 temperature=$5 clock=$6
  while :; do
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
    } >"$dir/gpu.prom.tmp" && mv -f "$dir/gpu.prom.tmp" "$dir/gpu.prom"
    sleep "$seconds"
  done
}
