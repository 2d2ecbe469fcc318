"""Docker's times, read one way (spark_llm.group.times): inspect's StartedAt and `docker logs --timestamps`."""

from __future__ import annotations

import pytest

from spark_llm.group.times import docker_time, docker_time_ns, iso, later, split_stamp


@pytest.mark.parametrize(
    ("earlier", "later_one"),
    [
        # Docker trims the fraction's trailing zeros, so the strings do not sort as the times do.
        ("2026-12-03T10:00:05Z", "2026-12-03T10:00:05.5Z"),
        ("2026-12-03T10:00:05.05Z", "2026-12-03T10:00:05.1Z"),
        ("2026-12-03T10:00:05.123456789Z", "2026-12-03T10:00:05.12345679Z"),
        ("2026-12-03T11:00:00+01:00", "2026-12-03T10:00:00.000000001Z"),
    ],
)
def test_times_compare_as_times_not_as_strings(earlier, later_one):
    assert later(later_one, earlier) and not later(earlier, later_one)


def test_nanoseconds_survive_and_dockers_zero_time_is_no_time():
    assert docker_time_ns("2026-12-03T10:00:05.000000007Z") % 1_000_000_000 == 7
    assert docker_time("2026-12-03T10:00:05.5Z") == pytest.approx(docker_time("2026-12-03T10:00:05Z") + 0.5)
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("") is None and docker_time("yesterday") is None
    assert not later("0001-01-01T00:00:00Z", "2026-12-03T10:00:05Z")


def test_a_log_lines_stamp_is_split_from_its_text():
    ns, text = split_stamp("2026-12-03T10:00:05.25Z INFO: Started server process")
    assert ns == docker_time_ns("2026-12-03T10:00:05.25Z") and text == "INFO: Started server process"
    assert split_stamp("no stamp here") == (None, "no stamp here")


def test_records_keep_whole_seconds_in_utc():
    assert iso(docker_time("2026-12-03T11:00:05.9+01:00") or 0) == "2026-12-03T10:00:05Z"
