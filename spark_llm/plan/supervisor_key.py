"""Pure: the supervisor's own ssh key, as OpenSSH restricts one (issue 31, 11).

The supervisor used to reach the workers with the head's fabric key: a root shell on every worker, for a program
that needs four docker verbs on one container. Now `pulumi up` makes a key pair of its own on the head
(`keygen_script`: the private key 0600 in a 0700 dir, never out of the head, never in Pulumi state; the step's stdout
is the public line), and on each worker writes scripts/supervisor_allow.sh and an authorized_keys line
(`authorized_line`) that lets that key run only the script, which runs only `docker inspect|start|stop|logs` on the
engine's container (`authorize_script`). `pulumi destroy` removes the line (that line only) and the key.
A line or script removed or edited on a worker since is drift (spark_llm.plan.drift: the probe reads them back,
`probe`): the next `pulumi up` puts them back, or the supervisor would wait for that worker forever.
components/supervisor.py declares the steps; spark_llm.plan.supervisor mounts the key's dir into the container.
"""

from __future__ import annotations

import shlex

from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.drift import record_token_script
from spark_llm.plan.node_files import file_script
from spark_llm.plan.nodes import NodePlan
from spark_llm.plan.observation import TOKENS_DIR
from spark_llm.plan.scripts import SCRIPTS_DIR, bash_lib

ALLOW_SCRIPT = SCRIPTS_DIR / "supervisor_allow.sh"
# The memory probe the allow script runs for `spark-llm memory` (spark_llm.group.memory.MEMORY_REQUEST).
MEMORY_PROBE = SCRIPTS_DIR / "lib" / "memory.sh"
FABRIC_RECORD = SCRIPTS_DIR / "lib" / "host_record.sh"
KEY_NAME = "id_ed25519"
# Where the supervisor's container sees the key's dir (read-only), and so the key.
CONTAINER_KEY_DIR = "/spark-llm-supervisor-key"
CONTAINER_KEY = f"{CONTAINER_KEY_DIR}/{KEY_NAME}"
# The authorize step runs its own script again at delete with this phase ($SPARK_LLM_PHASE): it removes its line.
DELETE_PHASE = "delete"
# The worker's step's drift token (spark_llm.plan.drift), and the probe section that reads its live value back.
STEP = "supervisor-key"
PROBE_SECTION = "supervisor_key"


def key_dir(head: NodePlan) -> str:
    """The key's dir on the head: apart from the supervisor's files dir, which a new group's files replace."""
    return f"{head.remote_dir}/supervisor-key"


def key_path(head: NodePlan) -> str:
    return f"{key_dir(head)}/{KEY_NAME}"


def key_comment(plan: DeploymentPlan, stack: str) -> str:
    """The public key's comment: whose key it is (the stack's, a model's of several), as authorized_keys shows it."""
    return f"{plan.own('spark-llm-supervisor')}@{stack}"


def keygen_script(plan: DeploymentPlan, stack: str) -> str:
    """The head's step that makes a new key pair (the old one, if any, removed first) and prints its public line."""
    call = shlex.join(["supervisor_key_make", key_dir(plan.head), key_comment(plan, stack)])
    return bash_lib("supervisor_key") + call + "\n"


def public_key_command(plan: DeploymentPlan) -> str:
    """The key step's update (a changed connection): it prints the public line again (the step's stdout is what the
    workers' steps read), and makes no new key."""
    return f"cat {shlex.quote(key_path(plan.head) + '.pub')}"


def remove_key_command(plan: DeploymentPlan) -> str:
    """The key step's delete (a new state's key, the supervisor turned off, `pulumi destroy`): the key pair goes."""
    return f"rm -rf {shlex.quote(key_dir(plan.head))}"


def allow_path(worker: NodePlan) -> str:
    """Where scripts/supervisor_allow.sh lives on a worker."""
    return f"{worker.remote_dir}/supervisor-allow.sh"


def memory_probe_path(worker: NodePlan) -> str:
    """Where scripts/lib/memory.sh lives on a worker, beside the allow script (its `spark-llm memory` runs it)."""
    return f"{worker.remote_dir}/memory.sh"


