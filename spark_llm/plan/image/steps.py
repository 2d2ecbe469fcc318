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
  (spark_llm.plan.image.layers). Progress every few seconds. A worker that has the head's ID moves no bytes.
- transfer, source operator: the head's step runs on the operator's machine and pipes its `docker save` into
  `docker load` on the head over plain OpenSSH (pinned, components.connection.ssh_command), when the head lacks
  that image ID; then the workers get it from the head as above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from spark_llm.config.group import GroupConfig
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import record_token_script
from spark_llm.plan.fabric import fabric_ssh_setup
from spark_llm.plan.image.layers import send_functions
from spark_llm.plan.scripts import bash_lib
from spark_llm.plan.weights.sync import BULK_CIPHER

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
    verify: Callable[[str, str], str]
    """`verify(token, expected_id)`: the node's verify script (`verify_script`), once its token and the ID it must
    have are known."""
    local: bool = False
    """The script runs on the operator's machine (source operator), reaching the head with $SPARK_LLM_SSH."""


@dataclass(frozen=True)
class ImagePlan:
    """The engine image's steps, resolved from the config (components.engine_image declares them)."""

    ref: str
    """spark-llm:image.ref: what every node's docker.RemoteImage reads."""
    pull_platform: str | None
    """The RemoteImage's `platform` (mode pull: the pull's); None in the other modes (it only reads)."""
    steps: tuple[ImageStep, ...]
    """The head's step, then one per worker."""


def _q(value: str) -> str:
    """Always single-quoted (shlex.quote leaves plain words bare, which shellcheck reads as commands)."""
    return "'" + value.replace("'", "'\\''") + "'"


def _header(purpose: str, cfg: GroupConfig, node: str, absent_hint: str, mismatch_hint: str) -> str:
    return (
        "#!/usr/bin/env bash\n"
        f"# spark-llm EngineImage, {node}: {purpose}\n"
        # The module's path before plan/image/ was a folder: this text is each image step's input, and a new one would
        # replace every deployed stack's image steps on upgrade (tests/integration/test_upgrade.py).
        "# Rendered by spark_llm/plan/image.py; run by `pulumi up` (pulumi-command, script on stdin).\n"
        "set -euo pipefail\n"
        f"IMAGE_REF={_q(cfg.image.ref)}\n"
        f"PLATFORM={_q(cfg.image.platform)}\n"
        f"NODE={_q(node)}\n"
        f"ABSENT_HINT={_q(absent_hint)}\n"
        f"MISMATCH_HINT={_q(mismatch_hint)}\n"
    )


# Where a step's `on_node` runs a command (scripts/lib/image.sh): the node itself ...
_ON_THIS_NODE = "NODE_SSH=()\n"
# ... the worker, from the head over the fabric (fabric_ssh_setup before it). The step's short ssh calls (platform,
# image, layers, verify) ride one connection (ControlMaster): a handshake costs about 0.5 s on the sim's loaded
# cores. The transfer has its own (LOAD_SSH, scripts/lib/image_transfer.sh), with the bulk cipher (AES-GCM, as the
# weights' ssh copy): on the sim the stream of the 299 MB stand-in took 3.4-4.0 s against 4.3-4.7 s with OpenSSH's
# default chacha20-poly1305, and `docker load` can only unpack once the whole archive is in.
# The master ends with the step (step_cleanup, which replaces fabric_ssh_setup's EXIT trap and removes its file too).
_ON_WORKER = (
    "mux_dir=$(mktemp -d)\n"
    'FABRIC_MUX=(-o ControlMaster=auto -o "ControlPath=$mux_dir/%C" -o ControlPersist=60)\n'
    'NODE_SSH=("${FABRIC_SSH[@]}" "${FABRIC_MUX[@]}" "$FABRIC_TARGET")\n'
    f'LOAD_SSH=("${{FABRIC_SSH[@]}}" -c {BULK_CIPHER} "$FABRIC_TARGET")\n'
    "SOURCE_NAME='the head'\nROUTE='over the fabric'\n"
)
# ... or the head, from the operator's machine: the pinned OpenSSH command the component puts in the environment.
_ON_HEAD_FROM_HERE = (
    f'mapfile -t SSH <<<"${{{SSH_ENV}:?set by the EngineImage component}}"\n'
    f"SSH_TARGET=${{{SSH_TARGET_ENV}:?set by the EngineImage component}}\n"
    'NODE_SSH=("${SSH[@]}" "$SSH_TARGET")\n'
    'LOAD_SSH=("${SSH[@]}" "$SSH_TARGET")\n'
    "SOURCE_NAME=\"this machine (the operator's)\"\nROUTE='over ssh'\n"
)


