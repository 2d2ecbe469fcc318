"""The `spark-llm` command's entry point (pyproject's [project.scripts]): the commands import first, which takes a
second or so (pydantic, the engines' flag catalogs), and a Ctrl-C in that second printed a 25-line traceback (issue
41, 7). Here it ends with one line and the shell's exit code for SIGINT, as a Ctrl-C during a command does
(spark_llm.ops.cli.main). Nothing is imported before the `try` but the standard library."""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130


def main() -> int:
    # A shell starts a background command with SIGINT ignored; Ctrl-C always means stop here (as cli.main says).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        from spark_llm.ops import cli
    except KeyboardInterrupt:
        sys.stderr.write("spark-llm: interrupted (before it started: nothing was done)\n")
        return INTERRUPTED
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
