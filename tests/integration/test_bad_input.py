"""Bad input stops `pulumi preview` with the key named, and nothing runs on any node.

The unit table (tests/unit/config/test_config_bad_input.py) checks every broken config's message, ~90 of them, in
milliseconds each. Here a sample of it, one or two per section and per path an error takes (Pulumi's own check of
the types Pulumi.yaml declares; our model's field and cross-node checks; the engine catalog; a secret given in plain
text), is written into the stack's config file and previewed with the real CLI against the live sim stack: the
path from the file to the printed error, and that nothing runs on a node. Each preview costs ~5 s of the test bed's
two cores; the whole table here took 7.5 minutes of its 26. A stack that names its recipe (spark-llm:recipe) is not
bad input: its preview passes and notes where the stack departs from the recipe.
"""

from __future__ import annotations

import copy
import subprocess

import pytest
import yaml

from spark_llm.config import recipe
from tests.unit.config.test_config_bad_input import BROKEN, Mutation

pytestmark = pytest.mark.integration

NAMESPACE = "spark-llm:"


def _node_state(sim_cluster) -> dict[str, str]:
    """What a command on a node would change: engine containers and the files under the remote dir."""
    state = {}
    for node in ("head", "worker-1"):
        ps = sim_cluster.node_exec(node, "docker", "ps", "-a", "--format", "{{.ID}} {{.State}} {{.CreatedAt}}").stdout
        files = sim_cluster.node_exec(
            node, "sh", "-c", "ls -la --time-style=full-iso /root/spark-llm 2>&1", check=False
        ).stdout
        state[node] = ps + files
    return state


def _secret_in_plain_text(raw: dict) -> None:
    raw["hfToken"] = "hf_plaintexttoken"


SAMPLE = (
    "missing-nodes",
    "two-heads",
    "host-key-wrong-type",
    "model-not-a-mapping",
    "hf-source-no-revision",
    "image-ref-url",
    "engine-version-uncatalogued",
    "engine-env-swaps-the-ray-token",
    "transfer-encrypt-not-boolean",
    "top-level-key-snake-case",
    "models-empty-beside-model",  # Pulumi.yaml's declaration once passed [] for an unset key: issue 41
    "recipe-unknown",
    "router-port-is-the-engines",
)
_BY_ID = {case_id: (mutate, key) for case_id, mutate, key, _ in BROKEN}
CASES = [(case_id, *_BY_ID[case_id]) for case_id in SAMPLE] + [
    ("secret-in-plain-text", _secret_in_plain_text, "spark-llm:hfToken"),
]


@pytest.fixture(scope="module")
def deployed_state(pulumi, sim_cluster):
    pulumi.up()
    return _node_state(sim_cluster)


def preview_with(pulumi, mutate: Mutation, *args: str) -> subprocess.CompletedProcess[str]:
    """`pulumi preview` of the sim's config with `mutate` applied to its `spark-llm:` keys; the config restored."""
    pulumi.reset_config()
    document = yaml.safe_load(pulumi.config_file.read_text())
    raw = copy.deepcopy({k.removeprefix(NAMESPACE): v for k, v in document["config"].items()})
    mutate(raw)
    document["config"] = {NAMESPACE + k: v for k, v in raw.items()}
    pulumi.config_file.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        return pulumi("preview", *args, check=False)
    finally:
        pulumi.reset_config()


@pytest.mark.parametrize(("mutate", "key"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_config_fails_preview_naming_the_key(pulumi, sim_cluster, deployed_state, mutate: Mutation, key):
    result = preview_with(pulumi, mutate)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    if "error: validating stack config:" in output:
        # Pulumi.yaml declares each top-level key's type: Pulumi itself refuses a wrong shape before the
        # program runs, naming that top-level key (`spark-llm:nodes must be of type 'array<object>'`).
        assert f"'{key.split('.')[0].split('[')[0]}'" in output, output
    else:
        assert key in output, output
    assert "[head]" not in output and "[worker-1]" not in output  # no script ran on a node
    assert _node_state(sim_cluster) == deployed_state


def _flag_out_of_range(raw: dict) -> None:
    raw["engine"] = dict(raw["engine"], flags=["--mem-fraction-static", "1.5"])


def _missing_key_file(raw: dict) -> None:
    raw["sshKeyPath"] = "/nonexistent/id_ed25519"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_flag_out_of_range, "`--mem-fraction-static 1.5`: out of range for SGLang"),
        (_missing_key_file, "spark-llm:sshKeyPath: cannot read the ssh private key /nonexistent/id_ed25519"),
    ],
    ids=["config-refusal", "key-file-refusal"],
)
def test_a_refusal_reads_as_our_message_not_as_a_crash(pulumi, mutate: Mutation, expected: str):
    """Pulumi printed "an unhandled error occurred: program exited with non-zero exit code: 1" under every
    refusal of bad input: it now shows the refusal alone, and preview still fails."""
    result = preview_with(pulumi, mutate)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert expected in output, output
    assert "unhandled" not in output and "non-zero exit code" not in output, output
    assert "Traceback" not in output, output


