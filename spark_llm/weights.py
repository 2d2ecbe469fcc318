"""Pure: the scripts that put the model's weights at `model.path` on every node, and how to read what they print.

The weights are obtained once, on the head (downloaded, copied from another directory there, or uploaded from
the operator's machine), then copied from the head to each worker over the fabric. Every copy is planned from
two manifests (scripts/manifest.py: path, size, sha256 per file, hashed once thanks to a stat-keyed cache):
only files whose size or sha256 differ are sent, files the source no longer has are removed, and the copy is
verified against the source's manifest, which is then stored beside the weights
(`MODEL_PATH/.spark-llm-manifest.json`). rsync keeps interrupted files in PARTIAL_DIR and resumes from them.

Every script prints its progress as short lines, and `spark-llm-manifest DIGEST FILES BYTES` as its last line
(`parse_digest`). Check scripts (drift) print only such lines. No Pulumi, no I/O here: the manifest tool's
text is passed in, as the launch template is to spark_llm.plan.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from spark_llm.config import StackConfig
from spark_llm.drift import record_token_script
from spark_llm.fabric import fabric_ssh_setup
from spark_llm.plan import NodePlan

MANIFEST_TOOL_PATH = Path(__file__).resolve().parent.parent / "scripts" / "manifest.py"
MANIFEST_NAME = ".spark-llm-manifest.json"
PARTIAL_DIR = ".spark-llm-partial"
DIGEST_PREFIX = "spark-llm-manifest "
# The drift token's step name on every node (spark_llm.drift), and the probe sections (spark_llm.observe) that
# carry the live manifest digest of model.path (and, kind head elsewhere, of the head's source dir).
DRIFT_STEP = "weights"
PROBE_SECTION = "weights"
PROBE_SOURCE_SECTION = "weights-source"
# The operator's OpenSSH command to the head (argv, shlex-joined) and its user@host, for kind local: in the
# local command's environment, so a new key or port is an update that re-runs nothing.
SSH_ENV = "SPARK_LLM_SSH"
SSH_TARGET_ENV = "SPARK_LLM_SSH_TARGET"
# Seconds between two progress lines of a long transfer (rsync's own \r progress goes to a log file).
PROGRESS_SECONDS = 5
# Bulk copies over ssh use AES-GCM rather than OpenSSH's default chacha20-poly1305: CPUs with AES instructions
# (x86 AES-NI, the Spark's Arm cores) run it faster. Measured on the sim (2 shared cores, load ~4), 419 MB head ->
# worker through the worker sync, 3 interleaved runs each: aes128-gcm 2.9 s mean (143 MB/s), chacha20 3.8 s
# (111 MB/s); `openssl speed`, one core: AES-128-GCM 2.3 GB/s, ChaCha20-Poly1305 2.0 GB/s.
BULK_CIPHER = "aes128-gcm@openssh.com"
# -I: the manifest already decided these files differ, so rsync must not skip one on size+mtime. With
# --partial-dir an interrupted file is kept aside and is the basis of the next attempt: only the rest is sent.
RSYNC_OPTIONS = (
    "-a",
    "--copy-links",
    "-I",
    f"--partial-dir={PARTIAL_DIR}",
    "--from0",
    "--info=progress2",
    "--stats",
)


def parse_digest(stdout: str | None) -> str:
    """The digest on the last `spark-llm-manifest` line of a script's output ("" when there is none)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(DIGEST_PREFIX):
            return line.split()[1]
    return ""


def hf_env_path(head: NodePlan) -> str:
    """The head's 0600 env file holding HF_TOKEN (read by the download script, never put on a command line)."""
    return f"{head.remote_dir}/hf.env"


def render_hf_env(token: str) -> str:
    return f"HF_TOKEN={token}\n"


def log_path(node: NodePlan, what: str) -> str:
    """Where a transfer's full output (rsync's \\r progress, hf's progress bars) goes on the node."""
    return f"{node.remote_dir}/logs/weights-{what}.log"


def head_owns_copy(cfg: StackConfig) -> bool:
    """False when model.path on the head is the source itself (kind head, same path): never purged."""
    source = cfg.model.effective_source
    return not (source.kind == "head" and source.path == cfg.model.path)


