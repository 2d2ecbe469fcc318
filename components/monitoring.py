"""Monitoring: Prometheus on the head and a node exporter on every node (spark-llm:monitoring;
spark_llm.plan.monitoring.prometheus).

- `{name}-image`, `{name}-exporter-image-<node>` (references pinned by digest): pulled by each node's docker
  provider; a local image's ID (the sim's: `sim up --load-monitoring`) is used as it is.
- `{name}-config`: prometheus.yml and the rules file on the head, written by a step that sends the running
  Prometheus a SIGHUP and waits for its log to say it loaded them: a model added, moved or renamed changes this
  step only, never the container (its data, its scrapes, every engine untouched).
- `{name}-web`: the web config with the bcrypt hash of spark-llm:monitoringPassword (a secret step: the password
  is on its stdin, encrypted in state); Prometheus reads it at each request, so a new password restarts nothing.
- `{name}-data`: Prometheus's data, a docker volume on the head kept on delete: the history outlives a new
  container and `pulumi destroy` (docs/monitoring.md says how to remove it).
- `{name}`: the container, host network, config and web directories read-only, labelled with its revision (image,
  port, retention): a change there replaces it, and nothing else does.
- `{name}-ready`: after each new container, a bounded wait for Prometheus to say it serves, or its last lines.
- `{name}-alertmanager-config`, `{name}-alertmanager`: with spark-llm:monitoringWebhook, Alertmanager on the head's
  loopback posting the alerts there (its config a secret step: the URL carries its token);
- `{name}-dir-<node>`: each worker's textfile directory (the head's is the config step's);
- `{name}-exporter-<node>`: one exporter per node, the host's network and processes, / read-only; `{name}-gpu-<node>`:
  one GPU writer per node (spark_llm.plan.monitoring.node_agents), its readings in the exporter's textfile dir.
Nothing of an engine group reads any of it: the caller declares it beside the groups, not before or after them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.commands import NodeCommand
from components.connection import command_connection
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.monitoring import alertmanager, grafana, node_agents
from spark_llm.plan.monitoring import prometheus as monitoring


@dataclass(frozen=True, kw_only=True)
class MonitoringArgs:
    plan: monitoring.MonitoringPlan
    """Prometheus, its files and the exporters (spark_llm.plan.monitoring.prometheus.monitoring_plan)."""
    hosts: dict[str, SshHost]
    """How this machine reaches each node (its ssh, pinned), the head first."""
    keys: dict[str, str]
    """The ssh private keys' contents by path (spark_llm.remote.key_files.read_keys)."""
    password: str
    """spark-llm:monitoringPassword: hashed on the head, a secret in state."""
    webhook: str = ""
    """spark-llm:monitoringWebhook: Alertmanager's receiver, a secret in state ("" without Alertmanager)."""
    commands: command.Provider
    """The stack's pulumi-command provider (components.stack)."""
    docker: dict[str, docker.Provider]
    """Each node's docker provider, the stack's (components.stack)."""


def _image(name: str, ref: str, provider: docker.Provider, parent: pulumi.Resource) -> pulumi.Input[str]:
    if ref.startswith("sha256:"):
        return ref
    pulled = docker.RemoteImage(
        name, name=ref, keep_locally=True, opts=pulumi.ResourceOptions(parent=parent, provider=provider)
    )
    return pulled.image_id


