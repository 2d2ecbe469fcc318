"""ModelWeights: the model's weights at `model.path` on every node, obtained once and copied over the fabric.

- `{name}-{head}`: on the head, download (kind huggingface) or copy from the head's source dir (kind head); for
  kind local a LocalCommand uploads the operator's directory to the head instead, its manifest digest (computed
  here at program run, cached) in the triggers, so a changed file shows in `pulumi preview`.
- `{name}-{worker}`: run on the head, copies the head's model.path to the worker over the fabric; replaced (so
  re-synced) whenever the head's copy is, its triggers holding the head resource's ID.
- `{name}-{node}-retention`: owns the fate of each copy on destroy. The copies themselves have no delete
  script, so a replace (a changed file, drift) never deletes weights; only this resource's delete does, and
  only with model.purgeOnDestroy.
Each copy has a read-only `check` (its directory's manifest digest): a file changed or deleted on a node since
the last `up` shows as drift in preview and `up` syncs the files that differ.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pulumi

from spark_llm import weights
from spark_llm.plan import DeploymentPlan
from spark_llm.remote import LocalCommand, RemoteCommand, RemoteFile


@dataclass(frozen=True, kw_only=True)
class ModelWeightsArgs:
    plan: DeploymentPlan
    """The deployment plan: model path and source, nodes, fabric key, transfer timeout, HF token."""


def local_manifest_digest(directory: str) -> str:
    """The manifest digest of a directory on this machine (scripts/manifest.py; unchanged files are not re-hashed).

    Runs at every preview and up; the first hash of a large directory shows its progress lines as they come.
    """
    argv = [sys.executable, str(weights.MANIFEST_TOOL_PATH), "scan", directory, "--node", "local"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    messages = []
    for line in proc.stderr:
        messages.append(line.rstrip())
        if " hashing " in line:
            pulumi.log.info(line.rstrip())
    stdout = proc.stdout.read()
    if proc.wait() != 0:
        raise pulumi.RunError(f"could not read the local weights in {directory}:\n" + "\n".join(messages[-5:]))
    if messages and " hashed 0 " not in messages[-1]:  # something was hashed: say what it cost
        pulumi.log.info(messages[-1])
    return weights.parse_digest(stdout)


class ModelWeights(pulumi.ComponentResource):
    """The weights at model.path on the head and every worker, identical by manifest; kept on destroy."""

    manifest_digest: pulumi.Output[str]
    path: pulumi.Output[str]

    def __init__(self, name: str, args: ModelWeightsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:ModelWeights", name, None, opts)
        plan = args.plan
        cfg = plan.config
        source = cfg.model.effective_source
        tool = weights.MANIFEST_TOOL_PATH.read_text()
        head = plan.head
        timeout = float(cfg.timeouts.transfer_seconds)

        retention = {
            node.name: RemoteCommand(
                f"{name}-{node.name}-retention",
                connection=node.ssh.to_props(),
                create=weights.render_retention(cfg, node),
                delete=weights.render_purge(cfg, node, tool),
                label=node.name,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for node in plan.nodes
        }
        # What the head's copy is made from: changing any of it re-obtains and re-syncs every worker.
        identity = [source.kind, source.repo or "", source.revision or "", source.path or "", cfg.model.path]
        head_deps: list[pulumi.Resource] = [retention[head.name]]
        digest: pulumi.Output[str]
        if source.kind == "local":
            assert source.path
            local_dir = str(Path(source.path).expanduser().resolve())
            local_digest = local_manifest_digest(local_dir)
            head_copy: RemoteCommand | LocalCommand = LocalCommand(
                f"{name}-{head.name}",
                connection=head.ssh.to_props(),
                create=weights.render_upload(cfg, head, tool, local_dir),
                check=weights.render_upload_check(cfg, head, tool),
                triggers=[*identity, local_digest],
                label=f"local->{head.name}",
                timeout=timeout,
                opts=pulumi.ResourceOptions(parent=self, depends_on=head_deps),
            )
            # Known at program run: preview shows exactly whether the group restarts.
            digest = pulumi.Output.from_input(local_digest)
        else:
            if source.kind == "huggingface" and cfg.hf_token:
                head_deps.append(
                    RemoteFile(
                        f"{name}-{head.name}-hf-token",
                        connection=head.ssh.to_props(),
                        path=weights.hf_env_path(head),
                        content=pulumi.Output.secret(weights.render_hf_env(cfg.hf_token)),
                        mode="0600",
                        label=head.name,
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                )
            head_copy = RemoteCommand(
                f"{name}-{head.name}",
                connection=head.ssh.to_props(),
                create=weights.render_obtain(cfg, head, tool),
                check=weights.render_head_check(cfg, tool),
                triggers=identity,
                label=head.name,
                timeout=timeout,
                opts=pulumi.ResourceOptions(parent=self, depends_on=head_deps),
            )
            digest = head_copy.stdout.apply(weights.parse_digest)
        for worker in plan.workers:
            RemoteCommand(
                f"{name}-{worker.name}",
                # Runs on the head: the bytes go head -> worker over the fabric, never through this machine.
                connection=head.ssh.to_props(),
                create=weights.render_worker_sync(cfg, head, worker, tool),
                check=weights.render_worker_check(cfg, worker, tool),
                triggers=[head_copy.id, digest, cfg.model.path],
                label=f"{head.name}->{worker.name}",
                timeout=timeout,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[head_copy, retention[worker.name]]),
            )
        self.manifest_digest = digest
        self.path = pulumi.Output.from_input(cfg.model.path)
        self.register_outputs({"manifest_digest": self.manifest_digest, "path": self.path})
