"""The Hugging Face download (model.source kind huggingface), run for real with a stand-in `hf`: repo and
revision pinned, the token from the env file and never on argv, a re-run resumes, a failure shows its log."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from spark_llm.plan.weights import steps as weights
from tests.unit.plan.weights_runs import HF, REVISION, TOKEN, TOOL, build, run_bash


def test_hf_download_pins_repo_and_revision_into_model_path():
    cfg, p = build(HF)
    script = weights.render_obtain(cfg, p.head, TOOL, TOKEN)
    assert "MODEL_PATH=/home/aurora/models/Qwen3.5-122B-A10B-FP8\n" in script
    assert f'"${{HF[@]}}" Qwen/Qwen3.5-122B-A10B-FP8 --revision {REVISION} --local-dir "$MODEL_PATH"' in script
    assert "HF=(hf download)" in script and "HF=(huggingface-cli download)" in script
    assert "HF_ENV=/home/aurora/spark-llm/hf.env\n" in script


def fake_hf(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "hf").write_text("#!/usr/bin/env bash\n" + body)
    (bin_dir / "hf").chmod(0o755)


def test_hf_token_comes_from_the_env_file_and_never_from_argv(tmp_path, env):
    cfg, p = build(HF, path=str(tmp_path / "model"))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    (tmp_path / "remote").mkdir()
    env_file = Path(weights.hf_env_path(head))
    env_file.write_text(weights.render_hf_env("hf_TOPSECRET"))
    env_file.chmod(0o600)
    # A stand-in `hf`: records its argv and whether it saw the token, writes one weights file.
    fake_hf(
        tmp_path / "bin",
        'printf "%s\\n" "$@" > "$0.argv"; echo "token=${HF_TOKEN:-none}" > "$0.env"\n'
        'dir=${@: -1}; mkdir -p "$dir/.cache/huggingface"; echo w > "$dir/model.safetensors"\n',
    )
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    out = run_bash(weights.render_obtain(cfg, head, TOOL, TOKEN), env).stdout
    argv = (tmp_path / "bin" / "hf.argv").read_text().split("\n")
    assert argv[:6] == [
        "download",
        "Qwen/Qwen3.5-122B-A10B-FP8",
        "--revision",
        REVISION,
        "--local-dir",
        str(tmp_path / "model"),
    ]
    assert "hf_TOPSECRET" not in "".join(argv) and "hf_TOPSECRET" not in out
    assert (tmp_path / "bin" / "hf.env").read_text().strip() == "token=hf_TOPSECRET"
    # The download metadata is not part of the manifest; the manifest is stored beside the weights.
    stored = json.loads((tmp_path / "model" / weights.MANIFEST_NAME).read_text())
    assert [f["path"] for f in stored["files"]] == ["model.safetensors"]
    assert weights.parse_digest(out) == stored["digest"]


def test_download_rerun_lets_hf_resume_and_hashes_only_new_files(tmp_path, env):
    """A second `up` after an interrupted download runs `hf download` again (it skips finished files itself) and
    the manifest re-hashes only what the download added."""
    cfg, p = build(HF, path=str(tmp_path / "model"))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    # A stand-in `hf` that fetches one more shard per call, as a resumed download does.
    fake_hf(
        tmp_path / "bin",
        'dir=${@: -1}; mkdir -p "$dir"; n=$(find "$dir" -maxdepth 1 -name "*.safetensors" | wc -l)\n'
        'head -c 100000 /dev/urandom > "$dir/model-$((n + 1)).safetensors"\n',
    )
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    script = weights.render_obtain(cfg, head, TOOL, TOKEN)
    first = run_bash(script, env)
    second = run_bash(script, env)
    assert "hashed 1 " in second.stderr and "1 from cache" in second.stderr
    assert weights.parse_digest(second.stdout) != weights.parse_digest(first.stdout)
    stored = json.loads((tmp_path / "model" / weights.MANIFEST_NAME).read_text())
    assert [f["path"] for f in stored["files"]] == ["model-1.safetensors", "model-2.safetensors"]


def test_failed_download_shows_its_log_and_says_it_resumes(tmp_path, env):
    cfg, p = build(HF, path=str(tmp_path / "model"))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    fake_hf(tmp_path / "bin", 'printf "Fetching 3 files:  33%%\\r"; echo "HTTP 401 for url"; exit 1\n')
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    result = run_bash(weights.render_obtain(cfg, head, TOOL, TOKEN), env, check=False)
    assert result.returncode == 1
    assert "HTTP 401 for url" in result.stderr and "run pulumi up again to resume" in result.stderr
