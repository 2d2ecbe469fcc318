"""`spark-llm status`'s router line (spark_llm.ops.status.router): what the head printed -> the router's state."""

from __future__ import annotations

import json

from spark_llm.ops.status.router import parse

ENDPOINT = "http://10.1.230.180:4000"
BOTH = ("embed", "qwen")


def printed(state: tuple[int, str], models: tuple[int, str]) -> str:
    """What the head's status script prints of the router: its `router_state` and `router_models` sections."""
    out = ""
    for name, (rc, body) in (("router_state", state), ("router_models", models)):
        out += f"--- spark-llm:{name} ---\n{body}\n--- spark-llm:rc={rc} ---\n"
    return out


def listing(*names: str) -> str:
    return json.dumps({"object": "list", "data": [{"id": name, "object": "model"} for name in names]})


def test_a_running_router_that_lists_every_model_is_ok():
    got = parse(printed((0, "running"), (0, listing("qwen", "embed"))), BOTH, ENDPOINT)
    assert got.ok and got.listed == ("embed", "qwen")
    assert got.sentence() == f"router: running at {ENDPOINT}, lists embed, qwen"


def test_a_model_the_router_does_not_list_is_named_with_what_happens_next():
    got = parse(printed((0, "running"), (0, listing("qwen"))), BOTH, ENDPOINT)
    assert not got.ok and got.missing == ("embed",)
    assert got.sentence().startswith(f"router: running at {ENDPOINT}, lists qwen; not embed: its launcher registers")


def test_a_router_gone_or_stopped_says_pulumi_up_makes_it_again():
    gone = parse(printed((1, "Error: No such object: spark-llm-router"), (7, "curl: (7) refused")), BOTH, ENDPOINT)
    assert (gone.state, gone.ok, gone.listed) == ("absent", False, ())
    stopped = parse(printed((0, "exited"), (7, "curl: (7) refused")), BOTH, ENDPOINT)
    assert stopped.state == "exited"
    assert stopped.sentence().startswith("router: its container on the head is exited: `pulumi up` makes it again")
    assert stopped.to_json() == {"state": "exited", "endpoint": ENDPOINT, "listed": [], "missing": ["embed", "qwen"]}
