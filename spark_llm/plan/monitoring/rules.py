"""The alert rules, generated from the stack: one group per model (its engine's signals, each expression from its
release's metric catalog through a role) and one for the nodes. Each rule has a `for:`, a severity and a one-line
description naming the node, the model and the `spark-llm` command to run.

The stack's own target labels (scrape.py: `model`, `node`) select the series, so one rule reads vLLM and SGLang
alike; Prometheus's templates (`{{ $labels.node }}`) fill in what only the series knows.
"""

from __future__ import annotations

from spark_llm.config.metric_catalog import Role, load_metrics
from spark_llm.group import agent_metrics as agent
from spark_llm.group.memory import WARN_MARGIN
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.monitoring.scrape import ENGINE_JOB, NODE_JOB, ROUTER_JOB
from spark_llm.plan.router import RouterPlan
from spark_llm.plan.stack import StackPlan

# How long a condition must hold before its alert fires, in scrapes (spark-llm:monitoring.scrapeSeconds, 15 s by
# default): a minute or two at the default, and as many readings whatever the interval.
ENGINE_DOWN_SCRAPES = 4
NODE_DOWN_SCRAPES = 8
HEADROOM_SCRAPES = 8
SOCKETS_SCRAPES = 4
ROUTER_MISSING_SCRAPES = 4
WEDGE_WINDOW_SCRAPES = 3
DEFAULT_SCRAPE_SECONDS = 15
DEFAULT_WEDGE_SECONDS = 180  # spark-llm:supervisor.wedgeSeconds' default, for a stack without the supervisor
GPU_HOT_CELSIUS = 90  # GB10s shut themselves down near 105 °C under long loads (../shared/notes/real-sparks.md)
GPU_HOT_SECONDS = 300
AGENT_SILENT_SECONDS = 120
WEIGHTS_DISK_FREE_RATIO = 0.1  # a weights copy needs room beside the old one: under a tenth free, it is time to act


def _seconds(value: float) -> str:
    return f"{int(value)}s"


def _rule(
    name: str, expr: str, seconds: float, severity: str, summary: str, description: str, model: str | None = None
) -> dict:
    # A model's rules carry its name as a label too: one alert per model (and promtool sees no duplicate rules).
    return {
        "alert": name,
        "expr": expr,
        "for": _seconds(seconds),
        "labels": {"severity": severity, **({"model": model} if model is not None else {})},
        "annotations": {"summary": summary, "description": description},
    }


def wedge_seconds(plan: DeploymentPlan) -> int:
    """How long requests may run with no token before the wedge alert fires: the supervisor's wedge bound, so the
    alert and the supervisor's restart name the same moment."""
    return plan.supervisor.wedge_seconds if plan.supervisor is not None else DEFAULT_WEDGE_SECONDS


