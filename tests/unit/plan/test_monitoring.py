"""The monitoring generated from the stack (spark_llm.plan.monitoring): Prometheus's targets and labels from what
the stack deploys, and alert rules whose expressions are each engine release's own metric names."""

from __future__ import annotations

import json
import re
import subprocess

from spark_llm.config import parse
from spark_llm.config.router import EXAMPLE_IMAGE
from spark_llm.plan.deployment import LAUNCH_TEMPLATE, node_launches
from spark_llm.plan.monitoring import MonitoringSettings, alert_rules, prometheus_config, targets
from spark_llm.plan.monitoring.prometheus import DISK_SECTION, disk_probe, monitoring_plan, retention_refusal
from spark_llm.plan.router import METRICS_PORT as ROUTER_METRICS_PORT
from spark_llm.plan.stack import StackPlan, build_stack
from tests.conftest import dual_spark_raw
from tests.unit.ops.several_models import BIG, SMALL, two_models_raw

SETTINGS = MonitoringSettings()


def stack_of(raw: dict) -> StackPlan:
    return build_stack(parse(raw), LAUNCH_TEMPLATE.read_text())


def two_models_with_router(raw: dict) -> StackPlan:
    return stack_of({**two_models_raw(raw), "router": {"image": EXAMPLE_IMAGE}, "apiKey": "sk-test"})


def test_every_model_the_router_and_each_node_once_are_targets_labelled_by_what_the_stack_knows(raw_config):
    stack = two_models_with_router(raw_config)
    found = {(t.job, t.address): dict(t.labels) for t in targets(stack, SETTINGS)}
    # The engines' APIs where the head reaches them (the router in front: each on the head's fabric address).
    big, small = stack.models[BIG], stack.models[SMALL]
    assert found[("spark-llm-engine", f"{big.api_address}:{big.port}")] == {
        "model": BIG,
        "node": "spark-1",
        "engine_kind": "sglang",
        "release": big.config.engine.version,
    }
    assert found[("spark-llm-engine", f"{small.api_address}:30001")]["model"] == SMALL
    # The router's metrics: smg serves them on a port of their own, on loopback (not its API's 4000).
    assert found[("spark-llm-router", f"127.0.0.1:{ROUTER_METRICS_PORT}")] == {"node": "spark-1"}
    # One exporter per node, however many models run there: the head's on loopback, the worker's over the fabric.
    nodes = {address: labels for (job, address), labels in found.items() if job == "spark-llm-node"}
    assert nodes == {
        "127.0.0.1:9100": {"node": "spark-1", "role": "head"},
        "192.168.200.13:9100": {"node": "spark-2", "role": "worker"},
    }
    assert len(found) == 5


def test_prometheus_config_has_a_job_per_kind_and_the_generated_rules(raw_config):
    config = prometheus_config(two_models_with_router(raw_config), MonitoringSettings(scrape_seconds=5))
    assert config["global"] == {"scrape_interval": "5s", "evaluation_interval": "15s"}
    assert config["rule_files"] == ["spark-llm-rules.json"]
    jobs = {job["job_name"]: job["static_configs"] for job in config["scrape_configs"]}
    assert set(jobs) == {"spark-llm-engine", "spark-llm-router", "spark-llm-node"}
    assert [group["labels"]["model"] for group in jobs["spark-llm-engine"]] == [BIG, SMALL]
    # The agent's textfile names the node each reading is of: its `node` wins on the exporters' job only.
    honored = {job["job_name"] for job in config["scrape_configs"] if job.get("honor_labels")}
    assert honored == {"spark-llm-node"}
    json.dumps(config)  # written to the head as JSON (YAML's subset)


def test_a_stack_without_the_router_has_no_router_target(raw_config):
    assert "spark-llm-router" not in {t.job for t in targets(stack_of(raw_config), SETTINGS)}


def _rules(rules: dict, group: str) -> dict[str, dict]:
    return {r["alert"]: r for g in rules["groups"] if g["name"] == group for r in g["rules"]}


