"""vLLM's OpenAI API server module, served by the spark-llm stand-in engine."""
