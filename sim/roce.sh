#!/usr/bin/env bash
# RoCE as a sim node shows it (`sim/sim roce`), run inside the node: `bash -s -- on|off IFACE ADDRESS DEVICE...`.
#   on:  /dev/infiniband/uverbs0..N-1 (character devices 231:192+, what `--device /dev/infiniband` mounts), and a
#        /sys/class/infiniband/DEVICE/{ports/1/state,ports/1/gids/N,device/net/IFACE} per device, each ACTIVE with a
#        link-local and an IPv4-mapped GID of ADDRESS, as the product's host record and fallback causes read them.
#        sysfs cannot be written: /sys/class becomes a tmpfs holding a bind mount of every real class directory
#        (live: /sys/class/net still shows each new veth) plus the fake infiniband one. The engine containers get a
#        sysfs of their own and never see it: the stand-in engine reads each uverbsN's device name (what libibverbs
#        reads from /sys/class/infiniband_verbs/uverbsN/ibdev) from `uverbsN NAME` lines in the node's cache dir,
#        its containers' ~/.cache (~/spark-llm/cache/standin-rdma-devices; sim/engine/standin_engine/nccl.py).
#   off: all gone (idempotent).
set -euo pipefail

if [ "$#" -lt 1 ] || { [ "$1" != on ] && [ "$1" != off ]; } || { [ "$1" = on ] && [ "$#" -lt 4 ]; }; then
  echo "Usage: roce.sh on IFACE ADDRESS DEVICE... | roce.sh off" >&2
  exit 2
fi
mode=$1
shift
root=/run/spark-llm-sys-class
names="$HOME/spark-llm/cache/standin-rdma-devices"

if grep -q " $root " /proc/mounts; then
  umount -R /sys/class
  umount -R "$root"
fi
rm -rf /dev/infiniband
rm -f "$names"
[ "$mode" = off ] && exit 0

iface=$1 address=$2
shift 2
mkdir -p /dev/infiniband "${names%/*}"
minor=192
for dev in "$@"; do
  mknod -m 666 "/dev/infiniband/uverbs$((minor - 192))" c 231 "$minor"
  echo "uverbs$((minor - 192)) $dev" >>"$names"
  minor=$((minor + 1))
done

mkdir -p "$root"
mount -t tmpfs -o mode=755 spark-llm-sys-class "$root"
for class in /sys/class/*; do
  mkdir "$root/${class##*/}"
  mount --bind "$class" "$root/${class##*/}"
done
IFS=. read -r a b c d <<<"$address"
mapped=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
for dev in "$@"; do
  ports="$root/infiniband/$dev/ports/1"
  mkdir -p "$ports/gids" "$root/infiniband/$dev/device/net/$iface"
  echo "4: ACTIVE" >"$ports/state"
  for n in 0 1 2 3; do echo 0000:0000:0000:0000:0000:0000:0000:0000 >"$ports/gids/$n"; done
  printf 'fe80:0000:0000:0000:0000:0000:%02x%02x:%02x%02x\n' "$a" "$b" "$c" "$d" >"$ports/gids/0"
  echo "$mapped" >"$ports/gids/3"
done
mount --rbind "$root" /sys/class
