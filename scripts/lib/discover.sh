# shellcheck shell=bash
# What `spark-llm init` reads on a node (spark_llm/ops/init/facts.py parses it): one `capture NAME cmd...` section
# each. Read only: nothing on the node changes. Sent after sections.SECTION_FUNCTION, with MODEL_PATH and IMAGE set.

# Every RoCE device: name, port 1's state ("4: ACTIVE") and the netdev(s) under device/net, as ConnectX-7 twins
# show them (rocep1s0f1 and roceP2p1s0f1 over enp1s0f1np1; the PCI prefix's case is the system's).
roce_ports() {
  local dev state net nets
  for dev in /sys/class/infiniband/*; do
    [ -e "$dev" ] || continue
    state=$(cat "$dev/ports/1/state" 2>/dev/null || echo "?")
    nets=""
    for net in "$dev"/device/net/*; do
      [ -e "$net" ] && nets="$nets${net##*/} "
    done
    printf '%s|%s|%s\n' "${dev##*/}" "$state" "$nets"
  done
}

# The model path's file system: the path itself or its nearest existing parent (init runs before any copy).
free_at() {
  local path=$1
  while [ ! -e "$path" ] && [ "$path" != / ]; do path=$(dirname "$path"); done
  df -P -B1 "$path" | tail -n 1
}

capture hostname hostname -s
capture arch uname -m
capture meminfo grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
capture roce roce_ports
capture ibdev2netdev ibdev2netdev
capture addrs ip -o -4 addr show
capture links ip -o link show
capture route ip -4 route show default
capture gpu nvidia-smi --query-gpu=name --format=csv,noheader
capture disk free_at "$MODEL_PATH"
capture docker docker info --format '{{json .Runtimes}}'
if [ -n "$IMAGE" ]; then capture image docker image inspect --format '{{.Id}}' "$IMAGE"; fi
