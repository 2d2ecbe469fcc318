"""`sglang serve ...` (console script `sglang` = sglang.cli.main:main), served by the spark-llm stand-in engine."""

import sys

from standin_engine.launch import run


def main() -> int:
    return run("sglang", sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
