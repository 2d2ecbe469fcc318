"""vLLM's `vllm` console script, served by the spark-llm stand-in engine."""