# An SGLang recipe: the sim's engine is SGLang at the newest catalogued release, as this recipe's.
SGLANG_RECIPE = "minimax-m3-v0-nvfp4-reap50-sglang"


def _from_recipe_with_one_flag_changed(raw: dict) -> None:
    """The sim's stack with the recipe's name, flags (one changed) and env; its own model and image stay."""
    known = recipe.by_name(SGLANG_RECIPE)
    flags = list(known.flags)
    flags[flags.index("--context-length") + 1] = "65536"
    raw["recipe"] = known.name
    raw["engine"] = dict(raw["engine"], flags=flags, env=dict(known.env))


def test_preview_notes_each_place_a_stack_departs_from_its_recipe(pulumi, deployed_state):
    """A person who started from a recipe and changed a flag sees that, and what the sim itself changes (its model
    and image), in `pulumi preview`: one line each, the model as a warning; the preview passes."""
    result = preview_with(pulumi, _from_recipe_with_one_flag_changed)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Pulumi's Diagnostics section, where each message stands alone (the progress view shows them once more).
    noted = {
        line.strip()
        for line in output.splitlines()
        if line.strip().startswith(("stack departs from recipe", "warning: stack departs from recipe"))
    }
    prefix = f"stack departs from recipe {SGLANG_RECIPE}: "
    assert noted == {
        f"warning: {prefix}model.name spark-llm/standin-model (recipe: sparkarena/Minimax-M3-v0-NVFP4-REAP50)",
        f"{prefix}image.ref spark-llm/standin-engine:sim (recipe: scitrera/dgx-spark-sglang-mm:v0)",
        f"{prefix}engine.flags --context-length 65536 (recipe: 131072)",
    }, output


def _as_models(raw: dict, *more: dict) -> None:
    """The single form's model, image and engine moved into spark-llm:models as its first entry, then `more`."""
    entry = {**raw.pop("model"), "image": raw.pop("image"), "engine": raw.pop("engine")}
    raw["models"] = [entry, *more]


def test_a_deployed_stack_moved_into_a_list_of_one_model_previews_no_change(pulumi, deployed_state):
    """spark-llm:models with one entry is the single form: the deployed stack's resources and inputs stay as they
    are (Pulumi.yaml's defaults for the unset model, image and engine read as unset)."""
    result = preview_with(pulumi, _as_models, "--expect-no-changes")
    assert result.returncode == 0, result.stdout + result.stderr


def _two_models(raw: dict) -> None:
    budget = {**raw["engine"], "flags": ["--mem-fraction-static", "0.85"]}
    raw["engine"] = budget
    head = raw["nodes"][0]["name"]
    engine = {**budget, "port": 30001, "distPort": 20001, "flags": ["--mem-fraction-static", "0.2"]}
    embed = {"name": "embed", "path": "/srv/models/embed", "image": raw["image"], "nodes": [head], "engine": engine}
    _as_models(raw, embed)


def test_two_models_that_do_not_fit_together_fail_preview_with_their_fit_per_node(pulumi, sim_cluster, deployed_state):
    result = preview_with(pulumi, _two_models)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "spark-llm:models on the nodes (each node's MemTotal):" in output, output
    assert "embed 24.3 GiB = 127.8 GiB of 121.7 GiB MemTotal (4.0 GiB kept free): does not fit: lower embed's" in output
    assert "Nothing was run on any node." in output, output
    assert "unhandled" not in output and "Traceback" not in output, output
    assert _node_state(sim_cluster) == deployed_state


def test_a_retention_larger_than_the_heads_disk_and_a_clock_cap_beyond_the_gpu_are_refused_before_anything_runs(
    pulumi, sim_cluster, deployed_state
):
    """Issue 42: spark-llm:monitoring.retentionSize larger than the head's disk under Docker's data root, and a GPU
    clock cap (nodes[].smClockCapMhz) above what the worker's GPU reports (both read by preview's probe of the
    nodes), are refused at once, each naming its key and a value that fits; nothing runs on any node."""
    pulumi.reset_config()
    try:
        pulumi("config", "set", "--secret", "monitoringPassword", "pw-bad-input")
        for key in ("image", "nodeExporterImage"):
            pulumi.set(f"monitoring.{key}", "sha256:" + "a" * 64)
        pulumi.set("monitoring.retentionSize", "100TB")
        pulumi.set("nodes[1].smClockCapMhz", "3000")
        result = pulumi("preview", check=False)
    finally:
        pulumi.reset_config()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "spark-llm:monitoring.retentionSize: 100TB is more than the head's whole disk" in output, output
    assert "spark-llm:nodes[1].smClockCapMhz 3000 is outside the GPU's range on worker-1 (600-2405 MHz" in output
    assert "pulumi config set --path 'nodes[1].smClockCapMhz' 2000" in output, output
    assert "Nothing was run on any node." in output and "Traceback" not in output
    assert _node_state(sim_cluster) == deployed_state
