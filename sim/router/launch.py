"""Start the router (smg, the Shepherd Model Gateway) with its API key read from a file, never from the command line.

smg takes its key only as `--api-key KEY`, and a command line is readable by every user of the host (`ps`, /proc)
and recorded by `docker inspect`. This launcher takes smg's own flags, refuses `--api-key`, reads the key from the
file named by SPARK_LLM_ROUTER_API_KEY_FILE (a mounted file, mode 0400 on the host) and hands it to smg's own parser
result, so the key reaches the gateway's memory only.

Usage (in the router image): spark-llm-router --worker-urls http://ENGINE:PORT ... --host 0.0.0.0 --port 4000
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

KEY_FILE_VARIABLE = "SPARK_LLM_ROUTER_API_KEY_FILE"


def fail(message: str) -> None:
    print(f"spark-llm-router: error: {message}", file=sys.stderr)
    sys.exit(2)


def api_key() -> str:
    """The key in the file KEY_FILE_VARIABLE names (surrounding whitespace dropped); exits 2 saying what is wrong."""
    path = os.environ.get(KEY_FILE_VARIABLE, "")
    if not path:
        fail(f"{KEY_FILE_VARIABLE} is not set: name a file holding the router's API key, e.g. /run/secrets/api-key")
    try:
        key = Path(path).read_text().strip()
    except OSError as error:
        fail(f"{KEY_FILE_VARIABLE}={path}: cannot read the API key ({error.strerror})")
    if not key:
        fail(f"{KEY_FILE_VARIABLE}={path}: the file is empty; write the router's API key into it")
    return key


def main(argv: list[str]) -> None:
    if any(arg == "--api-key" or arg.startswith("--api-key=") for arg in argv):
        fail(f"--api-key would put the key on the command line; put it in a file and set {KEY_FILE_VARIABLE}")
    key = api_key()
    # Imported after the checks: smg's import loads its 100 MB Rust extension.
    from smg.launch_router import launch_router, parse_router_args

    router_args = parse_router_args(argv)
    # smg checks this key on the serving path (a wrong or missing Bearer token answers 401) and sends it on to the
    # engines, which ignore it when they were started without a key of their own.
    router_args.api_key = key
    launch_router(router_args)


if __name__ == "__main__":
    main(sys.argv[1:])