def test_the_wedge_rule_reads_each_releases_own_metric_names(raw_config):
    raw_config["engine"] = {"kind": "vllm", "version": "0.16.0"}
    raw_config["supervisor"] = {"wedgeSeconds": 120}
    vllm = _rules(alert_rules(stack_of(raw_config), " --stack dual-spark"), f"spark-llm-{BIG}")
    wedged = vllm["SparkLlmEngineWedged"]
    assert wedged["expr"] == (
        f'sum by (model, node) (vllm:num_requests_running{{job="spark-llm-engine",model="{BIG}"}}) > 0'
        " and on (model, node) sum by (model, node) "
        f'(increase(vllm:generation_tokens_total{{job="spark-llm-engine",model="{BIG}"}}[45s])) == 0'
    )
    # The window three 15 s scrapes (a quarter of the bound is less), half the bound in `for:`: it fires within
    # 105 s of the wedge, before the supervisor's restart at 120 s.
    assert wedged["for"] == "60s"
    assert f"`spark-llm status --stack dual-spark --model {BIG}`" in wedged["annotations"]["description"]

    raw_config["engine"] = {"version": "0.5.5"}  # SGLang's oldest known release
    sglang = _rules(alert_rules(stack_of(raw_config)), f"spark-llm-{BIG}")["SparkLlmEngineWedged"]
    assert "sglang:num_running_reqs{" in sglang["expr"] and "increase(sglang:generation_tokens_total{" in sglang["expr"]


def test_every_rule_has_a_for_a_severity_and_a_description_naming_a_command(raw_config):
    rules = alert_rules(two_models_with_router(raw_config), " --stack dual-spark")
    assert [g["name"] for g in rules["groups"]] == [
        f"spark-llm-{BIG}",
        f"spark-llm-{SMALL}",
        "spark-llm-router",
        "spark-llm-nodes",
        "spark-llm-agent",
    ]
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert re.fullmatch(r"\d+s", rule["for"]) and rule["labels"]["severity"] in ("warning", "critical")
            assert "`spark-llm " in rule["annotations"]["description"], rule
            assert "--stack dual-spark" in rule["annotations"]["description"], rule
    headroom = _rules(rules, "spark-llm-nodes")["SparkLlmMemoryHeadroomLow"]
    assert headroom["expr"] == f'node_memory_MemAvailable_bytes{{job="spark-llm-node"}} < {4 * 2**30}'


def test_the_rules_select_series_by_the_labels_the_scrape_config_sets(raw_config):
    stack = two_models_with_router(raw_config)
    labelled = {
        group["labels"]["model"]
        for job in prometheus_config(stack, SETTINGS)["scrape_configs"]
        for group in job["static_configs"]
        if "model" in group["labels"]
    }
    exprs = " ".join(r["expr"] for g in alert_rules(stack)["groups"] for r in g["rules"])
    selected = set(re.findall(r'model="([^"]+)"', exprs))
    assert selected == labelled == {BIG, SMALL}


def test_the_router_rule_reads_smgs_own_series_for_each_model_it_serves(raw_config):
    stack = two_models_with_router(raw_config)
    missing = _rules(alert_rules(stack, scrape=5), "spark-llm-router")
    assert list(missing) == ["SparkLlmRouterMissingModel"]  # (one name; a rule per model: `model` tells them apart)
    rules = [r for g in alert_rules(stack)["groups"] if g["name"] == "spark-llm-router" for r in g["rules"]]
    assert [r["labels"]["model"] for r in rules] == [BIG, SMALL]
    url = dict(stack.router.workers)[SMALL] if stack.router else ""
    assert rules[1]["expr"] == (
        f'absent(smg_worker_pool_size{{job="spark-llm-router",model="{SMALL}"}})'
        f' or smg_worker_pool_size{{job="spark-llm-router",model="{SMALL}"}} == 0'
        f' or smg_worker_health{{job="spark-llm-router",worker="{url}"}} == 0'
    )
    assert "spark-llm-router" not in [g["name"] for g in alert_rules(stack_of(raw_config))["groups"]]  # no router


def test_every_generated_rule_passes_prometheus_own_check(raw_config, tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(alert_rules(two_models_with_router(raw_config), " --stack dual-spark", scrape=2)))
    checked = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0 and "SUCCESS: 13 rules found" in checked.stdout, checked.stdout + checked.stderr


# ---------- what spark-llm:monitoring runs (spark_llm.plan.monitoring.prometheus) ----------

MONITORING = {"image": EXAMPLE_IMAGE, "nodeExporterImage": EXAMPLE_IMAGE}


def monitored(raw: dict, **settings: object) -> dict:
    return {**raw, "monitoring": {**MONITORING, **settings}, "monitoringPassword": "pw"}


