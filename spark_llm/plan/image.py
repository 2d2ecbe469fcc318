"""Pure: the scripts that put the engine image on every node and prove every node has the same one.

Per node (components/engine_image.py wires them): a *step* that checks the node's platform (`docker info`)
before anything moves and gets the image there by the configured mode; then the node's docker provider reads the
image (a `docker.RemoteImage`, which also pulls in mode pull); then a *verify* script that fails, naming the node,
unless the image is there, is the expected platform and has the expected ID (the head's, on a worker), and
records the drift token (spark_llm.plan.drift) with that ID. Every failure says what it found and what to do.

- present: the step checks that the image is there.
- pull: the step checks the platform; the RemoteImage pulls with `platform`.
- transfer, source head: the head must have the image; each worker's step runs ON the head and, when the worker
  lacks the image or has another ID, pipes `docker save` into `docker load` on the worker over the fabric
  (spark_llm.plan.fabric): the whole image to a worker that holds none of its layers, else only the layers it lacks
  (spark_llm.plan.image_layers). Progress every few seconds. A worker that has the head's ID moves no bytes.
- transfer, source operator: the head's step runs on the operator's machine and pipes its `docker save` into
  `docker load` on the head over plain OpenSSH (pinned, components.connection.ssh_command), when the head lacks
  that image ID; then the workers get it from the head as above.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.config import StackConfig
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import record_token_script
from spark_llm.plan.fabric import fabric_ssh_setup
from spark_llm.plan.image_layers import PROGRESS_FUNCTIONS, send_functions

# The head's image ID in a worker's transfer script (prepended by `with_head_id`): the ID all nodes must have.
HEAD_ID_ENV = "HEAD_IMAGE_ID"
# The operator's OpenSSH command to the head (argv, shlex-joined) and its user@host, for source operator: in the
# local command's environment, not its script, so a new key or port is an update that re-runs nothing.
SSH_ENV = "SPARK_LLM_SSH"
SSH_TARGET_ENV = "SPARK_LLM_SSH_TARGET"
# The drift token's step name on every node (spark_llm.plan.drift).
DRIFT_STEP = "image"
# Seconds between two progress lines of a transfer.
PROGRESS_SECONDS = 5
# `docker image inspect` format of what a step compares: "ID OS/ARCH" (an image's arch is amd64 or arm64).
FACTS_FORMAT = "{{.Id}} {{.Os}}/{{.Architecture}}"


@dataclass(frozen=True)
class ImageStep:
    """How one node gets the image: where its step runs and the step's script."""

    node: str
    """The node that ends up with the image."""
    runs_on: NodePlan
    """Where the step runs: the node itself, or the head for a transfer over the fabric (or, with `local`, the
    node the operator's machine sends to)."""
    script: str
    """Checks the platform and gets the image there (or checks that it is there)."""
    needs_head_id: bool
    """The script needs the head's image ID (`with_head_id`): a worker's transfer."""
    local: bool = False
    """The script runs on the operator's machine (source operator), reaching the head with $SPARK_LLM_SSH."""