class Monitoring(pulumi.ComponentResource):
    """Prometheus's files, data, container and ready step on the head; an exporter on every node."""

    endpoint: pulumi.Output[str]
    container_id: pulumi.Output[str]

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:Monitoring", name, None, opts)
        watched = args.plan
        head = next(iter(args.hosts))
        head_docker = args.docker[head]
        connection = command_connection(args.hosts[head], args.keys)
        under = pulumi.ResourceOptions(parent=self, provider=args.commands, delete_before_replace=True)
        config = NodeCommand(
            f"{name}-config",
            connection=connection,
            script=watched.config_script(),
            # Files only: the directories stay, since the running container's mounts hold them (a directory made
            # anew would be another inode, which the container would never see).
            delete=f"rm -f {watched.config_dir}/{monitoring.CONFIG_NAME} {watched.config_dir}/{monitoring.RULES_FILE}",
            opts=under,
        )
        password = pulumi.Output.secret(args.password)
        web = NodeCommand(
            f"{name}-web",
            connection=connection,
            script=password.apply(watched.web_script),
            delete=f"rm -f {watched.web_dir}/{monitoring.WEB_NAME}",
            secret=True,
            opts=under,
        )
        data = docker.Volume(
            f"{name}-data",
            name=monitoring.DATA_VOLUME,
            # The history is the operator's: kept when the stack goes (docker volume rm removes it by hand).
            opts=pulumi.ResourceOptions(parent=self, provider=head_docker, retain_on_delete=True),
        )
        container = docker.Container(
            name,
            name=watched.container,
            image=_image(f"{name}-image", watched.image, head_docker, self),
            entrypoints=[monitoring.PROMETHEUS_BIN],
            command=list(watched.command),
            user=monitoring.USER,
            # It scrapes the engines on the head's fabric address and loopback, and the workers over the fabric.
            network_mode="host",
            volumes=[
                *(
                    docker.ContainerVolumeArgs(host_path=source, container_path=target, read_only=True)
                    for source, target in watched.mounts
                ),
                docker.ContainerVolumeArgs(volume_name=data.name, container_path=monitoring.CONTAINER_DATA),
            ],
            # What replaces it: its image, port, retention or mounts; never the scrape config (reloaded).
            labels=[docker.ContainerLabelArgs(label=node_agents.LABEL_REVISION, value=watched.revision)],
            log_driver="json-file",
            log_opts=monitoring.LOG_OPTS,
            restart="unless-stopped",
            must_run=True,
            # Prometheus writes its head block out on SIGTERM: time to do so before docker kills it.
            destroy_grace_seconds=30,
            opts=pulumi.ResourceOptions(
                parent=self, provider=head_docker, depends_on=[config, web], delete_before_replace=True
            ),
        )
        NodeCommand(
            f"{name}-ready",
            connection=connection,
            script=watched.ready_script(),
            triggers=[container.id],
            opts=pulumi.ResourceOptions(parent=self, provider=args.commands, depends_on=[container]),
        )
        if watched.alertmanager is not None:
            self._alertmanager(name, watched.alertmanager, args, connection, head_docker)
        if watched.grafana is not None:
            self._grafana(name, watched.grafana, args, connection, head_docker, container)
        # Each worker's textfile directory (the head's config step makes the head's): docker's --mount makes none.
        made = {head: config}
        for writer in watched.gpu_writers:
            if writer.node != head:
                made[writer.node] = NodeCommand(
                    f"{name}-dir-{writer.node}",
                    connection=command_connection(args.hosts[writer.node], args.keys),
                    script=f"mkdir -p {shlex.quote(writer.textfile_dir)}\n",
                    delete=f"rm -rf {shlex.quote(writer.textfile_dir)}",
                    opts=pulumi.ResourceOptions(parent=self, provider=args.commands),
                )
        for exporter in watched.exporters:
            _node_agent(
                f"{name}-exporter-{exporter.node}",
                node_agents.EXPORTER_CONTAINER,
                _image(f"{name}-exporter-image-{exporter.node}", exporter.image, args.docker[exporter.node], self),
                [node_agents.EXPORTER_BIN, *exporter.command],
                # The node's own network and processes: its memory, its disks, its hwmon, as the node sees them.
                # rslave: a file system the node mounts later (the weights' disk) shows in the exporter too.
                [(source, target, True, "rslave") for source, target in exporter.mounts],
                exporter.revision,
                pulumi.ResourceOptions(
                    parent=self, provider=args.docker[exporter.node], depends_on=[made[exporter.node]]
                ),
                user=monitoring.USER,
                network_mode="host",
                pid_mode="host",
            )
        for writer in watched.gpu_writers:
            _node_agent(
                f"{name}-gpu-{writer.node}",
                node_agents.GPU_CONTAINER,
                _image(f"{name}-gpu-image-{writer.node}", writer.image, args.docker[writer.node], self),
                list(writer.entrypoint),
                [(source, target, read_only, None) for source, target, read_only in writer.mounts],
                writer.revision,
                pulumi.ResourceOptions(parent=self, provider=args.docker[writer.node], depends_on=[made[writer.node]]),
                # root: nvidia-smi runs chrooted into the node's root (its driver and libraries).
                user="0:0",
                network_mode="none",
                gpus="all" if writer.gpus else None,
            )
        self.container_id = container.id
        self.endpoint = pulumi.Output.from_input(watched.endpoint)
        self.register_outputs({"endpoint": self.endpoint, "container_id": self.container_id})

    def _alertmanager(
        self,
        name: str,
        manager: alertmanager.AlertmanagerPlan,
        args: MonitoringArgs,
        connection: command.remote.ConnectionArgs,
        provider: docker.Provider,
    ) -> None:
        """Alertmanager on the head: its config (the webhook, a secret step) and its container, on loopback."""
        webhook = pulumi.Output.secret(args.webhook)
        config = NodeCommand(
            f"{name}-alertmanager-config",
            connection=connection,
            script=webhook.apply(manager.config_script),
            delete=f"rm -f {shlex.quote(manager.directory)}/{alertmanager.CONFIG_NAME}",
            secret=True,
            opts=pulumi.ResourceOptions(parent=self, provider=args.commands, delete_before_replace=True),
        )
        docker.Container(
            f"{name}-alertmanager",
            name=alertmanager.CONTAINER,
            image=_image(f"{name}-alertmanager-image", manager.image, provider, self),
            entrypoints=list(manager.command),
            # root in its container: its config (the webhook's URL) is 0600 on the head.
            user="0:0",
            network_mode="host",
            volumes=[
                docker.ContainerVolumeArgs(
                    host_path=manager.directory, container_path=alertmanager.CONTAINER_CONFIG_DIR, read_only=True
                )
            ],
            log_driver="json-file",
            log_opts=monitoring.LOG_OPTS,
            restart="unless-stopped",
            must_run=True,
            destroy_grace_seconds=5,
            opts=pulumi.ResourceOptions(
                parent=self, provider=provider, depends_on=[config], delete_before_replace=True
            ),
        )

    def _grafana(
        self,
        name: str,
        board: grafana.GrafanaPlan,
        args: MonitoringArgs,
        connection: command.remote.ConnectionArgs,
        provider: docker.Provider,
        prometheus: docker.Container,
    ) -> None:
        """Grafana on the head: its files (a step), its password file (a secret step), its data volume and its
        container, after Prometheus (its datasource)."""
        under = pulumi.ResourceOptions(parent=self, provider=args.commands, delete_before_replace=True)
        files = NodeCommand(
            f"{name}-grafana-files",
            connection=connection,
            script=board.files_script(),
            delete=f"rm -rf {shlex.quote(board.directory)}/provisioning {shlex.quote(board.directory)}/dashboards",
            opts=under,
        )
        secret = NodeCommand(
            f"{name}-grafana-secret",
            connection=connection,
            script=pulumi.Output.secret(args.password).apply(board.secret_script),
            delete=f"rm -rf {shlex.quote(board.secret_dir)}",
            secret=True,
            opts=under,
        )
        data = docker.Volume(
            f"{name}-grafana-data",
            name=grafana.DATA_VOLUME,
            # Its users' edits and sessions: kept when the stack goes, as Prometheus's history is.
            opts=pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True),
        )
        docker.Container(
            f"{name}-grafana",
            name=grafana.CONTAINER,
            image=_image(f"{name}-grafana-image", board.image, provider, self),
            envs=[f"{key}={value}" for key, value in board.env.items()],
            # root in its container: its password file is 0600 on the head.
            user="0:0",
            network_mode="host",
            volumes=[
                *(
                    docker.ContainerVolumeArgs(host_path=source, container_path=target, read_only=True)
                    for source, target in board.mounts
                ),
                docker.ContainerVolumeArgs(volume_name=data.name, container_path=grafana.CONTAINER_DATA),
            ],
            # What replaces it: its image, settings, mounts and files (Grafana reads its datasources at start).
            labels=[docker.ContainerLabelArgs(label=node_agents.LABEL_REVISION, value=board.revision)],
            log_driver="json-file",
            log_opts=monitoring.LOG_OPTS,
            restart="unless-stopped",
            must_run=True,
            destroy_grace_seconds=10,
            opts=pulumi.ResourceOptions(
                parent=self, provider=provider, depends_on=[files, secret, prometheus], delete_before_replace=True
            ),
        )


