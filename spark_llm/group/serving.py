"""What "serving" means for the group, for the readiness gate and the supervisor alike: rank 0 answers a one-token
completion of the configured model with HTTP 200 (an engine's /health can answer before the model generates, and
after the group lost a rank). `spark-llm status` also asks each engine's own health route (HEALTH_PATHS).

With spark-llm:apiKey the head keeps the key in the engine's `--config` file (API_CONFIG: one writer, one reader):
the supervisor reads the key from it, so the key is in no spec, no command line and no Pulumi state in plaintext.
"""

from __future__ import annotations

import json

COMPLETIONS_PATH = "/v1/completions"
# The engine's own health route: SGLang's /health_generate runs a generation; vLLM's /health answers once the
# engine loop runs. Neither needs the API key (both engines' key middleware guards /v1 only).
HEALTH_PATHS = {"sglang": "/health_generate", "vllm": "/health"}
API_KEY_FIELD = "api-key"


def serving_request(model: str) -> dict:
    """The body of the one-token completion that proves the group serves `model`."""
    return {"model": model, "prompt": "ping", "max_tokens": 1}


def serves(http_code: int | None) -> bool:
    return http_code == 200


def health_path(engine: str) -> str:
    """The engine's health route (`sglang` or `vllm`); /health for an engine not listed."""
    return HEALTH_PATHS.get(engine, "/health")


def render_api_config(api_key: str) -> str:
    """The engine's `--config` file with the key: YAML, the key JSON-quoted (a valid YAML double-quoted scalar)."""
    header = "# spark-llm: the API key (spark-llm:apiKey); mode 0600, read by the engine as --config\n"
    return f"{header}{API_KEY_FIELD}: {json.dumps(api_key)}\n"


def api_key_of(config_text: str) -> str | None:
    """The key `render_api_config` wrote (None: no such line)."""
    for line in config_text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == API_KEY_FIELD:
            try:
                key = json.loads(value.strip())
            except ValueError:
                return None
            return key if isinstance(key, str) else None
    return None