# Bash functions every step uses. `on_node CMD...` runs CMD on the node the step is about: here, or over the
# fabric from the head (defined per step). Its stdin is /dev/null: the script itself arrives on bash's stdin,
# and a command that reads stdin (ssh does) would swallow the rest of it.
_FUNCTIONS = r"""die() { echo "$*" >&2; exit 1; }

# docker info says x86_64/aarch64 for a machine, docker image inspect amd64/arm64 for an image: compare the latter.
arch_name() {
  case "$1" in
    x86_64 | amd64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) echo "$1" ;;
  esac
}

# The platform docker runs containers as on the node, e.g. linux/arm64.
node_platform() {
  local info
  info=$(on_node docker info --format '{{.OSType}}/{{.Architecture}}' 2>&1) \
    || die "$NODE: \`docker info\` failed: $info. Is docker running there, and is the login user in the docker group?"
  echo "${info%%/*}/$(arch_name "${info#*/}")"
}

require_node_platform() {
  local found
  found=$(node_platform)
  [ "$found" = "$PLATFORM" ] || die "$NODE is $found (docker info on $NODE), but spark-llm:image.platform is" \
    "$PLATFORM. Nothing was started. A DGX Spark is linux/arm64: set spark-llm:image.platform to the nodes'" \
    "platform ($found) if this cluster is meant to be $found, or deploy to nodes of the image's platform."
}

# "ID OS/ARCH" of IMAGE_REF on the node; nothing when the node does not have it.
image_facts() {
  on_node docker image inspect --format '{{.Id}} {{.Os}}/{{.Architecture}}' "$IMAGE_REF" 2>/dev/null || true
}

# The step's last line, "image ID OS/ARCH", once IMAGE_REF is on the node, is PLATFORM and has ID $1 (if given).
verify() {
  local expected=${1:-} facts id platform
  facts=$(image_facts)
  [ -n "$facts" ] || die "$NODE: image $IMAGE_REF is not there. $ABSENT_HINT"
  id=${facts%% *}
  platform=${facts#* }
  [ "$platform" = "$PLATFORM" ] || die "$NODE: image $IMAGE_REF ($id) is $platform, but spark-llm:image.platform" \
    "is $PLATFORM. Use an image built for $PLATFORM (docker pull --platform $PLATFORM ...), or fix the platform."
  [ -z "$expected" ] || [ "$id" = "$expected" ] || die "$NODE has $IMAGE_REF as $id, but the head has" \
    "$expected; every node must run the same image. $MISMATCH_HINT"
  echo "image $id $platform"
}
"""

# Runs where the image is (the head, or the operator's machine): docker save | dd (counts the bytes) | the
# node's docker load (`load_on_node`, defined per step), a progress line every PROGRESS_SECONDS (the image's
# unpacked size, about what the tar stream carries, gives the ETA). `transfer` sends the whole image;
# `transfer_layers DIFF_ID...` (a worker's step, spark_llm.plan.image_layers) only those layers, through LAYER_FILTER:
# the node holds the others, and `docker load` takes them from its own store.
_TRANSFER = r"""sent_bytes() {
  local sent
  sent=$(tr '\r' '\n' <"$progress_log" | sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' | tail -n 1)
  echo "${sent:-0}"
}

# A worker's step starts docker save before its checks (`save_early`): docker spends the first seconds of a save
# writing the image to a temp dir before the first byte, which covers the step's ssh round trips. It runs on the
# head only; nothing crosses the fabric until `send` reads it, and the step's cleanup stops it when nothing does.
save_early() {
  exec {saved_fd}< <(exec docker save "$IMAGE_REF")
  save_pid=$!
}

# The archive docker save writes (the early one if any), filtered to the given layers after `some`; `send` reads
# the early one itself when it sends all of it (one copy less).
save_image() {
  if [ "$1" = all ]; then
    docker save "$IMAGE_REF"
  elif shift && [ -n "${saved_fd:-}" ]; then
    python3 -c "$LAYER_FILTER" "$@" <&"$saved_fd"
  else
    docker save "$IMAGE_REF" | python3 -c "$LAYER_FILTER" "$@"
  fi
}

# send all | send some DIFF_ID...
send() {
  local size how=about
  size=$(docker image inspect --format '{{.Size}}' "$IMAGE_REF")
  # Global, for the EXIT trap (step_cleanup).
  progress_log=$(mktemp)
  if [ "$1" = all ]; then
    echo "$NODE: sending $IMAGE_REF ($((size / 1000000)) MB unpacked) from $SOURCE_NAME $ROUTE"
  else
    how='at most'
    echo "$NODE: sending $(($# - 1)) layers of $IMAGE_REF (at most $((size / 1000000)) MB unpacked) from" \
      "$SOURCE_NAME $ROUTE"
  fi
  if [ "$1" = all ] && [ -n "${saved_fd:-}" ]; then
    (dd if="/dev/fd/$saved_fd" bs=1M status=progress 2>"$progress_log" | load_on_node) &
  else
    (save_image "$@" | dd bs=1M status=progress 2>"$progress_log" | load_on_node) &
  fi
  watch_bytes $! "docker save | docker load $ROUTE" sent_bytes "$size" "$how" \
    || die "$NODE: the transfer failed (docker save on $SOURCE_NAME | docker load on $NODE);" \
      "the lines above say which side. Run pulumi up again to retry."
  echo "$NODE: sent $(tr '\r' '\n' <"$progress_log" | grep ' copied, ' | tail -n 1)"
}

transfer() { send all; }
transfer_layers() { send some "$@"; }
"""


