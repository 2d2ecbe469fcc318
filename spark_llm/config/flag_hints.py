"""What to say about a flag this release does not have: another release or the other engine has it, its negation
is missing, or it is a near miss of a real one (spark_llm.config.engine_flags asks).
"""

from __future__ import annotations

import difflib

from spark_llm.config.engine_catalog import (
    ENGINE_NAMES,
    Catalog,
    FlagProblem,
    known_versions,
    load_catalog,
    version_key,
)
from spark_llm.config.flag_values import code, listing, usage

# The same setting in the other engine: named when one engine's flag is given to the other.
COUNTERPARTS = {
    "--context-length": "--max-model-len",
    "--mem-fraction-static": "--gpu-memory-utilization",
    "--max-running-requests": "--max-num-seqs",
}
COUNTERPARTS |= {vllm: sglang for sglang, vllm in COUNTERPARTS.items()}


def not_a_flag(cat: Catalog, name: str, option: str) -> FlagProblem:
    """Why this release has no `option`: another release has it, the other engine has it, or a near miss."""
    engine = ENGINE_NAMES[cat.engine]
    dashed = "--" + option[2:].replace("_", "-") if option.startswith("--") else option
    other = next(e for e in ENGINE_NAMES if e != cat.engine)
    in_other = [v for v in known_versions(other) if (c := load_catalog(other, v)).lookup(c.normalize(dashed))]
    other_flag = f"a {ENGINE_NAMES[other]} flag ({ENGINE_NAMES[other]} {', '.join(in_other)})"
    accepting = cat.accepting(option)
    if accepting:
        here = version_key(cat.version)
        newer = [v for v in accepting if version_key(v) > here]
        older = [v for v in accepting if version_key(v) < here]
        if not older:
            when = f"added after {cat.version} (accepted by {engine} {', '.join(newer)})"
        elif not newer:
            when = f"removed after {older[-1]} (accepted by {engine} {', '.join(older)})"
        else:
            when = f"accepted by {engine} {', '.join(accepting)}, not by {cat.version}"
        also = f"; it is also {other_flag}" if in_other else ""
        return FlagProblem(name, "other-version", f"{code(name)} is not a {cat.name} flag: {when}{also}")
    negation = _missing_negation(cat, name, option)
    if negation is not None:
        also = f"; {code(name)} is {other_flag}" if in_other else ""
        return FlagProblem(name, "negation", negation + also)
    if in_other:
        counterpart = COUNTERPARTS.get(dashed)
        if counterpart and cat.lookup(counterpart):
            hint = f"; the nearest {engine} flag is {code(counterpart)}"
        else:
            hint = _near_misses(cat, dashed)
        return FlagProblem(name, "other-engine", f"{code(name)} is {other_flag}; {cat.name} has no such flag{hint}")
    return FlagProblem(name, "unknown", f"{code(name)} is not a {cat.name} flag{_near_misses(cat, dashed)}")


def _missing_negation(cat: Catalog, name: str, option: str) -> str | None:
    """Why `--no-X` (or vLLM's `--disable-X`) is refused when X is a switch without that negation here."""
    if option.startswith("--no-"):
        positive = "--" + option.removeprefix("--no-")
    elif option.startswith("--disable-"):
        positive = "--enable-" + option.removeprefix("--disable-")
    else:
        return None
    found = cat.lookup(positive)
    if found is None or found[0].takes_value:
        return None
    spec = found[0]
    if spec.negations:
        fix = f"its negation is {listing(spec.negations)}"
    elif not spec.default:
        fix = "it is off unless given: leave it out"
    else:
        fix = "this release cannot turn it off from the command line"
    return f"{code(name)}: {cat.name} has no such negation of the switch {code(spec.flag)}; {fix}"


def _near_misses(cat: Catalog, option: str) -> str:
    if not option.startswith("--"):
        # argparse splits `-qfp8` only after a one-letter option: `-tp2` is not `-tp 2`.
        shorts = [o for o in cat.option_strings if not o.startswith("--") and option.startswith(o)]
        if shorts:
            short = max(shorts, key=len)
            return f"; write the value apart: {usage(short, option[len(short) :])}"
    longs = [o for o in cat.option_strings if o.startswith("--")]
    close = difflib.get_close_matches(option, longs, n=3, cutoff=0.75)
    if close:
        return f"; did you mean {' or '.join(code(c) for c in close)}?"
    return f"; nothing spelled like it (every flag: {cat.path})"