def _node_agent(
    resource: str,
    container: str,
    image: pulumi.Input[str],
    argv: list[str],
    mounts: list[tuple[str, str, bool, str | None]],
    revision: str,
    opts: pulumi.ResourceOptions,
    *,
    user: str,
    network_mode: str,
    pid_mode: str | None = None,
    gpus: str | None = None,
) -> docker.Container:
    """One of a node's monitoring containers: `argv` its whole command (the entrypoint's words), `mounts` binds
    (source, target, read-only, propagation), labelled with its revision (a new one replaces it, and only it); each
    node's textfile directory is made before it (`opts`' depends_on)."""
    return docker.Container(
        resource,
        name=container,
        image=image,
        entrypoints=argv,
        mounts=[
            docker.ContainerMountArgs(
                type="bind",
                source=source,
                target=target,
                read_only=read_only,
                bind_options=docker.ContainerMountBindOptionsArgs(propagation=propagation) if propagation else None,
            )
            for source, target, read_only, propagation in mounts
        ],
        labels=[docker.ContainerLabelArgs(label=node_agents.LABEL_REVISION, value=revision)],
        log_driver="json-file",
        log_opts=monitoring.LOG_OPTS,
        restart="unless-stopped",
        must_run=True,
        destroy_grace_seconds=5,
        # The new container has the old one's name.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)),
        user=user,
        network_mode=network_mode,
        pid_mode=pid_mode,
        gpus=gpus,
    )
