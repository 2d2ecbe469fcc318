"""Pure: the scripts that put the model's weights at `model.path` on every node, and how to read what they print.

The weights are obtained once, on the head (downloaded, copied from another directory there, or uploaded from
the operator's machine), then copied from the head to each worker over the fabric. Every copy is planned from
two manifests (scripts/manifest.py: path, size, sha256 per file, hashed once thanks to a stat-keyed cache):
only files whose size or sha256 differ are sent, files the source no longer has are removed, and the copy is
verified against the source's manifest, which is then stored beside the weights
(`MODEL_PATH/.spark-llm-manifest.json`). rsync keeps interrupted files in PARTIAL_DIR and resumes from them.

Every script prints its progress as short lines, and `spark-llm-manifest DIGEST FILES BYTES` as its last line
(`parse_digest`). Check scripts (drift) print only such lines. No Pulumi, no I/O here: the manifest tool's
text is passed in, as the launch template is to spark_llm.plan.deployment.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from spark_llm.config.group import GroupConfig
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import record_token_script
from spark_llm.plan.node_files import file_script, remove_file_command
from spark_llm.plan.scripts import bash_lib, manifest_tool
from spark_llm.plan.weights import fanout as weights_fanout
from spark_llm.plan.weights.retention import purges, render_retention
from spark_llm.plan.weights.sync import (
    final_digest,
    from_operator,
    preamble,
    same_machine,
    sync_body,
    tool_prelude,
)

MANIFEST_NAME = ".spark-llm-manifest.json"
# Where a node keeps the versions a copy replaced, for a rollback (scripts/manifest.py keep/restore).
VERSIONS_DIR = ".spark-llm-versions"
DIGEST_PREFIX = "spark-llm-manifest "
# The drift token's step name on every node (spark_llm.plan.drift), and the probe sections (plan.observation) that
# carry the live manifest digest of model.path (and, kind head elsewhere, of the head's source dir).
DRIFT_STEP = "weights"
PROBE_SECTION = "weights"
PROBE_SOURCE_SECTION = "weights-source"
# Beside each, the bytes its manifest lists: the weights' size before they are on a node (`weights_size`).
BYTES_SUFFIX = "-bytes"


def parse_digest(stdout: str | None) -> str:
    """The digest on the last `spark-llm-manifest` line of a script's output ("" when there is none)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(DIGEST_PREFIX):
            return line.split()[1]
    return ""


def parse_bytes(stdout: str | None) -> int | None:
    """The bytes on the last `spark-llm-manifest` line of a script's output (None when there is none)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(DIGEST_PREFIX):
            fields = line.split()
            return int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else None
    return None


def weights_size(head_facts: dict[str, str], local_bytes: int | None = None) -> int | None:
    """The weights' bytes by their source's manifest, known before they are on the workers (None: unknown).

    Kind local: the operator's directory as this program run scanned it (`local_bytes`); kind head: the head's
    source directory; otherwise the head's own copy at model.path (a download lands there first), as the head's
    probe scanned them (render_probe). What the memory admission counts where a node has no copy yet."""
    if local_bytes is not None:
        return local_bytes
    for section in (PROBE_SOURCE_SECTION, PROBE_SECTION):
        text = head_facts.get(section + BYTES_SUFFIX, "")
        if text.isdigit() and int(text) > 0:
            return int(text)
    return None


def hf_env_path(head: NodePlan) -> str:
    """The head's 0600 env file holding HF_TOKEN (read by the download script, never put on a command line)."""
    return f"{head.remote_dir}/hf.env"


def render_hf_env(token: str) -> str:
    return f"HF_TOKEN={token}\n"


def log_path(node: NodePlan, what: str) -> str:
    """Where a transfer's full output (rsync's \\r progress, hf's progress bars) goes on the node."""
    return f"{node.remote_dir}/logs/weights-{what}.log"


# ---------- scripts ----------


