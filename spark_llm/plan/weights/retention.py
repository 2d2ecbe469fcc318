"""Pure: what `pulumi destroy` does with each node's weights (spark-llm:model.purgeOnDestroy), as the retention
resource's script says it at create and does it at delete."""

from __future__ import annotations

import shlex

from spark_llm.config.group import GroupConfig
from spark_llm.plan.deployment import NodePlan
from spark_llm.plan.weights.sync import tool_prelude


def head_owns_copy(cfg: GroupConfig) -> bool:
    """False when model.path on the head is the source itself (kind head, same path): never purged."""
    source = cfg.model.effective_source
    return not (source.kind == "head" and source.path == cfg.model.path)


def _retention_message(cfg: GroupConfig, node: NodePlan) -> str:
    path = cfg.model.path
    if node.role == "head" and not head_owns_copy(cfg):
        return f"weights at {path}: the source itself, never deleted by pulumi destroy"
    if cfg.model.purge_on_destroy:
        return f"weights at {path}: deleted by pulumi destroy (model.purgeOnDestroy)"
    return f"weights at {path}: kept on pulumi destroy"


def purges(cfg: GroupConfig, node: NodePlan) -> bool:
    """Whether destroy deletes the node's copy: model.purgeOnDestroy, and never the head's source itself."""
    return cfg.model.purge_on_destroy and not (node.role == "head" and not head_owns_copy(cfg))


# The retention script's phase at delete ($SPARK_LLM_PHASE, components.commands.NodeCommand's `delete_phase`).
RETENTION_DELETE_PHASE = "delete"


def render_retention(cfg: GroupConfig, node: NodePlan, tool: str) -> str:
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
        out += tool_prelude(tool) + f'python3 "$tool" purge {shlex.quote(cfg.model.path)}\n'
    return out + 'rm -f "$MARK"\n'
