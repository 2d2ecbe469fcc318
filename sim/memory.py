"""`sim memory` and `sim gpu-process`: a node's memory as the memory admission reads it (spark_llm.plan.memory).

- `memory NODE --total-gib T --free-gib F --cached-gib C` bind-mounts a file over the node's /proc/meminfo
  (MemAvailable = F + C, the cache split over Active(file)/Inactive(file)), and a FIFO over its
  /proc/sys/vm/drop_caches (read-only in a node otherwise) read by a small loop on the node: a write there moves
  the cache into MemFree, as a real drop does. `off` undoes both.
- `gpu-process NODE --mib M` starts a process on the node (outside any container) that the node's fake
  `nvidia-smi` lists as holding M MiB of GPU memory (`--query-compute-apps=pid,used_memory`). The fake, on every
  node from `up`, names the GPU a GB10 (`--query-gpu=name`, what `spark-llm init` reads) and reads an idle GB10's
  power, temperature and SM clock (`--query-gpu=power.draw,temperature.gpu,clocks.sm`: what spark-llm:monitoring's
  GPU writer reads); anything else it is asked answers as a node without a GPU does (`-L`: exit 3, the
  simulated-node marker's code). `off` stops the processes.
The node's engine containers keep their own /proc: only what runs on the node itself (sshd's sessions: the
program's probe, the admission, the drop step) sees the knobs.

Every node says a GB10's memory by default (`up`: SPARK_MEMORY), not this machine's: the admission then judges a
start as on a Spark (vLLM's 0.9 of MemTotal never fits a shared 24 GB test machine), and `memory NODE off` goes back
to it. The default outlives a node's restart: a boot hook the node's entrypoint runs (/run is new at every start).
"""

from __future__ import annotations

from host import SimError, docker
from paths import SimPaths
from state import ClusterState

KNOB_DIR = "/run/spark-llm-sim"
# A GB10 just after boot, in GiB: MemTotal (~121.7 of its 128 GB is the OS's), MemFree, page cache.
SPARK_MEMORY = (121.7, 119.5, 0.0)
# On the node's own disk (kept across a restart): the knob's start script, its default numbers, the boot hook.
START_SCRIPT = "/etc/spark-llm/sim-memory-start.sh"
DEFAULT_FILE = "/etc/spark-llm/sim-memory.default"
BOOT_HOOK = "/etc/spark-llm/sim-boot"

# Renders $KNOB_DIR/meminfo from $KNOB_DIR/memory.env (TOTAL FREE CACHED, kB); on a write to the drop_caches FIFO,
# moves CACHED into FREE and renders again. Runs on the node (bash), started by `memory`.
_RENDER = r"""
render() {
  . "$DIR/memory.env"
  local half=$((CACHED / 2))
  # Fixed-width numbers, written in place with one write (same inode: the bind mount over /proc/meminfo shows the
  # file, not the name; same length: a reader never finds it truncated half-way).
  printf 'MemTotal: %12d kB\nMemFree: %12d kB\nMemAvailable: %12d kB\nBuffers: %12d kB\nCached: %12d kB\n' \
    "$TOTAL" "$FREE" "$((FREE + CACHED))" 0 "$CACHED" > "$DIR/meminfo.new"
  printf 'Active(file): %12d kB\nInactive(file): %12d kB\nShmem: %12d kB\n' "$half" "$((CACHED - half))" 0 \
    >> "$DIR/meminfo.new"
  dd if="$DIR/meminfo.new" of="$DIR/meminfo" conv=notrunc status=none
}
"""

_START = (
    _RENDER
    + r"""
set -euo pipefail
DIR=$1
mkdir -p "$DIR"
printf 'TOTAL=%s\nFREE=%s\nCACHED=%s\n' "$2" "$3" "$4" > "$DIR/memory.env"
touch "$DIR/meminfo"
render
mountpoint -q /proc/meminfo || mount --bind "$DIR/meminfo" /proc/meminfo
if ! mountpoint -q /proc/sys/vm/drop_caches; then
  rm -f "$DIR/drop"; mkfifo "$DIR/drop"
  mount --bind "$DIR/drop" /proc/sys/vm/drop_caches
  # The node's "kernel": each write to drop_caches drops the cache.
  cat > "$DIR/drop-loop.sh" <<EOF
DIR=$DIR
$(declare -f render)
while :; do
  read -r _ < "\$DIR/drop" || continue
  . "\$DIR/memory.env"
  printf 'TOTAL=%s\nFREE=%s\nCACHED=0\n' "\$TOTAL" "\$((FREE + CACHED))" > "\$DIR/memory.env"
  render
done
EOF
  nohup bash "$DIR/drop-loop.sh" > /dev/null 2>&1 &
  echo $! > "$DIR/drop-loop.pid"
fi
"""
)