def render_obtain(cfg: GroupConfig, head: NodePlan, tool: str, token: str) -> str:
    """On the head: the weights at model.path (download, or copy from the head's source dir), then its manifest;
    records the drift token with `head_value`'s value."""
    model = cfg.model
    source = model.effective_source
    path = shlex.quote(model.path)
    if source.kind == "local":
        raise ValueError("kind local is uploaded from the operator's machine: use render_upload")
    transport = same_machine() if source.kind == "head" and source.path != model.path else None
    out = preamble(tool, transport)
    if source.kind == "huggingface":
        assert source.repo and source.revision  # ModelSource validated them
        log = log_path(head, "download")
        out += f"""\
MODEL_PATH={path}
HF_ENV={shlex.quote(hf_env_path(head))}
DOWNLOAD_LOG={shlex.quote(log)}
if command -v hf >/dev/null 2>&1; then HF=(hf download)
elif command -v huggingface-cli >/dev/null 2>&1; then HF=(huggingface-cli download)
else die "the Hugging Face CLI is not installed on the head: pip install -U huggingface_hub"; fi
if [ -f "$HF_ENV" ]; then
  # The token travels in a 0600 file and the environment, never on a command line.
  HF_TOKEN=$(sed -n 's/^HF_TOKEN=//p' "$HF_ENV")
  export HF_TOKEN
fi
mkdir -p "$MODEL_PATH" "$(dirname "$DOWNLOAD_LOG")"
WHAT=download
last_bytes=0
"""
        out += bash_lib("weights_download")
        out += f"""\
# The version this download replaces stays as hard links until the next start that serves (a rollback's).
python3 "$tool" keep "$MODEL_PATH" --node {shlex.quote(head.name)}
say "$WHAT: {source.repo}@{source.revision[:12]} to $MODEL_PATH with ${{HF[0]}} (resumes; log $DOWNLOAD_LOG)"
"${{HF[@]}}" {shlex.quote(source.repo)} --revision {source.revision} --local-dir "$MODEL_PATH" \\
  > "$DOWNLOAD_LOG" 2>&1 &
hf_pid=$!
watch_progress "$hf_pid" download_progress
if ! wait "$hf_pid"; then
  tr '\\r' '\\n' < "$DOWNLOAD_LOG" | grep -v '^ *$' | tail -n 8 >&2
  die "download of {source.repo}@{source.revision} failed; run pulumi up again to resume"
fi
"""
    elif source.path == model.path:
        missing = f"{model.path} does not exist on the head (model.source kind head): put the weights there"
        out += f"[ -d {path} ] || die {shlex.quote(missing)}\n"
    else:
        assert source.path
        out += (
            f"[ -d {shlex.quote(source.path)} ] || die "
            f"{shlex.quote(f'model.source.path {source.path} does not exist on the head')}\n"
        )
        log = shlex.quote(log_path(head, "copy"))
        assert transport is not None
        out += sync_body(
            source.path, model.path, what="copy", names=("source dir", "head"), log=log, transport=transport
        )
    out += f"final=$({final_digest(model.path, head).strip()})\n"
    out += 'echo "$final"\nread -r _ final_digest _ <<< "$final"\n'
    value = '"$final_digest"'
    if source.kind == "head" and source.path != model.path:
        value = '"$final_digest/$source_digest"'  # the source dir is watched for drift too (`live_value`)
    out += f"SPARK_LLM_VALUE={value}\n"
    return out + record_token_script(head.remote_dir, DRIFT_STEP, token, "$SPARK_LLM_VALUE")


_DIGEST_LINE = f'echo "{DIGEST_PREFIX}$source_digest $total_files $total_bytes"\n'


def _record_remote(node: NodePlan, token: str, value: str) -> str:
    """Record the drift token on the transport's target; `value`: a bash expression evaluated here."""
    record = record_token_script(node.remote_dir, DRIFT_STEP, token, "$SPARK_LLM_VALUE")
    return (
        "record_script=$(cat <<'SPARK_LLM_RECORD'\n"
        f"{record}SPARK_LLM_RECORD\n)\n"
        f'"${{REMOTE[@]}}" "SPARK_LLM_VALUE={value}; $record_script" </dev/null\n'
    )


def render_upload(cfg: GroupConfig, head: NodePlan, tool: str, local_dir: str, token: str) -> str:
    """On the operator's machine: make model.path on the head identical to `local_dir` (kind local)."""
    transport = from_operator(head)
    # The log lives on this machine, in the user's cache.
    log = '"${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm/logs/weights-upload.log"'
    body = sync_body(
        local_dir,
        cfg.model.path,
        what=f"upload to {head.name}",
        names=("local", head.name),
        log=log,
        transport=transport,
    )
    return preamble(tool, transport) + body + _record_remote(head, token, "$target_digest") + _DIGEST_LINE