def model_rules(plan: DeploymentPlan, ask: str, scrape: int = DEFAULT_SCRAPE_SECONDS) -> list[dict]:
    """One model's engine rules (`ask`: ` --stack NAME`, as the printed commands carry it; `scrape`: seconds)."""
    down = ENGINE_DOWN_SCRAPES * scrape
    catalog = load_metrics(plan.config.engine.kind, plan.config.engine.version)
    model = plan.model_name
    select = f'job="{ENGINE_JOB}",model="{model}"'
    running = catalog.metric(Role.RUNNING).samples[0]
    generated = catalog.metric(Role.GENERATION_TOKENS).samples[0]
    bound = wedge_seconds(plan)
    # A quarter of the bound to see no token come, half of it in `for:`: it fires within twice its `for:` of the
    # wedge and before the supervisor's restart at the bound (a restart resets the engine's series, and with them a
    # pending alert: firing after it, the alert would never be seen). The window holds at least
    # WEDGE_WINDOW_SCRAPES scrapes (increase() reads nothing from fewer than two samples), so with a bound short
    # beside the scrape interval the alert comes later, never not at all.
    window = max(bound // 4, WEDGE_WINDOW_SCRAPES * scrape)
    hold = max(bound // 2, scrape)
    status = f"spark-llm status{ask} --model {model}"
    logs = f"spark-llm logs{ask} --model {model}"
    return [
        _rule(
            "SparkLlmEngineDown",
            f"up{{{select}}} == 0",
            down,
            "critical",
            f"{model}: the engine on {{{{ $labels.node }}}} answers no /metrics",
            f"{model}'s engine on {{{{ $labels.node }}}} ({{{{ $labels.instance }}}}) has not answered Prometheus for"
            f" {down} s: `{status}` says which member stopped and why, `{logs}` shows its last lines",
            model,
        ),
        _rule(
            "SparkLlmEngineWedged",
            f"sum by (model, node) ({running}{{{select}}}) > 0"
            f" and on (model, node) sum by (model, node) (increase({generated}{{{select}}}[{_seconds(window)}])) == 0",
            hold,
            "critical",
            f"{model}: requests run and no token comes",
            f"{model} on {{{{ $labels.node }}}}: requests are running and rank 0 generated no token for {bound} s:"
            " the engine is wedged (a hung NCCL collective or scheduler); the supervisor restarts the group in"
            f" order once it answered nothing for supervisor.wedgeSeconds; `{status}`, `{logs}`",
            model,
        ),
    ]


def router_rules(router: RouterPlan, ask: str, scrape: int = DEFAULT_SCRAPE_SECONDS) -> list[dict]:
    """Per model the router serves: it lists no engine for it, or the one it lists fails smg's health check (smg's
    own metrics: `smg_worker_pool_size{model}`, `smg_worker_health{worker}`, the engine's URL as the workers file
    names it)."""
    select = f'job="{ROUTER_JOB}"'
    held = ROUTER_MISSING_SCRAPES * scrape
    return [
        _rule(
            "SparkLlmRouterMissingModel",
            f'absent(smg_worker_pool_size{{{select},model="{model}"}})'
            f' or smg_worker_pool_size{{{select},model="{model}"}} == 0'
            f' or smg_worker_health{{{select},worker="{url}"}} == 0',
            held,
            "critical",
            f"{model}: the router has no healthy engine for it",
            f"The router on the head has listed no healthy engine for {model} for {held} s: its requests get 503 or"
            f" 404. The launcher registers the engine again within seconds once it answers: `spark-llm status{ask}`"
            f" shows the router's line and the model's group, `spark-llm logs{ask} --model {model}` its engine",
            model,
        )
        for model, url in router.workers
    ]


def node_rules(ask: str, scrape: int = DEFAULT_SCRAPE_SECONDS) -> list[dict]:
    select = f'job="{NODE_JOB}"'
    down, headroom = NODE_DOWN_SCRAPES * scrape, HEADROOM_SCRAPES * scrape
    margin_gib = WARN_MARGIN // 2**30
    return [
        _rule(
            "SparkLlmNodeExporterDown",
            f"up{{{select}}} == 0",
            down,
            "warning",
            "{{ $labels.node }}: its node exporter answers no scrape",
            "{{ $labels.node }}'s node exporter ({{ $labels.instance }}) has not answered for"
            f" {down} s: the node is down or unreachable over the fabric; `spark-llm status{ask}`",
        ),
        _rule(
            "SparkLlmMemoryHeadroomLow",
            f"node_memory_MemAvailable_bytes{{{select}}} < {WARN_MARGIN}",
            headroom,
            "warning",
            f"{{{{ $labels.node }}}}: under {margin_gib} GiB of memory available",
            f"{{{{ $labels.node }}}} has under {margin_gib} GiB available (the memory admission's margin): unified"
            " memory is shared with the GPU, and page cache or another process is eating the engine's room;"
            f" `spark-llm preflight{ask}` shows each node's memory, spark-llm:memory.dropCaches frees the cache"
            " before a start",
        ),
    ]


def disk_rules(ask: str, scrape: int = DEFAULT_SCRAPE_SECONDS) -> list[dict]:
    """The disks of the weights, as each node's writer reads them (scripts/lib/gpu_readings.sh)."""
    free = f"{agent.WEIGHTS_DISK_FREE} / {agent.WEIGHTS_DISK_SIZE}"
    percent = round(WEIGHTS_DISK_FREE_RATIO * 100)
    return [
        _rule(
            "SparkLlmWeightsDiskLow",
            f"{free} < {WEIGHTS_DISK_FREE_RATIO}",
            HEADROOM_SCRAPES * scrape,
            "warning",
            f"{{{{ $labels.node }}}}: under {percent} % free on the disk of {{{{ $labels.path }}}}",
            f"{{{{ $labels.node }}}}'s disk holding the weights at {{{{ $labels.path }}}} is"
            " {{ $value | humanizePercentage }} free: a new revision's copy, an image's layers and Prometheus's"
            " data need room there; free space (old weights revisions, `docker image prune` on the node), and"
            f" `spark-llm preflight{ask}` shows each node's disk",
        ),
    ]


def agent_rules(ask: str, scrape: int = DEFAULT_SCRAPE_SECONDS) -> list[dict]:
    """What the head's agent reports (spark_llm.group.agent_metrics), through the head's exporter."""
    return [
        _rule(
            "SparkLlmNcclOnSockets",
            f'{agent.NCCL_TRANSPORT}{{transport="Socket"}} == 1',
            SOCKETS_SCRAPES * scrape,
            "warning",
            "{{ $labels.model }}: rank {{ $labels.rank }} on {{ $labels.node }} runs NCCL over sockets",
            "{{ $labels.model }}: rank {{ $labels.rank }} on {{ $labels.node }} chose NCCL's socket transport at"
            " its last start, not RoCE: the group serves at a fraction of the fabric's speed;"
            f" `spark-llm status{ask} --hosts` shows each node's fabric devices, `pulumi up` restarts onto them",
        ),
        _rule(
            "SparkLlmRestartBudgetSpent",
            f'{agent.GROUP_STATE}{{state="gave_up"}} == 1',
            0,
            "critical",
            "{{ $labels.model }}: the supervisor gave up",
            "{{ $labels.model }}: the head's agent spent its restart budget and stopped every member;"
            f" `spark-llm status{ask} --model {{{{ $labels.model }}}}` says why, `pulumi up` starts the group again",
        ),
        _rule(
            "SparkLlmGpuTemperatureHigh",
            f"{agent.GPU_TEMPERATURE} > {GPU_HOT_CELSIUS}",
            GPU_HOT_SECONDS,
            "warning",
            "{{ $labels.node }}: GPU at {{ $value }} °C",
            f"{{{{ $labels.node }}}}'s GPU has been above {GPU_HOT_CELSIUS} °C for {GPU_HOT_SECONDS} s: GB10s have"
            " shut themselves down near 105 °C under long loads; cap its SM clock: set smClockCapMhz in its entry of"
            " spark-llm:nodes (2000 kept one in bounds) and run `pulumi up`, and see the load with"
            f" `spark-llm status{ask}`",
        ),
        _rule(
            "SparkLlmAgentSilent",
            f"time() - {agent.LAST_WRITE} > {AGENT_SILENT_SECONDS}",
            AGENT_SILENT_SECONDS,
            "warning",
            "{{ $labels.node }}: the head's agent has written nothing for minutes",
            f"The head's agent (the supervisor) has not written its metrics for over {AGENT_SILENT_SECONDS} s: it"
            f" stopped or hangs, and nothing restarts a failed group; `spark-llm status{ask}` says whether it runs",
        ),
    ]


def alert_rules(stack: StackPlan, ask: str = "", scrape: int = DEFAULT_SCRAPE_SECONDS) -> dict:
    """The rules file's content: a group per model, then the nodes' and the agent's (`ask`: the stack flags
    commands carry; `scrape`: spark-llm:monitoring.scrapeSeconds)."""
    groups = [
        {"name": f"spark-llm-{name}", "rules": model_rules(plan, ask, scrape)} for name, plan in stack.models.items()
    ]
    if stack.router is not None:
        groups.append({"name": "spark-llm-router", "rules": router_rules(stack.router, ask, scrape)})
    groups.append({"name": "spark-llm-nodes", "rules": node_rules(ask, scrape) + disk_rules(ask, scrape)})
    groups.append({"name": "spark-llm-agent", "rules": agent_rules(ask, scrape)})
    return {"groups": groups}
