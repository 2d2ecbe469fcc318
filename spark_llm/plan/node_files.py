"""Pure: small files spark-llm writes on a node (launch script, env files, key files), and how their drift is seen.

A file step writes its file atomically and records a drift token (spark_llm.plan.drift) whose value is the content's
sha256. The read-only probe (spark_llm.remote.observe) prints each file's live sha256, so a file that was removed or
edited on the node since (by hand, or by another stack's `pulumi destroy` on the same nodes) is written again by
the next `pulumi up`, before any container mounts it: docker would otherwise create a directory in its place.
"""

from __future__ import annotations

import base64
import hashlib
import shlex
from dataclasses import dataclass

from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import record_token_script
from spark_llm.plan.observation import TOKENS_DIR

# Probe section prefix: `file:PATH<TAB>SHA256` (or `directory` when an empty directory stands at PATH, as docker
# leaves one when a container starts before its bind-mounted file exists; `directory-not-empty` for one that holds
# anything, which spark-llm never removes).
PROBE_PREFIX = "file:"
DIRECTORY = "directory"
NONEMPTY_DIRECTORY = "directory-not-empty"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def drift_step(path: str) -> str:
    """The token name (a file name under the node's state dir) of the step that writes `path`."""
    return "file-" + path.strip("/").replace("/", "_")


def heredoc_delimiter(content: str, base: str = "SPARK_LLM_EOF") -> str:
    """A heredoc delimiter that is no line of `content` (bash ends the heredoc at the first line equal to it)."""
    lines = set(content.split("\n"))
    delimiter = base
    while delimiter in lines:
        delimiter += "_"
    return delimiter


def _write_payload(content: str) -> str:
    """Bash that writes `content` to "$tmp" byte for byte.

    Text that ends with a newline travels as itself, in a heredoc with a quoted delimiter (nothing in it is
    expanded): `pulumi preview --diff` then shows an edited line of the launch script as that line (Pulumi diffs a
    multi-line input line by line). Anything else (a NUL, no final newline, which a heredoc would add) as base64.
    A secret file's script is a secret input either way: encrypted in state, shown as [secret].
    """
    if content.endswith("\n") and "\0" not in content:
        delimiter = heredoc_delimiter(content)
        return f"cat > \"$tmp\" <<'{delimiter}'\n{content}{delimiter}\n"
    payload = base64.b64encode(content.encode()).decode()
    delimiter = heredoc_delimiter(payload)
    return f"base64 -d > \"$tmp\" <<'{delimiter}'\n{payload}\n{delimiter}\n"


def file_script(path: str, content: str, mode: str, record: str = "", read_only: bool = False) -> str:
    """Bash that writes `content` to `path` atomically (temp file, mode, rename), creating the directory, and
    checks what landed: the content travels inside the script (as text, see `_write_payload`), so it is on no
    command line.

    An empty directory at `path` is what docker leaves when it starts a container whose bind-mounted file was
    missing: it is removed. `record`: bash run once the file is in place (the drift token). `read_only`: the
    owner's write bit is taken off once the file is in place (a user who is not root cannot write a 0400 temp
    file; the next write renames a new file over it, which needs only the directory's).
    """
    quoted = shlex.quote(path)
    digest = sha256_text(content)
    payload = _write_payload(content)
    not_empty = (
        f"{path} is a directory that is not empty; spark-llm writes a file there. Move it away, then run"
        " `pulumi up` again."
    )
    return (
        # (With our own temp files in it, from an older spark-llm whose `mv` moved them into that directory.)
        f"if [ -d {quoted} ]; then\n"
        f"  rm -f {quoted}/.spark-llm.*\n"
        f"  rmdir {quoted} 2>/dev/null || {{ echo {shlex.quote(not_empty)} >&2; exit 1; }}\n"
        "fi\n"
        f'dir=$(dirname {quoted}); mkdir -p "$dir"\n'
        'tmp=$(mktemp "$dir/.spark-llm.XXXXXX")\n'
        "trap 'rm -f \"$tmp\"' EXIT\n"
        f'chmod {mode} "$tmp"\n'
        f"{payload}"
        f'mv -fT "$tmp" {quoted}\ntrap - EXIT\n'
        f"got=$(sha256sum {quoted} | cut -d' ' -f1)\n"
        f'[ "$got" = {digest} ] || {{ echo "{path}: wrote sha256 $got, expected'
        f' {digest}; is the disk full?" >&2; exit 1; }}\n'
        + record
        + (f"chmod u-w {quoted}\n" if read_only else "")
        + f'echo "{path}: {len(content.encode())} bytes, mode {f"0{int(mode, 8) & ~0o200:o}" if read_only else mode}"\n'
    )


