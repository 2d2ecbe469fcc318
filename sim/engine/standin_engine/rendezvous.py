"""TCP rendezvous standing in for torch.distributed's: node rank 0 listens, the others join, the group is watched.

Wire protocol: one JSON object per line. A worker sends `hello` (node rank, nnodes, tp size, model path and the
group digest); rank 0 answers `welcome` or `refused`, and `go` once all ranks joined. Both sides then send `ping`
every HEARTBEAT_INTERVAL_SECONDS and treat a closed connection, or silence for HEARTBEAT_TIMEOUT_SECONDS, as the
peer gone, which ends the group as a dead NCCL communicator would.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from typing import Protocol

from standin_engine.launch_config import LaunchConfig
from standin_engine.logs import EngineLog

PROTOCOL = "spark-llm-standin-rendezvous/1"
HEARTBEAT_INTERVAL_SECONDS = 1.0
HEARTBEAT_TIMEOUT_SECONDS = 10.0
HANDSHAKE_TIMEOUT_SECONDS = 10.0
CONNECT_ATTEMPT_TIMEOUT_SECONDS = 5.0
CONNECT_RETRY_SECONDS = 1.0
MAX_MESSAGE_BYTES = 64 * 1024


class RendezvousError(RuntimeError):
    """The group could not form: a timeout, a refusal, or rank 0 gone before the go."""


class ProcessGroup(Protocol):
    """What the launcher needs from a group: form it, then block until a member is lost."""

    def form_group(self) -> None:
        """Return once every rank has joined; raise RendezvousError otherwise."""

    def wait_for_loss(self) -> str:
        """Block until the group breaks; return a sentence saying which rank went and how."""


def process_group(config: LaunchConfig, log: EngineLog) -> ProcessGroup:
    """The group for this node's role: single node, head (rank 0) or worker."""
    if config.nnodes == 1:
        return SingleNodeGroup()
    if config.is_head:
        return HeadRendezvous(config, log)
    return WorkerRendezvous(config, log)


class SingleNodeGroup:
    """A group of one: nothing to wait for, nothing to lose."""

    def form_group(self) -> None:
        return None

    def wait_for_loss(self) -> str:
        threading.Event().wait()
        return "unreachable"


