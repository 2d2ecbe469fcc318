"""A command line's flags, read one way (spark_llm.group.flags): the pulumi CLI's and the engines'."""

from __future__ import annotations

import pytest

from spark_llm.group.flags import flag_values

PULUMI = ["pulumi", "up", "--target", "a", "-t", "b", "--target=c", "--replace", "d", "--config-file=x=y.yaml"]


@pytest.mark.parametrize(
    ("argv", "flags", "values"),
    [
        (PULUMI, ("--target", "-t"), ["a", "b", "c"]),
        (PULUMI, ("--replace",), ["d"]),
        # Only the first `=` splits: the rest is the value's.
        (PULUMI, ("--config-file",), ["x=y.yaml"]),
        # A flag that ends the command line has no value; a longer flag is not the one named.
        (["pulumi", "up", "--target"], ("--target",), []),
        (["pulumi", "up", "--target-replace", "u"], ("--target",), []),
        (["--dist-timeout", "60", "--dist-timeout=120", "--dist-timeout="], ("--dist-timeout",), ["60", "120", ""]),
    ],
)
def test_every_value_of_the_flags_is_read_in_order_in_both_spellings(argv, flags, values):
    assert flag_values(argv, flags) == values