# ---------- bash building blocks ----------

_COMMON = f"""\
say() {{ printf '%s\\n' "$*"; }}
die() {{ printf 'weights: %s\\n' "$*" >&2; exit 1; }}
human() {{ numfmt --to=si --round=nearest --suffix=B "$1" 2>/dev/null || echo "$1B"; }}
now_ns() {{ python3 -c 'import time; print(time.time_ns())'; }}
PROGRESS_SECONDS={PROGRESS_SECONDS}
# While PID runs, print REPORTER's line every PROGRESS_SECONDS (the first one after PROGRESS_SECONDS).
watch_progress() {{
  local pid=$1 reporter=$2 ticks=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    ticks=$((ticks + 1))
    if [ $((ticks % (PROGRESS_SECONDS * 5))) -eq 0 ]; then
      "$reporter"
    fi
  done
}}
# The newest `rsync --info=progress2` line of $RSYNC_LOG, shortened: "LABEL: 45% 1.2GB 640MB/s 0:01:23 left".
rsync_progress() {{
  local line done_bytes pct rate eta
  line=$(tail -c 512 "$RSYNC_LOG" | tr '\\r' '\\n' | grep -E '^ *[0-9][0-9,.]* +[0-9]+%' | tail -n 1 || true)
  if [ -n "$line" ]; then
    read -r done_bytes pct rate eta _ <<< "$line"
    say "$WHAT: $pct $(human "${{done_bytes//,/}}") $rate $eta left"
  fi
}}
"""


def _tool_prelude(tool: str, cleanup: str = "") -> str:
    """Write the manifest tool to a private temp dir ($tool), removed with `cleanup` paths on exit."""
    if "\nSPARK_LLM_MANIFEST_PY\n" in f"\n{tool}\n":
        raise ValueError("the manifest tool contains the heredoc delimiter")
    return (
        "work=$(mktemp -d)\n"
        f"trap 'rm -rf \"$work\"{cleanup}' EXIT\n"
        'tool="$work/manifest.py"\n'
        "cat > \"$tool\" <<'SPARK_LLM_MANIFEST_PY'\n"
        f"{tool.rstrip()}\n"
        "SPARK_LLM_MANIFEST_PY\n"
    )


@dataclass(frozen=True)
class Transport:
    """How a sync script reaches its target: a command runner, rsync's -e and the destination prefix."""

    runner: str
    """Bash defining REMOTE, an array that runs one command string on the target (stdin passed through)."""
    rsync: str
    """Bash defining RSH_ARGS (rsync's -e, as an array) and DEST (the destination's `host:` prefix)."""
    describe: str
    """How the data travels, for the progress lines."""
    cleanup: str = ""
    """Extra paths (quoted bash words, each after a space) the exit trap removes."""


def same_machine() -> Transport:
    """Target directory on the machine the script runs on (the head's source dir -> model.path)."""
    return Transport(runner="REMOTE=(bash -c)\n", rsync='RSH_ARGS=()\nDEST=""\n', describe="on the head")


def over_fabric(worker: NodePlan, fabric_key_path: str) -> Transport:
    """From the head to a worker over the direct link, with the head's fabric key and the worker's pinned key."""
    return Transport(
        runner=fabric_ssh_setup(worker, fabric_key_path) + 'REMOTE=("${FABRIC_SSH[@]}" "$FABRIC_TARGET")\n',
        # A connection of its own with the bulk cipher (no ControlMaster on the head: nothing to share).
        rsync=f'RSH_ARGS=(-e "$FABRIC_RSH -c {BULK_CIPHER}")\nDEST="$FABRIC_TARGET:"\n',
        describe=f"over the fabric to {worker.fabric_address} (ssh cipher {BULK_CIPHER})",
        # fabric_ssh_setup's own EXIT trap is replaced by the tool prelude's, which removes its file too.
        cleanup=' "$fabric_kh"',
    )


