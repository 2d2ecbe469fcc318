"""Engine flag verdicts, one case per mistake: each refused flag is named with its release and a fix.

Deprecated flags (taken, with a warning) are in tests/unit/test_engine_flags.py.
"""

from __future__ import annotations

import pytest

from spark_llm.config import engine_flags
from spark_llm.config.engine_flags import OWNED_FLAGS, check_flags

S5, S17, S23 = ("sglang", "0.5.5"), ("sglang", "0.5.17"), ("sglang", "0.5.23")
V11, V16, V33 = ("vllm", "0.11.0"), ("vllm", "0.16.0"), ("vllm", "0.33.0")

# (case id, (engine, version), flags, the verdict kinds in order ([] = accepted), text every message must show)
CASES = [
    # accepted as written
    ("sglang-float-value", S17, ["--mem-fraction-static", "0.8", "--trust-remote-code"], [], []),
    ("sglang-flag-equals-value", S17, ["--attention-backend=triton"], [], []),
    ("sglang-human-readable-int", S17, ["--context-length", "32k"], [], []),
    ("sglang-negation-listed", S17, ["--no-lora-strict-loading"], [], []),
    ("sglang-nargs-plus", S5, ["--cuda-graph-bs", "1", "2", "4", "--trust-remote-code"], [], []),
    ("sglang-language-model-only-0.5.23", S23, ["--language-model-only"], [], []),
    ("vllm-underscore-normalised", V16, ["--max_model_len", "8192"], [], []),
    ("vllm-negation-listed", V16, ["--no-enable-prefix-caching"], [], []),
    ("vllm-disable-negation-0.33", V33, ["--disable-expert-parallel"], [], []),
    ("vllm-max-model-len-auto", V33, ["--max-model-len", "auto"], [], []),
    ("vllm-json-dotted-key", V33, ["--compilation-config.mode", "3"], [], []),
    ("vllm-optimization-level-short", V33, ["-O3"], [], []),
    ("vllm-nullable-none", V33, ["--max-log-len", "None"], [], []),
    # not a flag of this release
    ("sglang-typo", S17, ["--trust-remot-code"], ["unknown"], ["SGLang 0.5.17", "did you mean `--trust-remote-code`"]),
    ("sglang-no-such-flag", S17, ["--frobnicate"], ["unknown"], ["`--frobnicate`", "engine_catalogs/sglang-0.5.17"]),
    (
        "sglang-given-vllm-flag",
        S17,
        ["--max-model-len", "8192"],
        ["other-engine"],
        ["is a vLLM flag", "SGLang 0.5.17 has no such flag", "nearest SGLang flag is `--context-length`"],
    ),
    (
        "vllm-given-sglang-flag",
        V33,
        ["--mem-fraction-static", "0.8"],
        ["other-engine"],
        ["is a SGLang flag", "vLLM 0.33.0 has no such flag", "`--gpu-memory-utilization`"],
    ),
    (
        "vllm-flag-removed-in-newer",
        V33,
        ["--swap-space", "4"],
        ["other-version"],
        ["not a vLLM 0.33.0 flag", "removed after 0.16.0", "accepted by vLLM 0.11.0, 0.16.0"],
    ),
    (
        "vllm-flag-added-in-newer",
        V16,
        ["--language-model-only"],
        ["other-version"],
        ["not a vLLM 0.16.0 flag", "added after 0.16.0 (accepted by vLLM 0.33.0)"],
    ),
    (
        "sglang-flag-added-in-newer",
        S17,
        ["--attn-dp-size", "2"],
        ["other-version"],
        ["not a SGLang 0.5.17 flag", "added after 0.5.17 (accepted by SGLang 0.5.23)"],
    ),
    # spelling
    (
        "sglang-underscore",
        S17,
        ["--mem_fraction_static", "0.8"],
        ["underscore"],
        ["SGLang 0.5.17 does not turn `_` into `-`", "write `--mem-fraction-static`"],
    ),
    (
        "sglang-unique-prefix",
        S17,
        ["--mem-frac", "0.8"],
        ["prefix"],
        ["`--mem-frac` abbreviates `--mem-fraction-static`", "SGLang 0.5.17 takes it", "in full"],
    ),
    (
        "vllm-unique-prefix-after-underscore",
        V33,
        ["--max_model", "8k"],
        ["prefix"],
        ["abbreviates `--max-model-len`", "vLLM 0.33.0"],
    ),
    (
        "sglang-ambiguous-prefix",
        S23,
        ["--cuda-graph-max-bs", "8"],
        ["ambiguous-prefix"],
        ["ambiguous in SGLang 0.5.23", "`--cuda-graph-max-bs-decode`, `--cuda-graph-max-bs-prefill`", "0.5.5, 0.5.17"],
    ),
    ("sglang-same-flag-before-0.5.23", S17, ["--cuda-graph-max-bs", "8"], [], []),
    (
        "vllm-ambiguous-prefix",
        V16,
        ["--disable-log"],
        ["ambiguous-prefix"],
        ["ambiguous in vLLM 0.16.0", "`--disable-log-requests`, `--disable-log-stats`"],
    ),
    (
        "sglang-negation-not-listed",
        S17,
        ["--no-enable-torch-compile"],
        ["negation"],
        ["SGLang 0.5.17 has no such negation of the switch `--enable-torch-compile`", "leave it out"],
    ),
    (
        "vllm-negation-not-listed",
        V33,
        ["--no-disable-log-stats"],
        ["negation"],
        ["vLLM 0.33.0 has no such negation of the switch `--disable-log-stats`", "leave it out"],
    ),
    (
        "sglang-no-trust-remote-code-is-vllm-only",
        S17,
        ["--no-trust-remote-code"],
        ["negation"],
        ["no such negation of the switch `--trust-remote-code`", "is a vLLM flag"],
    ),
    # values
    (
        "sglang-missing-value-at-end",
        S17,
        ["--mem-fraction-static"],
        ["missing-value"],
        ["`--mem-fraction-static` needs a value (a number) in SGLang 0.5.17", "e.g. `--mem-fraction-static 0.8`"],
    ),
    (
        "sglang-missing-value-before-flag",
        S17,
        ["--context-length", "--trust-remote-code"],
        ["missing-value"],
        ["`--context-length` needs a value", "e.g. `--context-length 32k`"],
    ),
    (
        "sglang-bad-float",
        S17,
        ["--mem-fraction-static", "lots"],
        ["type"],
        ["`--mem-fraction-static lots`: SGLang 0.5.17 wants a number", "e.g. `--mem-fraction-static 0.8`"],
    ),
    (
        "sglang-binary-suffix-decimal",
        S23,
        ["--context-length=1.5K"],
        ["type"],
        ["no decimals with the binary suffix K", "1.5k"],
    ),
    (
        "sglang-bad-json",
        S17,
        ["--preferred-sampling-params", "{temperature: 0}"],
        ["type"],
        ["SGLang 0.5.17 wants JSON", "e.g. `--preferred-sampling-params '{}'`"],
    ),
    ("vllm-bad-int", V33, ["--max-num-seqs", "8.5"], ["type"], ["vLLM 0.33.0 wants an integer"]),
    ("vllm-0.11-no-auto", V11, ["--max-model-len", "auto"], ["type"], ["vLLM 0.11.0 wants an integer"]),
    (
        "vllm-dotted-key-on-int",
        V33,
        ["--max-num-seqs.x", "3"],
        ["type"],
        ["dotted keys on JSON flags only", "vLLM 0.33.0"],
    ),
    (
        "vllm-bool-value-false-means-true",
        V11,
        ["--guided-decoding-disable-fallback", "false"],
        ["type"],
        ["vLLM 0.11.0", "bool()", "leave the flag out"],
    ),
    (
        "sglang-bad-choice",
        S17,
        ["--attention-backend", "trito"],
        ["choice"],
        ["`--attention-backend trito`: not a choice of SGLang 0.5.17", "`triton`", "did you mean `triton`"],
    ),
    ("vllm-bad-int-choice", V16, ["--block-size", "24"], ["choice"], ["vLLM 0.16.0", "`16`, `32`"]),
    (
        "sglang-switch-given-value",
        S17,
        ["--trust-remote-code=true"],
        ["switch-value"],
        ["`--trust-remote-code` is a switch in SGLang 0.5.17 and takes no value (got `true`)"],
    ),
    (
        "sglang-switch-followed-by-value",
        S17,
        ["--trust-remote-code", "yes", "--mem-fraction-static", "0.8"],
        ["switch-value"],
        ["(got `yes`)"],
    ),
    (
        "vllm-switch-given-value",
        V16,
        ["--enable-prefix-caching=false"],
        ["switch-value"],
        ["vLLM 0.16.0", "or `--no-enable-prefix-caching` to turn it off"],
    ),
    ("vllm-short-option-glued-value", V16, ["-tp2"], ["unknown"], ["not a vLLM 0.16.0 flag", "`-tp 2`"]),
    ("sglang-stray-value", S17, ["model-x"], ["stray-value"], ["`model-x` is not a flag", "SGLang 0.5.17"]),
    (
        "sglang-deprecated-action-refused",
        S17,
        ["--enable-breakable-cuda-graph"],
        ["deprecated"],
        ["deprecated in SGLang 0.5.17", "remove it"],
    ),
    # flags the program sets
    ("sglang-owned-port", S17, ["--port", "8000"], ["owned"], ["SGLang 0.5.17", "use spark-llm:engine.port instead"]),
    ("sglang-owned-alias", S23, ["--tensor-parallel-size", "2"], ["owned"], ["spark-llm:nodes"]),
    ("sglang-owned-abbreviation", S17, ["--tp", "2"], ["owned"], ["`--tp` is set by spark-llm", "spark-llm:nodes"]),
    (
        "sglang-underscore-spelling-of-an-owned-flag",
        S17,
        ["--node_rank", "1"],
        ["underscore"],
        ["no such flag", "its spelling is `--node-rank`", "spark-llm sets that one itself: use spark-llm:nodes"],
    ),
    ("sglang-owned-old-alias", S5, ["--nccl-init-addr", "10.0.0.1:20000"], ["owned"], ["spark-llm:engine.distPort"]),
    ("sglang-owned-secret", S17, ["--api-key=sk-1"], ["owned"], ["spark-llm:apiKey (a secret)"]),
    ("sglang-owned-config-file", S23, ["--config", "/x.yaml"], ["owned"], ["spark-llm:engine.flags"]),
    ("vllm-owned-short-alias", V33, ["-tp", "2"], ["owned"], ["vLLM 0.33.0", "spark-llm:nodes"]),
    ("vllm-owned-master-addr", V16, ["--master-addr", "10.0.0.1"], ["owned"], ["spark-llm:nodes"]),
    ("vllm-owned-even-where-absent", V11, ["--master-port", "29501"], ["owned"], ["spark-llm:engine.distPort"]),
    ("vllm-owned-headless", V33, ["--headless"], ["owned"], ["spark-llm:nodes"]),
    ("vllm-owned-hf-token", V33, ["--hf-token", "hf_x"], ["owned"], ["spark-llm:hfToken (a secret)"]),
    # mistakes in writing the list itself
    ("sglang-empty-item", S23, ["--trust-remote-code", ""], ["empty"], ["an empty item", "remove it"]),
    (
        "sglang-typographic-dash",
        S23,
        ["\u2014trust-remote-code"],
        ["dash"],
        ["typographic dash", "write `--trust-remote-code`", "SGLang 0.5.23 takes only ASCII dashes"],
    ),
    ("vllm-en-dash-value-read-once", V33, ["\u2013max-model-len", "8k"], ["dash"], ["write `--max-model-len`"]),
    (
        "vllm-em-dash-switch-then-another-slip",
        V33,
        ["\u2014trust-remote-code", "--max-num-seqs 8"],
        ["dash", "joined"],
        ["write `--trust-remote-code`", "`--max-num-seqs` and its value are one item"],
    ),
    (
        "sglang-flag-and-value-in-one-item",
        S17,
        ["--mem-fraction-static 0.8"],
        ["joined"],
        ["`--mem-fraction-static` and its value are one item", "write two items"],
    ),
    (
        "sglang-single-dash-long-flag",
        S23,
        ["-mem-fraction-static", "0.8"],
        ["unknown"],
        ["did you mean `--mem-fraction-static`"],
    ),
    ("sglang-end-of-options", S17, ["--", "--trust-remote-code"], ["stray-value"], ["`--` ends the options"]),
    # more values
    ("sglang-bad-human-int", S23, ["--context-length", "32kk"], ["type"], ["k/m/g/t", "e.g. `--context-length 32k`"]),
    ("sglang-percent-for-fraction", S23, ["--mem-fraction-static", "80%"], ["type"], ["wants a number", "0.8"]),
    ("vllm-suffix-on-plain-int", V33, ["--max-num-seqs", "8k"], ["type"], ["vLLM 0.33.0 wants an integer"]),
    ("vllm-cut-short-choice", V33, ["--dtype", "bfloat"], ["choice"], ["did you mean `bfloat16`?"]),
    ("vllm-negation-given-value", V16, ["--no-enable-prefix-caching=1"], ["switch-value"], ["takes no value"]),
    ("vllm-dotted-key-without-value", V33, ["--compilation-config.mode"], ["missing-value"], ["needs a value"]),
    ("vllm-optimization-level-without-value", V33, ["-O"], ["missing-value"], ["e.g. `--optimization-level"]),
    (
        "vllm-given-sglang-flag-with-underscores",
        V33,
        ["--mem_fraction_static", "0.8"],
        ["other-engine"],
        ["is a SGLang flag", "nearest vLLM flag is `--gpu-memory-utilization`"],
    ),
    # more flags the program sets
    (
        "vllm-owned-executor-backend",
        V33,
        ["--distributed-executor-backend", "ray"],
        ["owned"],
        ["use spark-llm:engine.executor (native or ray) instead"],
    ),
    (
        "vllm-owned-executor-abbreviated",
        V16,
        ["--distributed-executor", "mp"],
        ["owned"],
        ["spark-llm:engine.executor"],
    ),
    ("vllm-owned-model", V33, ["--model", "/models/x"], ["owned"], ["use spark-llm:model.path instead"]),
    ("vllm-owned-node-rank-short", V33, ["-r", "1"], ["owned"], ["spark-llm:nodes (ranks follow the list"]),
    ("sglang-owned-served-model-name", S23, ["--served-model-name", "x"], ["owned"], ["spark-llm:model.name"]),
    ("sglang-owned-host", S17, ["--host", "0.0.0.0"], ["owned"], ["spark-llm:engine.host"]),
    # ranges the engine enforces where its parser takes any float
    (
        "vllm-memory-fraction-above-one",
        V33,
        ["--gpu-memory-utilization", "1.5"],
        ["range"],
        [
            "`--gpu-memory-utilization 1.5`: out of range for vLLM 0.33.0",
            "greater than 0 and at most 1",
            "e.g. `--gpu-memory-utilization 0.92`",
        ],
    ),
    ("vllm-memory-fraction-zero", V11, ["--gpu-memory-utilization=0"], ["range"], ["greater than 0 and at most 1"]),
    ("vllm-memory-fraction-whole-gpu", V16, ["--gpu-memory-utilization", "1"], [], []),
    (
        "sglang-memory-fraction-above-one",
        S23,
        ["--mem-fraction-static", "1.2"],
        ["range"],
        ["out of range for SGLang 0.5.23", "more memory than the GPU has", "e.g. `--mem-fraction-static 0.8`"],
    ),
    ("sglang-memory-fraction-not-a-number", S5, ["--mem-fraction-static", "nan"], ["range"], ["at most 1"]),
    ("vllm-pruning-rate-open-at-one", V33, ["--video-pruning-rate", "1.0"], ["range"], ["less than 1"]),
    # values a catalog keeps only in the metavar
    (
        "vllm-kv-cache-dtype-from-metavar",
        V33,
        ["--kv-cache-dtype", "fp9"],
        ["choice"],
        ["`--kv-cache-dtype fp9`: not a choice of vLLM 0.33.0", "`fp8_e4m3`", "did you mean `fp8`?"],
    ),
    ("vllm-kv-cache-dtype-metavar-value", V33, ["--kv-cache-dtype", "nvfp4"], [], []),
    ("vllm-model-impl-from-metavar", V16, ["--model-impl", "hf"], ["choice"], ["not a choice of vLLM 0.16.0"]),
    ("vllm-plugin-tokenizer-mode", V33, ["--tokenizer-mode", "my_plugin_mode"], [], []),
    # several at once: each reported, in order, values consumed so nothing is reported twice
    (
        "several-problems-in-order",
        S17,
        ["--language-model-only", "--mem_fraction_static", "0.8", "--port", "1", "--context-length", "x"],
        ["other-version", "underscore", "owned", "type"],
        [],
    ),
]


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
