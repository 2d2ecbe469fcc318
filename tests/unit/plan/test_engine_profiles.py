"""Engine profiles: the command, environment and docker options each node gets, per engine."""

from __future__ import annotations

import os
import subprocess

import pytest

from spark_llm.plan.engines import PROFILES, profile_for
from spark_llm.plan.engines.common import Member, Topology
from spark_llm.plan.engines.vllm import ray_auth_check

HEAD = Member("spark-1", 0, "192.168.200.12")
WORKER = Member("spark-2", 1, "192.168.200.13")


def topo(**overrides) -> Topology:
    base = dict(
        members=(HEAD, WORKER),
        model_path="/models/qwen",
        served_name="Qwen/Qwen3.5-122B-A10B-FP8",
        api_port=30000,
        dist_port=20000,
        user_flags=("--mem-fraction-static", "0.8"),
        fabric_interfaces=("enp1s0f0np0",),
        roce_devices=("rocep1s0f0", "roceP2p1s0f0"),
        ray_token_file="/spark-llm/ray-token",
    )
    base.update(overrides)
    return Topology(**base)


def argv(profile: str, member: Member, **overrides) -> list[str]:
    kind, executor = profile.split("/")
    return list(profile_for(kind, executor).launch(topo(**overrides), member).argv)


def test_sglang_every_rank_runs_the_server_and_only_rank_0_listens_outside():
    head, worker = argv("sglang/native", HEAD), argv("sglang/native", WORKER)
    assert head[:3] == ["python3", "-m", "sglang.launch_server"]
    for cmd, rank in ((head, "0"), (worker, "1")):
        assert cmd[cmd.index("--node-rank") + 1] == rank
        assert cmd[cmd.index("--dist-init-addr") + 1] == "192.168.200.12:20000"
        assert cmd[cmd.index("--nnodes") + 1] == "2" and cmd[cmd.index("--tp-size") + 1] == "2"
    assert "--host" in head and "--host" not in worker
    assert head[-2:] == ["--mem-fraction-static", "0.8"]  # user flags last


def test_sglang_host_ip_is_the_nodes_fabric_address():
    launch = PROFILES[("sglang", "native")].launch(topo(), WORKER)
    assert launch.env["SGLANG_HOST_IP"] == "192.168.200.13"


def test_vllm_native_workers_are_headless_and_the_head_serves():
    head, worker = argv("vllm/native", HEAD), argv("vllm/native", WORKER)
    assert head[:3] == ["vllm", "serve", "/models/qwen"]
    assert "--headless" in worker and "--headless" not in head
    assert worker[worker.index("--master-addr") + 1] == "192.168.200.12"
    assert worker[worker.index("--master-port") + 1] == "20000"
    assert head[head.index("--port") + 1] == "30000" and "--port" not in worker
    assert head[head.index("--tensor-parallel-size") + 1] == "2"


def test_vllm_ray_workers_join_the_head_and_the_head_waits_for_every_gpu():
    worker = argv("vllm/ray", WORKER)
    head = argv("vllm/ray", HEAD)
    assert worker[:2] == ["bash", "-c"] and "ray start --address=192.168.200.12:6379" in worker[2]
    assert "--node-ip-address=192.168.200.13" in worker[2]
    script = head[2]
    assert script.index("ray start --head") < script.index("ok = gpus >= 2") < script.index("Ray cluster ready")
    assert script.index("ray status") < script.index("exec vllm serve /models/qwen")
    assert "--distributed-executor-backend ray" in script


def test_every_ray_node_runs_with_token_auth_read_from_the_token_file():
    for member in (HEAD, WORKER):
        launch = PROFILES[("vllm", "ray")].launch(topo(), member)
        assert launch.env["RAY_AUTH_MODE"] == "token"
        assert launch.env["RAY_AUTH_TOKEN_PATH"] == "/spark-llm/ray-token"
        # The token itself travels in the file only: no RAY_AUTH_TOKEN in the container's environment.
        assert "RAY_AUTH_TOKEN" not in launch.env
    assert "RAY_AUTH_MODE" not in PROFILES[("vllm", "native")].launch(topo(), WORKER).env


def test_the_ray_head_starts_no_dashboard_and_keeps_rays_job_api_on_loopback():
    script = argv("vllm/ray", HEAD)[2]
    head_start = next(line for line in script.splitlines() if line.startswith("ray start --head"))
    assert "--node-ip-address=192.168.200.12" in head_start
    assert "--include-dashboard=false" in head_start and "--dashboard-host=127.0.0.1" in head_start
    assert "0.0.0.0" not in head_start


@pytest.mark.parametrize(
    ("version", "starts"), [("2.60.0", True), ("2.52.0", True), ("3.0.0.dev0", True), ("2.51.1", False)]
)
def test_a_ray_without_token_auth_stops_the_node_before_ray_starts(tmp_path, version, starts):
    # A Ray older than 2.52 ignores RAY_AUTH_MODE: the node must not start it. The check runs as rendered, with a
    # stand-in `ray` package of that version on PYTHONPATH.
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    for member in (HEAD, WORKER):
        script = argv("vllm/ray", member)[2]
        check = ray_auth_check()
        assert script.startswith(check)  # before any `ray start`
        done = subprocess.run(
            ["bash", "-c", check + "echo ray would start"],
            capture_output=True,
            text=True,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)},
        )
        if starts:
            assert done.returncode == 0 and done.stdout.endswith("ray would start\n"), done
        else:
            assert done.returncode == 1 and "ray would start" not in done.stdout
            assert f"Ray {version} in this image has no token authentication (Ray >= 2.52)" in done.stderr
            assert "Use an image with Ray 2.52 or newer (spark-llm:image.ref)" in done.stderr


def test_the_ray_profile_refuses_to_run_without_a_token_file():
    with pytest.raises(ValueError, match="Ray token file"):
        PROFILES[("vllm", "ray")].launch(topo(ray_token_file=None), HEAD)


def test_vllm_env_pins_the_fabric_and_disables_rays_memory_monitor():
    env = PROFILES[("vllm", "ray")].launch(topo(), WORKER).env
    assert env["VLLM_HOST_IP"] == "192.168.200.13" and env["RAY_memory_monitor_refresh_ms"] == "0"


def test_ray_logs_read_as_text_and_report_no_usage():
    for member in (HEAD, WORKER):
        env = PROFILES[("vllm", "ray")].launch(topo(), member).env
        assert env["RAY_COLOR_PREFIX"] == "0" and env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert "RAY_COLOR_PREFIX" not in PROFILES[("vllm", "native")].launch(topo(), WORKER).env


@pytest.mark.parametrize("profile", list(PROFILES))
def test_fabric_env_comes_from_one_network_declaration(profile):
    env = PROFILES[profile].launch(topo(), WORKER).env
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == env["UCX_NET_DEVICES"] == "enp1s0f0np0"
    assert env["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"


def test_no_fabric_declared_means_no_nccl_guessing():
    env = PROFILES[("sglang", "native")].launch(topo(fabric_interfaces=(), roce_devices=()), WORKER).env
    assert not any(k.startswith(("NCCL_", "GLOO_", "UCX_")) for k in env)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: sglang/native, vllm/native, vllm/ray"):
        profile_for("sglang", "ray")


@pytest.mark.parametrize("profile", ["sglang/native", "vllm/native", "vllm/ray"])
def test_the_head_api_listens_on_engine_host(profile):
    kind, executor = profile.split("/")
    head = " ".join(profile_for(kind, executor).launch(topo(api_host="10.1.230.180"), HEAD).argv)
    assert "--host 10.1.230.180" in head and "0.0.0.0" not in head