def from_operator(head: NodePlan) -> Transport:
    """From the operator's machine to the head, with the pinned OpenSSH command the component puts in
    $SPARK_LLM_SSH (spark_llm.connection.ssh_command) and $SPARK_LLM_SSH_TARGET (user@host).

    rsync's -e is one string that rsync splits itself: it gets a wrapper script around the ssh array instead.
    """
    return Transport(
        runner=f'mapfile -t SSH <<<"${{{SSH_ENV}:?set by the ModelWeights component}}"\n'
        f"SSH_TARGET=${{{SSH_TARGET_ENV}:?set by the ModelWeights component}}\n"
        'REMOTE=("${SSH[@]}" "$SSH_TARGET")\n',
        rsync="ssh_wrapper=$(mktemp)\n"
        '{ echo "#!/bin/sh"; printf "exec"; printf " %q" "${SSH[@]}"; echo \' "$@"\'; } > "$ssh_wrapper"\n'
        'chmod 700 "$ssh_wrapper"\n'
        f'RSH_ARGS=(-e "$ssh_wrapper -c {BULK_CIPHER}")\nDEST="$SSH_TARGET:"\n',
        describe=f"from this machine to {head.name} (ssh cipher {BULK_CIPHER})",
        cleanup=' "$ssh_wrapper"',
    )


def _preamble(tool: str, transport: Transport | None = None) -> str:
    """Helpers, the transport's definitions, then the manifest tool (its trap last, so it is the one in force)."""
    if transport is None:
        return _COMMON + _tool_prelude(tool)
    return _COMMON + transport.runner + transport.rsync + _tool_prelude(tool, transport.cleanup)


def _sync_body(src: str, dst: str, *, what: str, names: tuple[str, str], log: str, transport: Transport) -> str:
    """Make `dst` (on the transport's target) identical to `src` (here), sending only what differs.

    `what` starts every progress line; `names` (source, target) name the two sides in the manifest tool's
    lines; `log` is a bash word (already quoted) naming the rsync log file on the machine the script runs on.
    """
    source_name, target_name = (shlex.quote(n) for n in names)
    dst_q = shlex.quote(dst)
    opts = " ".join(shlex.quote(o) for o in RSYNC_OPTIONS)
    return (
        f"SRC={shlex.quote(src)}\nDST={dst_q}\nWHAT={shlex.quote(what)}\nRSYNC_LOG={log}\n"
        + f"""\
python3 "$tool" scan "$SRC" --json --node {source_name} > "$work/source.json"
"${{REMOTE[@]}}" {shlex.quote(f"mkdir -p {dst_q} && python3 - scan {dst_q} --json --node {target_name}")} \\
  < "$tool" > "$work/target.json"
plan=$(python3 "$tool" diff "$work/source.json" "$work/target.json" --send "$work/send" --extra "$work/extra")
read -r source_digest total_files total_bytes send_files send_bytes extra_files <<< "$plan"
if [ "$send_files" -eq 0 ]; then
  say "$WHAT: all $total_files files already identical ($(human "$total_bytes")), nothing to send"
else
  say "$WHAT: sending $send_files of $total_files files ($(human "$send_bytes") of $(human "$total_bytes"))"
  say "$WHAT: {transport.describe}; log $RSYNC_LOG"
  mkdir -p "$(dirname "$RSYNC_LOG")"
  started=$(now_ns)
  rsync {opts} "${{RSH_ARGS[@]}}" --files-from="$work/send" "$SRC/" "$DEST$DST/" > "$RSYNC_LOG" 2>&1 &
  rsync_pid=$!
  watch_progress "$rsync_pid" rsync_progress
  if ! wait "$rsync_pid"; then
    tr '\\r' '\\n' < "$RSYNC_LOG" | grep -v '^ *$' | tail -n 8 >&2
    die "$WHAT: rsync failed; run pulumi up again to resume (partial files are kept in {PARTIAL_DIR})"
  fi
  elapsed_ms=$(( ($(now_ns) - started) / 1000000 ))
  stats=$(awk -F': ' '/^Literal data:/ {{l=$2}} /^Matched data:/ {{m=$2}} /^Total bytes sent:/ {{s=$2}}
    END {{gsub(/ bytes/, "", l); gsub(/ bytes/, "", m); gsub(/ bytes/, "", s); print l, m, s}}' "$RSYNC_LOG")
  read -r literal matched sent <<< "$stats"
  say "$WHAT: sent $send_files files in $((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000))) s\
 (literal $literal B, matched $matched B, wire $sent B)"
fi
if [ "$extra_files" -gt 0 ]; then
  "${{REMOTE[@]}}" {shlex.quote(f"cd {dst_q} && xargs -0 rm -f --")} < "$work/extra"
  say "$WHAT: removed $extra_files files the source does not have"
fi
verified=$("${{REMOTE[@]}}" {shlex.quote(f"python3 - scan {dst_q} --write --node {target_name}")} < "$tool")
read -r _ target_digest _ <<< "$verified"
if [ "$target_digest" != "$source_digest" ]; then
  "${{REMOTE[@]}}" {shlex.quote(f"python3 - scan {dst_q} --json")} < "$tool" > "$work/after.json"
  python3 "$tool" diff "$work/source.json" "$work/after.json" --send "$work/bad" --extra "$work/bad-extra" >/dev/null
  die "$WHAT: the copy does not match the source's manifest: $(tr '\\0' ' ' < "$work/bad" | head -c 300)"
fi
say "$WHAT: verified $total_files files against manifest ${{source_digest:0:16}}"
"""
    )


