"""The weights fan-out's schedule (scripts/fanout_schedule.py): what each worker lacks, who feeds whom, the batches."""

from __future__ import annotations

import pytest

from tests.unit.scripts.test_fanout_link_cut import head_module

schedule = head_module("fanout_schedule")
MB = 1 << 20


def manifest(*files: tuple[str, int, str]) -> dict:
    return {"files": [{"path": p, "size": s, "sha256": h} for p, s, h in files]}


def test_a_worker_needs_what_it_lacks_or_has_otherwise_largest_first_and_loses_what_the_head_lacks():
    head = {f["path"]: f for f in manifest(("a", 1, "x"), ("b", 5, "y"), ("c", 3, "z"))["files"]}
    parts = schedule.needs("head", head, {"w1": manifest(("a", 1, "x"), ("c", 3, "old"), ("stale", 2, "s"))})
    assert [f["path"] for f in parts.need["w1"]] == ["b", "c"]
    assert parts.whole["w1"] == {"c"} and parts.extra["w1"] == ["stale"]
    assert parts.have == {"head": {"a", "b", "c"}, "w1": {"a"}}


@pytest.mark.parametrize(
    ("transport", "expected"),
    [
        # A chain: the head, the worker that has everything, then the needy ones, each fed by the one before.
        ("rsyncd", {"w2": "head", "w1": "w2", "w3": "w1"}),
        # Over ssh the workers hold no key to reach each other: the head feeds all.
        ("ssh", {"w2": "head", "w1": "head", "w3": "head"}),
    ],
)
def test_each_worker_is_fed_by_the_one_before_it_in_the_chain(transport, expected):
    need = {"w1": [{"path": "a"}], "w2": [], "w3": [{"path": "a"}]}
    assert schedule.feeders("head", ["w1", "w2", "w3"], need, transport) == expected


def test_small_files_the_sender_has_go_in_one_batch_and_a_file_it_lacks_waits():
    queue = [
        {"path": "big", "size": 100 * MB},
        {"path": "s1", "size": MB},
        {"path": "s2", "size": MB},
        {"path": "s3", "size": MB},
    ]
    assert [f["path"] for f in schedule.next_batch(queue, {"s1", "s3"})] == ["s1", "s3"]
    assert schedule.next_batch(queue, {"s1", "s3"}) == []  # the rest is not at the sender yet
    assert [f["path"] for f in schedule.next_batch(queue, {"big", "s2"})] == ["big"]  # a large file goes alone
    assert [f["path"] for f in queue] == ["s2"]


def test_a_worker_whose_disk_cannot_hold_what_it_lacks_is_named_before_any_byte_moves():
    need = {"w1": [{"size": 10 * MB}], "w2": [{"size": 10 * MB}], "w3": []}
    targets = {"w1": {"free": 5 * MB, "partial": 2 * MB}, "w2": {"free": 9 * MB, "partial": 2 * MB}, "w3": {"free": 0}}
    assert schedule.short_of_space("/m", need, targets) == ["w1: /m needs 8.4 MB (8388608 B), 5.2 MB (5242880 B) free"]
