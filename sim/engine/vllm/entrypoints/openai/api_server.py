"""`python3 -m vllm.entrypoints.openai.api_server --model M ...` (the 0.8-era image entry), served by the stand-in."""

import sys

from standin_engine.launch import run

if __name__ == "__main__":
    sys.exit(run("vllm.entrypoints.openai.api_server", sys.argv[1:]))