def render_restore(cfg: GroupConfig, head: NodePlan, tool: str, digest: str, token: str) -> str:
    """A rollback's head step: the head's model.path becomes the version `digest` it kept when a relaunch replaced
    it (manifest.py restore: hard links back, nothing copied), then the drift token records it. Runs where the
    head's copy runs: on this machine for kind local (through the pinned ssh), else on the head."""
    source = cfg.model.effective_source
    restore = f"python3 - restore {shlex.quote(cfg.model.path)} {digest} --node {shlex.quote(head.name)}"
    if source.kind == "local":
        return (
            preamble(tool, from_operator(head))
            + f'restored=$("${{REMOTE[@]}}" {shlex.quote(restore)} < "$tool")\necho "$restored"\n'
            + _record_remote(head, token, digest)
        )
    out = preamble(tool) + f'restored=$(bash -c {shlex.quote(restore)} < "$tool")\necho "$restored"\n'
    value = digest
    if source.kind == "head" and source.path != cfg.model.path:
        assert source.path
        # The source dir is watched for drift too (`live_value`): its digest now, as the head's copy records it.
        out += f'read -r _ source_digest _ <<< "$(python3 "$tool" scan {shlex.quote(source.path)})"\n'
        value = f"{digest}/$source_digest"
    return (
        out + f"SPARK_LLM_VALUE={value}\n" + record_token_script(head.remote_dir, DRIFT_STEP, token, "$SPARK_LLM_VALUE")
    )


def render_probe(cfg: GroupConfig, node: NodePlan, tool: str) -> str:
    """Read-only probe sections (spark_llm.remote.observe) for `node`: `weights<TAB>DIGEST` of model.path (a missing
    directory has the empty manifest's digest) and, on the head with kind head elsewhere, `weights-source`; each
    with its manifest's bytes beside it (`weights-bytes`, `weights-source-bytes`: `weights_size`).

    Runs at every program run: the manifest tool's stat cache makes an unchanged directory cost one stat a file.
    """
    source = cfg.model.effective_source
    paths = [(PROBE_SECTION, cfg.model.path)]
    if node.role == "head" and source.kind == "head" and source.path != cfg.model.path:
        assert source.path
        paths.append((PROBE_SOURCE_SECTION, source.path))
    # In a subshell: the tool's temp dir and EXIT trap stay out of the probe script around it.
    out = "(\n" + tool_prelude(tool)
    for section, path in paths:
        out += (
            f'if d=$(python3 "$tool" scan {shlex.quote(path)} --node {shlex.quote(node.name)} 2>/dev/null); then\n'
            f'  read -r _ d _ b <<< "$d"\n  printf "{section}\\t%s\\n" "$d"\n'
            f'  printf "{section}{BYTES_SUFFIX}\\t%s\\n" "$b"\nfi\n'
        )
    return out + ")\n"


def live_value(cfg: GroupConfig, node: NodePlan, facts: dict[str, str]) -> str | None:
    """The value a node's weights step recorded, as the node has it now (None when the probe printed none)."""
    digest = facts.get(PROBE_SECTION)
    if digest is None:
        return None
    source = cfg.model.effective_source
    if node.role == "head" and source.kind == "head" and source.path != cfg.model.path:
        return f"{digest}/{facts.get(PROBE_SOURCE_SECTION, '')}"
    return digest


def stored_digest_command(path: str, otherwise: str = "true") -> str:
    """Read-only bash: the digest of the manifest stored beside the weights at `path`, or runs `otherwise`."""
    program = "import json, sys; print(json.load(open(sys.argv[1]))['digest'])"
    return f"python3 -c {shlex.quote(program)} {shlex.quote(f'{path}/{MANIFEST_NAME}')} 2>/dev/null || {otherwise}\n"


