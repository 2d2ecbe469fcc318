"""A command line's flags, read one way: `--flag VALUE` or `--flag=VALUE` (as argparse and the pulumi CLI take them).

The one reader of the pulumi CLI's own command line (spark_llm.plan.cli_flags: `--target`, `--replace`;
spark_llm.ops.after_failure: `--config-file`) and of the engines' flags (spark_llm.group.memory: the memory flags;
spark_llm.plan.start.rendezvous: the engine's own group timeout). Each caller says which of the values counts.
"""

from __future__ import annotations

from collections.abc import Sequence


def flag_values(argv: Sequence[str], flags: Sequence[str]) -> list[str]:
    """Every value of `flags` on the command line `argv`, in order (a flag that ends it, with no value, has none)."""
    values = []
    for i, word in enumerate(argv):
        for flag in flags:
            if word == flag and i + 1 < len(argv):
                values.append(argv[i + 1])
            elif word.startswith(flag + "="):
                values.append(word.partition("=")[2])
    return values