def test_without_the_section_nothing_runs_and_sglang_keeps_its_flags(raw_config):
    stack = stack_of(raw_config)
    assert monitoring_plan(stack) is None
    assert "--enable-metrics" not in node_launches(stack.first.config)["spark-1"].argv


def test_with_it_sglang_serves_its_metrics_on_the_rank_that_serves_the_api(raw_config):
    launches = node_launches(stack_of(monitored(raw_config)).first.config)
    assert "--enable-metrics" in launches["spark-1"].argv
    assert "--enable-metrics" not in launches["spark-2"].argv
    # Given by the user too: once.
    raw = monitored(raw_config)
    raw["engine"] = {**raw.get("engine", {}), "flags": ["--enable-metrics"]}
    assert node_launches(stack_of(raw).first.config)["spark-1"].argv.count("--enable-metrics") == 1


def test_a_new_model_changes_the_config_step_and_never_the_container(raw_config):
    one = monitoring_plan(stack_of(monitored({**two_models_raw(raw_config), "router": {"image": EXAMPLE_IMAGE},
                                              "apiKey": "sk"})))  # fmt: skip
    raw = two_models_raw(raw_config)
    raw["models"] = raw["models"][:1]
    other = monitoring_plan(stack_of(monitored({**raw, "router": {"image": EXAMPLE_IMAGE}, "apiKey": "sk"})))
    assert one is not None and other is not None
    assert one.config_digest != other.config_digest and one.config_script() != other.config_script()
    assert one.revision == other.revision
    # The port or the retention replace the container: flags Prometheus reads once.
    changed = monitoring_plan(stack_of(monitored(raw_config, retentionSize="500MB")))
    assert changed is not None and changed.revision != monitoring_plan(stack_of(monitored(raw_config))).revision


def test_the_config_step_reloads_a_running_prometheus_and_waits_for_its_word(raw_config):
    plan = monitoring_plan(stack_of(monitored(raw_config, scrapeSeconds=5)))
    assert plan is not None
    script = plan.config_script()
    written = json.loads(plan.config_text)
    assert written["global"]["scrape_interval"] == "5s" and written["rule_files"] == ["spark-llm-rules.json"]
    assert script.index("mv -f") < script.index("docker kill --signal HUP spark-llm-prometheus")
    assert "Completed loading of configuration file" in script and "Error reloading config" in script


def test_the_web_config_holds_a_bcrypt_hash_made_on_the_head(raw_config):
    plan = monitoring_plan(stack_of(monitored(raw_config)))
    assert plan is not None
    script = plan.web_script("s3cret phrase")
    assert "crypt.METHOD_BLOWFISH" in script and "basic_auth_users" in script
    # The password is piped to the hash by the shell's builtin printf: on no command line of a process.
    assert "printf '%s' 's3cret phrase' | python3" in script


def test_each_exporter_listens_where_only_prometheus_reaches_it(raw_config):
    plan = monitoring_plan(stack_of(monitored(raw_config, nodeExporterPort=9200)))
    assert plan is not None
    listen = {e.node: e.listen for e in plan.exporters}
    assert listen["spark-1"] == "127.0.0.1:9200"
    assert listen["spark-2"] == f"{parse(raw_config).workers[0].fabric_address}:9200"
    # Every node's textfile directory is read: the GPU writer's file on each, the agent's too on the head.
    assert all("--collector.textfile.directory=/run/spark-llm/textfile" in e.command for e in plan.exporters)


def test_each_node_has_a_gpu_writer_given_the_gpus_its_engines_get(raw_config):
    plan = monitoring_plan(stack_of(monitored(raw_config, scrapeSeconds=5)))
    assert plan is not None
    assert [(w.node, w.gpus, w.seconds) for w in plan.gpu_writers] == [("spark-1", True, 5), ("spark-2", True, 5)]
    entrypoint = plan.gpu_writers[0].entrypoint
    assert entrypoint[:2] == ("/bin/sh", "-c") and 'chroot "$rootfs" nvidia-smi' in entrypoint[2]
    weights = stack_of(raw_config).first.model_path
    assert entrypoint[3:] == ("gpu-readings", "/host", "/run/spark-llm/textfile", "5", "spark_llm_gpu_power_watts",
                              "spark_llm_gpu_temperature_celsius", "spark_llm_gpu_sm_clock_hertz",
                              "spark_llm_weights_disk_free_bytes", "spark_llm_weights_disk_size_bytes",
                              weights)  # fmt: skip
    sim = {**raw_config, "engine": {**raw_config.get("engine", {}), "gpus": False}}
    without = monitoring_plan(stack_of(monitored(sim)))
    assert without is not None and [w.gpus for w in without.gpu_writers] == [False, False]


