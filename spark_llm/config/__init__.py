"""The stack's configuration, typed: `spark-llm:*` keys parsed once into pydantic models, one module a section.

- stack: the whole config and `parse`; base: the model base, number types and error messages; paths: path values;
- the sections: nodes (and the rules between them), model, models (several in one stack), image, engine, network
  (with transfer), memory, supervisor, router, monitoring; group: one model's group, its deployment beside the
  stack's sections;
- engine_flags: the engine flags read as each release's parser reads them, against its catalog (engine_catalog, the
  data in engine_catalogs/); flag_values, flag_hints: the refusals' values and wording;
- metric_catalog: each release's Prometheus metrics (engine_catalogs/*.metrics.json), named by what they mean;
- recipe: the known-good configurations; recipe_departures: where a stack departs from its recipe;
- schema_docs: Pulumi.yaml's `config:` declarations and the docs' config table, generated.
What the rest of the program uses is named here.
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
