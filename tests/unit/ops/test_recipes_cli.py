"""`spark-llm recipes`: each recipe with its fit on 2 and 4 Sparks and its source; the README's table is its output."""

from __future__ import annotations

import json
import re

from spark_llm.config import recipe
from spark_llm.ops import cli
from spark_llm.ops import recipes as recipes_cmd
from tests.unit.graph_mocks import ROOT


def spark_llm(*argv: str) -> int:
    """The command as `spark-llm` runs it (main's SIGUSR1 handler needs a real stderr, which capsys is not)."""
    return cli._run(cli.parser().parse_args(list(argv)))


def test_recipes_json_lists_each_recipe_with_its_fit_and_source(capsys):
    assert spark_llm("recipes", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    names = sorted(p.stem for p in recipe.RECIPES_DIR.glob("*.yaml"))
    assert sorted(r["name"] for r in listed) == names
    seed = next(r for r in listed if r["name"] == "qwen3.5-122b-a10b-fp8-vllm-ray")
    assert seed["fit"] == {"2": "fits", "4": "fits"} and seed["profile"] == "vLLM + Ray" and seed["source"]


def test_recipes_table_says_fit_and_source_per_recipe(capsys):
    assert spark_llm("recipes") == 0
    out = capsys.readouterr().out
    assert "2 Sparks: fits, 4 Sparks: fits" in out and "source: " in out


def test_a_bad_recipe_is_one_line_naming_file_and_key(monkeypatch, tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("name: bad\n")
    monkeypatch.setattr(recipe, "RECIPES_DIR", tmp_path)
    assert spark_llm("recipes") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.yaml: model:" in err


def test_readme_lists_the_recipes_as_the_command_does():
    readme = (ROOT / "README.md").read_text()
    table = re.search(r"<!-- recipes:begin -->\n(.*?)\n<!-- recipes:end -->", readme, re.S)
    assert table is not None, "README has no recipes table"
    assert table.group(1) == recipes_cmd.readme_table()
