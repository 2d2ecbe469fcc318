"""Pure: `spark-llm preflight`'s verdicts on one node: ssh, clock, Docker, GPU, disk, memory, the image and the
engine flags, each a Check with what was seen and how to fix it (the network's are in preflight_network).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.group import memory as verdict
from spark_llm.ops.preflight.script import (
    GB,
    engine_help_command,
    help_flags,
    platform_of,
    unknown_flags,
)
from spark_llm.ops.render import FAIL, PASS, SIMULATED, SKIP, WARN, gb
from spark_llm.ops.sections import Section
from spark_llm.plan import memory
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.node_commands import SELECTED, StackRef, read_host_key
from spark_llm.remote.runner import NodeRun, failure_of
from spark_llm.remote.ssh import fingerprint


@dataclass(frozen=True)
class Check:
    """One row of the table: a check on a node, its verdict, what was seen and how to fix it."""

    node: str
    check: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Limits:
    """What the disk, memory and clock checks compare against."""

    model_size: int | None
    """Bytes of the weights, None when unknown."""
    model_size_from: str
    disk_margin: int
    max_clock_skew: float


# ---------- verdicts (pure) ----------


def check_ssh(node: NodePlan, run: NodeRun | None, presented: str | None, stack: StackRef = SELECTED) -> Check:
    target = node.ssh
    where = f"{target.user}@{target.host}:{target.port}" + (f" via {target.via.name}" if target.via else "")
    if run is None:
        via = target.via.name if target.via else "?"
        return Check(node.name, "ssh", FAIL, f"{where}: not tried, its jump host {via} is not reachable", f"fix {via}")
    if not run.ssh_failed:
        return Check(node.name, "ssh", PASS, f"{where}, host key {fingerprint(target.host_key)} as pinned")
    failure = failure_of(run)
    if failure.kind == "host key mismatch":
        seen = f"presents {fingerprint(presented)}" if presented else "presents another key"
        return Check(
            node.name,
            "ssh",
            FAIL,
            f"host key mismatch: {where} {seen}, {node.config_key}.hostKey pins {fingerprint(target.host_key)}",
            f"if the node was reinstalled, read the key it presents (`{read_host_key(stack, node)}`), confirm it on "
            f"its console, then pin it in {node.config_key}.hostKey; otherwise something else answers at "
            f"{target.host}",
        )
    if failure.kind == "key refused":
        return Check(
            node.name,
            "ssh",
            FAIL,
            f"{where}: key refused ({failure.message})",
            f"authorize {target.key_path}.pub in ~{target.user}/.ssh/authorized_keys on {node.name}, "
            f"or set {node.config_key}.keyPath / spark-llm:sshKeyPath",
        )
    path_hint = f" and that {target.via.name} reaches it at {target.host} (the fabric)" if target.via else ""
    return Check(
        node.name,
        "ssh",
        FAIL,
        f"{where}: {failure.kind} ({failure.message})",
        f"check that {node.name} is up, sshd runs on port {target.port}{path_hint}",
    )


def check_clock(node: str, run: NodeRun, max_skew: float) -> Check:
    if run.clock_skew is None:
        return Check(node, "clock", SKIP, "not measured")
    error = run.clock_error or 0.0
    detail = f"{run.clock_skew:+.3f} s against this machine (±{error:.3f} s)"
    if abs(run.clock_skew) - error > max_skew:
        return Check(
            node,
            "clock",
            FAIL,
            detail + f", more than {max_skew:g} s",
            "turn on time sync on the node (`timedatectl set-ntp true`, chrony) and on this machine",
        )
    return Check(node, "clock", PASS, detail)


def check_docker(node: str, section: Section | None, stack: StackRef = SELECTED, user: str = "USER") -> Check:
    if section is None:
        return Check(node, "docker", SKIP, "not reported")
    if section.ok:
        version, _, platform = section.first_line.partition(" ")
        return Check(node, "docker", PASS, f"Docker {version}, {platform}")
    message = section.first_line
    if "permission denied" in message.lower():
        usermod = stack.exec_on(node, ["sudo", "usermod", "-aG", "docker", user])
        fix = f"add the login user to the docker group (`{usermod}`), then log in again"
    elif "command not found" in message or "not found" in message.split(":")[-1]:
        fix = "install Docker and the NVIDIA container toolkit"
    else:
        fix = f"start the engine: `{stack.exec_on(node, ['sudo', 'systemctl', 'start', 'docker'])}`"
    return Check(node, "docker", FAIL, f"`docker info` failed: {message}", fix)


def check_gpu(node: str, section: Section | None) -> Check:
    if section is None:
        return Check(node, "gpu", SKIP, "not reported")
    if section.ok:
        gpus = [line.strip() for line in section.body.splitlines() if line.strip()]
        return Check(node, "gpu", PASS, "; ".join(gpus) or "nvidia-smi -L listed nothing")
    if section.rc == 3:
        return Check(node, "gpu", SIMULATED, "no GPU: simulated node")
    return Check(
        node,
        "gpu",
        FAIL,
        f"`nvidia-smi -L` failed: {section.first_line}",
        "install the NVIDIA driver (DGX OS ships it); `nvidia-smi -L` must list the GPU",
    )


def check_disk(node: str, plan: DeploymentPlan, section: Section | None, limits: Limits) -> Check:
    if section is None or not section.ok:
        return Check(
            node, "disk", FAIL if section else SKIP, f"no answer from df: {section.first_line if section else ''}"
        )
    lines = section.body.splitlines()
    fields = lines[0].split() if lines else []
    if len(fields) < 3 or not fields[0].isdigit():
        return Check(node, "disk", FAIL, f"could not read df: {section.body[:200]}", "")
    free, mount = int(fields[0]), fields[2]
    present = int(lines[1]) if len(lines) > 1 and lines[1].strip().isdigit() else 0
    where = f"{gb(free)} free on {mount} (for {plan.model_path})"
    if limits.model_size is None:
        need = limits.disk_margin
        if free < need:
            return Check(node, "disk", FAIL, f"{where}, less than the margin {gb(need)}", "free space on " + mount)
        return Check(
            node,
            "disk",
            WARN,
            f"{where}; the model's size is unknown ({limits.model_size_from})",
            "pass --model-size-gb to check the space for the weights",
        )
    missing = max(limits.model_size - present, 0)
    need = missing + limits.disk_margin
    held = f", {gb(present)} of the weights already there" if present >= GB // 10 else ""
    detail = f"{where}{held}; needs {gb(missing)} + margin {gb(limits.disk_margin)} = {gb(need)}"
    if free < need:
        return Check(
            node,
            "disk",
            FAIL,
            detail,
            f"free {gb(need - free)} on {mount}, or set {plan.key('model.path')} to a larger file system",
        )
    return Check(node, "disk", PASS, detail)


# The memory admission's verdicts (spark_llm.plan.memory) as preflight's.
_ADMISSION_STATUS = {verdict.FITS: PASS, verdict.WARN: WARN, verdict.REFUSED: FAIL, verdict.UNREAD: FAIL}


def check_memory(plan: DeploymentPlan, node: NodePlan, sections: dict[str, Section], limits: Limits) -> Check:
    """The memory admission `pulumi up` runs before the group stops, judged now as it judges: the weights' size
    from the model source where it is known (`limits`), else from the node's files."""
    section = sections.get("memory")
    probe = dict(line.split("\t", 1) for line in section.body.splitlines() if "\t" in line) if section else {}
    admission = memory.judge_spec(memory.admission_spec(plan, node, weights_bytes=limits.model_size), probe)
    return Check(node.name, "memory", _ADMISSION_STATUS[admission.verdict], admission.detail, admission.fix)


