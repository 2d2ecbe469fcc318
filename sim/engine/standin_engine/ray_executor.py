"""vLLM's Ray executor, stood in with real Ray: the group is the Ray cluster the nodes joined with `ray start`.

`vllm serve M --distributed-executor-backend ray -tp N` runs on the head after `ray start --head --num-gpus 1`,
the other nodes having run `ray start --address HEAD:6379 --num-gpus 1`. Like vLLM's RayDistributedExecutor it:
connects with `ray.init(address="auto")`; waits (up to the dist timeout) until the cluster has N GPUs; reserves a
placement group of N `{"GPU": 1}` bundles, the first on the driver's node; starts one `RayWorkerWrapper` actor
per bundle, ranked driver first then by node IP as vLLM sorts its workers; and calls `init_torch_distributed`
on each, which is where the failure knobs of that node's environment (the environment of its `ray start`) fire.
After that the head polls `ray.nodes()` and pings the actors: a node that leaves, or an actor that dies (or stays
unreachable for 3 pings in a row), ends the group.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from datetime import datetime
from typing import Any

from standin_engine.knobs import FailureKnobs
from standin_engine.launch_config import LaunchConfig
from standin_engine.logs import EngineLog
from standin_engine.rendezvous import RendezvousError
from standin_engine.start_phases import hang_forever

POLL_SECONDS = 1.0
WAIT_LOG_EVERY_SECONDS = 10.0
PING_EVERY_SECONDS = 2.0
PING_TIMEOUT_SECONDS = 5.0
UNAVAILABLE_PINGS = 3
RAY_ADDRESS_HINT = "HEAD:6379"


class RayWorkerWrapper:
    """One rank on one Ray node (a GPU bundle), named as vLLM's worker actor so Ray's log prefix reads the same."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size

    def node_info(self) -> dict[str, Any]:
        import ray

        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }

    def init_torch_distributed(self, distributed_init_method: str) -> dict[str, Any]:
        """This rank's distributed init: the failure knobs of this node's environment fire here."""
        knobs = FailureKnobs.from_environ(os.environ, self.world_size, "vllm")
        if knobs.slow_start_seconds:
            self._log(f"Stand-in: STANDIN_SLOW_START_SECONDS delays rank {self.rank} by {knobs.slow_start_seconds:g} s")
            time.sleep(knobs.slow_start_seconds)
        if knobs.hangs_before_rendezvous(self.rank):
            self._log(f"Stand-in: STANDIN_HANG_BEFORE_RENDEZVOUS holds rank {self.rank}; it will never arrive")
            threading.Event().wait()
        self._log(
            f"world_size={self.world_size} rank={self.rank} local_rank=0 "
            f"distributed_init_method={distributed_init_method} backend=nccl",
            source="parallel_state.py:1208",
        )
        if knobs.hangs_in("dist_init", self.rank):
            hang_forever()  # the head's ray.wait then waits out its timeout, as for a rank stuck in NCCL's init
        time.sleep(knobs.seconds_in("dist_init"))
        crash = knobs.claim_crash_at_init(self.rank)
        if crash is not None:
            raise RuntimeError(
                f"[spark-llm stand-in] simulated crash of rank {self.rank} on {socket.gethostname()} "
                f"in init_torch_distributed: {crash}"
            )
        return self.node_info()

    def ping(self) -> int:
        return self.rank

    @staticmethod
    def _log(message: str, source: str = "worker_base.py:611") -> None:
        # Ray forwards this to the driver's stdout as `(RayWorkerWrapper pid=N, ip=A) ...`.
        print(f"INFO {datetime.now().strftime('%m-%d %H:%M:%S')} [{source}] {message}", flush=True)


