"""Pure: bash snippets that run ON the head and reach a worker over the fabric with the head's own SSH key.

Bulk data (weights, images) goes head -> worker over the direct link, never through the operator's machine:
the operator's ssh to the head carries only the command. The worker's host key is pinned from the stack
config, written to a private known_hosts file on the head for the duration of the script.
"""

from __future__ import annotations

import shlex

from spark_llm.plan.deployment import NodePlan
from spark_llm.plan.hosts import SSH_OPTIONS

# The options of every head -> worker ssh (besides the key, the pinned known_hosts file and the port), as `-o`
# values: the bash snippet below and scripts/fanout.py (through its plan, spark_llm.plan.weights.fanout) use them.
# The same list as every other ssh (plan.hosts.SSH_OPTIONS); the head's ssh keeps its default log level.
FABRIC_SSH_OPTIONS = tuple(f"{key}={value}" for key, value in SSH_OPTIONS)


def fabric_ssh_setup(worker: NodePlan, key_path: str) -> str:
    """Defines bash array FABRIC_SSH (ssh to the worker over the fabric), FABRIC_TARGET (user@address) and
    FABRIC_RSH (the same ssh as one string, for `rsync -e`).

    `key_path` is a path on the head (a leading `~` is the head user's home). The temp known_hosts file is
    removed when the script exits.
    """
    key = '"$HOME"' + shlex.quote(key_path[1:]) if key_path.startswith("~") else shlex.quote(key_path)
    host = worker.fabric_address if worker.ssh.port == 22 else f"[{worker.fabric_address}]:{worker.ssh.port}"
    pin = shlex.quote(f"{host} {worker.ssh.host_key}")
    return (
        "fabric_kh=$(mktemp)\n"
        "trap 'rm -f \"$fabric_kh\"' EXIT\n"
        f"printf '%s\\n' {pin} > \"$fabric_kh\"\n"
        f"FABRIC_KEY={key}\n"
        '[ -r "$FABRIC_KEY" ] || { echo "fabric key $FABRIC_KEY is not readable on the head;'
        ' set spark-llm:network.fabricKeyPath" >&2; exit 1; }\n'
        'FABRIC_SSH=(ssh -i "$FABRIC_KEY" -o UserKnownHostsFile="$fabric_kh"'
        + "".join(f" -o {o}" for o in FABRIC_SSH_OPTIONS)
        + f" -p {worker.ssh.port})\n"
        f"FABRIC_TARGET={shlex.quote(worker.ssh.user + '@' + worker.fabric_address)}\n"
        'FABRIC_RSH="${FABRIC_SSH[*]}"\n'
    )