class _LineChannel:
    """JSON messages, one a line, over one TCP connection; sends from several threads are serialised."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self._buffer = b""
        self._send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self._send_lock:
            self.sock.sendall(data)

    def receive(self, timeout: float) -> dict | None:
        """The next message; None once the peer closed; TimeoutError when none came in time."""
        self.sock.settimeout(max(timeout, 0.001))
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                return None
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                raise ValueError(f"message from {self.peer} longer than {MAX_MESSAGE_BYTES} bytes")
        line, _, self._buffer = self._buffer.partition(b"\n")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError(f"message from {self.peer} is not a JSON object")
        return message

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _peer_name(address: tuple) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _socket_family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class HeadRendezvous:
    """Node rank 0: listens on --dist-init-addr, admits matching ranks, sends the go, watches every member."""

    def __init__(self, config: LaunchConfig, log: EngineLog) -> None:
        self._config = config
        self._log = log
        self._changed = threading.Condition()
        self._members: dict[int, _LineChannel] = {}
        self._formed = False
        self._lost: set[int] = set()
        self._losses: queue.Queue[str] = queue.Queue()

    def form_group(self) -> None:
        host, port = self._config.rendezvous_address()
        nnodes, timeout = self._config.nnodes, self._config.dist_timeout
        # As torch's TCPStore server: it listens on every address of rank 0's node (the host in --dist-init-addr is
        # where the other ranks connect, not a bind address), so the management network reaches it unless a
        # firewall (spark-llm:network.firewall) refuses it there.
        family = _socket_family(host)
        every = "::" if family == socket.AF_INET6 else "0.0.0.0"
        try:
            listener = socket.create_server((every, port), family=family, backlog=64)
        except OSError as error:
            raise RendezvousError(
                f"The server socket has failed to listen on any local network address. port: {port}, "
                f"useIpv6: {family == socket.AF_INET6} ({error.strerror or error})"
            ) from error
        self._log.scheduler(
            f"Rendezvous: rank 0 listening on {every}:{port} (for {host}) for {nnodes - 1} more node ranks "
            f"(group digest {self._config.group_digest}, timeout {timeout} s)"
        )
        threading.Thread(target=self._accept_members, args=(listener,), name="rendezvous-accept", daemon=True).start()
        threading.Thread(target=self._send_heartbeats, name="rendezvous-heartbeat", daemon=True).start()
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._members) < nnodes - 1:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(1, nnodes)) - set(self._members))
                    raise RendezvousError(
                        f"Timed out after {timeout} seconds waiting for clients. "
                        f"{len(self._members) + 1}/{nnodes} clients joined. Missing node ranks: {missing}"
                    )
                self._changed.wait(remaining)
            self._formed = True
            members = sorted(self._members.items())
        for rank, channel in members:
            try:
                channel.send({"type": "go", "nnodes": nnodes})
            except OSError as error:
                self._member_lost(rank, channel, f"sending the go failed: {error}")
        self._log.scheduler(f"Rendezvous: all {nnodes} node ranks joined; the group is formed")

    def wait_for_loss(self) -> str:
        return self._losses.get()

    def _accept_members(self, listener: socket.socket) -> None:
        while True:
            try:
                connection, address = listener.accept()
            except OSError as error:
                self._log.scheduler(f"Rendezvous: accept failed: {error}")
                time.sleep(CONNECT_RETRY_SECONDS)
                continue
            channel = _LineChannel(connection, _peer_name(address))
            threading.Thread(target=self._admit_member, args=(channel,), name="rendezvous-member", daemon=True).start()

    def _admit_member(self, channel: _LineChannel) -> None:
        try:
            hello = channel.receive(HANDSHAKE_TIMEOUT_SECONDS)
        except (OSError, ValueError):
            hello = None
        if hello is None or hello.get("protocol") != PROTOCOL or hello.get("type") != "hello":
            self._log.scheduler(f"Rendezvous: ignored a connection from {channel.peer} that sent no stand-in hello")
            channel.close()
            return
        rank = hello.get("node_rank")
        with self._changed:
            refusal = self._refusal(hello)
            if refusal is None:
                self._members[rank] = channel
                present = len(self._members) + 1
                try:
                    channel.send({"type": "welcome", "present": present, "nnodes": self._config.nnodes})
                except OSError:
                    del self._members[rank]
                    return
                self._changed.notify_all()
        if refusal is not None:
            self._log.scheduler(f"Rendezvous: refused node rank {rank} from {channel.peer}: {refusal}")
            try:
                channel.send({"type": "refused", "reason": refusal})
            except OSError:
                pass
            channel.close()
            return
        self._log.scheduler(
            f"Rendezvous: node rank {rank} joined from {channel.peer} "
            f"({present}/{self._config.nnodes} node ranks present)"
        )
        self._watch_member(rank, channel)

    def _refusal(self, hello: dict) -> str | None:
        """Why this hello cannot join the group, or None; called with the lock held."""
        config = self._config
        rank = hello.get("node_rank")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank < config.nnodes:
            return f"node rank {rank!r} is not one of 1..{config.nnodes - 1} in a group of {config.nnodes}"
        if hello.get("digest") != config.group_digest:
            return (
                f"config digest {hello.get('digest')} (model_path={hello.get('model_path')!r}, "
                f"tp_size={hello.get('tp_size')}, nnodes={hello.get('nnodes')}) differs from rank 0's "
                f"{config.group_digest} (model_path={config.model_path!r}, tp_size={config.tp_size}, "
                f"nnodes={config.nnodes}): every rank must be launched with the same --model-path, --tp-size "
                "and --nnodes"
            )
        if self._formed:
            return "the group has already formed; restart every rank to form a new one"
        if rank in self._members:
            return f"node rank {rank} already joined from {self._members[rank].peer}"
        return None

    def _watch_member(self, rank: int, channel: _LineChannel) -> None:
        while True:
            try:
                message = channel.receive(HEARTBEAT_TIMEOUT_SECONDS)
            except TimeoutError:
                why = f"no heartbeat for {HEARTBEAT_TIMEOUT_SECONDS:.0f} s"
            except (OSError, ValueError) as error:
                why = f"connection error: {error}"
            else:
                if message is not None:
                    continue
                why = "connection closed"
            self._member_lost(rank, channel, why)
            return

    def _member_lost(self, rank: int, channel: _LineChannel, why: str) -> None:
        with self._changed:
            if self._members.get(rank) is not channel or rank in self._lost:
                return
            if not self._formed:
                del self._members[rank]
                self._log.scheduler(
                    f"Rendezvous: node rank {rank} ({channel.peer}) left before the group formed "
                    f"({why}); waiting for it again"
                )
                channel.close()
                return
            self._lost.add(rank)
        self._losses.put(f"node rank {rank} ({channel.peer}) left the process group after it formed: {why}")

    def _send_heartbeats(self) -> None:
        while True:
            time.sleep(HEARTBEAT_INTERVAL_SECONDS)
            with self._changed:
                members = list(self._members.items())
            for rank, channel in members:
                try:
                    channel.send({"type": "ping"})
                except OSError as error:
                    self._member_lost(rank, channel, f"heartbeat send failed: {error}")


class WorkerRendezvous:
    """Node rank > 0: reaches rank 0 with bounded retries, says hello, waits for the go, watches rank 0."""

    def __init__(self, config: LaunchConfig, log: EngineLog) -> None:
        self._config = config
        self._log = log
        self._channel: _LineChannel | None = None

    def form_group(self) -> None:
        config = self._config
        deadline = time.monotonic() + config.dist_timeout
        channel = self._connect(deadline)
        channel.send(
            {
                "protocol": PROTOCOL,
                "type": "hello",
                "node_rank": config.node_rank,
                "nnodes": config.nnodes,
                "tp_size": config.tp_size,
                "model_path": config.model_path,
                "digest": config.group_digest,
            }
        )
        try:
            reply = channel.receive(min(HANDSHAKE_TIMEOUT_SECONDS, max(deadline - time.monotonic(), 1.0)))
        except TimeoutError:
            raise RendezvousError(f"rank 0 at {channel.peer} did not answer this rank's hello") from None
        if reply is None:
            raise RendezvousError(f"rank 0 at {channel.peer} closed the connection during the handshake")
        if reply.get("type") == "refused":
            reason = reply.get("reason")
            raise RendezvousError(f"rank 0 at {channel.peer} refused node rank {config.node_rank}: {reason}")
        if reply.get("type") != "welcome":
            raise RendezvousError(f"rank 0 at {channel.peer} answered the hello with {reply!r}")
        self._log.scheduler(
            f"Rendezvous: joined rank 0 at {channel.peer} ({reply.get('present')}/{config.nnodes} "
            "node ranks present); waiting for the group to form"
        )
        self._channel = channel
        threading.Thread(
            target=self._send_heartbeats, args=(channel,), name="rendezvous-heartbeat", daemon=True
        ).start()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RendezvousError(
                    f"Timed out after {config.dist_timeout} seconds waiting for the group at {channel.peer} to form"
                )
            try:
                message = channel.receive(min(HEARTBEAT_TIMEOUT_SECONDS, remaining))
            except TimeoutError:
                if deadline - time.monotonic() <= 0:
                    continue
                raise RendezvousError(
                    f"no heartbeat from rank 0 at {channel.peer} for {HEARTBEAT_TIMEOUT_SECONDS:.0f} s"
                ) from None
            if message is None:
                raise RendezvousError(f"rank 0 at {channel.peer} closed the connection before the group formed")
            if message.get("type") == "go":
                break
        self._log.scheduler(f"Rendezvous: the group is formed ({config.nnodes} node ranks)")

    def wait_for_loss(self) -> str:
        channel = self._channel
        if channel is None:
            raise RuntimeError("wait_for_loss called before form_group")
        while True:
            try:
                message = channel.receive(HEARTBEAT_TIMEOUT_SECONDS)
            except TimeoutError:
                return f"no heartbeat from rank 0 at {channel.peer} for {HEARTBEAT_TIMEOUT_SECONDS:.0f} s"
            except (OSError, ValueError) as error:
                return f"connection to rank 0 at {channel.peer} failed: {error}"
            if message is None:
                return f"rank 0 at {channel.peer} closed the connection"

    def _connect(self, deadline: float) -> _LineChannel:
        host, port = self._config.rendezvous_address()
        attempts = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RendezvousError(
                    f"The client socket has timed out after {self._config.dist_timeout}s while trying to connect to "
                    f"({host}, {port}) after {attempts} attempts"
                )
            try:
                sock = socket.create_connection((host, port), timeout=min(CONNECT_ATTEMPT_TIMEOUT_SECONDS, remaining))
            except OSError as error:
                attempts += 1
                # Log the first failure and then every tenth, as torch's client socket does, not every retry.
                if attempts == 1 or attempts % 10 == 0:
                    self._log.scheduler(
                        f"[W socket] The client socket has failed to connect to {host}:{port} "
                        f"(errno: {error.errno} - {error.strerror or error}); retrying until the dist timeout"
                    )
                time.sleep(min(CONNECT_RETRY_SECONDS, max(deadline - time.monotonic(), 0.0)))
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return _LineChannel(sock, _peer_name(sock.getpeername()))

    @staticmethod
    def _send_heartbeats(channel: _LineChannel) -> None:
        while True:
            time.sleep(HEARTBEAT_INTERVAL_SECONDS)
            try:
                channel.send({"type": "ping"})
            except OSError:
                return
