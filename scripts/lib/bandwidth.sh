# shellcheck shell=bash
# `spark-llm preflight --bandwidth` on a node (spark_llm.ops.preflight.bandwidth): what the node has for a
# bandwidth test, a bounded test server, its client, and the server's cleanup. Not run on its own: the plan reads
# it as text (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# How a tool is started, HOW: `node` (the node's own binary) or `image` (a container from the engine image, with
# the host's network and, for RDMA, the verbs devices and unlimited locked memory, as NCCL gets them).
# `bw_facts ADDRESS IMAGE` prints `link IF SPEED_MBIT`, `roce DEV STATE`..., then per tool `tool NAME HOW|missing
# WHY`. `bw_serve TOOL HOW IMAGE ADDRESS PORT SECONDS BOUND [DEV [GID]]` starts a server that ends by itself after
# BOUND s and prints `server HANDLE`; `bw_stop HOW PORT` ends the server of PORT now (found by its pid file or its
# container's name, so that it can be stopped even when its start was interrupted before HANDLE was printed). `bw_client TOOL HOW IMAGE ADDRESS PORT
# SECONDS [DEV [GID]]` runs the client (iperf3: twice, `to` and `from` the server, JSON each). DEV and GID: the RDMA
# device and GID index for ib_write_bw (`-d`, `-x`; no GID: perftest's own choice).

readonly BW_CONTAINER_PREFIX=spark-llm-bandwidth

# The interface that holds ADDRESS and its speed as the kernel reports it (Mbit/s; -1 or absent: unknown).
bw_link() {
  local dev speed
  dev=$(ip -o addr show to "$1" | awk '{print $2; exit}')
  if [ -z "$dev" ]; then
    echo "link - no interface holds $1"
    return 0
  fi
  speed=$(cat "/sys/class/net/$dev/speed" 2>/dev/null) || speed=unknown
  echo "link $dev ${speed:-unknown}"
}

# Each RDMA device and its port 1 state (`4: ACTIVE`), as /sys/class/infiniband shows it.
bw_roce() {
  local dir state
  [ -d /sys/class/infiniband ] || return 0
  for dir in /sys/class/infiniband/*; do
    [ -e "$dir" ] || continue
    state=$(cat "$dir/ports/1/state" 2>/dev/null) || state=unknown
    echo "roce ${dir##*/} ${state##* }"
  done
}

# TOOL IMAGE: how TOOL can be started here, or why not.
bw_tool() {
  local tool=$1 image=$2
  if command -v "$tool" >/dev/null 2>&1; then
    echo "tool $tool node $(command -v "$tool")"
  elif ! docker image inspect "$image" >/dev/null 2>&1; then
    echo "tool $tool missing: not on the node, and the engine image $image is not on it either"
  elif docker run --rm --network none --entrypoint sh "$image" -c "command -v $tool" >/dev/null 2>&1; then
    echo "tool $tool image $image"
  else
    echo "tool $tool missing: neither the node nor the engine image $image has it"
  fi
}

bw_facts() {
  bw_link "$1"
  bw_roce
  bw_tool iperf3 "$2"
  bw_tool ib_write_bw "$2"
}

# The tool's argv after the binary: a server (no ADDRESS to reach) or a client of ADDRESS.
bw_server_args() {
  local tool=$1 address=$2 port=$3 seconds=$4 dev=${5:-} gid=${6:-}
  case "$tool" in
    iperf3) echo "-s -B $address -p $port" ;;
    ib_write_bw) echo "-d $dev -p $port -F --report_gbits -D $seconds${gid:+ -x $gid}" ;;
    *) echo "bw_server_args: unknown tool $tool" >&2; return 2 ;;
  esac
}

