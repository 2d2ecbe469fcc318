"""`vllm serve ...` (console script `vllm` = vllm.entrypoints.cli.main:main), served by the spark-llm stand-in."""

import sys

from standin_engine.launch import run


def main() -> int:
    return run("vllm", sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