def _q(value: str) -> str:
    """Always single-quoted (shlex.quote leaves plain words bare, which shellcheck reads as commands)."""
    return "'" + value.replace("'", "'\\''") + "'"


def _header(purpose: str, cfg: StackConfig, node: str, absent_hint: str, mismatch_hint: str) -> str:
    return (
        "#!/usr/bin/env bash\n"
        f"# spark-llm EngineImage, {node}: {purpose}\n"
        "# Rendered by spark_llm/plan/image.py; run by `pulumi up` (pulumi-command, script on stdin).\n"
        "set -euo pipefail\n"
        f"IMAGE_REF={_q(cfg.image.ref)}\n"
        f"PLATFORM={_q(cfg.image.platform)}\n"
        f"NODE={_q(node)}\n"
        f"ABSENT_HINT={_q(absent_hint)}\n"
        f"MISMATCH_HINT={_q(mismatch_hint)}\n"
    )


_ON_THIS_NODE = 'on_node() { "$@" </dev/null; }\n'
# ssh joins its arguments into one command line for the remote shell: quote each word once more. The step's short
# ssh calls (platform, image, layers, verify) ride one connection (ControlMaster): a handshake costs about 0.5 s on
# the sim's loaded cores. The transfer has a connection of its own: through the master, every byte would take one
# more hop (client -> master). The master ends with the step (step_cleanup, which replaces fabric_ssh_setup's EXIT
# trap and removes its file too).
_ON_WORKER = (
    "fabric_mux=$(mktemp -d)\n"
    'FABRIC_MUX=(-o ControlMaster=auto -o "ControlPath=$fabric_mux/%C" -o ControlPersist=60)\n'
    "step_cleanup() {\n"
    '  [ -z "${save_pid:-}" ] || kill "$save_pid" 2>/dev/null || true\n'
    '  "${FABRIC_SSH[@]}" "${FABRIC_MUX[@]}" -O exit "$FABRIC_TARGET" >/dev/null 2>&1 || true\n'
    '  rm -rf "$fabric_mux" "$fabric_kh" "${progress_log:-}"\n'
    "}\n"
    "trap step_cleanup EXIT\n"
    'on_node() { "${FABRIC_SSH[@]}" "${FABRIC_MUX[@]}" "$FABRIC_TARGET" "${*@Q}" </dev/null; }\n'
    'load_on_node() { "${FABRIC_SSH[@]}" "$FABRIC_TARGET" docker load; }\n'
    "SOURCE_NAME='the head'\nROUTE='over the fabric'\n"
)
# From the operator's machine: the pinned OpenSSH command the component puts in the environment.
_ON_HEAD_FROM_HERE = (
    f'mapfile -t SSH <<<"${{{SSH_ENV}:?set by the EngineImage component}}"\n'
    f"SSH_TARGET=${{{SSH_TARGET_ENV}:?set by the EngineImage component}}\n"
    'on_node() { "${SSH[@]}" "$SSH_TARGET" "${*@Q}" </dev/null; }\n'
    'load_on_node() { "${SSH[@]}" "$SSH_TARGET" docker load; }\n'
    "SOURCE_NAME=\"this machine (the operator's)\"\nROUTE='over ssh'\n"
    'step_cleanup() { rm -f "${progress_log:-}"; }\n'
    "trap step_cleanup EXIT\n"
)


