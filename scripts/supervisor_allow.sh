#!/usr/bin/env bash
# What the supervisor's own ssh key may run on a worker, and nothing more (docs/security.md).
#
# sshd runs this for every session of that key, whatever the client asked: the worker's authorized_keys holds
# `restrict,command="HOME/spark-llm/supervisor-allow.sh CONTAINER" ssh-ed25519 ... spark-llm-supervisor@STACK`, written by
# `pulumi up` (spark_llm.plan.supervisor_key) and removed by `pulumi destroy`. What the client asked is in
# $SSH_ORIGINAL_COMMAND (empty for a login shell).
#
# Usage: supervisor_allow.sh CONTAINER   (CONTAINER: the engine's container, spark-llm:engine.containerName)
# Allowed, word for word (what scripts/supervisor.py asks; spark_llm.group.logs.logs_command for `logs`):
#   docker inspect CONTAINER
#   docker start CONTAINER
#   docker stop [-t SECONDS] CONTAINER
#   docker logs [--since SECONDS] [--tail LINES] CONTAINER [2>&1]
#                                                    (2>&1: the engine's stderr merged into stdout, as asked;
#                                                     SECONDS: a Unix time, digits: the lines of one start only)
#   spark-llm weights-record                         (spark_llm.group.weights.RECORD_REQUEST: this node's weights
#                                                     record, `state/weights` beside this script, printed as it is;
#                                                     exit 3 when there is none. The supervisor starts no group on
#                                                     weights not verified on every member: issue 31, 2)
#   spark-llm memory                                 (spark_llm.group.memory.MEMORY_REQUEST: this node's meminfo and
#                                                     the processes holding GPU memory, read by the memory probe
#                                                     installed beside this script, scripts/lib/memory.sh; no path
#                                                     from the request. No restart into a node that cannot fit)
#   spark-llm fabric IFACE...                        (spark_llm.group.fabric_ready: each interface's MTU and the RoCE
#                                                     devices' port states and GIDs, read by fabric_record of
#                                                     scripts/lib/host_record.sh, installed beside this script; each
#                                                     IFACE an interface name, nothing else. No restart onto a fabric
#                                                     a start would not take: issue 41, 2)
# Anything else (a shell, another verb, another container, one word more) is refused: one line on stderr, exit 126.
# The request is split on blanks and compared word by word; it is never evaluated, so a quote, `;`, `&&`, `$(...)`
# or a glob in it is only a word that matches nothing.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "Usage: supervisor_allow.sh CONTAINER (sshd runs it for the supervisor's key; the request in \$SSH_ORIGINAL_COMMAND)" >&2
  exit 2
fi
container=$1
request=${SSH_ORIGINAL_COMMAND:-}

refuse() {
  # One line: a control character of the request (a newline) is shown as `?`.
  local shown=${request//[![:print:]]/?}
  echo "spark-llm: the supervisor's key may only run docker inspect|start|stop|logs on $container or read the weights" \
    "record, the memory or the fabric; refused:" \
    "${shown:-a login shell}" >&2
  exit 126
}

# A newline or any other control character: `read` below would see only the first line. Refused outright.
case $request in *[![:print:]]*) refuse ;; esac
words=()
read -r -a words <<<"$request"
n=${#words[@]}
digits='^[0-9]{1,5}$'

# The node's weights record: read-only, and only that file. It lives in the drift records' dir (spark_llm.plan.drift:
# `<remote_dir>/state`), and this script is installed at `<remote_dir>/supervisor-allow.sh` (sshd runs it by that
# absolute path), so it is found from the script's own location, never from anything the request says.
if [[ $n -eq 2 && ${words[0]} == spark-llm && ${words[1]} == weights-record ]]; then
  record="$(dirname "$0")/state/weights"
  if [ ! -f "$record" ]; then
    echo "spark-llm: no weights record on this node (the weights step never completed here)" >&2
    exit 3
  fi
  exec cat -- "$record"
fi

# The node's memory (spark_llm.group.memory): the probe without a weights path, read-only.
if [[ $n -eq 2 && ${words[0]} == spark-llm && ${words[1]} == memory ]]; then
  # shellcheck source=scripts/lib/memory.sh
  . "$(dirname "$0")/memory.sh"
  memory_probe ""
  exit 0
fi

# Each allowed form ends in `exec` (docker's own exit code and output); whatever falls through is refused.
# The fabric as a start needs it (spark_llm.group.fabric_ready), read before each restart: `spark-llm fabric IFACE...`.
if [[ $n -ge 3 && ${words[0]} == spark-llm && ${words[1]} == fabric ]]; then
  for iface in "${words[@]:2}"; do
    [[ $iface =~ ^[A-Za-z0-9_.:-]{1,15}$ ]] || refuse
  done
  # shellcheck source=scripts/lib/host_record.sh
  . "$(dirname "$0")/host_record.sh"
  fabric_record "${words[@]:2}"
  exit 0
fi

if [[ $n -ge 3 && ${words[0]} == docker ]]; then
  case ${words[1]} in
    inspect | start)
      if [[ $n -eq 3 && ${words[2]} == "$container" ]]; then
        exec docker "${words[1]}" "$container"
      fi
      ;;
    stop)
      if [[ $n -eq 3 && ${words[2]} == "$container" ]]; then
        exec docker stop "$container"
      fi
      if [[ $n -eq 5 && ${words[2]} == -t && ${words[3]} =~ $digits && ${words[4]} == "$container" ]]; then
        exec docker stop -t "${words[3]}" "$container"
      fi
      ;;
    logs)
      tail=()
      rest=("${words[@]:2}")
      if [[ ${rest[0]} == --since && ${#rest[@]} -ge 2 && ${rest[1]} =~ ^[0-9]{1,12}$ ]]; then
        tail=(--since "${rest[1]}")
        rest=("${rest[@]:2}")
      fi
      if [[ ${rest[0]} == --tail && ${#rest[@]} -ge 2 && ${rest[1]} =~ $digits ]]; then
        tail+=(--tail "${rest[1]}")
        rest=("${rest[@]:2}")
      fi
      if [[ ${#rest[@]} -eq 1 && ${rest[0]} == "$container" ]]; then
        exec docker logs "${tail[@]}" "$container"
      fi
      if [[ ${#rest[@]} -eq 2 && ${rest[0]} == "$container" && ${rest[1]} == '2>&1' ]]; then
        exec docker logs "${tail[@]}" "$container" 2>&1
      fi
      ;;
  esac
fi
refuse