_STOP = r"""
DIR=$1
mountpoint -q /proc/meminfo && umount /proc/meminfo
mountpoint -q /proc/sys/vm/drop_caches && umount /proc/sys/vm/drop_caches
[ -f "$DIR/drop-loop.pid" ] && kill "$(cat "$DIR/drop-loop.pid")" 2>/dev/null
rm -f "$DIR/drop-loop.pid" "$DIR/drop" "$DIR/memory.env" "$DIR/meminfo" "$DIR/meminfo.new"
true
"""

# Installs the start script, the default and the boot hook (sim/node/entrypoint.sh runs it at every node start),
# then runs the hook: $1 the start script, $2..$4 the default (kB).
_INSTALL_DEFAULT = rf"""
set -euo pipefail
mkdir -p /etc/spark-llm
printf '%s' "$1" > {START_SCRIPT}
printf '%s %s %s\n' "$2" "$3" "$4" > {DEFAULT_FILE}
printf '%s\n' '#!/usr/bin/env bash' \
  '# Written by the sim (sim/memory.py): the node default memory again after a restart (/run is a new tmpfs).' \
  '[ -r {DEFAULT_FILE} ] || exit 0' \
  'read -r total free cached < {DEFAULT_FILE}' \
  'exec bash {START_SCRIPT} {KNOB_DIR} "$total" "$free" "$cached"' > {BOOT_HOOK}
chmod 755 {BOOT_HOOK}
{BOOT_HOOK}
"""

FAKE_NVIDIA_SMI = "/usr/local/bin/nvidia-smi"
# A GB10 node's nvidia-smi, as far as the product reads it: the GPU's name (`spark-llm init`), the processes `sim
# gpu-process` started (the memory admission's --query-compute-apps). `nvidia-smi -L` still says there is no GPU,
# so `spark-llm preflight` reports the node as simulated rather than passing a GPU check it never ran.
_FAKE_SMI = r"""#!/usr/bin/env bash
# The sim's nvidia-smi (sim/memory.py): a GB10's name, the processes `sim gpu-process` started, an idle GB10's power,
# temperature and SM clock (or what /run/spark-llm-sim/gpu-readings says), its clock range, and a lock of its clocks
# as root (`-lgc MIN,MAX`, `-rgc`; kept under /run, which a restart of the node clears, as a reboot clears the
# driver's lock); no GPU otherwise (said on stderr, as the real one says its errors).
LOCK=/run/spark-llm-sim/gpu-clock-lock
TOP=2405
sm_clock() {
  local max=$TOP
  [ -r "$LOCK" ] && read -r max <"$LOCK"
  echo $((max < TOP ? max : TOP))
}
as_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "Changing GPU clocks requires root: Insufficient Permissions" >&2
    exit 4
  fi
}
case "$*" in
  *--query-compute-apps=*) cat /run/spark-llm-sim/gpu-apps 2>/dev/null; exit 0 ;;
  *--query-gpu=name*) echo "NVIDIA GB10 (simulated)"; exit 0 ;;
  *--query-gpu=power.draw,temperature.gpu,clocks.sm*)
    cat /run/spark-llm-sim/gpu-readings 2>/dev/null || echo "18.50, 42, $(sm_clock)"; exit 0 ;;
  *--query-gpu=clocks.max.sm*) echo "$TOP"; exit 0 ;;
  *--query-gpu=clocks.sm*) sm_clock; exit 0 ;;
  *--query-supported-clocks=graphics*) printf '%s\n' 2405 2100 1800 1500 1200 900 600; exit 0 ;;
  *--reset-gpu-clocks* | -rgc*)
    as_root
    rm -f "$LOCK"
    echo "All done."
    exit 0 ;;
  *--lock-gpu-clocks=* | -lgc*)
    as_root
    range=${*#*--lock-gpu-clocks=}
    [ "$1" = -lgc ] && range=$2
    low=${range%%,*} high=${range#*,}
    if ! [[ $low =~ ^[0-9]+$ && $high =~ ^[0-9]+$ ]] || [ "$high" -lt 600 ] || [ "$high" -gt "$TOP" ]; then
      echo "Invalid combination of GPU clocks: $range (600-$TOP MHz)" >&2
      exit 2
    fi
    mkdir -p "${LOCK%/*}"
    echo "$high" >"$LOCK"
    echo "GPU clocks set to \"(gpuClkMin $low, gpuClkMax $high)\" for GPU 00000000:01:00.0"
    echo "All done."
    exit 0 ;;
esac
echo "simulated node: no GPU" >&2
exit 3
"""
# $1: the fake's text. Installed by `sim up` (a GB10 node) and by `sim gpu-process`.
_INSTALL_SMI = f"""
printf '%s' "$1" > {FAKE_NVIDIA_SMI}
chmod 755 {FAKE_NVIDIA_SMI}
"""
_GPU_START = r"""
set -euo pipefail
DIR=$1
mkdir -p "$DIR"
nohup sleep infinity > /dev/null 2>&1 &
echo "$!, $2" >> "$DIR/gpu-apps"
cut -d, -f1 "$DIR/gpu-apps" | tail -n 1
"""