def fabric_record_path(worker: NodePlan) -> str:
    """Where scripts/lib/host_record.sh lives on a worker, beside the allow script (its `spark-llm fabric` runs it)."""
    return f"{worker.remote_dir}/host_record.sh"


def forced_command(plan: DeploymentPlan, worker: NodePlan) -> str:
    """What sshd runs (the user's shell reads it) for every session of the key on `worker`, whatever was asked."""
    return shlex.join([allow_path(worker), plan.container])


def key_options(plan: DeploymentPlan, worker: NodePlan) -> str:
    """The options of the key's authorized_keys line: `restrict` (no pty, no forwarding of any kind, no ~/.ssh/rc)
    and the forced command."""
    # sshd's option syntax (auth-options.c, opt_dequote): inside the double quotes `\"` is a quote, nothing else is
    # escaped. shlex.quote writes no double quote, but a path may hold one.
    command = forced_command(plan, worker).replace('"', '\\"')
    return f'restrict,command="{command}"'


def authorized_line(plan: DeploymentPlan, worker: NodePlan, public_key: str) -> str:
    """The worker's authorized_keys line for the key (`key_options`, then the key).
    `public_key`: the key step's stdout (`ssh-ed25519 AAAA... spark-llm-supervisor@STACK`)."""
    words = public_key.split()
    if len(words) < 2 or words[0] != "ssh-ed25519":
        raise ValueError(f"the supervisor's key step printed no ed25519 public key: {public_key[:80]!r}")
    return f"{key_options(plan, worker)} {' '.join(words)}"


def _live_call(plan: DeploymentPlan, worker: NodePlan) -> str:
    return shlex.join(["supervisor_key_live", allow_path(worker), key_options(plan, worker)])


def probe(plan: DeploymentPlan, node: NodePlan) -> str:
    """A worker's read-only probe section: `supervisor_key<TAB>DIGEST` of its key line(s) and allow script as they
    are now (what the step recorded when it wrote them, unless someone changed them since)."""
    if node.role == "head" or plan.supervisor is None:
        return ""
    return bash_lib("supervisor_key") + f"printf '{PROBE_SECTION}\\t%s\\n' \"$({_live_call(plan, node)})\"\n"


def drift_warning(worker: NodePlan, why: str) -> str:
    """What preview says when the key's line or the allow script changed on a worker since `pulumi up`."""
    return (
        f"drift: the supervisor's key on {worker.name} ({why}): its authorized_keys line or"
        f" {allow_path(worker)} was removed or edited since `pulumi up`; `up` puts them back (until then the"
        " supervisor cannot reach that worker)"
    )


def authorize_script(plan: DeploymentPlan, worker: NodePlan, public_key: str, token: str) -> str:
    """The worker's step: scripts/supervisor_allow.sh in place (0755), then the key's line in the login user's
    authorized_keys, once, then its drift token (`token`) with the digest of both. Run again at delete
    ($SPARK_LLM_PHASE=delete: `DELETE_PHASE`), it removes that line, the script and the token."""
    line = authorized_line(plan, worker, public_key)
    allow = shlex.quote(allow_path(worker))
    recorded = shlex.quote(f"{worker.remote_dir}/{TOKENS_DIR}/{STEP}")
    return (
        bash_lib("supervisor_key")
        + 'if [ "${SPARK_LLM_PHASE:-create}" = delete ]; then\n'
        + f"  {shlex.join(['supervisor_key_allow', line])}\n"
        + f"  rm -f {allow} {shlex.quote(memory_probe_path(worker))} {shlex.quote(fabric_record_path(worker))}"
        + f" {recorded}\n"
        + "  exit 0\n"
        + "fi\n"
        + file_script(allow_path(worker), ALLOW_SCRIPT.read_text(), "0755")
        + file_script(memory_probe_path(worker), MEMORY_PROBE.read_text(), "0644")
        + file_script(fabric_record_path(worker), FABRIC_RECORD.read_text(), "0644")
        + f"{shlex.join(['supervisor_key_allow', line])}\n"
        + record_token_script(worker.remote_dir, STEP, token, f"$({_live_call(plan, worker)})")
    )
