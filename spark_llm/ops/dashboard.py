"""`spark-llm dashboard`: the Grafana dashboard of this stack, and the files a Grafana container provisions it with.

Writes into `--out` (default `./grafana`): `spark-llm.json` (the dashboard: `spark-llm top`'s panels, each a time
series per model or node, and the alerts firing), `datasource.yaml` (the stack's Prometheus, basic auth as user
spark-llm, the password read from Grafana's environment, $SPARK_LLM_MONITORING_PASSWORD: in no file) and
`dashboards.yaml` (a file provider reading /var/lib/grafana/dashboards). A Grafana container reads them as:

    docker run -d -p 3000:3000 -e SPARK_LLM_MONITORING_PASSWORD=... \\
      -v $PWD/grafana/datasource.yaml:/etc/grafana/provisioning/datasources/spark-llm.yaml:ro \\
      -v $PWD/grafana/dashboards.yaml:/etc/grafana/provisioning/dashboards/spark-llm.yaml:ro \\
      -v $PWD/grafana/spark-llm.json:/var/lib/grafana/dashboards/spark-llm.json:ro grafana/grafana

The files hold no secret; run it again after the stack's models change. `--json`: the dashboard on stdout only.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan.monitoring import dashboard
from spark_llm.plan.monitoring.prometheus import prometheus_endpoint
from spark_llm.plan.stack import StackPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("grafana"), help="directory to write the files in (./grafana)")


def run(pulumi: PulumiCli, stack: StackPlan, args: argparse.Namespace) -> int:
    endpoint = prometheus_endpoint(stack.config)
    if endpoint is None:
        sys.stderr.write(
            "spark-llm dashboard: the stack has no spark-llm:monitoring, so no Prometheus to draw from; turn it on"
            " (docs/monitoring.md) and `pulumi up`\n"
        )
        return 2
    name = pulumi.stack or pulumi.capture("stack", "--show-name").strip()
    if args.json:
        render.emit_json(dashboard.dashboard(stack, name))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for file_name, text in dashboard.files(stack, name, endpoint).items():
        path = args.out / file_name
        temporary = path.with_name(f".{file_name}.tmp")
        temporary.write_text(text)
        os.replace(temporary, path)
        print(f"wrote {path}")
    print(f"Grafana reads the password from ${dashboard.PASSWORD_VARIABLE} (`pulumi config get monitoringPassword`)")
    return 0
