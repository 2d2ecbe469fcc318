#!/usr/bin/env bash
# Purpose: PID 1 of a sim node: start the node's own Docker engine in the background, then run sshd
#   in the foreground, as a DGX Spark would have both services running.
# Usage: the node image's command (/usr/local/sbin/spark-llm-node-entrypoint); takes no arguments.
# Environment: none.
# Outputs: the inner engine logs to /var/log/dockerd.log (storage: the /var/lib/docker volume);
#   sshd logs to stderr (`docker logs NODE`).
set -euo pipefail

mkdir -p /var/lib/docker /var/log /run/sshd
# A restarted node keeps its disk: a stale pid file would stop dockerd from starting again.
rm -f /run/docker.pid /run/docker/containerd/containerd.pid
setsid dockerd --data-root /var/lib/docker >>/var/log/dockerd.log 2>&1 </dev/null &

# Host keys are made per node on first start (the image ships none), so each node has its own; kept on a restart.
# Only the ed25519 key, the one stacks pin (sshd_config names it): `ssh-keygen -A` also made a 3072-bit RSA key,
# 0.4 s of CPU per node start, 34 times a test run.
[ -s /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
# What the sim gives a node that must outlive its restart (sim/memory.py: a GB10's /proc/meminfo, whose bind mount
# and helper live in /run, new at every start).
if [ -x /etc/spark-llm/sim-boot ]; then /etc/spark-llm/sim-boot || echo "sim-boot failed" >&2; fi
exec /usr/sbin/sshd -D -e
