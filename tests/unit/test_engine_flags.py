"""Engine flags against the engines' own parsers, by release: each refused flag is named with a fix, at config time."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

from spark_llm import engine_flags, plan
from spark_llm.config import ConfigError, parse
from spark_llm.engine_flags import OWNED_FLAGS, UnknownCatalogError, check_flags, known_versions, load_catalog
from tests.conftest import dual_spark_raw

ROOT = Path(__file__).resolve().parents[2]
CATALOGS = ROOT / "spark_llm" / "engine_catalogs"
SHARED_CATALOGS = ROOT.parent / "shared" / "engine-flags"

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
    ("sglang-owned-underscore", S17, ["--node_rank", "1"], ["owned"], ["spark-llm:nodes"]),
    ("sglang-owned-old-alias", S5, ["--nccl-init-addr", "10.0.0.1:20000"], ["owned"], ["spark-llm:engine.distPort"]),
    ("sglang-owned-secret", S17, ["--api-key=sk-1"], ["owned"], ["spark-llm:apiKey (a secret)"]),
    ("sglang-owned-config-file", S23, ["--config", "/x.yaml"], ["owned"], ["spark-llm:engine.flags"]),
    ("vllm-owned-short-alias", V33, ["-tp", "2"], ["owned"], ["vLLM 0.33.0", "spark-llm:nodes"]),
    ("vllm-owned-master-addr", V16, ["--master-addr", "10.0.0.1"], ["owned"], ["spark-llm:nodes"]),
    ("vllm-owned-even-where-absent", V11, ["--master-port", "29501"], ["owned"], ["spark-llm:engine.distPort"]),
    ("vllm-owned-headless", V33, ["--headless"], ["owned"], ["spark-llm:nodes"]),
    ("vllm-owned-hf-token", V33, ["--hf-token", "hf_x"], ["owned"], ["spark-llm:hfToken (a secret)"]),
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


def test_unknown_version_lists_the_known_ones():
    known = r"known SGLang versions: 0\.5\.5, 0\.5\.17, 0\.5\.23"
    with pytest.raises(UnknownCatalogError, match=rf"no flag catalog for SGLang '0\.5\.18'; {known}"):
        check_flags("sglang", "0.5.18", [], {})
    with pytest.raises(UnknownCatalogError, match=r"known vLLM versions: 0\.11\.0, 0\.16\.0, 0\.33\.0"):
        load_catalog("vllm", "0.17")


def test_unknown_engine_lists_the_known_ones():
    with pytest.raises(UnknownCatalogError, match=r"'tensorrt'.*sglang, vllm"):
        check_flags("tensorrt", "1.0", [], {})


def test_known_versions_are_ordered_by_release():
    assert known_versions("sglang") == ("0.5.5", "0.5.17", "0.5.23")
    assert known_versions("vllm") == ("0.11.0", "0.16.0", "0.33.0")
    assert engine_flags.newest_version("sglang") == "0.5.23"
    assert engine_flags.newest_version("vllm") == "0.33.0"


# ---------- the catalogs as data ----------


def test_catalogs_are_packaged_with_the_module():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "spark_llm.engine_catalogs" in setuptools["packages"]
    packaged = {p for g in setuptools["package-data"]["spark_llm.engine_catalogs"] for p in CATALOGS.glob(g)}
    assert {p for p in CATALOGS.glob("*.json")} <= packaged and CATALOGS / "README.md" in packaged
    assert len(list(CATALOGS.glob("*.json"))) == 6


@pytest.mark.skipif(not SHARED_CATALOGS.is_dir(), reason="shared/engine-flags is not beside the checkout")
def test_catalogs_are_byte_identical_to_the_shared_ones():
    for shared in sorted(SHARED_CATALOGS.glob("*.json")):
        ours = CATALOGS / shared.name
        assert hashlib.sha256(ours.read_bytes()).digest() == hashlib.sha256(shared.read_bytes()).digest(), shared.name


@pytest.mark.parametrize("target", [S5, S17, S23, V11, V16, V33], ids="-".join)
def test_every_catalogued_flag_passes_spelled_in_full(target: tuple[str, str]):
    """The checker's reading of each catalog: every flag, alias and negation with a value of its type passes."""
    catalog = load_catalog(*target)
    entries = {o for spec in catalog.flags for o in (spec.flag, *spec.aliases, *spec.negations)}
    assert entries == set(catalog.option_strings)
    for spec in catalog.flags:
        for option in (spec.flag, *spec.aliases):
            tokens = [option, engine_flags._example(spec)] if spec.takes_value else [option]
            kinds = [p.kind for p in check_flags(*target, tokens, {})]
            assert kinds == (["deprecated"] if spec.refused_when_given else []), (tokens, kinds)
        for option in spec.negations:
            assert check_flags(*target, [option], {}) == [], option


