# shellcheck shell=bash
# What `spark-llm init` reads on a node (spark_llm/ops/init/facts.py parses it): `discover MODEL_PATH IMAGE` prints
# one `capture NAME cmd...` section each (spark_llm.ops.sections). Read only: nothing on the node changes.
# roce_ports: every RoCE device, its port 1's state ("4: ACTIVE") and the netdev(s) under device/net, as a Spark's
# ConnectX-7 twins show them (rocep1s0f1 over enp1s0f1np1, roceP2p1s0f1 over enP2p1s0f1np1; the PCI prefix's case
# is the system's). free_at: the model path's file system (the path or its nearest existing parent: init runs
# before any copy). hub_revision REPO: the commit the Hugging Face Hub serves for REPO's main now (its API's JSON,
# with "sha"), for a recipe that pins none.

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

free_at() {
  local path=$1
  while [ ! -e "$path" ] && [ "$path" != / ]; do path=$(dirname "$path"); done
  df -P -B1 "$path" | tail -n 1
}

hub_revision() {
  curl -fsS --max-time 15 "https://huggingface.co/api/models/$1/revision/main"
}

discover() {
  local model_path=${1:-$HOME/models} image=${2:-}
  capture hostname hostname -s
  capture home printenv HOME
  capture arch uname -m
  capture meminfo grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
  capture roce roce_ports
  capture ibdev2netdev ibdev2netdev
  capture addrs ip -o -4 addr show
  capture links ip -o link show
  capture route ip -4 route show default
  capture gpu nvidia-smi --query-gpu=name --format=csv,noheader
  capture disk free_at "$model_path"
  capture docker docker info --format '{{json .Runtimes}}'
  if [ -n "$image" ]; then capture image docker image inspect --format '{{.Id}}' "$image"; fi
}