def test_the_gpu_writer_writes_each_reading_nvidia_smi_gives_and_leaves_out_the_others(tmp_path):
    """The writer's functions run by sh once, with a root of its own: a chroot whose nvidia-smi and df answer as
    told (chroot shadowed by a function; `sleep` ends the loop). The weights path is not there yet: its disk is
    read through its nearest parent, and the samples name the path as configured."""
    plan = monitoring_plan(stack_of(monitored(dual_spark_raw())))
    assert plan is not None
    _, _, script, name, _rootfs, _dir, _seconds, *families = plan.gpu_writers[0].entrypoint
    weights = '/nowhere/models/a "b"'
    families[5:] = [weights]
    df = "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/nvme0n1p2 3800000000 3610000000 1900000 95% /"
    answers_df = f"[ \"$4\" = / ] && printf '%s\\n' '{df}'"
    disk = {'spark_llm_weights_disk_free_bytes{path="/nowhere/models/a \\"b\\""}': 1900000 * 1024.0,
            'spark_llm_weights_disk_size_bytes{path="/nowhere/models/a \\"b\\""}': 3800000000 * 1024.0}  # fmt: skip
    for answer, expected in (
        ("18.50, 42, 2405", {"spark_llm_gpu_power_watts": 18.5, "spark_llm_gpu_temperature_celsius": 42.0,
                             "spark_llm_gpu_sm_clock_hertz": 2405e6, **disk}),
        ("[N/A], 61, 2100", {"spark_llm_gpu_temperature_celsius": 61.0, "spark_llm_gpu_sm_clock_hertz": 2100e6,
                             **disk}),
    ):  # fmt: skip
        shim = (
            f"chroot() {{ if [ \"$2\" = df ]; then {answers_df}; else echo '{answer}'; fi; }}\nsleep() {{ exit 0; }}\n"
        )
        subprocess.run(["sh", "-c", shim + script, name, "/", str(tmp_path), "1", *families], check=True, timeout=10)
        text = (tmp_path / "gpu.prom").read_text()
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[0] != "#"
        }
        assert samples == expected
        subprocess.run(["promtool", "check", "metrics"], input=text, text=True, check=True, capture_output=True)


def test_monitoring_restarts_an_sglang_group_in_order_and_leaves_a_vllm_group_as_it_was(raw_config):
    """Regression (found on the sim): the flag changed rank 0's command and not the group's revision, so the head
    was replaced alone after the worker had joined the old head, and the start failed."""
    sglang_off, sglang_on = stack_of(raw_config).first, stack_of(monitored(raw_config)).first
    assert sglang_off.group_revision != sglang_on.group_revision
    vllm = {**raw_config, "engine": {**raw_config.get("engine", {}), "kind": "vllm"}}
    assert stack_of(vllm).first.group_revision == stack_of(monitored(vllm)).first.group_revision


def test_the_wedge_window_holds_enough_scrapes_to_read_a_rate(raw_config):
    """A bound short beside the scrape interval (10 s at 15 s scrapes) read no sample in its window: the alert
    could never fire. The window holds three scrapes at least; a quarter of the bound otherwise, half in `for:`."""
    raw = {**raw_config, "supervisor": {"wedgeSeconds": 10}}
    slow = _rules(alert_rules(stack_of(raw), scrape=15), f"spark-llm-{BIG}")["SparkLlmEngineWedged"]
    assert "[45s]" in slow["expr"] and slow["for"] == "15s"
    raw["supervisor"] = {"wedgeSeconds": 180}
    fast = _rules(alert_rules(stack_of(raw), scrape=15), f"spark-llm-{BIG}")["SparkLlmEngineWedged"]
    assert "[45s]" in fast["expr"] and fast["for"] == "90s"


def test_a_retention_larger_than_the_heads_disk_is_refused_naming_the_key_and_a_size_that_fits():
    monitoring = parse(monitored(dual_spark_raw(), retentionSize="2TB")).monitoring
    assert monitoring is not None
    disk = {DISK_SECTION: f"{915 * 2**30} /var/lib/docker"}
    refusal = retention_refusal(monitoring, disk)
    assert refusal is not None and refusal.startswith("spark-llm:monitoring.retentionSize: 2TB is more than")
    assert "(/var/lib/docker: 915 GB)" in refusal and "(e.g. 91GB)" in refusal
    fits = parse(monitored(dual_spark_raw(), retentionSize="500GB")).monitoring
    assert fits is not None and retention_refusal(fits, disk) is None
    assert retention_refusal(monitoring, {}) is None  # Docker or df could not say: nothing to judge