def _final_digest(path: str, node: NodePlan) -> str:
    """The head's manifest of model.path, stored beside the weights; its digest line ends the script."""
    return f'python3 "$tool" scan {shlex.quote(path)} --write --node {shlex.quote(node.name)}\n'


# ---------- scripts ----------


def render_obtain(cfg: StackConfig, head: NodePlan, tool: str, token: str) -> str:
    """On the head: the weights at model.path (download, or copy from the head's source dir), then its manifest;
    records the drift token with `head_value`'s value."""
    model = cfg.model
    source = model.effective_source
    path = shlex.quote(model.path)
    if source.kind == "local":
        raise ValueError("kind local is uploaded from the operator's machine: use render_upload")
    transport = same_machine() if source.kind == "head" and source.path != model.path else None
    out = _preamble(tool, transport)
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
download_progress() {{
  local bytes
  bytes=$(du -sb --exclude=.cache "$MODEL_PATH" | cut -f1)
  say "$WHAT: $(human "$bytes") in $MODEL_PATH (+$(human $(( (bytes - last_bytes) / PROGRESS_SECONDS )))/s)"
  last_bytes=$bytes
}}
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
        out += _sync_body(
            source.path, model.path, what="copy", names=("source dir", "head"), log=log, transport=transport
        )
    out += f"final=$({_final_digest(model.path, head).strip()})\n"
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


def render_upload(cfg: StackConfig, head: NodePlan, tool: str, local_dir: str, token: str) -> str:
    """On the operator's machine: make model.path on the head identical to `local_dir` (kind local)."""
    transport = from_operator(head)
    # The log lives on this machine, in the user's cache.
    log = '"${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm/logs/weights-upload.log"'
    body = _sync_body(
        local_dir,
        cfg.model.path,
        what=f"upload to {head.name}",
        names=("local", head.name),
        log=log,
        transport=transport,
    )
    return _preamble(tool, transport) + body + _record_remote(head, token, "$target_digest") + _DIGEST_LINE


def render_worker_sync(cfg: StackConfig, head: NodePlan, worker: NodePlan, tool: str, token: str) -> str:
    """On the head: make model.path on `worker` identical to the head's, over the fabric."""
    transport = over_fabric(worker, cfg.network.fabric_key_path)
    log = shlex.quote(log_path(head, worker.name))
    body = _sync_body(
        cfg.model.path, cfg.model.path, what=worker.name, names=(head.name, worker.name), log=log, transport=transport
    )
    return _preamble(tool, transport) + body + _record_remote(worker, token, "$target_digest") + _DIGEST_LINE


