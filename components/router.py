"""Router: the stack's one endpoint on the head (spark-llm:router; spark_llm.plan.router), after the engine group.

- `{name}-image` (a reference pinned by digest): pulled on the head by its docker provider. A local image's ID
  (`sha256:...`, the sim's: `sim up --load-router`) is used as it is, already on the head.
- `{name}-workers`, `{name}-key`: the workers file (each model's name and engine URL) and the API key file (the
  stack's apiKey, 0400) on the head, written by a step whose script carries the content on stdin: the key is on no
  command line, and in state only encrypted (the step is secret). Each is rewritten, as a replacement, when its
  content changes.
- `{name}`: the container, host network, the workers file's directory and the key file mounted read-only,
  `restart: unless-stopped` (docker brings it back after a crash or the head's reboot; with spark-llm:supervisor the
  supervisor also brings it back when it is removed or stopped: spark_llm.group.router). Its labels are the router's
  revision and the key's digest (a secret), so a new image, port or key replaces this container and nothing else: no
  engine resource reads anything of the router. A model added, removed or renamed rewrites the workers file only:
  the running router's launcher reads it again and registers or removes the engine through smg's worker API.
- `{name}-clear`: before each new container, removes a router the supervisor made in its place (it holds the name).
- `{name}-ready`: on the head, the launcher in the container waits (bounded, with progress) until smg lists exactly
  the file's models, each under its own name, healthy; re-run for each new container and each new workers file. The
  stack's endpoint waits for it.
The caller declares it after the engine group (`depends_on` the cluster): it starts once the group served and its
gate passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.commands import NodeCommand, secret_digest
from components.connection import command_connection
from spark_llm.plan import router
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.node_files import file_script, remove_file_command


@dataclass(frozen=True, kw_only=True)
class RouterArgs:
    plan: router.RouterPlan
    """The router: image, port, the workers, its files on the head (spark_llm.plan.router.router_plan)."""
    head: SshHost
    """How this machine reaches the head (its ssh, pinned)."""
    keys: dict[str, str]
    """The ssh private keys' contents by path (spark_llm.remote.key_files.read_keys)."""
    api_key: str
    """spark-llm:apiKey: written to the key file, a secret in state."""
    state_id: pulumi.Input[str] = ""
    """This state's identity (components.state_identity): the container's owner label, and what `-clear` keeps."""
    commands: command.Provider
    """The stack's pulumi-command provider (components.stack)."""
    docker: docker.Provider
    """The head's docker provider, the stack's (components.stack): the router runs beside the engines it fronts."""


class Router(pulumi.ComponentResource):
    """The router's image, files, container and ready step on the head."""

    endpoint: pulumi.Output[str]
    container_id: pulumi.Output[str]

    def __init__(self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:Router", name, None, opts)
        plan = args.plan
        # The stack's providers (Pulumi.yaml disables the default ones): the head's commands and docker engine.
        commands, provider = args.commands, args.docker
        connection = command_connection(args.head, args.keys)
        image: pulumi.Input[str] = plan.image
        if not plan.image.startswith("sha256:"):
            image = docker.RemoteImage(
                f"{name}-image",
                name=plan.image,
                keep_locally=True,
                opts=pulumi.ResourceOptions(parent=self, provider=provider),
            ).image_id
        workers = NodeCommand(
            f"{name}-workers",
            connection=connection,
            script=file_script(plan.workers_path, plan.workers_file, "0644"),
            delete=remove_file_command(plan.workers_path),
            # The old file's delete runs before the new one is written (same path).
            opts=pulumi.ResourceOptions(parent=self, provider=commands, delete_before_replace=True),
        )
        key_text = pulumi.Output.secret(args.api_key + "\n")
        key = NodeCommand(
            f"{name}-key",
            connection=connection,
            script=key_text.apply(lambda text: file_script(plan.key_path, text, "0600", read_only=True)),
            delete=remove_file_command(plan.key_path),
            secret=True,
            opts=pulumi.ResourceOptions(parent=self, provider=commands, delete_before_replace=True),
        )
        key_digest = secret_digest(key_text)
        # A router the supervisor made again (it was removed by hand) holds the name: it goes before this `up` makes
        # the router, each time the container is replaced (the same triggers as its labels).
        clear = NodeCommand(
            f"{name}-clear",
            connection=connection,
            script=pulumi.Output.from_input(args.state_id).apply(plan.clear_command),
            triggers=[plan.revision, key_digest, args.state_id],
            opts=pulumi.ResourceOptions(parent=self, provider=commands),
        )
        container = docker.Container(
            name,
            name=plan.container,
            image=image,
            command=list(plan.command),
            envs=list(plan.env),
            # The engines' API is on the head's fabric address; the router listens on every address of the head.
            network_mode="host",
            volumes=[
                docker.ContainerVolumeArgs(host_path=source, container_path=target, read_only=True)
                for source, target in plan.mounts
            ],
            # What replaces it (a new image, port or key), and only it: the engines read none of it. The workers are
            # not here: the launcher takes a new list on live (spark_llm.plan.router.CONTAINER_WORKERS_DIR says why
            # the directory is mounted, not the file), so adding a model never drops the others' requests.
            labels=[
                docker.ContainerLabelArgs(label=router.LABEL_REVISION, value=plan.revision),
                docker.ContainerLabelArgs(label=router.LABEL_API_KEY, value=key_digest),
                docker.ContainerLabelArgs(label=router.LABEL_OWNER, value=args.state_id),
            ],
            # Its log bounded: the newest 60 MB at most (a line a health check a second otherwise fills the disk).
            log_driver=router.LOG_DRIVER,
            log_opts=router.LOG_OPTS,
            # Back after a crash or the head's reboot; a `docker stop` keeps it stopped (without a supervisor).
            restart="unless-stopped",
            must_run=True,
            destroy_grace_seconds=10,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                depends_on=[workers, key, clear],
                # The new container has the old one's name.
                delete_before_replace=True,
            ),
        )
        ready = NodeCommand(
            f"{name}-ready",
            connection=connection,
            script=plan.ready_command(),
            # Each new container registers its engines anew, and the running one follows a new workers file: the
            # check runs again for either, after the file is written.
            triggers=[container.id, plan.workers_digest],
            opts=pulumi.ResourceOptions(parent=self, provider=commands, depends_on=[container, workers]),
        )
        self.container_id = container.id
        self.endpoint = ready.stdout.apply(lambda _: plan.endpoint)
        self.register_outputs({"endpoint": self.endpoint, "container_id": self.container_id})
