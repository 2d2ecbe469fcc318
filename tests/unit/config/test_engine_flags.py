"""Engine flag catalogs by release, the program's own flags, and spark-llm:engine in the stack config.

The table of refused flags is tests/unit/config/flag_verdict_cases.py (run by test_engine_flag_verdicts.py); here,
flags taken with a deprecation warning.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from spark_llm.config import ConfigError, engine_flags, flag_values, parse
from spark_llm.config.engine_flags import (
    OWNED_FLAGS,
    UnknownCatalogError,
    check_flags,
    flag_warnings,
    known_versions,
    load_catalog,
)
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from tests.conftest import dual_spark_raw

ROOT = Path(__file__).resolve().parents[3]
CATALOGS = ROOT / "spark_llm" / "config" / "engine_catalogs"
SHARED_CATALOGS = ROOT.parent / "shared" / "engine-flags"

S5, S17, S23 = ("sglang", "0.5.5"), ("sglang", "0.5.17"), ("sglang", "0.5.23")
V11, V16, V33 = ("vllm", "0.11.0"), ("vllm", "0.16.0"), ("vllm", "0.33.0")


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
    assert "spark_llm.config.engine_catalogs" in setuptools["packages"]
    packaged = {p for g in setuptools["package-data"]["spark_llm.config.engine_catalogs"] for p in CATALOGS.glob(g)}
    assert {p for p in CATALOGS.glob("*.json")} <= packaged and CATALOGS / "README.md" in packaged
    flags = [p for p in CATALOGS.glob("*.json") if not p.name.endswith(".metrics.json")]
    assert len(flags) == 6 and len(list(CATALOGS.glob("*.metrics.json"))) == 6  # a metric catalog per release


def test_each_catalog_is_the_shared_file_its_readme_row_records():
    # The README's digests were taken from shared/engine-flags when the files were copied (the metric catalogs',
    # when tools/engine_metrics.py wrote them); this check needs no ../shared beside the checkout, so it runs in
    # every clone.
    rows = dict(re.findall(r"^\| `([^`]+\.json)` \| `([0-9a-f]{64})` \|$", (CATALOGS / "README.md").read_text(), re.M))
    assert set(rows) == {p.name for p in CATALOGS.glob("*.json")}
    for name, digest in rows.items():
        assert hashlib.sha256((CATALOGS / name).read_bytes()).hexdigest() == digest, name
    if SHARED_CATALOGS.is_dir():  # beside the shared tree (a developer's machine), the source itself too
        for shared in SHARED_CATALOGS.glob("*.json"):
            assert (CATALOGS / shared.name).read_bytes() == shared.read_bytes(), shared.name


def test_the_standin_engine_reads_the_programs_own_catalogs():
    # One copy: run from a checkout the stand-in reads the package's files, and its image gets the same ones.
    engine_dir = ROOT / "sim" / "engine"
    read = subprocess.run(
        [sys.executable, "-c", "from standin_engine import catalog; print(catalog.CATALOG_DIR.resolve())"],
        env={**os.environ, "PYTHONPATH": str(engine_dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert read.stdout.strip() == str(CATALOGS.resolve())
    build = (ROOT / "sim" / "engine" / "build-image.sh").read_text()
    assert 'CATALOG_SOURCE="$REPO_DIR/spark_llm/config/engine_catalogs"' in build
    assert not (ROOT / "sim" / "engine" / "standin_engine" / "catalogs").exists()


@pytest.mark.parametrize("target", [S5, S17, S23, V11, V16, V33], ids="-".join)
def test_every_catalogued_flag_passes_spelled_in_full(target: tuple[str, str]):
    """The checker's reading of each catalog: every flag, alias and negation with a value of its type passes."""
    catalog = load_catalog(*target)
    entries = {o for spec in catalog.flags for o in (spec.flag, *spec.aliases, *spec.negations)}
    assert entries == set(catalog.option_strings)
    for spec in catalog.flags:
        for option in (spec.flag, *spec.aliases):
            tokens = [option, flag_values.example_value(spec)] if spec.takes_value else [option]
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


def test_config_points_the_executor_flag_to_the_executor_key():
    """The new-user replay: `--distributed-executor-backend ray` was pointed at spark-llm:nodes."""
    with pytest.raises(ConfigError) as err:
        parse(_with_engine(kind="vllm", flags=["--distributed-executor-backend", "ray"]))
    message = str(err.value)
    assert "use spark-llm:engine.executor (native or ray) instead" in message
    assert "spark-llm:nodes" not in message
    cfg = parse(_with_engine(kind="vllm", executor="ray"))
    assert cfg.engine.executor == "ray"


