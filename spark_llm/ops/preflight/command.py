"""`spark-llm preflight`: every node checked for what the deployment needs, before `pulumi up`.

Per node, checks with pass/fail and a fix: ssh (the pinned host key; a mismatch is not an unreachable node),
clock skew against this machine, Docker, GPU, disk at the model path, memory, the fabric interfaces (each at
spark-llm:network.mtu), the RoCE devices of spark-llm:network.roceDevices (ACTIVE, with an address), the
fabric at the configured MTU (head <-> each worker, don't-fragment pings), the engine's ports on the head,
the image (same ID as the head's, the configured platform) and, with `--check-flags`, the engine flags the
config uses against the image's own `--help` (the seeds' `--language-model-only`: a vLLM flag SGLang refused).

One ssh connection per node, all nodes in parallel, runs a read-only script that prints every fact; the
verdicts are pure functions of those facts. `warn` is what `pulumi up` will take care of (an image it
transfers); only `fail` makes the exit code non-zero.

Here: the command (run every node's script, judge, print); the script and its parsers are in preflight_script,
the verdicts in preflight_checks (a node) and preflight_network (interfaces, RDMA, fabric, ports).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, replace

from rich.table import Table

from spark_llm.ops import render
from spark_llm.ops.preflight import bandwidth_run
from spark_llm.ops.preflight.checks import (
    Check,
    Limits,
    check_clock,
    check_disk,
    check_docker,
    check_flags,
    check_gpu,
    check_image,
    check_memory,
    check_ssh,
)
from spark_llm.ops.preflight.network import check_fabric, check_interfaces, check_ports, check_rdma, link_mtus
from spark_llm.ops.preflight.script import GB, group_sections, node_script
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.ops.render import FAIL, PASS, SIMULATED, SKIP, WARN
from spark_llm.ops.sections import Section, parse_sections
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.node_commands import SELECTED, StackRef
from spark_llm.plan.stack import StackPlan
from spark_llm.remote.runner import NodeRun, failure_of, presented_host_key
from spark_llm.remote.runner import run as run_on


def model_size(plan: DeploymentPlan, override_gb: float | None, head: dict[str, Section]) -> tuple[int | None, str]:
    """The weights' size in bytes and where it came from: the flag, the source directory, or unknown."""
    if override_gb is not None:
        return int(override_gb * GB), "--model-size-gb"
    source = plan.model_source
    if source is None:
        return None, "no model source"
    if source.kind == "local" and source.path:
        total = 0
        for root, _dirs, files in os.walk(os.path.expanduser(source.path)):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total, f"local directory {source.path}"
    if source.kind == "head":
        section = head.get("source")
        if section is not None and section.ok and section.first_line.isdigit():
            return int(section.first_line), f"du of {source.path} on the head"
        return None, f"{source.path} not found on the head"
    return None, "a huggingface source: pass --model-size-gb"


def judge(
    stack: StackPlan,
    runs: dict[str, NodeRun | None],
    presented: dict[str, str | None],
    limits: dict[str, Limits],
    *,
    check_flags_too: bool = False,
    ref: StackRef = SELECTED,
) -> list[Check]:
    """Every check of every node from what the nodes printed; `runs[n]` None: not tried (its jump host failed).
    The node's own checks once; each model's (its disk, memory, ports, image, flags) on each of its nodes, named
    with the model when the stack has several. `limits`: each model's, by its name."""
    facts = {name: parse_sections(run.stdout) if run and not run.ssh_failed else {} for name, run in runs.items()}
    nodes = stack.nodes
    head_node = nodes[0]
    # Every node's fabric MTUs, which a node's interfaces check names beside its own where they differ.
    mtus = {name: link_mtus(stack.first, own) for name, own in facts.items() if "links" in own}
    checks: list[Check] = []
    for node in nodes:
        run = runs.get(node.name)
        own = facts.get(node.name, {})
        checks.append(check_ssh(node, run, presented.get(node.name), ref))
        fabric = check_fabric(stack.first, node, facts.get(head_node.name, {}), own) if node.role == "worker" else None
        if run is None or run.ssh_failed:
            if fabric is not None and fabric.status != SKIP:
                checks.append(fabric)
            checks.append(Check(node.name, "other checks", SKIP, "not run: no ssh session"))
            continue
        checks.append(check_clock(node.name, run, limits[stack.first.model_name].max_clock_skew))
        checks.append(check_docker(node.name, own.get("docker"), ref, node.ssh.user))
        checks.append(check_gpu(node.name, own.get("gpu")))
        checks.append(check_interfaces(stack.first, node.name, node.fabric_address, own, ref, mtus=mtus))
        checks.append(check_rdma(stack.first, node.name, own, ref))
        if fabric is not None:
            checks.append(fabric)
        for plan in stack.groups:
            if node.name in {n.name for n in plan.nodes}:
                checks += _group_checks(stack, plan, node, facts, limits[plan.model_name], check_flags_too, ref)
    return checks


def _group_checks(
    stack: StackPlan,
    plan: DeploymentPlan,
    node: NodePlan,
    facts: dict[str, dict[str, Section]],
    limits: Limits,
    check_flags_too: bool,
    ref: StackRef,
) -> list[Check]:
    """One model's checks on one of its nodes, read from that model's sections (named with it among several)."""
    own = group_sections(facts.get(node.name, {}), plan)
    head = group_sections(facts.get(plan.head.name, {}), plan)
    head_image = head.get("image")
    head_image_id = head_image.first_line.partition(" ")[0] if head_image is not None and head_image.ok else None
    node_plan = next(n for n in plan.nodes if n.name == node.name)
    checks = [
        check_disk(node.name, plan, own.get("disk"), limits),
        check_memory(plan, node_plan, own, limits),
    ]
    if node.role == "head":
        # The router's port once, with the first model's ports.
        checks.append(check_ports(plan, node.name, own, ref, with_router=plan is stack.first))
    checks.append(check_image(plan, node_plan, own, head_image_id))
    if node.role == "head" and check_flags_too:
        checks.append(check_flags(plan, node.name, own.get("flags")))
    if not stack.several:
        return checks
    return [replace(c, check=f"{c.check} ({plan.model_name})") for c in checks]