bw_serve() {
  local tool=$1 how=$2 image=$3 address=$4 port=$5 seconds=$6 bound=$7 dev=${8:-} gid=${9:-} name
  local -a args
  read -r -a args <<<"$(bw_server_args "$tool" "$address" "$port" "$seconds" "$dev" "$gid")"
  # Something else on the port would answer the client in the server's place.
  if ss -Hltn "sport = :$port" | grep -q .; then
    echo "port $port is in use on $(hostname) (choose another with --bandwidth-port): $(ss -Hltnp "sport = :$port" | head -n 1)"
    return 1
  fi
  if [ "$how" = node ]; then
    # A session of its own, no terminal, output to a file: it outlives this ssh session, bounded by `timeout`.
    setsid timeout -k 2 "$bound" "$tool" "${args[@]}" >"/tmp/$BW_CONTAINER_PREFIX-$port.log" 2>&1 </dev/null &
    echo "$!" >"/tmp/$BW_CONTAINER_PREFIX-$port.pid"
    echo "server $!"
  else
    name="$BW_CONTAINER_PREFIX-$port"
    docker rm -f "$name" >/dev/null 2>&1 || true
    local -a rdma=()
    if [ "$tool" = ib_write_bw ]; then rdma=(--device /dev/infiniband --ulimit memlock=-1 --cap-add IPC_LOCK); fi
    docker run -d --rm --name "$name" --network host "${rdma[@]}" --entrypoint timeout "$image" \
      -k 2 "$bound" "$tool" "${args[@]}" >/dev/null
    echo "server $name"
  fi
  # iperf3 listens on TCP; ib_write_bw's out-of-band exchange does too: both on PORT. Bounded: 10 s.
  local tries=0
  until ss -Hltn "sport = :$port" | grep -q .; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
      echo "no $tool server listening on port $port after 10 s" >&2
      return 1
    fi
    sleep 0.1
  done
}

bw_stop() {
  local how=$1 port=$2 pidfile="/tmp/$BW_CONTAINER_PREFIX-$2.pid" pid
  if [ "$how" = node ]; then
    # The server's `timeout`, and with it the server: only the process bw_serve started.
    if [ -f "$pidfile" ]; then
      pid=$(cat "$pidfile")
      # A file a killed run left may name a pid reused since: only our own `timeout ... -p PORT` is ended.
      if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^timeout -k 2 .* -p $port "; then
        kill "$pid" 2>/dev/null || true
      fi
      rm -f "$pidfile"
    fi
  else
    docker rm -f "$BW_CONTAINER_PREFIX-$port" >/dev/null 2>&1 || true
  fi
}

# SECONDS IPERF3-ARGV...: one iperf3 client run, its JSON printed; asked again (at most 5 times, a second apart) while
# the server says it is busy: it takes a moment to end a test, and the `from` run right after the `to` run once
# found it still busy on a loaded machine (`the server is busy running a test. try again later`).
bw_iperf3() {
  local seconds=$1 out attempt
  shift
  for attempt in 1 2 3 4 5; do
    out=$(timeout $((seconds + 20)) "$@") || true
    if [ "$attempt" -lt 5 ] && grep -q '"error":[[:space:]]*"the server is busy' <<<"$out"; then
      sleep 1
      continue
    fi
    printf '%s\n' "$out"
    return 0
  done
}

bw_client() {
  local tool=$1 how=$2 image=$3 address=$4 port=$5 seconds=$6 dev=${7:-} gid=${8:-}
  local -a run=() gid_args=()
  if [ -n "$gid" ]; then gid_args=(-x "$gid"); fi
  if [ "$how" = image ]; then
    run=(docker run --rm --network host)
    if [ "$tool" = ib_write_bw ]; then run+=(--device /dev/infiniband --ulimit memlock=-1 --cap-add IPC_LOCK); fi
    run+=(--entrypoint "$tool" "$image")
  else
    run=("$tool")
  fi
  case "$tool" in
    iperf3)
      # Four streams, the first second (TCP's slow start) left out of the figure; `to` then `from` the server.
      echo "--- to"
      bw_iperf3 "$seconds" "${run[@]}" -c "$address" -p "$port" -t "$seconds" -O 1 -P 4 -J
      echo "--- from"
      bw_iperf3 "$seconds" "${run[@]}" -c "$address" -p "$port" -t "$seconds" -O 1 -P 4 -J -R
      ;;
    ib_write_bw)
      timeout $((seconds + 20)) "${run[@]}" -d "$dev" -p "$port" -F --report_gbits -D "$seconds" "${gid_args[@]}" \
        "$address"
      ;;
    *) echo "bw_client: unknown tool $tool" >&2; return 2 ;;
  esac
}
