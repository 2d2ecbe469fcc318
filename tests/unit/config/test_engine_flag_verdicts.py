"""Engine flag verdicts, one case per mistake: each refused flag is named with its release and a fix.

The table of cases is flag_verdict_cases.py; here, what every case must show, and the regressions that name what
broke. Deprecated flags (taken, with a warning) are in tests/unit/config/test_engine_flags.py.
"""

from __future__ import annotations

import pytest

from spark_llm.config import engine_flags
from spark_llm.config.engine_flags import OWNED_FLAGS, check_flags
from tests.unit.config.flag_verdict_cases import CASES


@pytest.mark.parametrize(("target", "flags", "kinds", "texts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_flag_verdict(target: tuple[str, str], flags: list[str], kinds: list[str], texts: list[str]):
    engine, version = target
    problems = check_flags(engine, version, flags, OWNED_FLAGS[engine])
    assert [p.kind for p in problems] == kinds, problems
    messages = " | ".join(p.message for p in problems)
    for text in texts:
        assert text in messages, messages


@pytest.mark.parametrize(("target", "flags"), [c[1:3] for c in CASES if c[3]], ids=[c[0] for c in CASES if c[3]])
def test_every_refusal_is_one_line_naming_flag_engine_and_version(target: tuple[str, str], flags: list[str]):
    engine, version = target
    for problem in check_flags(engine, version, flags, OWNED_FLAGS[engine]):
        # The flag as written, without an attached value (which may be a secret: `--api-key=sk-...`).
        assert any(token == problem.flag or token.startswith(problem.flag) for token in flags), problem
        assert f"`{problem.flag}" in problem.message
        assert f"{engine_flags.ENGINE_NAMES[engine]} {version}" in problem.message
        assert "\n" not in problem.message


def test_sglang_tensor_parallel_size_with_underscores_is_refused_for_its_spelling():
    """`--tensor_parallel_size` was refused as "set by spark-llm": SGLang has no such spelling at all."""
    for version in ("0.5.5", "0.5.23"):
        [problem] = check_flags("sglang", version, ["--tensor_parallel_size", "2"], OWNED_FLAGS["sglang"])
        assert problem.kind == "underscore"
        assert problem.message.startswith(
            f"`--tensor_parallel_size`: SGLang {version} does not turn `_` into `-` in flag names (vLLM does), "
            "so it has no such flag; its spelling is `--tensor-parallel-size`"
        ), problem.message
        assert "use spark-llm:nodes" in problem.message
    # vLLM does turn `_` into `-`: there the flag is spark-llm's, for that reason alone.
    [problem] = check_flags("vllm", "0.33.0", ["--tensor_parallel_size", "2"], OWNED_FLAGS["vllm"])
    assert problem.kind == "owned" and "is set by spark-llm" in problem.message


def test_an_owned_secret_is_never_echoed():
    [problem] = check_flags("sglang", "0.5.23", ["--api-key=sk-very-secret"], OWNED_FLAGS["sglang"])
    assert problem.flag == "--api-key" and "sk-very-secret" not in problem.message


def test_seeds_language_model_only_refused_by_sglang_0_5_17():
    """The seeds' first relaunch died on `--language-model-only`, a vLLM flag the SGLang of that day rejected."""
    [problem] = check_flags("sglang", "0.5.17", ["--language-model-only"], OWNED_FLAGS["sglang"])
    assert problem.flag == "--language-model-only"
    assert "is not a SGLang 0.5.17 flag" in problem.message
    assert "vLLM flag" in problem.message
    assert "accepted by SGLang 0.5.23" in problem.message
    assert check_flags("sglang", "0.5.23", ["--language-model-only"], OWNED_FLAGS["sglang"]) == []


def test_the_table_holds_at_least_60_refusals():
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))
    assert sum(1 for case in CASES if case[3]) >= 60
