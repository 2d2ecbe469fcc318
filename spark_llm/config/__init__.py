"""The stack's configuration, typed: `spark-llm:*` keys parsed once into pydantic models, one module a section.

stack (the whole config and `parse`), nodes, model, image, engine, network (with transfer), and base (the model
base, number types and error messages). What the rest of the program uses is named here.
"""

from spark_llm.config.base import NAMESPACE, ConfigError
from spark_llm.config.network import Network
from spark_llm.config.nodes import Node
from spark_llm.config.stack import SECRET_KEYS, TOP_LEVEL_KEYS, StackConfig, parse, raw_from_pulumi

__all__ = [
    "NAMESPACE",
    "SECRET_KEYS",
    "TOP_LEVEL_KEYS",
    "ConfigError",
    "Network",
    "Node",
    "StackConfig",
    "parse",
    "raw_from_pulumi",
]
