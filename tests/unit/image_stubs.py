"""Stub nodes for the image steps' scripts (tests/unit/test_image*.py): a head, a worker, the operator's machine.

The stub `docker` answers from files (one set per node), the stub `ssh` runs the fabric command as the worker (and
notes a reverse tunnel), the stub `docker-registry` listens on nothing: a rendered script runs here as it would on
the head, and its messages, the commands it ran and what each node ends up with are checked.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from spark_llm.plan import image

HEAD_ID = "sha256:" + "a" * 64
OTHER_ID = "sha256:" + "b" * 64
MANIFEST_DIGEST = "sha256:" + "c" * 64
ARM = "linux/aarch64"  # what `docker info` says on a DGX Spark
X86 = "linux/x86_64"
# What the stub registry's manifest lists: the config and two layers (compressed sizes).
MANIFEST_SIZES = (1500, 30_000_000, 21_000_000)

DOCKER_STUB = r"""#!/usr/bin/env bash
# docker as seen on node $STUB_NODE (default head): answers from $STUB/<node>.{info,image}
set -euo pipefail
node=${STUB_NODE:-head}
echo "$node docker $*" >>"$STUB/calls.log"
case "$1" in
  info) cat "$STUB/$node.info" ;;
  image)
    fmt=$4
    [ -f "$STUB/$node.image" ] || { echo "Error: No such image: $5" >&2; exit 1; }
    read -r id platform <"$STUB/$node.image"
    case "$fmt" in
      *Size*) echo 123000000 ;;
      '{{.Id}}') echo "$id" ;;
      *) echo "$id ${platform%%/*}/${platform#*/}" ;;
    esac ;;
  pull)
    case "$2" in
      127.0.0.1:*)  # from the head's registry, through the tunnel: what the head pushed
        [ -f "$STUB/registry.pushed" ] || { echo "manifest unknown" >&2; exit 1; }
        cp "$STUB/registry.pushed" "$STUB/$node.image"
        printf '%s\n' "l1: Already exists" "l2: Pulling fs layer" "l2: Pull complete" "Digest: ${2#*@}"
        exit 0 ;;
    esac
    if [ -f "$STUB/$node.pull" ]; then cp "$STUB/$node.pull" "$STUB/$node.image"; echo "pulled $4"; exit 0; fi
    echo "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup failed" >&2
    exit 1 ;;
  push)
    if [ -f "$STUB/push.fails" ]; then echo "received unexpected HTTP status: 500" >&2; exit 1; fi
    if [ -f "$STUB/push.slow" ]; then touch "$STUB/push.started"; /bin/sleep 10; fi
    cp "$STUB/$node.image" "$STUB/registry.pushed"
    hex=${MANIFEST_DIGEST#sha256:}
    blob="$HOME/.cache/spark-llm/registry/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex"
    mkdir -p "$blob"
    printf '{\n   "config": {"size": %s},\n   "layers": [{"size": %s}, {"size": %s}]\n}\n' $MANIFEST_SIZES \
      >"$blob/data"
    printf '%s\n' "The push refers to repository [${2%:*}]" "l1: Layer already exists" "l2: Pushed" \
      "${2##*:}: digest: $MANIFEST_DIGEST size: 741" ;;
  tag | rmi) ;;
  save) printf 'IMAGE-TAR-FROM-%s' "$node" ;;
  load) cat >"$STUB/$node.loaded"; cp "$STUB/${LOAD_FROM:-head}.image" "$STUB/$node.image"; echo "Loaded image" ;;
  *) echo "stub docker: unexpected $*" >&2; exit 2 ;;
esac
"""

# ssh -i KEY -o ... [-R FORWARD] -p PORT user@host COMMAND: runs COMMAND as the worker, as ssh would (one string,
# a shell). With $STUB/forward.fails, the next tunnel fails as OpenSSH's ExitOnForwardFailure does.
SSH_STUB = r"""#!/usr/bin/env bash
set -euo pipefail
while [ $# -gt 0 ]; do
  case "$1" in
    -R)
      if [ -f "$STUB/forward.fails" ]; then
        rm "$STUB/forward.fails"
        echo "Error: remote port forwarding failed for listen port ${2%%:*}" >&2
        exit 255
      fi
      echo "tunnel $2" >>"$STUB/calls.log"
      shift 2 ;;
    -i | -o | -p) shift 2 ;;
    *) break ;;
  esac
