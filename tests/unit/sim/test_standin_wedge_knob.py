"""The stand-in's wedge knob: while its file exists a running engine keeps running and answers no generation (a
completion, a chat, SGLang's /health_generate), while /health stays 200; removed, the held requests are answered.
What the supervisor's wedge test relies on (issue 32, item 7)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.unit.sim.standin_group import SERVED_MODEL_NAME, EngineGroup, post_head, wait_until

COMPLETION = {"model": SERVED_MODEL_NAME, "prompt": "ping", "max_tokens": 1}
HELD_S = 1.5


def _times_out(url: str, payload: dict | None) -> bool:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HELD_S):
            return False
    except TimeoutError:
        return True
    except urllib.error.URLError as error:
        return isinstance(error.reason, (TimeoutError, socket.timeout))


def test_a_wedge_file_makes_a_running_engine_answer_no_generation_while_health_stays_200(
    new_group: Callable[..., EngineGroup], tmp_path: Path
) -> None:
    wedge = tmp_path / "standin-wedge"
    group = new_group(1)
    head = group.start(0, env={"STANDIN_WEDGE_WHILE_FILE": str(wedge)})
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    assert post_head(group, "/v1/completions", COMPLETION)["usage"]["completion_tokens"] == 1

    wedge.touch()
    assert _times_out(f"{head.url}/v1/completions", COMPLETION)
    assert _times_out(
        f"{head.url}/v1/chat/completions", {**COMPLETION, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert _times_out(f"{head.url}/health_generate", None)
    assert head.health() == 200 and head.process.poll() is None  # up, and its liveness route says so

    wedge.unlink()
    assert post_head(group, "/v1/completions", COMPLETION)["usage"]["completion_tokens"] == 1


def test_a_wedged_vllm_head_answers_no_completion_while_health_and_ping_stay_200(
    new_vllm_group, tmp_path: Path
) -> None:
    wedge = tmp_path / "standin-wedge"
    group = new_vllm_group(1)
    head = group.start(0, env={"STANDIN_WEDGE_WHILE_FILE": str(wedge)})
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    wedge.touch()
    assert _times_out(f"{head.url}/v1/completions", COMPLETION)
    assert head.health() == 200 and _times_out(f"{head.url}/ping", None) is False