def test_the_disk_probe_prints_its_section_on_this_machines_docker(tmp_path):
    """The probe as the head runs it, with a `docker` that names a data root here and the real df."""
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\necho {tmp_path}\n")
    fake.chmod(0o755)
    printed = subprocess.run(
        ["bash", "-c", disk_probe()], capture_output=True, text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}
    ).stdout
    name, value = printed.rstrip("\n").split("\t")
    size, root = value.split(" ", 1)
    assert name == DISK_SECTION and root == str(tmp_path) and int(size) > 0


def test_the_config_step_writes_a_config_and_rules_prometheus_accepts(tmp_path, raw_config):
    """The head's config step run by bash here (its home under tmp_path), with no Prometheus running: both files
    land, and Prometheus's own check passes the config and the rules it names."""
    plan = monitoring_plan(stack_of(monitored(two_models_raw(raw_config) | {"router": {"image": EXAMPLE_IMAGE},
                                                                            "apiKey": "sk"})))  # fmt: skip
    assert plan is not None
    script = plan.config_script().replace("/home/aurora", str(tmp_path))
    ran = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "Prometheus starts with it" in ran.stdout
    config = tmp_path / "spark-llm" / "monitoring" / "config" / "prometheus.yml"
    checked = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0 and "SUCCESS: 13 rules found" in checked.stdout, checked.stdout + checked.stderr


def test_every_step_script_of_the_monitoring_is_bash_that_parses(raw_config):
    """Regression (found on the sim): an apostrophe inside a single-quoted echo ended the quote, and the step failed
    with bash's syntax error (exit 2)."""
    raw = monitored(raw_config)
    raw["monitoring"]["alertmanagerImage"] = EXAMPLE_IMAGE
    raw["monitoring"]["grafanaImage"] = EXAMPLE_IMAGE
    raw["monitoringWebhook"] = "https://hooks.example.com/x"
    plan = monitoring_plan(stack_of(raw))
    assert plan is not None and plan.alertmanager is not None and plan.grafana is not None
    scripts = {
        "config": plan.config_script(),
        "web": plan.web_script("it's a pass'word"),
        "ready": plan.ready_script(),
        "alertmanager": plan.alertmanager.config_script("https://hooks.example.com/it's"),
        "grafana files": plan.grafana.files_script(),
        "grafana secret": plan.grafana.secret_script("it's a pass'word"),
    }
    for name, script in scripts.items():
        parsed = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert parsed.returncode == 0, f"{name}: {parsed.stderr}"


def test_grafanas_steps_write_its_files_and_a_0600_password_file_with_the_password_alone(raw_config, tmp_path):
    """Both of Grafana's steps run by bash here (the head's home under tmp_path): its provisioning, the stack's
    dashboard, and the password's file (0600, no newline: Grafana's __FILE and $__file{} read it whole)."""
    raw = monitored(raw_config)
    raw["monitoring"]["grafanaImage"] = EXAMPLE_IMAGE
    plan = monitoring_plan(stack_of(raw), name="dual-spark")
    assert plan is not None and plan.grafana is not None
    for script in (plan.grafana.files_script(), plan.grafana.secret_script("pw with 'quotes' and $x")):
        ran = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script.replace("/home/aurora", str(tmp_path))],
                             capture_output=True, text=True)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    grafana = tmp_path / "spark-llm" / "monitoring" / "grafana"
    board = json.loads((grafana / "dashboards" / "spark-llm.json").read_text())
    assert board["title"] == "spark-llm: dual-spark" and board["panels"]
    datasource = json.loads((grafana / "provisioning" / "datasources" / "datasource.yaml").read_text())
    [source] = datasource["datasources"]
    assert source["url"] == "http://127.0.0.1:9090" and source["basicAuthUser"] == "spark-llm"
    assert source["secureJsonData"]["basicAuthPassword"] == "$__file{/run/spark-llm/grafana/password}"
    password = grafana / "secret" / "password"
    assert password.read_text() == "pw with 'quotes' and $x" and oct(password.stat().st_mode & 0o777) == "0o600"
