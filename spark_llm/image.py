"""Pure: the scripts that put the engine image on every node and prove every node has the same one.

One step per node, the head first. Each step's script checks the node's platform (`docker info`) before
anything moves, gets the image there by the configured mode, and ends with the line `image ID OS/ARCH` once
the image is there, is the expected platform and (on a worker) has the head's ID; otherwise it exits 1 with
a message that names the node, says what it found and what to do. Each step also has a read-only check
(`docker image inspect`) that `pulumi preview` runs to find a node whose image was removed or changed.

- present: check only.
- pull: `docker pull --platform PLATFORM REF` on the node.
- transfer, source head: the head must have the image; each worker step runs ON the head and, when the worker
  lacks the image or has another ID, pipes `docker save` into `docker load` on the worker over the fabric
  (spark_llm.fabric), printing progress every few seconds. A worker that has the head's ID moves no bytes.
- transfer, source operator: the head step receives `docker save` from the operator's machine on its stdin
  (spark_llm.ssh `feed`), then the workers get it from the head as above.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.config import StackConfig
from spark_llm.fabric import fabric_ssh_setup
from spark_llm.plan import DeploymentPlan, NodePlan
from spark_llm.ssh import FEED_PROBE_ENV, FEED_REQUEST

# The head's image ID, given to every worker step by the EngineImage component: the ID all nodes must have.
HEAD_ID_ENV = "SPARK_LLM_HEAD_IMAGE_ID"
# Seconds between two progress lines of a transfer.
PROGRESS_SECONDS = 5
# `docker image inspect` format of what a step compares: "ID OS/ARCH" (an image's arch is amd64 or arm64).
FACTS_FORMAT = "{{.Id}} {{.Os}}/{{.Architecture}}"


@dataclass(frozen=True)
class ImageStep:
    """How one node gets the image: where the script runs, the script, and its read-only check."""

    node: str
    """The node that ends up with the image (and the label of the step's output lines)."""
    runs_on: NodePlan
    """Where ssh runs the script: the node itself, or the head for a transfer over the fabric."""
    script: str
    """Gets the image there; its last output line is `image ID OS/ARCH`."""
    check: str
    """Read-only: `ID OS/ARCH` of the image on the node, or a line starting with `absent`."""
    head_id_env: bool
    """The script needs the head's image ID in HEAD_ID_ENV (every worker step)."""
    feed: dict | None = None
    """Commands run on the operator's machine: `probe` (its output is FEED_PROBE_ENV) and `command` (its
    output is streamed to the script's stdin when the script asks for it)."""


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

# Runs ON the head: docker save | dd (counts the bytes) | ssh over the fabric | docker load on the worker.
_TRANSFER = r"""progress_bytes() { tr '\r' '\n' <"$1" | sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' | tail -n 1; }

transfer() {
  local size_mb pipeline start=$SECONDS last=$SECONDS sent
  size_mb=$(($(docker image inspect --format '{{.Size}}' "$IMAGE_REF") / 1000000))
  # Global, for the EXIT trap; the trap replaces fabric_ssh_setup's, so it removes its known_hosts file too.
  progress_log=$(mktemp)
  trap 'rm -f "$fabric_kh" "$progress_log"' EXIT
  echo "$NODE: sending $IMAGE_REF ($size_mb MB unpacked) from the head over the fabric"
  (docker save "$IMAGE_REF" | dd bs=1M status=progress 2>"$progress_log" \
    | "${FABRIC_SSH[@]}" "$FABRIC_TARGET" docker load) &
  pipeline=$!
  while kill -0 "$pipeline" 2>/dev/null; do
    sleep 1
    if ((SECONDS - last >= PROGRESS_SECONDS)); then
      last=$SECONDS
      sent=$(progress_bytes "$progress_log")
      echo "$NODE: $((${sent:-0} / 1000000)) MB sent" \
        "($((${sent:-0} / 1000000 / (SECONDS - start))) MB/s)"
    fi
  done
  wait "$pipeline" || die "$NODE: the transfer failed (docker save on the head | ssh $FABRIC_TARGET docker load);" \
    "the lines above say which side. Run pulumi up again to retry."
  echo "$NODE: sent $(tr '\r' '\n' <"$progress_log" | grep ' copied, ' | tail -n 1)"
}
"""


def _q(value: str) -> str:
    """Always single-quoted (shlex.quote leaves plain words bare, which shellcheck reads as commands)."""
    return "'" + value.replace("'", "'\\''") + "'"


def _header(purpose: str, cfg: StackConfig, node: str, absent_hint: str, mismatch_hint: str) -> str:
    return (
        "#!/usr/bin/env bash\n"
        f"# spark-llm EngineImage, {node}: {purpose}\n"
        "# Rendered by spark_llm/image.py; run over ssh by `pulumi up`. Last line: image ID OS/ARCH.\n"
        "set -euo pipefail\n"
        f"IMAGE_REF={_q(cfg.image.ref)}\n"
        f"PLATFORM={_q(cfg.image.platform)}\n"
        f"NODE={_q(node)}\n"
        f"ABSENT_HINT={_q(absent_hint)}\n"
        f"MISMATCH_HINT={_q(mismatch_hint)}\n"
    )


_ON_THIS_NODE = 'on_node() { "$@" </dev/null; }\n'
# ssh joins its arguments into one command line for the remote shell: quote each word once more.
_ON_WORKER = 'on_node() { "${FABRIC_SSH[@]}" "$FABRIC_TARGET" "${*@Q}" </dev/null; }\n'


def _hints(cfg: StackConfig, node: NodePlan) -> tuple[str, str, str]:
    """(what to do when the image is absent, when its ID differs from the head's, the check's `absent` line)."""
    image = cfg.image
    load_it = f"docker load -i IMAGE.tar, or docker pull --platform {image.platform} {image.ref}"
    if image.mode == "present":
        return (
            f"spark-llm:image.mode present only checks: put it on {node.name} ({load_it}), "
            "or set spark-llm:image.mode to transfer (from the head) or pull.",
            f"put the head's image on {node.name}, or set spark-llm:image.mode to transfer.",
            f"absent (mode present: put it on {node.name})",
        )
    if image.mode == "pull":
        return (
            "docker pull succeeded but the image is not there; check the reference.",
            f"the tag moved between pulls: pin a digest ({image.ref}@sha256:...) or use spark-llm:image.mode transfer.",
            "absent (pulumi up pulls it)",
        )
    if node.role == "head" and image.source == "head":
        return (
            f"spark-llm:image.source head sends the head's image to the workers: put it on the head first "
            f"({load_it}), or set spark-llm:image.source operator to send it from this machine.",
            "",
            "absent (put it on the head: spark-llm:image.source is head)",
        )
    if node.role == "head":
        return (
            "docker load did not tag it (see the lines above).",
            "the image changed on this machine during the update; run pulumi up again.",
            "absent (pulumi up sends it from this machine)",
        )
    return (
        "docker load did not tag it (see the lines above); run pulumi up again to retry.",
        "the head's image changed during the update; run pulumi up again.",
        "absent (pulumi up transfers it from the head)",
    )


def check_script(cfg: StackConfig, node: NodePlan, runs_on: NodePlan) -> str:
    """Read-only: `ID OS/ARCH` of the image on `node`, or `absent (...what pulumi up will do...)`."""
    _, _, absent = _hints(cfg, node)
    over_fabric = runs_on.name != node.name
    return (
        "set -euo pipefail\n"
        f"IMAGE_REF={_q(cfg.image.ref)}\n"
        + (fabric_ssh_setup(node, cfg.network.fabric_key_path) + _ON_WORKER if over_fabric else _ON_THIS_NODE)
        # Absent only when docker says so: a node that does not answer is "unknown", not a reason to transfer.
        + f'if facts=$(on_node docker image inspect --format {_q(FACTS_FORMAT)} "$IMAGE_REF" 2>&1); then\n'
        + '  echo "$facts"\n'
        + 'elif [[ $facts == *"No such image"* ]]; then\n'
        + f"  echo {_q(absent)}\n"
        + "else\n"
        + '  echo "unknown: $(echo "$facts" | tail -n 1)"\n'
        + "fi\n"
    )


def _present(cfg: StackConfig, node: NodePlan) -> str:
    absent, mismatch, _ = _hints(cfg, node)
    expected = f'"${HEAD_ID_ENV}"' if node.role == "worker" else '""'
    return (
        _header("check that the image is there (mode present)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + f"verify {expected}\n"
    )


def _pull(cfg: StackConfig, node: NodePlan) -> str:
    absent, mismatch, _ = _hints(cfg, node)
    expected = f'"${HEAD_ID_ENV}"' if node.role == "worker" else '""'
    return (
        _header("docker pull the image (mode pull)", cfg, node.name, absent, mismatch)
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + 'echo "$NODE: docker pull --platform $PLATFORM $IMAGE_REF"\n'
        + 'on_node docker pull --platform "$PLATFORM" "$IMAGE_REF" || die "$NODE: docker pull --platform $PLATFORM'
        " $IMAGE_REF failed (its output is above). The node must reach the registry (for a private image, run"
        " docker login on $NODE first); without registry access, put the image on the head and set"
        ' spark-llm:image.mode transfer."\n' + f"verify {expected}\n"
    )


def _head_has_it(cfg: StackConfig, node: NodePlan) -> str:
    absent, _, _ = _hints(cfg, node)
    return (
        _header("check the image the workers get is here (mode transfer, source head)", cfg, node.name, absent, "")
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + 'verify ""\n'
    )


def _head_from_operator(cfg: StackConfig, node: NodePlan) -> str:
    absent, mismatch, _ = _hints(cfg, node)
    return (
        _header(
            "receive the image from the operator's machine (mode transfer, source operator)",
            cfg,
            node.name,
            absent,
            mismatch,
        )
        + _ON_THIS_NODE
        + _FUNCTIONS
        + "require_node_platform\n"
        + "# What the operator's machine has: ID OS/ARCH (set by the provider from `docker image inspect` there).\n"
        + f"source_facts=${{{FEED_PROBE_ENV}:?set by spark_llm.remote: the image ID and platform on this machine}}\n"
        + "source_id=${source_facts%% *}\n"
        + '[ "${source_facts#* }" = "$PLATFORM" ] || die "$IMAGE_REF on this machine (the operator\'s) is'
        " ${source_facts#* }, but spark-llm:image.platform is $PLATFORM. Nothing was sent: build or pull it for"
        ' $PLATFORM here (docker pull --platform $PLATFORM $IMAGE_REF)."\n'
        + "have=$(image_facts)\n"
        + 'if [ "${have%% *}" = "$source_id" ]; then\n'
        + '  echo "$NODE already has $IMAGE_REF ($source_id): nothing to send"\n'
        + "else\n"
        + '  echo "$NODE: receiving $IMAGE_REF ($source_id) from this machine"\n'
        + f"  echo {_q(FEED_REQUEST)}\n"
        + "  # The operator's docker save arrives on stdin, right after this script.\n"
        + "  docker load\n"
        + "fi\n"
        + 'verify "$source_id"\n'
    )


def _worker_from_head(cfg: StackConfig, worker: NodePlan) -> str:
    absent, mismatch, _ = _hints(cfg, worker)
    return (
        _header(
            "transfer the image from the head over the fabric (runs on the head)", cfg, worker.name, absent, mismatch
        )
        + fabric_ssh_setup(worker, cfg.network.fabric_key_path)
        + _ON_WORKER
        + _FUNCTIONS
        + f"PROGRESS_SECONDS={PROGRESS_SECONDS}\n"
        + _TRANSFER
        + f"HEAD_IMAGE_ID=${{{HEAD_ID_ENV}:?set by the EngineImage component: the image ID of the head}}\n"
        + "require_node_platform\n"
        + "head_id=$(docker image inspect --format '{{.Id}}' \"$IMAGE_REF\" 2>/dev/null) || head_id=absent\n"
        + '[ "$head_id" = "$HEAD_IMAGE_ID" ] || die "the head\'s $IMAGE_REF is now $head_id, not $HEAD_IMAGE_ID as'
        ' when this update checked it; nothing was sent to $NODE. Run pulumi up again."\n'
        + "have=$(image_facts)\n"
        + 'if [ "${have%% *}" = "$HEAD_IMAGE_ID" ]; then\n'
        + '  echo "$NODE already has $IMAGE_REF ($HEAD_IMAGE_ID): nothing to transfer"\n'
        + "else\n"
        + '  echo "$NODE: ${have:-no $IMAGE_REF}; the head has $HEAD_IMAGE_ID"\n'
        + "  transfer\n"
        + "fi\n"
        + 'verify "$HEAD_IMAGE_ID"\n'
    )


def source_feed(ref: str) -> dict:
    """What spark_llm.remote runs on the operator's machine: the image's `ID OS/ARCH` there, its `docker save`,
    and what to do when it is not there."""
    return {
        "probe": ["docker", "image", "inspect", "--format", FACTS_FORMAT, ref],
        "command": ["docker", "save", ref],
        "missing": f"spark-llm:image.source is operator, but {ref} is not in this machine's docker: build or pull "
        "it here, or set spark-llm:image.source head to send the head's copy. Nothing was sent.",
    }


def image_steps(plan: DeploymentPlan) -> tuple[ImageStep, ...]:
    """The head's step, then one per worker (a worker's step waits for the head's ID)."""
    cfg = plan.config
    mode, source = cfg.image.mode, cfg.image.source
    steps = []
    for node in plan.nodes:
        runs_on, feed = node, None
        if mode == "present":
            script = _present(cfg, node)
        elif mode == "pull":
            script = _pull(cfg, node)
        elif node.role == "head" and source == "head":
            script = _head_has_it(cfg, node)
        elif node.role == "head":
            script, feed = _head_from_operator(cfg, node), source_feed(cfg.image.ref)
        else:
            script, runs_on = _worker_from_head(cfg, node), plan.head
        steps.append(
            ImageStep(
                node=node.name,
                runs_on=runs_on,
                script=script,
                check=check_script(cfg, node, runs_on),
                head_id_env=node.role == "worker",
                feed=feed,
            )
        )
    return tuple(steps)


def parse_image_id(stdout: str | None) -> str:
    """The ID from a step's last line `image ID OS/ARCH` ("" when the step printed none)."""
    lines = (stdout or "").strip().splitlines()
    fields = lines[-1].split() if lines else []
    return fields[1] if len(fields) == 3 and fields[0] == "image" else ""
