"""HTTP side of a node: the OpenAI-compatible API on node rank 0, only the health endpoints on the others."""

from __future__ import annotations

import hmac
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from standin_engine import STANDIN_FINGERPRINT
from standin_engine.engine_state import EngineState
from standin_engine.generation import Generation, count_tokens, generate
from standin_engine.knobs import answer_salt, hold_while_wedged
from standin_engine.logs import EngineLog
from standin_engine.metrics import RunningRequest, arrived
from standin_engine.openai_requests import (
    ApiError,
    chat_chunks,
    chat_prompt,
    check_context,
    choice_count,
    completion_chunks,
    include_usage,
    max_tokens_of,
    prompts_of,
    stop_strings,
    usage_block,
)

HEALTH_PATHS = {"sglang": ("/health", "/health_generate"), "vllm": ("/health", "/ping")}
# The routes that generate: the wedge knob (knobs.hold_while_wedged) holds them; /health and /ping stay up.
GENERATING_PATHS = ("/health_generate", "/v1/completions", "/v1/chat/completions")
API_PATHS = ("/v1/completions", "/v1/chat/completions")  # the requests the engine's metrics count
DEFAULT_COMPLETION_MAX_TOKENS = 16  # the OpenAI completions default
MAX_REQUEST_BYTES = 8 * 1024 * 1024


class EngineHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer bound to --host/--port that hands its handlers the engine state and log."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: EngineState, log: EngineLog) -> None:
        self.state = state
        self.log = log
        if ":" in state.config.host:
            self.address_family = socket.AF_INET6
        super().__init__((state.config.host, state.config.port), EngineRequestHandler)