def test_config_accepts_good_flags_and_defaults_to_the_newest_release():
    cfg = parse(_with_engine(flags=["--mem-fraction-static", "0.8", "--language-model-only"]))
    assert cfg.engine.version == engine_flags.newest_version("sglang") == "0.5.23"
    assert parse(dual_spark_raw()).engine.version == "0.5.23"


def test_config_refuses_an_uncatalogued_version_listing_the_known_ones():
    expected = r"spark-llm:engine\.version: no flag catalog for SGLang '0\.5\.18'; known SGLang versions: .*0\.5\.17"
    with pytest.raises(ConfigError, match=expected):
        parse(_with_engine(version="0.5.18"))


def test_changing_only_the_version_restarts_nothing():
    template = plan.LAUNCH_TEMPLATE.read_text()
    before = plan.build_plan(groups(parse(_with_engine(version="0.5.23")))[0], template).group_revision
    after = plan.build_plan(groups(parse(_with_engine(version="0.5.17")))[0], template).group_revision
    assert before == after == plan.build_plan(groups(parse(dual_spark_raw()))[0], template).group_revision


# ---------- deprecated flags: taken, with a warning ----------

# (case id, (engine, version), flags, the flags warned about, text every warning must show)
DEPRECATED = [
    ("vllm-switch", V16, ["--disable-log-requests"], ["--disable-log-requests"], ["a later release may refuse it"]),
    ("vllm-negation-of-one", V16, ["--no-disable-log-requests"], ["--no-disable-log-requests"], ["vLLM 0.16.0"]),
    ("vllm-with-value", V33, ["--log-config-file", "/etc/log.json"], ["--log-config-file"], ["vLLM 0.33.0"]),
    (
        "vllm-gone-in-the-next-release",
        V11,
        ["--guided-decoding-backend", "xgrammar"],
        ["--guided-decoding-backend"],
        ["deprecated in vLLM 0.11.0", "vLLM 0.16.0 no longer has it"],
    ),
    ("sglang-switch", S23, ["--enable-dp-attention"], ["--enable-dp-attention"], ["deprecated in SGLang 0.5.23"]),
    (
        "sglang-among-others",
        S17,
        ["--trust-remote-code", "--cuda-graph-max-bs", "8", "--mem-fraction-static", "0.8"],
        ["--cuda-graph-max-bs"],
        ["SGLang 0.5.23 no longer has it"],
    ),
    ("not-deprecated", S23, ["--mem-fraction-static", "0.8"], [], []),
    ("refused-not-warned", S17, ["--enable-breakable-cuda-graph"], [], []),
    ("deprecated-with-a-bad-value-refused-not-warned", V11, ["--task", "generat"], [], []),
]


@pytest.mark.parametrize(
    ("target", "flags", "warned", "texts"), [c[1:] for c in DEPRECATED], ids=[c[0] for c in DEPRECATED]
)
def test_deprecated_flag_is_taken_with_a_warning(
    target: tuple[str, str], flags: list[str], warned: list[str], texts: list[str]
):
    engine, version = target
    warnings = flag_warnings(engine, version, flags)
    assert [w.flag for w in warnings] == warned
    if warned:
        assert check_flags(engine, version, flags, OWNED_FLAGS[engine]) == []  # taken: the launch goes ahead
    for warning in warnings:
        assert warning.kind == "deprecated" and "\n" not in warning.message
        assert f"`{warning.flag}` is deprecated in {engine_flags.ENGINE_NAMES[engine]} {version}" in warning.message
        for text in texts:
            assert text in warning.message, warning.message


def test_config_keeps_the_warnings_for_preview():
    raw = dual_spark_raw()
    raw["engine"] = {"kind": "vllm", "version": "0.16.0", "flags": ["--disable-log-requests", "--max-num-seqs", "8"]}
    [warning] = parse(raw).engine.flag_warnings()
    assert warning.startswith("spark-llm:engine.flags: `--disable-log-requests` is deprecated in vLLM 0.16.0")
    raw["engine"]["flags"] = ["--max-num-seqs", "8"]
    assert parse(raw).engine.flag_warnings() == []
