"""spark-llm stand-in engine: simulates a multi-node LLM engine launch over real TCP, with no model and no GPU.

The real engines' entry points (`python3 -m sglang.launch_server ...`) live in sibling packages that call
`standin_engine.launch.run`; see sim/engine/README.md for the command-line contract and the failure knobs.
"""

STANDIN_FINGERPRINT = "spark-llm-standin"