def summary(checks: Sequence[Check]) -> dict[str, int]:
    counts = {status: 0 for status in (PASS, WARN, SIMULATED, SKIP, FAIL)}
    for check in checks:
        counts[check.status] = counts.get(check.status, 0) + 1
    return counts


def checks_table(checks: Sequence[Check], title: str | None = None) -> Table:
    rows = [[c.node, c.check, c.status, c.detail, c.fix] for c in checks]
    return render.table(title, ["node", "check", "status", "detail", "fix"], rows, status_column="status")


# ---------- the command ----------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-size-gb", type=float, help="size of the weights (default: from the model source)")
    parser.add_argument("--disk-margin-gb", type=float, default=10.0, help="free space beyond the weights (10)")
    parser.add_argument("--max-clock-skew", type=float, default=1.0, help="seconds a node's clock may be off (1)")
    parser.add_argument(
        "--check-flags", action="store_true", help="run the engine's --help in the image and check the config's flags"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per node (120)")
    parser.add_argument(
        "--bandwidth",
        action="store_true",
        help="measure the fabric head <-> each worker (ib_write_bw with RDMA devices, else iperf3) against its speed",
    )
    parser.add_argument("--bandwidth-seconds", type=int, default=3, help="seconds per direction (3)")
    parser.add_argument("--bandwidth-port", type=int, default=5201, help="TCP port of the test server (5201)")


def probe(stack: StackPlan, node: NodePlan, args: argparse.Namespace) -> tuple[NodeRun, str | None]:
    """Run the node's one script (every group's checks on it); on a host key mismatch, also read the key the node
    presents now."""
    script = node_script(stack, node, check_flags=args.check_flags)
    run = run_on(node.ssh, script, timeout=args.timeout, clock=True)
    presented = None
    if run.ssh_failed and failure_of(run).kind == "host key mismatch":
        presented = presented_host_key(node.ssh)
    return run, presented


def collect(
    stack: StackPlan, args: argparse.Namespace, update: Callable[[str], None] | None = None
) -> tuple[dict[str, NodeRun | None], dict[str, str | None]]:
    """Every node's run (one ssh session a node), in parallel; a worker whose jump host failed ssh is not tried
    (None)."""
    runs: dict[str, NodeRun | None] = {}
    presented: dict[str, str | None] = {}
    nodes = stack.nodes
    pending = {n.name for n in nodes}
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = {pool.submit(probe, stack, node, args): node for node in nodes}
        for future in as_completed(futures):
            node = futures[future]
            runs[node.name], presented[node.name] = future.result()
            pending.discard(node.name)
            if update is not None:
                update(f"preflight: {len(runs)}/{len(nodes)} nodes checked; waiting for {', '.join(sorted(pending))}")
    for node in nodes:
        via = node.ssh.via
        if via is not None and (jump := runs.get(via.name)) is not None and jump.ssh_failed:
            runs[node.name] = None
    return runs, presented


def run(pulumi: PulumiCli, stack: StackPlan, args: argparse.Namespace) -> int:
    start = time.monotonic()
    nodes = stack.nodes
    with render.progress(f"preflight: checking {len(nodes)} nodes", enabled=not args.json) as update:
        runs, presented = collect(stack, args, update)
    head_run = runs.get(nodes[0].name)
    head = parse_sections(head_run.stdout) if head_run is not None and not head_run.ssh_failed else {}
    sizes = {plan.model_name: model_size(plan, args.model_size_gb, group_sections(head, plan)) for plan in stack.groups}
    limits = {
        name: Limits(
            model_size=size,
            model_size_from=size_from,
            disk_margin=int(args.disk_margin_gb * GB),
            max_clock_skew=args.max_clock_skew,
        )
        for name, (size, size_from) in sizes.items()
    }
    ref = StackRef(pulumi.stack, pulumi.config_file)
    checks = judge(stack, runs, presented, limits, check_flags_too=args.check_flags, ref=ref)
    if args.bandwidth:
        with render.progress("preflight: measuring the fabric", enabled=not args.json) as update:
            checks += bandwidth_run.measure(stack.first, args.bandwidth_port, args.bandwidth_seconds, update)
    wall = time.monotonic() - start
    counts = summary(checks)
    ok = counts[FAIL] == 0
    size, size_from = sizes[stack.first.model_name]
    if args.json:
        render.emit_json(
            {
                "ok": ok,
                "stack": pulumi.stack,
                "seconds": round(wall, 2),
                "model_size_bytes": size,
                "model_size_from": size_from,
                **(
                    {"models": {name: {"size_bytes": b, "size_from": f} for name, (b, f) in sizes.items()}}
                    if stack.several
                    else {}
                ),
                "counts": counts,
                "checks": [asdict(c) for c in checks],
            }
        )
    else:
        out = render.console()
        models = f"model {stack.first.model_name}" if not stack.several else f"models {', '.join(stack.models)}"
        out.print(checks_table(checks, f"preflight: {len(nodes)} nodes, {models}"))
        words = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        verdict = "ready for `pulumi up`" if ok else "fix the failed checks before `pulumi up`"
        out.print(f"{words} in {wall:.1f} s: {verdict}")
    return 0 if ok else 1