def head_digest_command(cfg: GroupConfig) -> str:
    """Read-only, short: the head copy's digest line again, from the manifest stored beside the weights.

    The head copy's `update` (a changed connection): pulumi-command keeps the update's output as `stdout`, which
    the component reads the manifest digest from, so the update prints it again.
    """
    manifest = shlex.quote(f"{cfg.model.path}/{MANIFEST_NAME}")
    program = (
        "import json,sys; m=json.load(open(sys.argv[1])); "
        f"print('{DIGEST_PREFIX}' + m['digest'], len(m['files']), sum(f['size'] for f in m['files']))"
    )
    return f"echo 'spark-llm: connection settings recorded'; python3 -c {shlex.quote(program)} {manifest}"


# ---------- every weights step of a deployment ----------


@dataclass(frozen=True)
class WeightsPlan:
    """Every weights step of a deployment, its config resolved once (components.model_weights declares them).

    The scripts that record a drift token are functions of that token alone: the token comes from this program
    run's observation of the node (spark_llm.plan.drift), which needs the plan first.
    """

    path: str
    """model.path on every node."""
    kind: str
    """model.source.kind: huggingface, head or local."""
    identity: tuple[str, ...]
    """What the head's copy is made from: a change re-obtains it and re-syncs every worker."""
    local_dir: str | None
    """Kind local: the operator's directory, absolute (scripts/manifest.py hashes it here at every program run)."""
    hf_env_script: str | None
    """Kind huggingface with spark-llm:hfToken: the step that writes the head's 0600 env file holding it (secret)."""
    hf_env_delete: str
    """That step's delete: the env file goes with it."""
    head_digest_command: str
    """The head copy's `update`: reprints its digest line (head_digest_command)."""
    retention: dict[str, str]
    """Each node's retention step (render_retention), by node name."""
    purges: dict[str, bool]
    """Whether `pulumi destroy` deletes the node's copy (`purges`), by node name."""
    probes: dict[str, str]
    """Each node's probe sections (render_probe), by node name."""
    head_script: Callable[[str], str]
    """The head's copy (render_obtain, or render_upload for kind local), given its drift token."""
    fanout_script: Callable[[dict[str, str]], str]
    """The head's copy to every worker (weights_fanout.render_fanout), given each worker's drift token."""
    live: Callable[[NodePlan, dict[str, str]], str | None]
    """The value a node's weights step recorded, as the node has it now (live_value)."""
    restore: str | None = None
    """A rollback's digest (DeploymentPlan.restore_weights): the steps put that kept version back."""


def weights_plan(plan: DeploymentPlan) -> WeightsPlan:
    """The weights steps of `plan`: every config value they use read here, once."""
    cfg = plan.config
    source = cfg.model.effective_source
    tool = manifest_tool()
    head = plan.head
    local_dir = None
    head_script: Callable[[str], str]
    if source.kind == "local":
        assert source.path
        # Symlinks resolved: the upload and the local digest read the very directory rsync sends from.
        local_dir = str(Path(source.path).expanduser().resolve())
        head_script = partial(render_upload, cfg, head, tool, local_dir)
    else:
        head_script = partial(render_obtain, cfg, head, tool)
    if plan.restore_weights:
        head_script = partial(render_restore, cfg, head, tool, plan.restore_weights)
    return WeightsPlan(
        path=cfg.model.path,
        kind=source.kind,
        identity=(source.kind, source.repo or "", source.revision or "", source.path or "", cfg.model.path),
        local_dir=local_dir,
        hf_env_script=(
            file_script(hf_env_path(head), render_hf_env(cfg.hf_token), "0600")
            if source.kind == "huggingface" and cfg.hf_token
            else None
        ),
        hf_env_delete=remove_file_command(hf_env_path(head)),
        head_digest_command=head_digest_command(cfg),
        retention={n.name: render_retention(cfg, n, tool) for n in plan.nodes},
        purges={n.name: purges(cfg, n) for n in plan.nodes},
        probes={n.name: render_probe(cfg, n, tool) for n in plan.nodes},
        head_script=head_script,
        fanout_script=partial(
            weights_fanout.render_fanout,
            cfg,
            head,
            list(plan.workers),
            tool,
            weights_fanout.fanout_sources(),
            step=DRIFT_STEP,
            restore=plan.restore_weights,
        ),
        live=partial(live_value, cfg),
        restore=plan.restore_weights,
    )