class EngineRequestHandler(BaseHTTPRequestHandler):
    """Routes one request; health checks are never access-logged, API calls are, in uvicorn's shape."""

    server: EngineHTTPServer
    server_version = STANDIN_FINGERPRINT
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        metrics = {"/metrics": self._metrics} if self.server.state.metrics is not None else {}
        if self.server.state.config.engine == "vllm":
            self._dispatch({"/v1/models": self._models, "/version": self._version, **metrics})
            return
        self._dispatch(
            {
                "/v1/models": self._models,
                "/get_model_info": self._model_info,
                "/get_server_info": self._server_info,
                **metrics,
            }
        )

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self._dispatch(
            {
                "/v1/completions": self._completions,
                "/v1/chat/completions": self._chat_completions,
            }
        )

    def _dispatch(self, routes: dict) -> None:
        path = urlsplit(self.path).path
        self.request: RunningRequest | None = None
        if path in API_PATHS:
            # Waiting from the moment it arrives, running once scheduled (`_schedule`): one the wedge knob holds stays
            # running, and no token comes.
            with arrived(self.server.state.metrics) as self.request:
                self._dispatch_now(path, routes)
            return
        self._dispatch_now(path, routes)

    def _dispatch_now(self, path: str, routes: dict) -> None:
        state = self.server.state
        try:
            if path in GENERATING_PATHS and path not in API_PATHS and state.ready:
                self._schedule(0)  # /health_generate: a generation with no body
            # vLLM's /ping (SageMaker's health route) answers POST too.
            if path in HEALTH_PATHS[state.config.engine] and (self.command == "GET" or path == "/ping"):
                self._health()
                return
            route = routes.get(path) if state.config.serves_api else None
            if route is None:
                raise ApiError(HTTPStatus.NOT_FOUND, f"{self.command} {path} is not served by this node")
            if not self._authorized(path):
                # Both engines' API-key middleware: the /v1 routes only (health stays open), a bare JSON error.
                self.close_connection = True
                self._send_json(HTTPStatus.UNAUTHORIZED, {"error": "Unauthorized"})
                return
            body = self._read_json() if self.command == "POST" else {}
            if not state.ready:
                raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, f"stand-in engine not ready: {state.phase}")
            route(body)
        except ApiError as error:
            self.close_connection = True  # the request body may be unread; never reuse this connection
            self._send_json(
                error.status,
                {
                    "object": "error",
                    "message": error.message,
                    "type": error.status.phrase.replace(" ", ""),
                    "param": None,
                    "code": error.status.value,
                    "system_fingerprint": STANDIN_FINGERPRINT,
                },
            )
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _authorized(self, path: str) -> bool:
        key = self.server.state.config.api_key
        if not key or not path.startswith("/v1"):
            return True
        given = self.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {key}".encode())

    def _health(self) -> None:
        state = self.server.state
        if state.ready:
            self._send_text(HTTPStatus.OK, f"{STANDIN_FINGERPRINT}: ready\n")
        else:
            self._send_text(HTTPStatus.SERVICE_UNAVAILABLE, f"{STANDIN_FINGERPRINT}: not ready: {state.phase}\n")

    def _metrics(self, _body: dict) -> None:
        assert self.server.state.metrics is not None
        text = self.server.state.metrics.render().encode()
        self._send_bytes(HTTPStatus.OK, text, "text/plain; version=0.0.4; charset=utf-8")

    def _schedule(self, tokens: int) -> None:
        """The request is the engine's now (read and checked): its `tokens` (prompt and room to generate) hold KV
        cache while it runs, and here the wedge knob holds it, as a hung collective holds a scheduled batch."""
        if self.request is not None:
            self.request.schedule(tokens, self.server.state.slots)
        hold_while_wedged(os.environ)
        if not self.server.state.take_answer():
            threading.Event().wait()  # wedged for good (knobs.wedge_after_answers): no answer, ever

    def _counted(self, prompt_tokens: int, generations: list[Generation], stream: bool) -> None:
        metrics = self.server.state.metrics
        if metrics is not None and self.request is not None:
            tokens = [g.completion_tokens for g in generations]
            reasons = [g.finish_reason or "stop" for g in generations]
            metrics.finished(self.request, prompt_tokens, tokens, reasons, stream)

    def _models(self, _body: dict) -> None:
        config = self.server.state.config
        self._send_json(
            HTTPStatus.OK,
            {
                "object": "list",
                "data": [
                    {
                        "id": config.served_model_name,
                        "object": "model",
                        "created": self.server.state.created,
                        "owned_by": STANDIN_FINGERPRINT,
                        "root": config.model_path,
                        "max_model_len": config.context_length,
                    }
                ],
            },
        )

    def _version(self, _body: dict) -> None:
        self._send_json(HTTPStatus.OK, {"version": self.server.state.config.engine_version})

    def _model_info(self, _body: dict) -> None:
        config = self.server.state.config
        self._send_json(
            HTTPStatus.OK,
            {
                "model_path": config.model_path,
                "tokenizer_path": config.model_path,
                "is_generation": True,
                "served_model_name": config.served_model_name,
                "system_fingerprint": STANDIN_FINGERPRINT,
            },
        )

    def _server_info(self, _body: dict) -> None:
        self._send_json(
            HTTPStatus.OK,
            {
                # asdict copies every field: the API key is dropped from the answer, as from the log.
                **{k: v for k, v in asdict(self.server.state.config).items() if k != "api_key"},
                "version": STANDIN_FINGERPRINT,
                "system_fingerprint": STANDIN_FINGERPRINT,
            },
        )

    def _completions(self, body: dict) -> None:
        config = self.server.state.config
        prompts = prompts_of(body.get("prompt"))
        max_tokens = max_tokens_of(body.get("max_tokens"), DEFAULT_COMPLETION_MAX_TOKENS)
        choices_per_prompt = choice_count(body.get("n"))
        stop = stop_strings(body.get("stop"))
        salt = answer_salt(os.environ)
        generations: list[Generation] = []
        for prompt in prompts:
            check_context(config, count_tokens(prompt), max_tokens)
        prompt_tokens = sum(count_tokens(prompt) for prompt in prompts)
        self._schedule(prompt_tokens + max_tokens * choices_per_prompt * len(prompts))
        for prompt in prompts:
            generations += [
                generate(
                    model=config.served_model_name,
                    prompt=prompt,
                    max_tokens=max_tokens,
                    stop=stop,
                    choice_index=index,
                    leading_space=True,
                    salt=salt,
                )
                for index in range(choices_per_prompt)
            ]
        envelope = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": config.served_model_name,
            "system_fingerprint": STANDIN_FINGERPRINT,
        }
        usage = usage_block(prompt_tokens, generations)
        self._counted(prompt_tokens, generations, bool(body.get("stream")))
        if body.get("stream"):
            self._send_stream(completion_chunks(envelope, generations, usage if include_usage(body) else None))
            return
        self._send_json(
            HTTPStatus.OK,
            {
                **envelope,
                "object": "text_completion",
                "choices": [
                    {
                        "index": index,
                        "text": generation.text,
                        "logprobs": None,
                        "finish_reason": generation.finish_reason,
                    }
                    for index, generation in enumerate(generations)
                ],
                "usage": usage,
            },
        )

    def _chat_completions(self, body: dict) -> None:
        config = self.server.state.config
        prompt = chat_prompt(body.get("messages"))
        prompt_tokens = count_tokens(prompt)
        requested = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = max_tokens_of(requested, max(config.context_length - prompt_tokens, 0))
        check_context(config, prompt_tokens, max_tokens)
        stop = stop_strings(body.get("stop"))
        salt = answer_salt(os.environ)
        self._schedule(prompt_tokens + max_tokens * choice_count(body.get("n")))
        generations = [
            generate(
                model=config.served_model_name,
                prompt=prompt,
                max_tokens=max_tokens,
                stop=stop,
                choice_index=index,
                leading_space=False,
                salt=salt,
            )
            for index in range(choice_count(body.get("n")))
        ]
        envelope = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": config.served_model_name,
            "system_fingerprint": STANDIN_FINGERPRINT,
        }
        usage = usage_block(prompt_tokens, generations)
        self._counted(prompt_tokens, generations, bool(body.get("stream")))
        if body.get("stream"):
            self._send_stream(chat_chunks(envelope, generations, usage if include_usage(body) else None))
            return
        self._send_json(
            HTTPStatus.OK,
            {
                **envelope,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": index,
                        "message": {"role": "assistant", "content": generation.text},
                        "logprobs": None,
                        "finish_reason": generation.finish_reason,
                    }
                    for index, generation in enumerate(generations)
                ],
                "usage": usage,
            },
        )

    def _read_json(self) -> dict:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(HTTPStatus.BAD_REQUEST, "Content-Length is not a number") from None
        if length > MAX_REQUEST_BYTES:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_REQUEST_BYTES} bytes")
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError as error:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"request body is not JSON: {error}") from None
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object")
        return body

    def _send_json(self, status: HTTPStatus, payload: dict) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json")

    def _send_text(self, status: HTTPStatus, text: str) -> None:
        self._send_bytes(status, text.encode(), "text/plain; charset=utf-8")

    def _send_bytes(self, status: HTTPStatus, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, chunks: Iterator[dict]) -> None:
        """Server-sent events, one `data:` line a chunk, then `data: [DONE]`; the connection closes after it."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if urlsplit(self.path).path in HEALTH_PATHS[self.server.state.config.engine]:
            return
        status = HTTPStatus(int(code)) if str(code).isdigit() else None
        phrase = f"{status.value} {status.phrase}" if status else str(code)
        self.server.log.server(
            f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" {phrase}'
        )

    def log_message(self, format: str, *args: object) -> None:
        self.server.log.server(f"WARNING:  {self.client_address[0]} - {format % args}")
