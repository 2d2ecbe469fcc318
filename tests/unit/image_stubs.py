"""Stub nodes for the image steps' scripts (tests/unit/test_image*.py): a head, a worker, the operator's machine.

The stub `docker` answers from files (one set per node; the head's `docker save` writes a real archive of two
layers), the stub `ssh` runs the fabric command as the worker: a rendered script runs here as it would on the head,
and its messages, the commands it ran and what each node ends up with are checked.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from spark_llm.plan.image import steps as image

HEAD_ID = "sha256:" + "a" * 64
OTHER_ID = "sha256:" + "b" * 64
ARM = "linux/aarch64"  # what `docker info` says on a DGX Spark
X86 = "linux/x86_64"

# What the head's image is made of: two layers (their tars; a layer's diff ID is its tar's sha256), bottom first.
LAYER_TARS = (b"base layer " * 3000, b"new layer " * 2000)
LAYERS = tuple("sha256:" + hashlib.sha256(tar).hexdigest() for tar in LAYER_TARS)

DOCKER_STUB = r"""#!/usr/bin/env bash
# docker as seen on node $STUB_NODE (default head): answers from $STUB/<node>.{info,image,layers,others}
# (<node>.image: "ID OS/ARCH" of the configured reference; .layers: its diff IDs; .others: "ID DIFF_ID..." lines,
# images under no tag).
set -euo pipefail
node=${STUB_NODE:-head}
echo "$node docker $*" >>"$STUB/calls.log"
# "ID DIFF_ID..." of the image REF names on this node.
image_line() {
  if [ -f "$STUB/$node.others" ] && grep -q "^$1 " "$STUB/$node.others"; then
    grep "^$1 " "$STUB/$node.others"
  elif [ -f "$STUB/$node.image" ]; then
    echo "$(cut -d' ' -f1 "$STUB/$node.image") $(cat "$STUB/$node.layers" 2>/dev/null || true)"
  else
    echo "Error: No such image: $1" >&2
    return 1
  fi
}
case "$1" in
  info) cat "$STUB/$node.info" ;;
  image)
    case "$2" in
      ls)
        [ ! -f "$STUB/$node.image" ] || cut -d' ' -f1 "$STUB/$node.image"
        [ ! -f "$STUB/$node.others" ] || cut -d' ' -f1 "$STUB/$node.others"
        exit 0 ;;
    esac
    fmt=$4
    shift 4
    [ -f "$STUB/$node.image" ] || [ -f "$STUB/$node.others" ] || { echo "Error: No such image: $1" >&2; exit 1; }
    for ref in "$@"; do
      line=$(image_line "$ref")
      id=${line%% *} platform=linux/arm64
      [ ! -f "$STUB/$node.image" ] || read -r id platform <"$STUB/$node.image"
      case "$fmt" in
        *Id*RootFS*) echo "$line " ;;
        *RootFS*) echo "${line#* } " ;;
        *Size*) echo 123000000 ;;
        '{{.Id}}') echo "$id" ;;
        *) echo "$id ${platform%%/*}/${platform#*/}" ;;
      esac
    done ;;
  pull)
    if [ -f "$STUB/$node.pull" ]; then cp "$STUB/$node.pull" "$STUB/$node.image"; echo "pulled $4"; exit 0; fi
    echo "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup failed" >&2
    exit 1 ;;
  tag)
    if [ -f "$STUB/$node.others" ] && grep -q "^$2 " "$STUB/$node.others"; then
      echo "$2 linux/arm64" >"$STUB/$node.image"
    fi ;;
  rmi) ;;
  save)
    if [ -f "$STUB/$node.save.tar" ]; then cat "$STUB/$node.save.tar"; else printf 'IMAGE-TAR-FROM-%s' "$node"; fi ;;
  load)
    cat >"$STUB/$node.loaded"
    from=${LOAD_FROM:-head}
    cp "$STUB/$from.image" "$STUB/$node.image"
    [ ! -f "$STUB/$from.layers" ] || cp "$STUB/$from.layers" "$STUB/$node.layers"
    echo "Loaded image" ;;
  *) echo "stub docker: unexpected $*" >&2; exit 2 ;;
esac
"""

# ssh -i KEY -o ... -p PORT user@host COMMAND: runs COMMAND as the worker, as ssh would (one string, a shell).
SSH_STUB = r"""#!/usr/bin/env bash
set -euo pipefail
while [ $# -gt 0 ]; do
  case "$1" in
    -i | -o | -p) shift 2 ;;
    -c) echo "ssh cipher $2" >>"$STUB/calls.log"; shift 2 ;;
    -O) echo "ssh -O $2" >>"$STUB/calls.log"; exit 0 ;;  # the connection master: nothing to stop here
    *) break ;;
  esac
done
target=$1  # user@host: the head for the operator's ssh, else a worker over the fabric
shift
case "$target" in *@head) to=head ;; *) to=worker ;; esac
echo "ssh $to: $*" >>"$STUB/calls.log"
STUB_NODE=$to exec bash -c "$*"
"""


def save_tar() -> bytes:
    """What `docker save` of the head's image writes: a directory per layer (its layer.tar), the config, the
    manifest, in the name order docker 20.10 writes them (here: the top layer's directory first)."""
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": list(LAYERS)}}).encode()
    dirs = ("f1" + "0" * 62, "e2" + "0" * 62)  # bottom layer's, top layer's
    manifest = json.dumps([{"Config": HEAD_ID[7:] + ".json", "Layers": [f"{d}/layer.tar" for d in dirs]}]).encode()
    members = sorted(
        [(f"{d}/layer.tar", tar) for d, tar in zip(dirs, LAYER_TARS, strict=True)]
        + [(f"{d}/VERSION", b"1.0") for d in dirs]
        + [(HEAD_ID[7:] + ".json", config), ("manifest.json", manifest)]
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


Runner = Callable[..., subprocess.CompletedProcess[str]]


def stub_nodes(tmp_path: Path) -> Runner:
    """A head and a worker, both arm64, the head with the image (two layers, `docker save` a real archive), and
    the operator's machine (its docker: `operator`) with the same image. Returns a script runner (`.state`: the
    stubs' files, `.home`: the head user's home)."""
    bin_dir, state, home = tmp_path / "bin", tmp_path / "state", tmp_path / "home"
    for d in (bin_dir, state, home / ".ssh"):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("fabric key\n")
    stubs = {"docker": DOCKER_STUB, "ssh": SSH_STUB}
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (state / "head.info").write_text(ARM + "\n")
    (state / "worker.info").write_text(ARM + "\n")
    (state / "head.image").write_text(f"{HEAD_ID} linux/arm64\n")
    (state / "head.layers").write_text(" ".join(LAYERS) + "\n")
    (state / "head.save.tar").write_bytes(save_tar())
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