def _hints(cfg: StackConfig, node: NodePlan) -> tuple[str, str]:
    """(what to do when the image is absent, when its ID differs from the head's)."""
    image = cfg.image
    load_it = f"docker load -i IMAGE.tar, or docker pull --platform {image.platform} {image.ref}"
    if image.mode == "present":
        return (
            f"spark-llm:image.mode present only checks: put it on {node.name} ({load_it}), "
            "or set spark-llm:image.mode to transfer (from the head) or pull.",
            f"put the head's image on {node.name}, or set spark-llm:image.mode to transfer.",
        )
    if image.mode == "pull":
        return (
            "docker pull succeeded but the image is not there; check the reference.",
            f"the tag moved between pulls: pin a digest ({image.ref}@sha256:...) or use spark-llm:image.mode transfer.",
        )
    if node.role == "head" and image.source == "head":
        return (
            f"spark-llm:image.source head sends the head's image to the workers: put it on the head first "
            f"({load_it}), or set spark-llm:image.source operator to send it from this machine.",
            "",
        )
    if node.role == "head":
        return (
            "docker load did not tag it (see the lines above).",
            "the image changed on this machine during the update; run pulumi up again.",
        )
    return (
        "docker load did not tag it (see the lines above); run pulumi up again to retry.",
        "the head's image changed during the update; run pulumi up again.",
    )