def _checks() -> str:
    """The functions every step uses (scripts/lib/image.sh)."""
    return bash_lib("image")


def _transfer() -> str:
    """The functions of a step that sends the image (scripts/lib/image_transfer.sh), then its EXIT trap."""
    return f"PROGRESS_SECONDS={PROGRESS_SECONDS}\n" + bash_lib("image_transfer") + "trap step_cleanup EXIT\n"


def _hints(cfg: GroupConfig, node: NodePlan) -> tuple[str, str]:
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


def _present(cfg: GroupConfig, node: NodePlan) -> str:
    absent, mismatch = _hints(cfg, node)
    return (
        _header("check that the image is there (mode present)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _checks()
        + "require_node_platform\n"
        + 'verify ""\n'
    )


def _pull(cfg: GroupConfig, node: NodePlan) -> str:
    """Before the RemoteImage pulls: the node's platform, so a wrong one fails before anything moves."""
    absent, mismatch = _hints(cfg, node)
    return (
        _header("check the platform before the pull (mode pull)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _checks()
        + "require_node_platform\n"
        + 'echo "$NODE is $PLATFORM: the docker provider pulls $IMAGE_REF for $PLATFORM if it is not there"\n'
    )


def _head_has_it(cfg: GroupConfig, node: NodePlan) -> str:
    absent, _ = _hints(cfg, node)
    return (
        _header("check the image the workers get is here (mode transfer, source head)", cfg, node.name, absent, "")
        + _ON_THIS_NODE
        + _checks()
        + "require_node_platform\n"
        + 'verify ""\n'
    )


def _head_from_operator(cfg: GroupConfig, node: NodePlan) -> str:
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
        + _checks()
        + _transfer()
        + f'source_facts=$(docker image inspect --format {_q(FACTS_FORMAT)} "$IMAGE_REF" 2>/dev/null) \\\n'
        + f"  || fail {_q(missing)}\n"
        + "source_id=${source_facts%% *}\n"
        + '[ "${source_facts#* }" = "$PLATFORM" ] || fail "$IMAGE_REF on this machine (the operator\'s) is'
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


def _worker_from_head(cfg: GroupConfig, worker: NodePlan) -> str:
    absent, mismatch = _hints(cfg, worker)
    return (
        _header(
            "transfer the image from the head over the fabric (runs on the head)", cfg, worker.name, absent, mismatch
        )
        + fabric_ssh_setup(worker, cfg.network.fabric_key_path)
        + _ON_WORKER
        + _checks()
        + _transfer()
        + send_functions()
        + f"HEAD_IMAGE_ID=${{{HEAD_ID_ENV}:?set by the EngineImage component: the image ID of the head}}\n"
        + "head_id=$(docker image inspect --format '{{.Id}}' \"$IMAGE_REF\" 2>/dev/null) || head_id=absent\n"
        + '[ "$head_id" = "$HEAD_IMAGE_ID" ] || fail "the head\'s $IMAGE_REF is now $head_id, not $HEAD_IMAGE_ID as'
        ' when this update checked it; nothing was sent to $NODE. Run pulumi up again."\n'
        + "require_node_platform\n"
        + "have=$(image_facts)\n"
        + 'if [ "${have%% *}" = "$HEAD_IMAGE_ID" ]; then\n'
        + '  echo "$NODE already has $IMAGE_REF ($HEAD_IMAGE_ID): nothing to transfer"\n'
        + "else\n"
        + '  echo "$NODE: ${have:-no $IMAGE_REF}; the head has $HEAD_IMAGE_ID"\n'
        + "  save_early\n"
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
            ImageStep(
                node=node.name,
                runs_on=runs_on,
                script=script,
                needs_head_id=needs_head_id,
                verify=partial(_verify, cfg, node),
                local=local,
            )
        )
    return tuple(steps)


def image_plan(plan: DeploymentPlan) -> ImagePlan:
    image = plan.image
    return ImagePlan(
        ref=image.ref,
        pull_platform=image.platform if image.mode == "pull" else None,
        steps=image_steps(plan),
    )


def _verify(cfg: GroupConfig, node: NodePlan, token: str, expected_id: str) -> str:
    return verify_script(cfg, node, expected_id, token)


def verify_script(cfg: GroupConfig, node: NodePlan, expected_id: str, token: str) -> str:
    """On the node, after its RemoteImage: the image is there, of PLATFORM, with `expected_id`; records the token.

    `expected_id`: the head's ID on a worker (every node runs the same image), the node's own on the head.
    """
    absent, mismatch = _hints(cfg, node)
    return (
        _header("verify the image and record it (spark_llm.plan.drift)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _checks()
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
