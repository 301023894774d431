"""The HTTP transport: OpenAI-compatible ``/chat/completions`` over aiohttp, nothing else.

OpenAI itself and nearly every self-hosted or hosted judge (vLLM, SGLang, TGI, llama.cpp,
Ollama's ``/v1``, Together, Groq, Fireworks, OpenRouter...) speak this one wire format.
Going straight to it costs a fraction of a millisecond of CPU per call, where litellm's
request building, response objects and logging cost a few, so one process can keep a
fast endpoint busy.

One keep-alive connection pool per judge and event loop, sized to ``concurrency``,
opened when a run starts and closed when the last run on that loop ends. Every failure is
classified here into a :class:`~framekit.judges.faults.Fault`, with the same verdicts
(and the same OpenAI error class names in row errors) as the litellm transport.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from framekit import _secrets
from framekit._aio import Deadlines
from framekit._errors import one_line
from framekit._urls import join_path
from framekit.judges.endpoint import Decoding, Endpoint, Limits
from framekit.judges.faults import (
    TIMEOUT,
    Fault,
    connect_cause,
    never_connected,
    refused_by_client,
    retry_after_from,
)
from framekit.judges.logprobs import logprobs_content
from framekit.judges.pricing import judge_price
from framekit.judges.providers import PROVIDERS, Provider, first_set, openai_speaker
from framekit.judges.request import ChatRequest, Mode, build_call_kwargs, dump_json, load_json
from framekit.judges.shared_prefix import schema_leads_prefix
from framekit.judges.transport import LOGPROBS_REQUEST, RawReply, TransportName, keep_headers
from framekit.judges.usage import Price, read_usage

# The OpenAI SDK's names for each status, so a row's error reads the same on both
# transports ("BadRequestError: ...").
_ERROR_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGateway",
    503: "ServiceUnavailableError",
    504: "GatewayTimeout",
}
# Decoding parameters that only litellm reads: never request body fields.
_LITELLM_ONLY = {"extra_body", "num_retries", "max_retries", "custom_llm_provider", "drop_params"}
#: The request fields of OpenAI's chat completions a judge's keyword arguments may set
#: (framekit sets messages, model, temperature, max_tokens and the answer format itself);
#: a server's own fields (vLLM's ``top_k``...) go in ``extra_body``.
BODY_FIELDS = frozenset({
    "audio", "frequency_penalty", "logit_bias", "logprobs", "max_completion_tokens",
    "metadata", "modalities", "parallel_tool_calls", "prediction", "presence_penalty",
    "prompt_cache_key", "reasoning_effort", "safety_identifier", "seed", "service_tier",
    "stop", "store", "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
})  # fmt: skip


def unknown_body_fields(params: Mapping[str, Any]) -> list[str]:
    """The names among a judge's decoding keyword arguments that the HTTP transport
    could only send as request fields OpenAI's chat completions do not have (a typo, or
    a setting meant for someone else, such as a price): each is an input error, not a
    field of the request body.

    Examples
    --------
    >>> unknown_body_fields({"seed": 7, "extra_body": {"top_k": 5}, "cost": 2})
    ['cost']
    """
    return [name for name in params if name not in BODY_FIELDS and name not in _LITELLM_ONLY]


def resolve_endpoint(endpoint: Endpoint, via: Provider | None) -> tuple[str | None, str | None]:
    """``(api_base, key)`` a client of ``endpoint`` sends to: its own, else the variables
    litellm reads for ``via``, the provider whose wire format the client speaks
    (``None``: framekit's own only). ``api_base`` is ``None`` for the provider's public
    endpoint. Shared by this transport and the batch clients, so both reach the same
    endpoint with the same key."""
    base = endpoint.base or (first_set(via.base_vars) if via is not None else None)
    return base, endpoint.credentials.key(via)


class HttpTransport:
    """Calls an OpenAI-compatible endpoint directly (see the module docstring)."""

    name: TransportName = "http"

    def __init__(self, endpoint: Endpoint, limits: Limits, decoding: Decoding) -> None:
        self.endpoint, self.limits, self.decoding = endpoint, limits, decoding
        provider, _, model = endpoint.model.partition("/")
        self._model = model or provider
        self._resolve()
        # Per event loop: its pool, the runs using it, the deadlines of its calls.
        self._sessions: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, list[int], Deadlines]
        ] = weakref.WeakKeyDictionary()
        self._price: Price | None = None
        self._priced = False
        #: Set when the endpoint answered 400 to a request for logprobs (some reasoning
        #: models and servers refuse them): the rest of its calls go without.
        self.logprobs_refused = False
        # (mode, id(schema), schema name, logprobs asked) -> (the schema, the body's other
        # fields); holding the schema keeps its id from being reused by another object.
        self._bodies: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any]]] = {}

    def _resolve(self) -> None:
        """URL and key from the endpoint, else the provider's variables (read again when
        a run opens a pool: the environment may have changed since the judge was made)."""
        base, self._key = resolve_endpoint(self.endpoint, openai_speaker(self.endpoint.model))
        self._custom_base = base is not None
        self.url = join_path(base or PROVIDERS["openai"].public_base or "", "/chat/completions")

    @property
    def requires_key(self) -> bool:
        """Only OpenAI's own endpoint needs a key: a self-hosted server may take none."""
        return not self._custom_base

    @property
    def secrets(self) -> list[str]:
        """The endpoint's secrets plus a key this transport found in the environment."""
        found = list(self.endpoint.secrets())
        if self._key and self._key not in found:
            found.append(self._key)
        return found

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        extra = self.endpoint.routing.get("extra_headers")
        if isinstance(extra, dict):
            headers.update({str(k): str(v) for k, v in extra.items()})
        if self._key:
            headers["authorization"] = f"Bearer {self._key}"
        return headers

    async def open(self) -> None:
        """Open (or share) this loop's connection pool; price the judge once."""
        loop = asyncio.get_running_loop()
        entry = self._sessions.get(loop)
        if entry is None or entry[0].closed:
            self._resolve()
            limit = self.limits.concurrency
            connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, ttl_dns_cache=300)
            session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers(),
                # The whole answer is bounded by the judge's timeout in ``call``
                # (one timer for all the calls: see Deadlines).
                timeout=aiohttp.ClientTimeout(total=None),
                skip_auto_headers=("User-Agent",),
            )
            entry = (session, [0], Deadlines(self.limits.timeout))
            self._sessions[loop] = entry
        entry[1][0] += 1
        if not self._priced:
            # Looked up once, in a thread: a list price lives in litellm's table (seconds
            # to import), which a given price or a custom endpoint never needs.
            self._price = await asyncio.to_thread(
                judge_price, self.endpoint, transport=self.name, batch=False
            )
        self._priced = True

    async def release(self) -> None:
        """Close this loop's pool once the last run using it is over."""
        loop = asyncio.get_running_loop()
        entry = self._sessions.get(loop)
        if entry is None:
            return
        entry[1][0] -= 1
        if entry[1][0] <= 0:
            self._sessions.pop(loop, None)
            entry[2].close()
            await entry[0].close()

    def close(self) -> None:
        """Nothing outlives a run but idle pools, which :meth:`release` closes."""

    def asks_logprobs(self, request: ChatRequest) -> bool:
        """Whether a call for ``request`` asks for token logprobs: a rubric answer (the
        label's probabilities are read from them), unless the user's own ``logprobs=``
        decides, the endpoint refused them, or the judge votes over samples instead."""
        return (
            bool(request.choices)
            and self.decoding.samples == 1
            and "logprobs" not in self.decoding.params
            and not self.logprobs_refused
        )

    def _body(self, request: ChatRequest, messages: list[dict[str, Any]], mode: Mode) -> bytes:
        if mode == "prompt" or request.extra:  # the messages may change with the mode or
            return dump_json(self._fields(request, messages, mode))  # layout: built whole
        # Everything but the messages is the same for every request of an evaluator:
        # built once, and the messages put in its place (the same bytes, key order kept).
        asks = self.asks_logprobs(request)
        ident = (mode, id(request.schema), request.schema_name, asks)
        memo = self._bodies.get(ident)
        if memo is None or memo[0] is not request.schema:
            if len(self._bodies) > 64:
                self._bodies.clear()
            memo = self._bodies[ident] = (request.schema, self._fields(request, [], mode))
        body = dict(memo[1])
        body["messages"] = messages
        return dump_json(body)

    def _fields(
        self, request: ChatRequest, messages: list[dict[str, Any]], mode: Mode
    ) -> dict[str, Any]:
        params = self.decoding.params
        body: dict[str, Any] = {k: v for k, v in params.items() if k not in _LITELLM_ONLY}
        if self.asks_logprobs(request):
            body.update(LOGPROBS_REQUEST)
        extra = params.get("extra_body")
        if isinstance(extra, dict):  # litellm's way to pass provider-specific fields
            body.update(extra)
        body.update(
            model=self._model,
            temperature=self.decoding.temperature,
            max_tokens=self.decoding.max_tokens,
            **build_call_kwargs(
                request, messages, mode, schema_leads_prefix(self.endpoint.model, self._custom_base)
            ),
        )
        return body

    async def call(
        self, request: ChatRequest, messages: list[dict[str, Any]], mode: Mode
    ) -> RawReply | Fault:
        entry = self._sessions.get(asyncio.get_running_loop())
        if entry is None:
            await self.open()  # a caller that skipped open(): the pool stays for the loop
            entry = self._sessions[asyncio.get_running_loop()]
        session, _, deadlines = entry
        try:
            data = self._body(request, messages, mode)
        except (TypeError, ValueError) as exc:  # unencodable text: resending cannot help
            reason = f"{type(exc).__name__}: {one_line(str(exc), 160)}"
            return Fault("fatal", _secrets.redact(reason, self.secrets))
        started = time.perf_counter()
        try:
            status, headers, payload = await deadlines.run(self._post(session, data))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return exception_fault(exc, self.secrets)
        latency = time.perf_counter() - started
        if status == 400 and self.asks_logprobs(request) and b"logprobs" in payload.lower():
            # The endpoint does not give logprobs: ask again without, and from now on.
            self.logprobs_refused = True
            return await self.call(request, messages, mode)
        if status != 200:
            return status_fault(status, headers, payload, self.secrets)
        try:
            reply = read_completion(load_json(payload), headers)
        except ValueError:
            reply = None
        if reply is None:
            # A torn or garbled body from a proxy: the next attempt may be whole.
            return Fault("transient", unreadable_reply(payload, self.secrets))
        reply.cost_usd = reply.cost_at(self._price)
        reply.latency_s = latency
        return reply

    async def _post(
        self, session: aiohttp.ClientSession, data: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        async with session.post(self.url, data=data) as response:
            payload = await response.read()
            return response.status, keep_headers(response.headers), payload


def read_completion(data: Any, headers: dict[str, str] | None = None) -> RawReply | None:
    """The reply in an OpenAI chat-completion body (the HTTP transport's answer, a line of
    an OpenAI batch's output), unpriced and untimed; ``None`` when it is not one.

    A forced tool call's arguments stand for the text when there is none; the prompt
    tokens read from (and written to) the provider's prompt cache are counted as
    :func:`~framekit.judges.pricing.read_usage` reads them.
    """
    try:
        message = data["choices"][0]["message"]
        text = message.get("content")
        tool_calls = message.get("tool_calls")
        if tool_calls and not text:
            text = (tool_calls[0].get("function") or {}).get("arguments")
        usage = read_usage(data.get("usage"))
        return RawReply(
            text=text,
            refusal=message.get("refusal"),
            prompt_tokens=usage.prompt,
            completion_tokens=usage.completion,
            cached_tokens=usage.cached,
            written_tokens=usage.written,
            cost_usd=None,
            latency_s=0.0,
            headers=headers if headers is not None else {},
            logprobs=logprobs_content(data),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def status_fault(
    status: int, headers: Mapping[str, str], payload: bytes, secrets: Sequence[str]
) -> Fault:
    """The verdict on an error status from an OpenAI-style endpoint (this transport's
    chat calls, and every batch API call): 429 and 5xx pass, 401/403 stop the run, a
    rejected structured-output mode falls back, anything else fails the row."""
    name = _ERROR_NAMES.get(status, f"HTTP {status}")
    message, code = _error_message(payload)
    # Redacted before it is cut: a key cut in two would no longer match.
    reason = f"{name}: {one_line(_secrets.redact(message, secrets), 160)}"
    if status == 429:
        return Fault.rate_limited(headers)
    if status in (401, 403):
        return Fault.rejected_credentials(name, status)
    if status in (408, 409) or status >= 500:
        return Fault("transient", reason, retry_after_from(headers), status=status)
    low = message.lower()
    if code == "context_length_exceeded" or "maximum context length" in low:
        return Fault("fatal", "prompt exceeds the judge's context window")
    if status in (400, 404, 422) and (
        "response_format" in low or "json_schema" in low or "tool" in low
    ):
        return Fault("mode", reason)
    return Fault("fatal", reason, status=status)


def unreadable_reply(payload: bytes, secrets: Sequence[str]) -> str:
    """Why a 200 answer is not a chat completion, in the endpoint's words where it gave
    some: an error object sent with 200 (some gateways do), or a body that is not UTF-8.

    Examples
    --------
    >>> unreadable_reply(b'{"error": {"message": "model overloaded"}}', [])
    'APIError: the endpoint answered HTTP 200 with an error: model overloaded'
    >>> unreadable_reply(bytes([0x7B, 0xFF]), [])
    "APIError: the judge's answer (HTTP 200) is not valid UTF-8: '{\ufffd'"
    """
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        shown = _secrets.redact(payload[:400].decode("utf-8", "replace"), secrets)
        return (
            f"APIError: the judge's answer (HTTP 200) is not valid UTF-8: {one_line(shown, 120)!r}"
        )
    try:
        data = json.loads(payload)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("error"):
        message, _ = _error_message(payload)
        shown = one_line(_secrets.redact(message, secrets), 160)  # redacted before it is cut
        return f"APIError: the endpoint answered HTTP 200 with an error: {shown}"
    return "APIError: the judge's answer was not a chat completion"


def exception_fault(exc: BaseException, secrets: Sequence[str]) -> Fault:
    """The verdict on an exception from an aiohttp call (this transport's, and the batch
    clients'): a timeout and a connection never made are transient (the latter marked
    so), a refused URL is configuration, other client and OS errors are transient,
    anything else fatal."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Fault("transient", TIMEOUT)
    detail = _secrets.redact(str(exc), secrets) or "no detail"  # before it is cut
    reason = f"{type(exc).__name__}: {one_line(detail, 160)}"
    refused = refused_by_client(exc)
    if refused is not None:  # the URL or its credentials: every call would fail alike
        return Fault("config", refused)
    if never_connected(exc):
        cause = _secrets.redact(connect_cause(exc), secrets)
        return Fault("transient", f"could not connect ({cause})", connect=True)
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        # Dropped connections, torn bodies, resets: the next attempt may go through.
        return Fault("transient", reason)
    return Fault("fatal", reason)


def _error_message(payload: bytes) -> tuple[str, str | None]:
    """The ``error.message`` and ``error.code`` of an OpenAI-style error body."""
    try:
        data = json.loads(payload)
    except ValueError:
        return payload[:300].decode("utf-8", "replace") or "no detail", None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        return str(error.get("message") or "no detail"), code if isinstance(code, str) else None
    if isinstance(error, str):
        return error, None
    return one_line(json.dumps(data), 300), None