def render_probe(cfg: StackConfig, node: NodePlan, tool: str) -> str:
    """Read-only probe sections (spark_llm.observe) for `node`: `weights<TAB>DIGEST` of model.path (a missing
    directory has the empty manifest's digest) and, on the head with kind head elsewhere, `weights-source`.

    Runs at every program run: the manifest tool's stat cache makes an unchanged directory cost one stat a file.
    """
    source = cfg.model.effective_source
    paths = [(PROBE_SECTION, cfg.model.path)]
    if node.role == "head" and source.kind == "head" and source.path != cfg.model.path:
        assert source.path
        paths.append((PROBE_SOURCE_SECTION, source.path))
    # In a subshell: the tool's temp dir and EXIT trap stay out of the probe script around it.
    out = "(\n" + _tool_prelude(tool)
    for section, path in paths:
        out += (
            f'if d=$(python3 "$tool" scan {shlex.quote(path)} --node {shlex.quote(node.name)} 2>/dev/null); then\n'
            f'  read -r _ d _ <<< "$d"\n  printf "{section}\\t%s\\n" "$d"\nfi\n'
        )
    return out + ")\n"


def live_value(cfg: StackConfig, node: NodePlan, facts: dict[str, str]) -> str | None:
    """The value a node's weights step recorded, as the node has it now (None when the probe printed none)."""
    digest = facts.get(PROBE_SECTION)
    if digest is None:
        return None
    source = cfg.model.effective_source
    if node.role == "head" and source.kind == "head" and source.path != cfg.model.path:
        return f"{digest}/{facts.get(PROBE_SOURCE_SECTION, '')}"
    return digest


def head_digest_command(cfg: StackConfig) -> str:
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


def _retention_message(cfg: StackConfig, node: NodePlan) -> str:
    path = cfg.model.path
    if node.role == "head" and not head_owns_copy(cfg):
        return f"weights at {path}: the source itself, never deleted by pulumi destroy"
    if cfg.model.purge_on_destroy:
        return f"weights at {path}: deleted by pulumi destroy (model.purgeOnDestroy)"
    return f"weights at {path}: kept on pulumi destroy"


def purges(cfg: StackConfig, node: NodePlan) -> bool:
    """Whether destroy deletes the node's copy: model.purgeOnDestroy, and never the head's source itself."""
    return cfg.model.purge_on_destroy and not (node.role == "head" and not head_owns_copy(cfg))


# The retention script's phase at delete ($SPARK_LLM_PHASE, spark_llm.commands.NodeCommand's `delete_phase`).
RETENTION_DELETE_PHASE = "delete"


def render_retention(cfg: StackConfig, node: NodePlan, tool: str) -> str:
    """The retention resource's script: at create, say the weights' fate on destroy and mark the node with this
    setting; run again as the resource's delete ($SPARK_LLM_PHASE=delete, only when `purges`), delete the copy.

    A replaced retention resource (a changed setting) is deleted after its successor is created: the mark then
    names the successor, and the old one's delete deletes nothing. Only a destroy (the mark still its own)
    purges. The purge deletes only the files the stored manifest lists (and our own partial/download metadata),
    so a model.path that also holds other files keeps them.
    """
    message = _retention_message(cfg, node)
    mark = shlex.quote(f"{node.remote_dir}/weights-retention")
    identity = f"{cfg.model.path} purge={purges(cfg, node)}"
    out = f"MARK={mark}\nIDENTITY={shlex.quote(identity)}\n"
    out += 'if [ "${SPARK_LLM_PHASE:-create}" = create ]; then\n'
    out += '  mkdir -p "$(dirname "$MARK")"\n  printf \'%s\\n\' "$IDENTITY" > "$MARK"\n'
    out += f"  echo {shlex.quote(message)}\n  exit 0\nfi\n"
    out += 'if [ -f "$MARK" ] && [ "$(cat "$MARK")" != "$IDENTITY" ]; then\n'
    out += f"  echo {shlex.quote(f'weights at {cfg.model.path}: retention setting replaced, nothing deleted')}\n"
    out += "  exit 0\nfi\n"
    if purges(cfg, node):
        out += _tool_prelude(tool) + f'python3 "$tool" purge {shlex.quote(cfg.model.path)}\n'
    return out + 'rm -f "$MARK"\n'