done
target=$1  # user@host: the head for the operator's ssh, else a worker over the fabric
shift
case "$target" in *@head) to=head ;; *) to=worker ;; esac
echo "ssh $to: $*" >>"$STUB/calls.log"
STUB_NODE=$to exec bash -c "$*"
"""

# The distribution registry: `serve CONFIG` says it listens on CONFIG's addr (or, with $STUB/registry.busy, that the
# port is taken) and waits; `garbage-collect` is noted.
REGISTRY_STUB = r"""#!/usr/bin/env bash
set -euo pipefail
echo "head docker-registry $*" >>"$STUB/calls.log"
case "$1" in
  serve)
    addr=$(sed -n 's/^  addr: //p' "$2")
    if [ -f "$STUB/registry.busy" ]; then
      rm "$STUB/registry.busy"
      echo "level=fatal msg=\"listen tcp $addr: bind: address already in use\"" >&2
      exit 1
    fi
    echo $$ >>"$STUB/registry.pids"
    echo "level=info msg=\"listening on $addr\"" >&2
    exec /bin/sleep 30 ;;
  garbage-collect) echo "0 blobs eligible for deletion" ;;
esac
"""

Runner = Callable[..., subprocess.CompletedProcess[str]]


def stub_nodes(tmp_path: Path, *, registry: bool) -> Runner:
    """A head and a worker, both arm64, the head with the image, and the operator's machine (its docker:
    `operator`) with the same image; `docker-registry` on the head when `registry`. Returns a script runner
    (`.state`: the stubs' files, `.home`: the head user's home)."""
    bin_dir, state, home = tmp_path / "bin", tmp_path / "state", tmp_path / "home"
    for d in (bin_dir, state, home / ".ssh"):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("fabric key\n")
    stubs = {"docker": DOCKER_STUB, "ssh": SSH_STUB, "sleep": "#!/bin/sh\n"}
    if registry:
        stubs["docker-registry"] = REGISTRY_STUB
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (state / "head.info").write_text(ARM + "\n")
    (state / "worker.info").write_text(ARM + "\n")
    (state / "head.image").write_text(f"{HEAD_ID} linux/arm64\n")
    (state / "operator.image").write_text(f"{HEAD_ID} linux/arm64\n")
    (state / "calls.log").write_text("")

    def env_of(node: str = "head", extra: dict | None = None) -> dict[str, str]:
        """The environment a script runs with: the stubs first in PATH, the head user's home, the stub state."""
        environment = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(home),
            "STUB": str(state),
            "STUB_NODE": node,
            "MANIFEST_DIGEST": MANIFEST_DIGEST,
            "MANIFEST_SIZES": " ".join(map(str, MANIFEST_SIZES)),
            image.HEAD_ID_ENV: HEAD_ID,
            # What EngineImage gives the operator's step: its pinned ssh command and the head's user@host.
            image.SSH_ENV: "\n".join(
                ["ssh", "-i", "/keys/id", "-o", "KnownHostsCommand=/bin/echo head ssh-ed25519 AAAA"]
            ),
            image.SSH_TARGET_ENV: "aurora@head",
            **(extra or {}),
        }
        environment.pop("XDG_CACHE_HOME", None)
        return environment

    def run(script: str, *, node: str = "head", stdin: bytes = b"", env: dict | None = None):
        path = tmp_path / "step.sh"
        path.write_text(script)
        argv = ["bash", str(path)]
        result = subprocess.run(argv, input=stdin, capture_output=True, env=env_of(node, env), timeout=30)
        return subprocess.CompletedProcess(argv, result.returncode, result.stdout.decode(), result.stderr.decode())

    run.state = state  # type: ignore[attr-defined]
    run.home = home  # type: ignore[attr-defined]
    run.env = env_of  # type: ignore[attr-defined]
    return run
