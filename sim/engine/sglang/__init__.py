"""spark-llm stand-in engine: a simulator of SGLang's multi-node launch, no model, no GPU.

This is NOT SGLang. It only accepts SGLang's launch command line (`python3 -m sglang.launch_server ...`) so the
deployment under test runs unchanged; the behaviour lives in the `standin_engine` package beside it.
"""