def remove_file_command(path: str, remote_dir: str | None = None) -> str:
    """The delete of a file step: short, so the file goes with its resource (replace, destroy), and with it the
    token its step recorded under `remote_dir` (when given).

    A directory at `path` (docker made it; see `file_script`) never fails the delete: an empty one goes, one that
    holds anything stays and is named on stderr (`pulumi destroy` must finish whatever stands there).
    """
    quoted = shlex.quote(path)
    token = [shlex.quote(f"{remote_dir}/{TOKENS_DIR}/{drift_step(path)}")] if remote_dir else []
    kept = shlex.quote(f"spark-llm: left {path} in place: it is a directory that is not empty")
    return f"if [ -d {quoted} ]; then rmdir {quoted} 2>/dev/null || echo {kept} >&2; else rm -f {quoted}; fi" + (
        f"; rm -f {' '.join(token)}" if token else ""
    )


def probe(paths: list[str]) -> str:
    """Read-only probe sections: `file:PATH<TAB>SHA256` for each file present (`directory`, `directory-not-empty`
    for a directory)."""
    out = ""
    for path in paths:
        quoted = shlex.quote(path)
        section = shlex.quote(PROBE_PREFIX + path)
        out += (
            # (Our own temp files, from an older spark-llm's `mv` into such a directory, do not count: file_script
            # removes them.)
            f'if [ -d {quoted} ] && [ -n "$(ls -A {quoted} 2>/dev/null | grep -v "^\\.spark-llm\\.")" ]; then'
            f" printf '%s\\t%s\\n' {section} {NONEMPTY_DIRECTORY}\n"
            f"elif [ -d {quoted} ]; then printf '%s\\t%s\\n' {section} {DIRECTORY}\n"
            f"elif [ -f {quoted} ]; then printf '%s\\t%s\\n' {shlex.quote(PROBE_PREFIX + path)}"
            f' "$(sha256sum < {quoted} | cut -d" " -f1)"; fi\n'
        )
    return out


@dataclass(frozen=True)
class NodeFile:
    """One file components.launch_scripts writes on a node, and how."""

    name: str
    """Its step's name after the node's (`{component}-{node}-{name}`)."""
    path: str
    mode: str
    secret: bool
    """Its content is a secret: encrypted in state, 0600 on the node."""
    content: str | None
    """None: the stack's Ray token, made at the first `pulumi up` (components.launch_scripts), not by the plan."""
    delete: str
    """Its step's delete (`remove_file_command`): the file and its drift token go with the step."""


def launch_files(plan: DeploymentPlan, node: NodePlan) -> tuple[NodeFile, ...]:
    """The files components.launch_scripts writes on `node`: launch script, env file, the head's API key and, with
    Ray, the group's Ray token."""
    files: list[tuple[str, str, str, bool, str | None]] = [
        (node.script_path, "script", "0755", False, plan.launch_script),
        # The env file may carry secrets: a secret in state, and 0600 on the node.
        (node.env_path, "env", "0600", True, plan.env_file),
    ]
    if plan.api_config and plan.api_config_path and node.role == "head":
        # The API key, for the head's engine only (the rank that serves the API), handed to the engine as
        # `--config` so it is on no command line.
        files.append((plan.api_config_path, "api-key", "0600", True, plan.api_config))
    if plan.ray_auth:
        # Every Ray node needs it: the head's Ray checks it, the workers' Ray and vLLM's driver send it.
        files.append((node.ray_token_path, "ray-token", "0600", True, None))
    return tuple(
        NodeFile(name, path, mode, secret, content, remove_file_command(path, node.remote_dir))
        for path, name, mode, secret, content in files
    )


def file_step(node: NodePlan, file: NodeFile, content: str, token: str) -> str:
    """The step that writes `file` with `content` on `node` and records its drift token (`token`) with the
    content's sha256 (`content`: the file's, or the Ray token once it is made)."""
    record = record_token_script(node.remote_dir, drift_step(file.path), token, sha256_text(content))
    return file_script(file.path, content, file.mode, record)


def live_value(facts: dict[str, str], path: str) -> str | None:
    """The sha256 of the file at `path` as the probe saw it (`directory`, or None when absent)."""
    return facts.get(PROBE_PREFIX + path)


def directory_warning(node: str, path: str, live: str) -> str:
    """What preview says of a directory standing where spark-llm writes a file on `node`."""
    if live == NONEMPTY_DIRECTORY:
        return (
            f"{path} on {node} is a directory holding files, where spark-llm writes a file: `pulumi up` fails"
            " there until it is moved away (spark-llm never deletes what it did not write); move it, then run"
            " `pulumi up`."
        )
    return (
        f"{path} on {node} is an empty directory, where spark-llm writes a file (docker makes one when a"
        " container starts before its bind-mounted file exists): `pulumi up` removes it and writes the file."
    )
