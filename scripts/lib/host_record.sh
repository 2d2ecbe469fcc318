# shellcheck shell=bash
# The host as a node shows it (spark_llm.plan.host_record): what the readiness gate records at a start that served,
# and what the program's probe and `spark-llm status` compare with it. Read-only; a field that cannot be read is
# not printed (the record says "absent"), never an error. Not run on its own: the plan reads it as text
# (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# `host_record CONTAINER IFACE...` prints `host.FIELD<TAB>VALUE` lines; it runs under `set -euo pipefail` (the
# probe's), so every read that may fail ends in `|| true`.

host_field() {
  local value
  value=$(printf '%s' "$2" | tr -s '\t\n' '  ' | sed 's/ *$//' || true)
  [ -n "$value" ] && printf 'host.%s\t%s\n' "$1" "$value"
  return 0
}

# `fabric_record IFACE...`: what spark_llm.group.fabric_ready judges before a start: each fabric interface's MTU,
# each RoCE device's port state and GIDs, the device list and /dev/infiniband's. Also the supervisor's one request
# for it on a worker (scripts/supervisor_allow.sh). SPARK_LLM_SYSFS and SPARK_LLM_DEVFS stand for /sys and /dev in
# the unit tests.
fabric_record() {
  local sys=${SPARK_LLM_SYSFS:-/sys} devfs=${SPARK_LLM_DEVFS:-/dev} iface dev gids out=""
  for iface in "$@"; do
    [ -e "$sys/class/net/$iface" ] || continue
    host_field "mtu.$iface" "$(cat "$sys/class/net/$iface/mtu" 2>/dev/null || true)"
  done
  for dev in "$sys"/class/infiniband/*; do
    [ -d "$dev" ] || continue
    out="${out:+$out }$(basename "$dev")"
    # Port 1's state without its number ("4: ACTIVE" -> ACTIVE): NCCL opens only an ACTIVE port.
    host_field "port_state.$(basename "$dev")" "$(sed 's/^[0-9]*: *//' "$dev/ports/1/state" 2>/dev/null || true)"
    # The GIDs in use (non-zero), as NCCL_IB_GID_INDEX picks among them.
    gids=$(grep -vh '^0000:0000:0000:0000:0000:0000:0000:0000$' "$dev"/ports/1/gids/* 2>/dev/null | sort -u | tr '\n' ' ' || true)
    host_field "gids.$(basename "$dev")" "$gids"
  done
  host_field roce_devices "$out"
  # What `--device /dev/infiniband` gives the engine's container (Docker refuses to create it without).
  out=""
  for dev in "$devfs"/infiniband/*; do
    [ -e "$dev" ] || continue
    out="${out:+$out }${dev##*/}"
  done
  host_field verbs_devices "$out"
}

host_record() {
  local container=$1 iface out
  shift
  host_field kernel "$(cat /proc/sys/kernel/osrelease 2>/dev/null || true)"
  out=$(sed -n 's/.*Kernel Module[^0-9]*\([0-9][0-9.]*\).*/\1/p' /proc/driver/nvidia/version 2>/dev/null | head -n 1 || true)
  if [ -z "$out" ] && command -v nvidia-smi >/dev/null 2>&1; then
    out=$(timeout 10 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
  fi
  host_field nvidia_driver "$out"
  if command -v nvidia-smi >/dev/null 2>&1; then
    host_field cuda "$(timeout 10 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1 || true)"
  fi
  for iface in "$@"; do
    [ -e "/sys/class/net/$iface" ] || continue
    if command -v ethtool >/dev/null 2>&1 && out=$(ethtool -i "$iface" 2>/dev/null); then
      host_field "nic_driver.$iface" "$(printf '%s\n' "$out" | sed -n 's/^driver: //p') $(printf '%s\n' "$out" | sed -n 's/^version: //p')"
      host_field "nic_firmware.$iface" "$(printf '%s\n' "$out" | sed -n 's/^firmware-version: //p')"
    fi
  done
  fabric_record "$@"
  host_field docker "$(docker version -f '{{.Server.Version}}' 2>/dev/null || true)"
  for out in nvidia-container-runtime nvidia-ctk; do
    if command -v "$out" >/dev/null 2>&1; then
      host_field nvidia_container_runtime "$("$out" --version 2>/dev/null | head -n 1 || true)"
      break
    fi
  done
  host_field image "$(docker inspect -f '{{.Image}}' "$container" 2>/dev/null || true)"
}