def _present(cfg: StackConfig, node: NodePlan) -> str:
    absent, mismatch = _hints(cfg, node)
    return (
        _header("check that the image is there (mode present)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + 'verify ""\n'
    )


def _pull(cfg: StackConfig, node: NodePlan) -> str:
    """Before the RemoteImage pulls: the node's platform, so a wrong one fails before anything moves."""
    absent, mismatch = _hints(cfg, node)
    return (
        _header("check the platform before the pull (mode pull)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + 'echo "$NODE is $PLATFORM: the docker provider pulls $IMAGE_REF for $PLATFORM if it is not there"\n'
    )


def _head_has_it(cfg: StackConfig, node: NodePlan) -> str:
    absent, _ = _hints(cfg, node)
    return (
        _header("check the image the workers get is here (mode transfer, source head)", cfg, node.name, absent, "")
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + 'verify ""\n'
    )


def _head_from_operator(cfg: StackConfig, node: NodePlan) -> str:
    absent, mismatch = _hints(cfg, node)
    missing = (
        f"spark-llm:image.source is operator, but {cfg.image.ref} is not in this machine's docker: build or pull "
        "it here, or set spark-llm:image.source head to send the head's copy. Nothing was sent."
    )
    return (
        _header(
            "send the image from the operator's machine (mode transfer, source operator; runs here)",
            cfg,
            node.name,
            absent,
            mismatch,
        )
        + _ON_HEAD_FROM_HERE
        + _FUNCTIONS
        + f"PROGRESS_SECONDS={PROGRESS_SECONDS}\n"
        + PROGRESS_FUNCTIONS
        + _TRANSFER
        + f'source_facts=$(docker image inspect --format {_q(FACTS_FORMAT)} "$IMAGE_REF" 2>/dev/null) \\\n'
        + f"  || die {_q(missing)}\n"
        + "source_id=${source_facts%% *}\n"
        + '[ "${source_facts#* }" = "$PLATFORM" ] || die "$IMAGE_REF on this machine (the operator\'s) is'
        " ${source_facts#* }, but spark-llm:image.platform is $PLATFORM. Nothing was sent: build or pull it for"
        ' $PLATFORM here (docker pull --platform $PLATFORM $IMAGE_REF)."\n'
        + "require_node_platform\n"
        + "have=$(image_facts)\n"
        + 'if [ "${have%% *}" = "$source_id" ]; then\n'
        + '  echo "$NODE already has $IMAGE_REF ($source_id): nothing to send"\n'
        + "else\n"
        + "  transfer\n"
        + "fi\n"
        + 'verify "$source_id"\n'
    )


def _worker_from_head(cfg: StackConfig, worker: NodePlan) -> str:
    absent, mismatch = _hints(cfg, worker)
    return (
        _header(
            "transfer the image from the head over the fabric (runs on the head)", cfg, worker.name, absent, mismatch
        )
        + fabric_ssh_setup(worker, cfg.network.fabric_key_path)
        + _ON_WORKER
        + _FUNCTIONS
        + f"PROGRESS_SECONDS={PROGRESS_SECONDS}\n"
        + PROGRESS_FUNCTIONS
        + _TRANSFER
        + send_functions()
        + f"HEAD_IMAGE_ID=${{{HEAD_ID_ENV}:?set by the EngineImage component: the image ID of the head}}\n"
        + "head_id=$(docker image inspect --format '{{.Id}}' \"$IMAGE_REF\" 2>/dev/null) || head_id=absent\n"
        + '[ "$head_id" = "$HEAD_IMAGE_ID" ] || die "the head\'s $IMAGE_REF is now $head_id, not $HEAD_IMAGE_ID as'
        ' when this update checked it; nothing was sent to $NODE. Run pulumi up again."\n'
        + "save_early\n"
        + "require_node_platform\n"
        + "have=$(image_facts)\n"
        + 'if [ "${have%% *}" = "$HEAD_IMAGE_ID" ]; then\n'
        + '  echo "$NODE already has $IMAGE_REF ($HEAD_IMAGE_ID): nothing to transfer"\n'
        + "else\n"
        + '  echo "$NODE: ${have:-no $IMAGE_REF}; the head has $HEAD_IMAGE_ID"\n'
        + "  send_image\n"
        + "fi\n"
        + 'verify "$HEAD_IMAGE_ID"\n'
    )


def with_head_id(script: str, head_id: str) -> str:
    """A worker's transfer script with the head's image ID set (the component knows it once the head is read)."""
    return f"{HEAD_ID_ENV}={_q(head_id)}\n{script}"


def image_steps(plan: DeploymentPlan) -> tuple[ImageStep, ...]:
    """The head's step, then one per worker (a worker's step waits for the head's ID)."""
    cfg = plan.config
    mode, source = cfg.image.mode, cfg.image.source
    steps = []
    for node in plan.nodes:
        runs_on, local, needs_head_id = node, False, False
        if mode == "present":
            script = _present(cfg, node)
        elif mode == "pull":
            script = _pull(cfg, node)
        elif node.role == "head" and source == "head":
            script = _head_has_it(cfg, node)
        elif node.role == "head":
            script, local = _head_from_operator(cfg, node), True
        else:
            script, runs_on, needs_head_id = _worker_from_head(cfg, node), plan.head, True
        steps.append(
            ImageStep(node=node.name, runs_on=runs_on, script=script, needs_head_id=needs_head_id, local=local)
        )
    return tuple(steps)


def verify_script(cfg: StackConfig, node: NodePlan, expected_id: str, token: str) -> str:
    """On the node, after its RemoteImage: the image is there, of PLATFORM, with `expected_id`; records the token.

    `expected_id`: the head's ID on a worker (every node runs the same image), the node's own on the head.
    """
    absent, mismatch = _hints(cfg, node)
    return (
        _header("verify the image and record it (spark_llm.plan.drift)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _FUNCTIONS
        + f"EXPECTED={_q(expected_id)}\n"
        + 'verify "$EXPECTED"\n'
        + record_token_script(node.remote_dir, DRIFT_STEP, token, "$EXPECTED")
    )


def live_image_id(observed_image: str) -> str | None:
    """The ID in an observation's `ID OS/ARCH` (spark_llm.remote.observe), None when the node lacks the image."""
    return observed_image.split()[0] if observed_image.strip() else None


def local_image_facts_argv(ref: str) -> list[str]:
    """What the component runs on the operator's machine at program run (source operator): `ID OS/ARCH` of ref."""
    return ["docker", "image", "inspect", "--format", FACTS_FORMAT, ref]