def check_image(plan: DeploymentPlan, node: NodePlan, sections: dict[str, Section], head_image_id: str | None) -> Check:
    image = plan.image
    docker = sections.get("docker")
    platform = platform_of(docker.first_line) if docker is not None and docker.ok else None
    if platform is None:
        return Check(node.name, "image", SKIP, "docker did not answer")
    if platform != image.platform:
        return Check(
            node.name,
            "image",
            FAIL,
            f"{node.name} runs {platform}, {plan.key('image.platform')} is {image.platform}",
            f"deploy to nodes of the image's platform, or set {plan.key('image.platform')}"
            " (a DGX Spark is linux/arm64)",
        )
    section = sections.get("image")
    if section is not None and section.ok:
        image_id, _, image_platform = section.first_line.partition(" ")
        short = image_id.removeprefix("sha256:")[:12]
        if image_platform != image.platform:
            return Check(
                node.name,
                "image",
                FAIL,
                f"{image.ref} ({short}) is {image_platform}, not {image.platform}",
                f"use an image built for {image.platform} (`docker pull --platform {image.platform} ...`)",
            )
        if node.role != "head" and head_image_id and image_id != head_image_id:
            detail = f"{image.ref} is {short} here, {head_image_id.removeprefix('sha256:')[:12]} on the head"
            if image.mode == "present":
                return Check(node.name, "image", FAIL, detail, "put the head's image on this node (docker save | load)")
            return Check(node.name, "image", WARN, detail + f"; `pulumi up` replaces it (mode {image.mode})")
        same = ", the head's ID" if node.role != "head" and head_image_id else ""
        return Check(node.name, "image", PASS, f"{image.ref} {short} {image_platform}{same}")
    absent = f"{image.ref} is not on {node.name}"
    load = f"`docker load -i IMAGE.tar` or `docker pull --platform {image.platform} {image.ref}`"
    if image.mode == "present":
        return Check(
            node.name, "image", FAIL, absent, f"put it there ({load}), or set {plan.key('image.mode')} transfer"
        )
    if image.mode == "pull":
        return Check(node.name, "image", WARN, absent + "; `pulumi up` pulls it")
    if node.role == "head" and image.source == "head":
        return Check(
            node.name,
            "image",
            FAIL,
            absent + f"; {plan.key('image.source')} head sends the head's image to the workers",
            f"put it on the head ({load}), or set {plan.key('image.source')} operator",
        )
    source = "this machine" if node.role == "head" else "the head, over the fabric"
    return Check(node.name, "image", WARN, absent + f"; `pulumi up` transfers it from {source}")


def check_flags(plan: DeploymentPlan, node: str, section: Section | None) -> Check:
    command = " ".join(engine_help_command(plan))
    if section is None:
        return Check(node, "engine flags", SKIP, "not checked")
    if not section.ok:
        return Check(
            node,
            "engine flags",
            FAIL,
            f"`{command}` failed in {plan.image.ref} (exit {section.rc}): {section.first_line}",
            f"check the image and {plan.key('engine.kind')}",
        )
    listed = help_flags(section.body)
    unknown = unknown_flags(list(plan.engine_flags), listed)
    if unknown:
        return Check(
            node,
            "engine flags",
            FAIL,
            f"the image's engine does not list {', '.join(unknown)} (`{command}`)",
            f"remove them from {plan.key('engine.flags')} (another engine's flags?),"
            " or use an image whose engine has them",
        )
    return Check(node, "engine flags", PASS, f"all {len(plan.engine_flags)} flags the config uses are in `{command}`")
