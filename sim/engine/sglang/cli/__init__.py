"""SGLang's `sglang` console script (`sglang serve ...`), served by the spark-llm stand-in engine."""
