"""spark-llm stand-in engine: a simulator of vLLM's multi-node launch, no model, no GPU.

This is NOT vLLM. It only accepts vLLM's launch command lines (`vllm serve ...`,
`python3 -m vllm.entrypoints.openai.api_server ...`) so the deployment under test runs unchanged; the behaviour
lives in the `standin_engine` package beside it.
"""
