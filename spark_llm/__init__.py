"""spark-llm: deploy one LLM across several GPU nodes with Pulumi (config -> plan -> components and ops)."""