# ---------- the program's own flags ----------


def _program_flags() -> list[str]:
    """Every flag the SGLang profile puts on the head's command line (the head has all of a worker's, and more)."""
    cfg = parse(dual_spark_raw())
    argv = list(plan.node_launches(cfg)[cfg.head.name].argv)
    return argv[argv.index("sglang.launch_server") + 1 :]


@pytest.mark.parametrize("version", known_versions("sglang"))
def test_program_flags_are_full_spellings_every_sglang_release_accepts(version: str):
    assert check_flags("sglang", version, _program_flags(), {}) == []


@pytest.mark.parametrize("version", known_versions("sglang"))
def test_every_flag_the_program_sets_is_owned(version: str):
    tokens = _program_flags()
    for i, token in enumerate(tokens):
        if token.startswith("--"):
            problems = check_flags("sglang", version, tokens[i : i + 2], OWNED_FLAGS["sglang"])
            assert [p.kind for p in problems] == ["owned"], token


# ---------- spark-llm:engine in the stack config ----------


def _with_engine(**engine: object) -> dict[str, object]:
    raw = dual_spark_raw()
    raw["engine"] = engine
    return raw


def test_config_refuses_a_bad_flag_naming_the_key_and_the_flag():
    with pytest.raises(ConfigError) as err:
        parse(_with_engine(version="0.5.17", flags=["--language-model-only"]))
    message = str(err.value)
    assert "spark-llm:engine.flags: refused for SGLang 0.5.17" in message
    assert "`--language-model-only` is not a SGLang 0.5.17 flag" in message and "vLLM flag" in message


def test_config_lists_every_refused_flag_one_a_line():
    with pytest.raises(ConfigError) as err:
        parse(_with_engine(flags=["--port", "8000", "--mem-frac", "0.8", "--max_model_len", "8k"]))
    lines = str(err.value).splitlines()
    assert any("spark-llm:engine.flags: refused for SGLang 0.5.23" in line for line in lines)
    refused = [line for line in lines if line.startswith("    `")]
    assert [r.split("`")[1] for r in refused] == ["--port", "--mem-frac", "--max_model_len"]


def test_config_accepts_good_flags_and_defaults_to_the_newest_release():
    cfg = parse(_with_engine(flags=["--mem-fraction-static", "0.8", "--language-model-only"]))
    assert cfg.engine.version == engine_flags.newest_version("sglang") == "0.5.23"
    assert parse(dual_spark_raw()).engine.version == "0.5.23"


def test_config_refuses_an_uncatalogued_version_listing_the_known_ones():
    expected = r"spark-llm:engine\.version: no flag catalog for SGLang '0\.5\.18'; known SGLang versions: .*0\.5\.17"
    with pytest.raises(ConfigError, match=expected):
        parse(_with_engine(version="0.5.18"))


def test_changing_only_the_version_restarts_nothing():
    template = plan.TEMPLATE_PATH.read_text()
    before = plan.build_plan(parse(_with_engine(version="0.5.23")), template).group_revision
    after = plan.build_plan(parse(_with_engine(version="0.5.17")), template).group_revision
    assert before == after == plan.build_plan(parse(dual_spark_raw()), template).group_revision
