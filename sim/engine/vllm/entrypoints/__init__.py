"""vLLM's entry points, served by the spark-llm stand-in engine."""
