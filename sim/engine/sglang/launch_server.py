"""`python3 -m sglang.launch_server`: SGLang's entry point, served by the spark-llm stand-in engine."""

import sys

from standin_engine.launch import run

if __name__ == "__main__":
    sys.exit(run("sglang.launch_server", sys.argv[1:]))