class RayExecutorGroup:
    """The head's side: form the group out of the Ray cluster's GPU nodes, then watch it."""

    def __init__(self, config: LaunchConfig, log: EngineLog) -> None:
        self._config = config
        self._log = log
        self._members: list[tuple[int, dict[str, Any], Any]] = []  # (rank, Ray node entry, actor)

    def form_group(self) -> None:
        try:
            import ray
            from ray.util.placement_group import placement_group, placement_group_table
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        except ImportError as error:
            raise RendezvousError(
                f"--distributed-executor-backend ray needs Ray, which this Python cannot import ({error}); "
                "the stand-in image has it in /opt/standin/site unless it was built with STANDIN_RAY=0"
            ) from None
        config, log = self._config, self._log
        world = config.world_size
        deadline = time.monotonic() + config.dist_timeout
        ray.init(address="auto", log_to_driver=True, logging_level="WARNING")
        driver_node_id = ray.get_runtime_context().get_node_id()
        log.scheduler(
            f"Connected to the Ray cluster as driver on node {driver_node_id[:12]}; "
            f"the group needs {world} GPU(s) (tensor_parallel_size={config.tp_size} x "
            f"pipeline_parallel_size={config.pp_size})",
            source="ray_utils.py:326",
        )
        driver = self._wait_for_gpu_nodes(ray, driver_node_id, world, deadline)

        specs = [{"GPU": 1.0, f"node:{driver['NodeManagerAddress']}": 0.001}] + [{"GPU": 1.0}] * (world - 1)
        group = placement_group(specs, strategy="PACK")
        remaining = max(deadline - time.monotonic(), 1.0)
        try:
            ray.get(group.ready(), timeout=remaining)
        except ray.exceptions.GetTimeoutError:
            raise RendezvousError(
                f"Cannot provide a placement group of placement_group_specs={specs} within {config.dist_timeout} "
                "seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough resources."
            ) from None
        nodes = {node["NodeID"]: node for node in ray.nodes()}
        bundle_nodes = placement_group_table(group)["bundles_to_node_id"]
        bundles = sorted(bundle_nodes.items(), key=lambda item: _rank_order(nodes[item[1]], driver_node_id))
        method = f"tcp://{driver['NodeManagerAddress']}:{_free_port()}"
        wrapper = ray.remote(RayWorkerWrapper)
        for rank, (bundle_index, node_id) in enumerate(bundles):
            actor = wrapper.options(
                num_cpus=0,
                num_gpus=1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=bundle_index
                ),
            ).remote(rank, world)
            self._members.append((rank, nodes[node_id], actor))
        log.scheduler(
            "Ray group ranks: "
            + ", ".join(f"{rank}={node['NodeManagerAddress']}" for rank, node, _ in self._members)
            + "; calling init_torch_distributed on each",
            source="ray_executor.py:291",
        )
        calls = {actor.init_torch_distributed.remote(method): (rank, node) for rank, node, actor in self._members}
        pending = list(calls)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = sorted(f"{calls[ref][0]} ({calls[ref][1]['NodeManagerAddress']})" for ref in pending)
                raise RendezvousError(
                    f"Timed out after {config.dist_timeout} seconds waiting for the Ray workers' distributed init. "
                    f"{world - len(pending)}/{world} ranks done. Ranks still initialising: {late}"
                )
            done, pending = ray.wait(pending, num_returns=1, timeout=remaining)
            for ref in done:
                rank, node = calls[ref]
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as error:
                    raise RendezvousError(
                        f"rank {rank} on Ray node {node['NodeManagerAddress']} ({node['NodeID'][:12]}) failed its "
                        f"init:\n{error}"
                    ) from None
        log.scheduler(f"Ray group formed: all {world} ranks initialised", source="ray_executor.py:318")

    def wait_for_loss(self) -> str:
        import ray

        # An actor that is only unreachable (ActorUnavailableError: Ray's retryable state) is lost after
        # UNAVAILABLE_PINGS pings in a row; a dead actor or a node marked dead is lost at once.
        unavailable_type = getattr(ray.exceptions, "ActorUnavailableError", ())
        unavailable = {rank: 0 for rank, _, _ in self._members}
        last_ping = time.monotonic()
        while True:
            time.sleep(POLL_SECONDS)
            alive = {node["NodeID"] for node in ray.nodes() if node.get("Alive")}
            for rank, node, _ in self._members:
                if node["NodeID"] not in alive:
                    return (
                        f"rank {rank} on Ray node {node['NodeManagerAddress']} ({node['NodeID'][:12]}, "
                        f"{node.get('NodeManagerHostname')}) left the Ray cluster after the group formed"
                    )
            if time.monotonic() - last_ping < PING_EVERY_SECONDS:
                continue
            last_ping = time.monotonic()
            for rank, node, actor in self._members:
                try:
                    ray.get(actor.ping.remote(), timeout=PING_TIMEOUT_SECONDS)
                    unavailable[rank] = 0
                except (ray.exceptions.GetTimeoutError, *_as_tuple(unavailable_type)) as error:
                    unavailable[rank] += 1
                    if unavailable[rank] >= UNAVAILABLE_PINGS:
                        return _actor_lost(rank, node, error, f"unreachable for {UNAVAILABLE_PINGS} pings in a row")
                except ray.exceptions.RayError as error:
                    return _actor_lost(rank, node, error, "died")

    def _wait_for_gpu_nodes(self, ray: Any, driver_node_id: str, world: int, deadline: float) -> dict[str, Any]:
        """The driver's node entry, once the cluster's live nodes have `world` GPUs; RendezvousError at the deadline."""
        log, config = self._log, self._config
        next_log = time.monotonic()
        while True:
            nodes = ray.nodes()
            alive = [node for node in nodes if node.get("Alive")]
            driver = next((node for node in alive if node["NodeID"] == driver_node_id), None)
            if driver is None or _gpus(driver) < 1:
                raise RendezvousError(
                    "Current node has no GPU available. "
                    f"current_node_resource={driver.get('Resources') if driver else None}. vLLM engine cannot start "
                    "without GPU. Make sure you have at least 1 GPU available in a node "
                    f"current_node_id={driver_node_id} (stand-in: start the head with `ray start --head --num-gpus 1`)"
                )
            gpu_nodes = [node for node in alive if _gpus(node) >= 1]
            gpus = sum(_gpus(node) for node in gpu_nodes)
            if gpus >= world:
                return driver
            if time.monotonic() >= deadline:
                dead = [node["NodeManagerAddress"] for node in nodes if not node.get("Alive")]
                no_gpu = [node["NodeManagerAddress"] for node in alive if _gpus(node) < 1]
                raise RendezvousError(
                    f"Timed out after {config.dist_timeout} seconds waiting for {world} GPUs in the Ray cluster: "
                    f"{gpus:g} present on {len(gpu_nodes)} node(s) {[node['NodeManagerAddress'] for node in gpu_nodes]}"
                    f"; missing {world - gpus:g} node(s) with a GPU. Dead nodes: {dead}. Nodes without a GPU: "
                    f"{no_gpu}. Start each missing worker with `ray start --address {RAY_ADDRESS_HINT} --num-gpus 1`."
                )
            if time.monotonic() >= next_log:
                next_log = time.monotonic() + WAIT_LOG_EVERY_SECONDS
                log.scheduler(
                    f"Waiting for {world} GPUs in the Ray cluster: {gpus:g} present on "
                    f"{[node['NodeManagerAddress'] for node in gpu_nodes]}. Check `ray status` and `ray list nodes`.",
                    level="WARNING",
                    source="ray_utils.py:251",
                )
            time.sleep(POLL_SECONDS)


def _as_tuple(error_type: type | tuple) -> tuple:
    return error_type if isinstance(error_type, tuple) else (error_type,)


def _actor_lost(rank: int, node: dict[str, Any], error: Exception, how: str) -> str:
    first_line = str(error).splitlines()[0] if str(error) else ""
    return (
        f"the RayWorkerWrapper of rank {rank} on {node['NodeManagerAddress']} {how}: "
        f"{type(error).__name__}: {first_line}"
    )


def _gpus(node: dict[str, Any]) -> float:
    return float(node.get("Resources", {}).get("GPU", 0))


def _rank_order(node: dict[str, Any], driver_node_id: str) -> tuple:
    """vLLM's worker order: the driver's node first, then by IP address."""
    address = node["NodeManagerAddress"]
    try:
        ip = ipaddress.ip_address(address)
        key: tuple = (0, ip.version, int(ip), "")
    except ValueError:
        key = (1, 0, 0, address)
    return (node["NodeID"] != driver_node_id, *key)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]
