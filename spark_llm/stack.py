"""Reads the `spark-llm:*` keys of the running Pulumi stack into a StackConfig (the program's one config read)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi.runtime

from spark_llm.config import NAMESPACE, ConfigError, StackConfig, parse, raw_from_pulumi


def raw_stack_config() -> dict[str, Any]:
    """Every `spark-llm:` key set for this stack (or defaulted in Pulumi.yaml), decoded."""
    return raw_from_pulumi(pulumi.runtime.config.CONFIG.get())


def secret_keys() -> set[str]:
    """The `spark-llm:` keys Pulumi holds as secrets for this stack."""
    prefix = NAMESPACE + ":"
    return {k[len(prefix) :] for k in pulumi.runtime.config.CONFIG.get() if pulumi.runtime.is_config_secret(k)}


def load() -> StackConfig:
    """Parse and validate; a bad value stops the program before any resource is declared."""
    try:
        return parse(raw_stack_config(), secret_keys())
    except ConfigError as err:
        # RunError prints the message alone (no traceback): it is the user's input, not our bug.
        raise pulumi.RunError(
            f"{err}\nNothing was run on any node. Fix the key in Pulumi.{pulumi.get_stack()}.yaml "
            "(or `pulumi config set --path ...`), then run `pulumi preview` again."
        ) from None