_GPU_STOP = r"""
DIR=$1
if [ -f "$DIR/gpu-apps" ]; then
  cut -d, -f1 "$DIR/gpu-apps" | while read -r pid; do kill "$pid" 2>/dev/null || true; done
fi
rm -f "$DIR/gpu-apps"
"""


def _container(paths: SimPaths, node: str) -> str:
    state = ClusterState.load(paths.state_file)
    if state is None or not state.nodes:
        raise SimError(f"no sim cluster recorded in {paths.state_dir} (run: sim/sim up)")
    for n in state.nodes:
        if n.name == node:
            return n.container
    raise SimError(f"no node {node!r} (has: {', '.join(n.name for n in state.nodes)})")


def _kb(gib: float) -> str:
    return str(int(gib * 1024 * 1024))


def memory(paths: SimPaths, node: str, total: float | None, free: float | None, cached: float) -> None:
    """Make `node`'s /proc/meminfo say these numbers (GiB), or (total None) undo it."""
    container = _container(paths, node)
    if total is None:
        if docker("exec", container, "bash", "-c", f"cat {DEFAULT_FILE} 2>/dev/null || true").strip():
            docker("exec", container, BOOT_HOOK)
            print(f"{node}: /proc/meminfo says the node's default again (a GB10's: {describe(*SPARK_MEMORY)})")
            return
        docker("exec", container, "bash", "-c", _STOP, "stop", KNOB_DIR)
        print(f"{node}: /proc/meminfo and drop_caches are the kernel's again")
        return
    if free is None or free + cached > total:
        raise SimError("--free-gib plus --cached-gib must not exceed --total-gib")
    docker("exec", container, "bash", "-c", _START, "start", KNOB_DIR, _kb(total), _kb(free), _kb(cached))
    print(f"{node}: {describe(total, free, cached)} (drop_caches frees it)")


def describe(total: float, free: float, cached: float) -> str:
    return f"MemTotal {total:g} GiB, MemFree {free:g} GiB, page cache {cached:g} GiB"


def give_spark_memory(containers: list[str]) -> None:
    """Make every node's /proc/meminfo a GB10's (SPARK_MEMORY), also after a restart of the node."""
    total, free, cached = SPARK_MEMORY
    for container in containers:
        docker("exec", container, "bash", "-c", _INSTALL_DEFAULT, "install", _START, _kb(total), _kb(free), _kb(cached))
        docker("exec", container, "bash", "-c", _INSTALL_SMI, "install", _FAKE_SMI)


def gpu_process(paths: SimPaths, node: str, mib: int | None) -> None:
    """Start a process on `node` that the fake nvidia-smi lists as holding `mib` MiB, or (None) stop them all."""
    container = _container(paths, node)
    if mib is None:
        docker("exec", container, "bash", "-c", _GPU_STOP, "stop", KNOB_DIR)
        print(f"{node}: no process holds GPU memory")
        return
    docker("exec", container, "bash", "-c", _INSTALL_SMI, "install", _FAKE_SMI)
    pid = docker("exec", container, "bash", "-c", _GPU_START, "start", KNOB_DIR, str(mib)).strip()
    print(f"{node}: pid {pid} holds {mib} MiB of GPU memory (as nvidia-smi lists it)")
