"""Pure: the bash building blocks of a manifest-planned copy (spark_llm.plan.weights.steps' scripts are made of them).

How the bytes move (a transport: on the head itself, head -> worker over the fabric, or this machine -> head),
the shared bash functions (progress, errors), the manifest tool's prelude and the rsync body that sends what the
manifests say differs and verifies the result. No Pulumi; the bash functions come from `scripts/lib/weights.sh`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from spark_llm.plan.nodes import NodePlan
from spark_llm.plan.scripts import bash_lib

PARTIAL_DIR = ".spark-llm-partial"
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
# --no-owner/--no-group: the node's login user owns what lands (-a run as root there would keep the sender's
# uid, and any account of the node with that uid could rewrite the weights).
RSYNC_OPTIONS = (
    "-a",
    "--no-owner",
    "--no-group",
    "--copy-links",
    "-I",
    f"--partial-dir={PARTIAL_DIR}",
    "--from0",
    "--info=progress2",
    "--stats",
)


# The functions every weights step starts with (say, die, human, now_ns, watch_progress, rsync_progress).
COMMON = bash_lib("weights")
if f"\nPROGRESS_SECONDS={PROGRESS_SECONDS}\n" not in COMMON:
    raise ValueError("scripts/lib/weights.sh must set PROGRESS_SECONDS to spark_llm.plan.weights.sync.PROGRESS_SECONDS")


def heredoc(path: str, text: str, delimiter: str) -> str:
    """Bash that writes `text` to `path` (a bash word) verbatim."""
    if f"\n{delimiter}\n" in f"\n{text}\n":
        raise ValueError(f"the text contains the heredoc delimiter {delimiter}")
    return f"cat > {path} <<'{delimiter}'\n{text.rstrip()}\n{delimiter}\n"


def tool_prelude(tool: str, cleanup: str = "") -> str:
    """Write the manifest tool to a private temp dir ($tool), removed with `cleanup` paths on exit."""
    return f'work=$(mktemp -d)\ntrap \'rm -rf "$work"{cleanup}\' EXIT\ntool="$work/manifest.py"\n' + heredoc(
        '"$tool"', tool, "SPARK_LLM_MANIFEST_PY"
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


def from_operator(head: NodePlan) -> Transport:
    """From the operator's machine to the head, with the pinned OpenSSH command the component puts in
    $SPARK_LLM_SSH (components.connection.ssh_command) and $SPARK_LLM_SSH_TARGET (user@host).

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


def preamble(tool: str, transport: Transport | None = None) -> str:
    """Helpers, the transport's definitions, then the manifest tool (its trap last, so it is the one in force)."""
    if transport is None:
        return COMMON + tool_prelude(tool)
    return COMMON + transport.runner + transport.rsync + tool_prelude(tool, transport.cleanup)


def sync_body(src: str, dst: str, *, what: str, names: tuple[str, str], log: str, transport: Transport) -> str:
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
if [ "$send_files" -gt 0 ] || [ "$extra_files" -gt 0 ]; then
  # The version this copy replaces stays on the target as hard links until the next start that serves: what a
  # rollback puts back (issue 31, 1).
  "${{REMOTE[@]}}" {shlex.quote(f"python3 - keep {dst_q} --node {target_name}")} < "$tool"
fi
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


def final_digest(path: str, node: NodePlan) -> str:
    """The head's manifest of model.path, stored beside the weights; its digest line ends the script."""
    return f'python3 "$tool" scan {shlex.quote(path)} --write --node {shlex.quote(node.name)}\n'
