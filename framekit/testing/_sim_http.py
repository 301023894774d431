"""The judge simulator's server: a bare ``asyncio.Protocol`` speaking HTTP/1.1.

Why not aiohttp.web or http.server: a hand-rolled protocol serves several thousand
requests/s on one core, which a load test of framekit's engine needs; the HTTP subset
the OpenAI clients use (keep-alive, ``Content-Length`` bodies, no chunked requests) is
small. :class:`SimApp` holds all state and decides every reply; :class:`_Connection`
only frames bytes. Everything runs on one event loop, so the state needs no locks;
other threads reach it through ``loop.call_soon_threadsafe`` (see ``simulator.py``).

Order of checks for an API request: parse -> record -> API key (401) -> storm ->
rpm bucket (429) -> [chat only: reject_response_format, reject_logprobs (400) -> marker fault ->
random fault] -> latency -> reply.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import hashlib
import json
import math
import random
import time
from collections import deque
from typing import Any

from framekit.testing import _sim_answers as answers
from framekit.testing import _sim_batch, _sim_cache, _sim_echo
from framekit.testing._sim_config import SimulatorConfig
from framekit.testing._sim_reply import Reply, error_body

CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
#: Anthropic's Messages API: the same answers, in its request and reply shapes.
MESSAGES_PATHS = frozenset({"/v1/messages"})
EMBEDDING_PATHS = frozenset({"/v1/embeddings", "/embeddings"})
# The body fields that make two requests "the same request" for ``first=N``;
# everything else (user, metadata, timeouts...) is volatile.
IDENTITY_FIELDS = ("model", "messages", "response_format", "tools", "tool_choice")
_ERROR_STATUSES = {"400": 400, "401": 401, "429": 429, "500": 500, "503": 503}
#: Answers no client can read, whatever it retries (``@sim(fault=...)``), as broken
#: gateways give them: see :func:`unreadable`.
_UNREADABLE = frozenset({"badutf8", "error200", "echo500"})
_RATE_FIELDS = (
    ("500", "error_500_rate"),
    ("503", "error_503_rate"),
    ("hang", "hang_rate"),
    ("drop", "drop_rate"),
    ("malformed", "malformed_rate"),
    ("null", "null_content_rate"),
    ("refusal", "refusal_rate"),
)
_MAX_HEAD = 64 * 1024
# Above OpenAI's 200 MB batch-file limit: a provider-sized upload must get through.
_MAX_BODY = 256 * 1024 * 1024
_TRICKLE_PIECES = 8


def _json(value: Any) -> Reply:
    return Reply(200, json.dumps(value).encode(), api=False)


def refill(bucket: float, elapsed: float, rpm: float) -> float:
    """The rpm token bucket after ``elapsed`` seconds: capacity ``max(1, rpm/60)`` (about
    one second of budget), refilled continuously at ``rpm/60`` a second.

    >>> refill(0.0, 0.25, 600), refill(0.0, 60.0, 600), refill(0.0, 60.0, 30)
    (2.5, 10.0, 1.0)
    """
    rate = rpm / 60.0
    return min(max(1.0, rate), bucket + elapsed * rate)


class SimApp:
    """All simulator state, and the decision of every reply. Loop-thread only."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.requests: deque[Any] = deque(maxlen=config.max_recorded)
        self.connections: set[_Connection] = set()
        self.prompt_cache = _sim_cache.PromptCache()
        self.batch = _sim_batch.BatchSim(self)
        self._zero()

    # -- state ----------------------------------------------------------------------

    def _zero(self) -> None:
        self.total = self.chat = self.embeddings = 0
        self.by_status: dict[int, int] = {}
        self.by_endpoint: dict[str, int] = {}
        self.by_model: dict[str, int] = {}
        self.by_query: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.abandoned = self.in_flight = self.max_in_flight = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.cached_tokens = self.cache_write_tokens = 0
        self.attempts: dict[str, int] = {}
        self.storm_until = 0.0
        self.storm_status = 503
        self.seq = 0
        self._refill()

    def _refill(self) -> None:
        rpm = self.config.rpm
        self.bucket = max(1.0, rpm / 60.0) if rpm else 0.0
        self.bucket_at = time.monotonic()
        self.window_start, self.window_count = self.bucket_at, 0

    def reset(self) -> None:
        """Zero counters, forget recorded requests, attempts and storms, refill the bucket."""
        self.requests.clear()
        self.rng.seed(self.config.seed)
        self.prompt_cache.clear()
        self.batch.reset()
        self._zero()

    def configure(self, fields: dict[str, Any]) -> SimulatorConfig:
        """Replace config fields (validated by the config class); returns the new config."""
        old = self.config
        known = {f.name for f in dataclasses.fields(old)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"unknown config field(s) {unknown}; known: {sorted(known)}")
        new = dataclasses.replace(old, **fields)
        self.config = new
        if new.max_recorded != old.max_recorded:
            self.requests = deque(self.requests, maxlen=new.max_recorded)
        if new.seed != old.seed:
            self.rng.seed(new.seed)
        if new.rpm != old.rpm:
            self._refill()
        return new

    def storm(self, status: int = 503, seconds: float = 30.0) -> None:
        """Answer every API request with ``status`` for the next ``seconds``."""
        if not 100 <= int(status) <= 599 or seconds < 0:
            raise ValueError("storm needs a status in [100, 599] and seconds >= 0")
        self.storm_status = int(status)
        self.storm_until = time.monotonic() + float(seconds)

    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters (see ``SimulatorStats`` in ``simulator.py``)."""
        return {
            "total": self.total,
            "chat": self.chat,
            "embeddings": self.embeddings,
            "by_status": dict(sorted(self.by_status.items())),
            "by_endpoint": dict(self.by_endpoint),
            "by_model": dict(self.by_model),
            "by_query": dict(self.by_query),
            "faults": dict(self.faults),
            "abandoned": self.abandoned,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "batch": self.batch.stats(),
        }

    def finished(self, reply: Reply, *, sent: bool) -> None:
        """Book a reply once: written (``sent``), or dropped/abandoned (not sent)."""
        if reply.done or not reply.api:
            return
        reply.done = True
        self.in_flight -= 1
        if sent:
            self.by_status[reply.status] = self.by_status.get(reply.status, 0) + 1
            self.prompt_tokens += reply.tokens[0]
            self.completion_tokens += reply.tokens[1]
            self.cached_tokens += reply.tokens[2]
            self.cache_write_tokens += reply.tokens[3]
            if reply.prefixes:  # answered: its prefixes are cached for later requests
                self.prompt_cache.store(reply.prefixes)
        elif reply.mode != "drop":
            self.abandoned += 1

    def _sampling_draw(self, payload: dict[str, Any]) -> float | None:
        """A uniform draw that samples the label, for a request at temperature > 0 when
        ``sample_at_temperature`` is set (seeded: a run's draws repeat after reset)."""
        if not self.config.sample_at_temperature:
            return None
        temperature = payload.get("temperature")
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            return None
        return self.rng.random()

    def _fault(self, name: str) -> None:
        self.faults[name] = self.faults.get(name, 0) + 1

    def count_model(self, model: Any) -> None:
        """One more request (or batch line) for ``model``."""
        name = str(model)
        self.by_model[name] = self.by_model.get(name, 0) + 1

    # -- routing ----------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> Reply:
        """Decide the reply to one parsed request."""
        if path.startswith("/_sim/"):
            return self._control(method, path, query, body)
        self.total += 1
        self.by_endpoint[path] = self.by_endpoint.get(path, 0) + 1
        if query:
            self.by_query[query] = self.by_query.get(query, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if _sim_batch.owns(path):
                echoed = _sim_echo.echo_error(
                    self.config.echo_headers, method, path, query, headers
                )
                if echoed is not None:  # the careless gateway quotes batch calls too
                    return Reply(echoed[0], error_body(*echoed))
                return self._gateway(headers) or self.batch.handle(
                    method, path, query, headers, body
                )
            reply = self._api(method, path, headers, body, query)
            reply.headers += self.limit_headers()
            return reply
        except Exception as exc:  # a simulator bug must surface as a 500, not a dead socket
            return Reply(500, error_body(500, f"simulator error: {exc!r}"))

    def _api(
        self, method: str, path: str, headers: dict[str, str], body: bytes, query: str = ""
    ) -> Reply:
        messages_api = path in MESSAGES_PATHS
        is_chat = path in CHAT_PATHS or messages_api
        echoed = _sim_echo.echo_error(self.config.echo_headers, method, path, query, headers)
        if echoed is not None:  # any path: a gateway in front of every route
            return Reply(echoed[0], error_body(*echoed), delay=self._latency())
        if not is_chat and path not in EMBEDDING_PATHS:
            return Reply(404, error_body(404, f"Unknown endpoint {path}."))
        if is_chat:
            self.chat += 1
        else:
            self.embeddings += 1
        if method != "POST":
            return Reply(405, error_body(405))
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return Reply(400, error_body(400, "The request body must be a JSON object."))
        self.requests.append(payload)
        self.count_model(payload.get("model"))

        rejected = self._gateway(headers)
        if rejected is not None:
            return rejected
        if self.config.echo_headers == "answer" and is_chat:
            reply = self._chat(payload, headers)
            text = _sim_echo.echo_text(method, path, query, headers)
            reply.body = json.dumps(_sim_echo.inject(json.loads(reply.body), text)).encode()
            return reply
        try:
            if messages_api:
                return self._messages(payload)
            if is_chat:
                return self._chat(payload, headers)
            return self._embeddings(payload)
        except ValueError as exc:
            return Reply(400, error_body(400, str(exc)), delay=self._latency())

    def _gateway(self, headers: dict[str, str]) -> Reply | None:
        """Rejections a real API gateway answers at once: key, storm, rate limit."""
        cfg = self.config
        if cfg.require_api_key is not None and (
            headers.get("authorization") != f"Bearer {cfg.require_api_key}"
        ):
            self._fault("auth")
            return Reply(401, error_body(401))
        now = time.monotonic()
        if now < self.storm_until:
            self._fault("storm")
            status = self.storm_status
            extra = self._retry_after(self.storm_until - now) if status in (429, 503) else ()
            return Reply(status, error_body(status), extra)
        if cfg.rpm and cfg.rpm_window:
            return self._window_gate(now, cfg.rpm, cfg.rpm_window)
        if cfg.rpm:
            rate = cfg.rpm / 60.0
            self.bucket = refill(self.bucket, now - self.bucket_at, cfg.rpm)
            self.bucket_at = now
            if self.bucket < 1.0:
                self._fault("rpm")
                return Reply(429, error_body(429), self._retry_after((1.0 - self.bucket) / rate))
            self.bucket -= 1.0
        return None

    def _window_gate(self, now: float, rpm: float, window: float) -> Reply | None:
        """Fixed windows of ``window`` seconds, each allowing ``rpm * window / 60``."""
        if now - self.window_start >= window:
            self.window_start += window * ((now - self.window_start) // window)
            self.window_count = 0
        if self.window_count >= max(1, int(rpm * window / 60.0)):
            self._fault("rpm")
            wait = self.window_start + window - now
            return Reply(429, error_body(429), self._retry_after(wait))
        self.window_count += 1
        return None

    def limit_headers(self) -> tuple[tuple[str, str], ...]:
        """OpenAI's request-limit headers for the current bucket or window."""
        cfg = self.config
        if not (cfg.rate_limit_headers and cfg.rpm):
            return ()
        now = time.monotonic()
        if cfg.rpm_window:
            allowed = max(1, int(cfg.rpm * cfg.rpm_window / 60.0))
            left = max(0, allowed - self.window_count)
            reset = max(0.0, self.window_start + cfg.rpm_window - now)
        else:
            rate = cfg.rpm / 60.0
            left = int(self.bucket)
            reset = (max(1.0, rate) - self.bucket) / rate
        return (
            ("x-ratelimit-limit-requests", f"{cfg.rpm:g}"),
            ("x-ratelimit-remaining-requests", str(left)),
            ("x-ratelimit-reset-requests", f"{math.ceil(reset * 1000)}ms"),
        )

    def _retry_after(self, wait: float) -> tuple[tuple[str, str], ...]:
        style = self.config.retry_after
        if style == "seconds":
            return (("retry-after", str(max(1, math.ceil(wait)))),)
        if style == "ms":
            return (("retry-after-ms", str(max(1, math.ceil(wait * 1000)))),)
        if style == "http-date":
            when = email.utils.formatdate(math.ceil(time.time() + wait), usegmt=True)
            return (("retry-after", when),)
        return ()

    def _latency(self) -> float:
        cfg = self.config
        if cfg.latency_max is not None:
            return self.rng.uniform(cfg.latency, cfg.latency_max)
        return cfg.latency

    def _chat(self, payload: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
        cfg = self.config
        messages = payload.get("messages")
        if not isinstance(messages, list):
            raise ValueError("'messages' must be a list of message objects")
        if payload.get("stream"):
            raise ValueError("The simulator does not stream; send stream=false.")
        response_format = payload.get("response_format")
        if (
            cfg.reject_response_format
            and isinstance(response_format, dict)
            and response_format.get("type") == "json_schema"
        ):
            self._fault("response_format")
            message = "response_format json_schema is not supported by this model."
            return Reply(
                400, error_body(400, message, param="response_format"), delay=self._latency()
            )

        if cfg.reject_logprobs and payload.get("logprobs"):
            self._fault("logprobs")
            message = "logprobs are not supported with this model."
            return Reply(400, error_body(400, message, param="logprobs"), delay=self._latency())

        markers = answers.parse_markers(messages)
        fault = self.marker_fault(markers, payload)
        if fault is None and cfg.any_rate:
            draw = self.rng.random()
            for name, field in _RATE_FIELDS:
                rate = getattr(cfg, field)
                if draw < rate:
                    fault = name
                    break
                draw -= rate
        delay = markers.get("latency")
        delay = float(delay) if isinstance(delay, (int, float)) else self._latency()
        if fault is not None:
            self._fault(fault)
            status = _ERROR_STATUSES.get(fault)
            if status is not None:
                wait = markers.get("retry_after", 1.0)
                extra = self._retry_after(float(wait)) if status == 429 else ()
                return Reply(status, error_body(status), extra, delay=delay)
            if fault in _UNREADABLE:
                return unreadable(fault, headers or {}, delay)
            if fault == "hang":
                delay = cfg.hang_seconds

        self.seq += 1
        completion = answers.chat_completion(
            payload,
            markers,
            fault,
            f"chatcmpl-sim{self.seq:08d}",
            int(time.time()),
            template=cfg.reply_template,
            noisy=cfg.noisy_judge(payload.get("model")),
            pairwise=cfg.pairwise_judge(payload.get("model")),
            draw=self._sampling_draw(payload),
        )
        cached, written, prefixes = self.cache_usage(payload, completion)
        usage = completion["usage"]
        mode = "drop" if fault == "drop" else "trickle" if cfg.trickle_seconds > 0 else "normal"
        return Reply(
            200,
            json.dumps(completion).encode(),
            delay=delay,
            mode=mode,
            tokens=(usage["prompt_tokens"], usage["completion_tokens"], cached, written),
            prefixes=prefixes,
        )

    def cache_usage(
        self, payload: dict[str, Any], completion: dict[str, Any]
    ) -> tuple[int, int, tuple[bytes, ...]]:
        """Report the prompt tokens ``payload`` finds in the prompt cache in
        ``completion``'s usage (see ``_sim_cache``); returns them, those written to it
        (reported Anthropic-style only) and the request's prefixes, cached once it is
        answered."""
        style = self.config.prompt_cache
        if style is None:
            return 0, 0, ()
        cached, written, prefixes = self.prompt_cache.look_up(payload)
        anthropic = _sim_cache.anthropic_style(style, payload.get("model"))
        completion["usage"] = _sim_cache.with_cache_usage(
            completion["usage"], cached, written, anthropic=anthropic
        )
        return cached, written if anthropic else 0, prefixes

    def _messages(self, payload: dict[str, Any]) -> Reply:
        """An Anthropic Messages API request, answered as its chat-completions twin is,
        in Anthropic's reply shape (its usage with the cache reads and writes)."""
        reply = self._chat(_sim_batch.openai_payload(payload))
        if reply.status == 200 and reply.mode != "drop":
            completion = json.loads(reply.body)
            _, _, cached, written = reply.tokens
            message = _sim_batch.anthropic_message(completion, payload, cached, written)
            reply.body = json.dumps(message).encode()
        return reply

    def marker_fault(self, markers: dict[str, Any], payload: dict[str, Any]) -> str | None:
        fault = markers.get("fault")
        if fault is None:
            return None
        fault = str(fault)
        if fault not in answers.FAULTS:
            raise ValueError(f"unknown @sim fault {fault!r}; one of {sorted(answers.FAULTS)}")
        first = markers.get("first")
        if isinstance(first, int):
            identity = json.dumps([payload.get(k) for k in IDENTITY_FIELDS], sort_keys=True)
            key = hashlib.sha256(identity.encode()).hexdigest()
            seen = self.attempts[key] = self.attempts.get(key, 0) + 1
            if seen > first:
                return None
        return fault

    def _embeddings(self, payload: dict[str, Any]) -> Reply:
        body, tokens = answers.embeddings_body(payload, self.config.embedding_dimensions)
        return Reply(200, body, delay=self._latency(), tokens=(tokens, 0))

    # -- control endpoints -------------------------------------------------------------

    def _control(self, method: str, path: str, query: str, body: bytes) -> Reply:
        try:
            data = json.loads(body) if body.strip() else {}
        except ValueError:
            return Reply(400, error_body(400, "invalid JSON body"), api=False)
        try:
            if path == "/_sim/stats" and method == "GET":
                return _json(self.stats())
            if path == "/_sim/requests" and method == "GET":
                limit = dict(p.partition("=")[::2] for p in query.split("&") if p).get("limit")
                recorded = list(self.requests)
                keep = len(recorded) if limit is None else max(0, int(limit))
                return _json(recorded[len(recorded) - keep :])
            if path == "/_sim/reset" and method == "POST":
                self.reset()
                return _json({"ok": True})
            if path == "/_sim/config" and method in ("GET", "POST"):
                if method == "POST":
                    if not isinstance(data, dict):
                        raise ValueError("config must be a JSON object")
                    self.configure(data)
                return _json(dataclasses.asdict(self.config))
            if path == "/_sim/storm" and method == "POST":
                self.storm(int(data.get("status", 503)), float(data.get("seconds", 30.0)))
                return _json({"ok": True})
            if path == "/_sim/health":
                return _json({"ok": True})
        except (TypeError, ValueError) as exc:
            return Reply(400, error_body(400, str(exc)), api=False)
        return Reply(404, error_body(404, f"Unknown control endpoint {method} {path}."), api=False)

    async def shutdown(self, server: asyncio.base_events.Server) -> None:
        """Stop listening, cut every connection and wait for pending replies to cancel."""
        server.close()
        tasks = []
        for connection in list(self.connections):
            if connection.task is not None:
                connection.task.cancel()
                tasks.append(connection.task)
            if connection.transport is not None:
                connection.transport.abort()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


class _Connection(asyncio.Protocol):
    """Frames HTTP/1.1 requests on one keep-alive connection, answering them in order."""

    def __init__(self, app: SimApp) -> None:
        self.app = app
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.keep_alive = True
        self.continued = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.app.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.app.connections.discard(self)
        if self.task is not None:
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.task is None:
            self._drain()

    def _drain(self) -> None:
        # One request at a time per connection: a delayed reply parks the rest of the
        # buffer until it is written, so pipelined replies keep their order.
        while not self.closed and self.task is None:
            request = self._next_request()
            if request is None:
                return
            reply = self.app.handle(*request)
            if reply.delay <= 0 and reply.mode == "normal":
                self._send(reply)
            else:
                self.task = self.loop.create_task(self._deferred(reply))

    def _next_request(self) -> tuple[str, str, str, dict[str, str], bytes] | None:
        buf = self.buffer
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                self._fatal(431, "Request headers too large.")
            return None
        lines = buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            self._fatal(400, "Malformed request line.")
            return None
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._fatal(501, "Chunked request bodies are not supported.")
            return None
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            self._fatal(413 if length > 0 else 400, "Bad Content-Length.")
            return None
        total = end + 4 + length
        if len(buf) < total:
            # curl waits a second for this before sending bodies over 1 kB.
            if headers.get("expect", "").lower() == "100-continue" and not self.continued:
                self.continued = True
                if self.transport is not None:
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return None
        self.continued = False
        body = bytes(buf[end + 4 : total])
        del buf[:total]
        connection = headers.get("connection", "").lower()
        self.keep_alive = (
            connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        )
        path, _, query = target.partition("?")
        return method, path, query, headers, body

    def _fatal(self, status: int, message: str) -> None:
        self.buffer.clear()
        if self.transport is not None:
            self.transport.write(Reply(status, error_body(status, message)).head(False))
            self.transport.close()
        self.closed = True

    def _send(self, reply: Reply) -> None:
        assert self.transport is not None
        self.transport.write(reply.head(self.keep_alive) + reply.body)
        self.app.finished(reply, sent=True)
        if not self.keep_alive:
            self.transport.close()
            self.closed = True

    async def _deferred(self, reply: Reply) -> None:
        try:
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)
            transport = self.transport
            assert transport is not None
            if reply.mode == "drop":
                # Promise the whole body, deliver half, hang up: a torn response.
                transport.write(reply.head(True) + reply.body[: len(reply.body) // 2])
                self.app.finished(reply, sent=False)
                transport.close()
                self.closed = True
                return
            if reply.mode == "trickle":
                transport.write(reply.head(self.keep_alive))
                step = max(1, -(-len(reply.body) // _TRICKLE_PIECES))
                pause = self.app.config.trickle_seconds / _TRICKLE_PIECES
                for start in range(0, len(reply.body), step):
                    transport.write(reply.body[start : start + step])
                    await asyncio.sleep(pause)
                self.app.finished(reply, sent=True)
                if not self.keep_alive:
                    transport.close()
                    self.closed = True
            else:
                self._send(reply)
        except asyncio.CancelledError:
            # The client went away (timeout) or the server is stopping.
            self.app.finished(reply, sent=False)
            return
        finally:
            self.task = None
        if not self.closed:
            self._drain()


async def serve(app: SimApp, host: str, port: int) -> asyncio.base_events.Server:
    """Start listening; the caller owns the returned server (see :meth:`SimApp.shutdown`)."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Connection(app), host, port, backlog=1024)


def unreadable(fault: str, headers: dict[str, str], delay: float) -> Reply:
    """An answer the client cannot use, the same at every attempt (a bad row, not an
    outage):

    - ``badutf8``: HTTP 200 whose body is not UTF-8 (a proxy that mangled it);
    - ``error200``: HTTP 200 carrying an OpenAI-style error object instead of a completion;
    - ``echo500``: a 500 whose message quotes the request's headers (the key among them).
    """
    if fault == "badutf8":
        return Reply(200, b'{"id": "chatcmpl-\xff\xfe", "choices": [\xc3\x28]}', delay=delay)
    if fault == "error200":
        message = "The model produced invalid content for this request."
        return Reply(200, error_body(500, message), delay=delay)
    text = _sim_echo.echo_text("POST", "/v1/chat/completions", "", headers)
    return Reply(500, error_body(500, text), delay=delay)
