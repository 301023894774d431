"""One ``litellm.acompletion`` call, and what a failed one comes to.

Both sides of the litellm transport make the call: the transport in this process and
the worker processes (:mod:`framekit.judges.litellm.workers`), which must not import the
transport that starts them. A success is reduced to a
:class:`~framekit.judges.transport.RawReply`; a failure is classified where it happened
into a :class:`~framekit.judges.faults.Fault`, the litellm transport's one mapping of
litellm's exceptions: ``RateLimitError``, ``InternalServerError`` (also for a refused
connection), ``Timeout``, ``AuthenticationError`` and ``BadRequestError`` subclasses.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from typing import Any

from framekit import _secrets
from framekit._errors import one_line
from framekit.judges.faults import (
    TIMEOUT,
    Fault,
    chain,
    connect_cause,
    never_connected,
    parse_retry_after,
    refused_by_client,
)
from framekit.judges.litellm import header, litellm_module, response_cost
from framekit.judges.litellm.model_names import not_routed
from framekit.judges.logprobs import logprobs_content
from framekit.judges.transport import LOGPROBS_REQUEST, RawReply, keep_headers

__all__ = ["WANTS_LOGPROBS", "call_litellm", "classify", "takes_logprobs"]

#: A key of a call's keyword arguments that is never sent: ``True`` asks for token
#: logprobs when the model's provider takes them (decided where litellm is imported).
WANTS_LOGPROBS = "framekit_logprobs"


@functools.lru_cache(maxsize=256)
def takes_logprobs(model: str, custom_llm_provider: str | None = None) -> bool:
    """Whether litellm sends ``logprobs``/``top_logprobs`` for ``model``: its provider
    lists them among its supported OpenAI parameters (OpenAI, vLLM, Groq... do;
    Anthropic, Bedrock's Claude, Gemini do not, and asking would raise)."""
    lm = litellm_module()
    try:
        name, provider, _, _ = lm.get_llm_provider(model, custom_llm_provider=custom_llm_provider)
        supported = lm.get_supported_openai_params(model=name, custom_llm_provider=provider)
    except Exception:  # a model litellm cannot place: do not ask for what may be refused
        return False
    return bool(supported) and {"logprobs", "top_logprobs"} <= set(supported)


def _token_dicts(response: Any) -> list[dict[str, Any]] | None:
    """The reply's token logprobs as plain dicts (they cross process boundaries)."""
    content = logprobs_content(response)
    if not content:
        return None
    return [e.model_dump() if hasattr(e, "model_dump") else dict(e) for e in content]


async def call_litellm(params: dict[str, Any], call: dict[str, Any]) -> RawReply:
    """One ``litellm.acompletion`` call, reduced to what the engine reads from it."""
    lm = litellm_module()
    if WANTS_LOGPROBS in call:
        call = dict(call)
        wanted = call.pop(WANTS_LOGPROBS)
        provider = params.get("custom_llm_provider")
        if wanted and takes_logprobs(str(params["model"]), provider):
            call.update(LOGPROBS_REQUEST)
    started = time.perf_counter()
    response = await lm.acompletion(**params, **call)
    latency = time.perf_counter() - started
    message = response.choices[0].message
    text = message.content
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls and not text:
        text = tool_calls[0].function.arguments
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None) or {}
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    return RawReply(
        text=text,
        refusal=getattr(message, "refusal", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=response_cost(response),
        latency_s=latency,
        headers=keep_headers(headers) if isinstance(headers, dict) else {},
        logprobs=_token_dicts(response),
    )


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return int(code) if isinstance(code, int) else None


def classify(exc: BaseException, secrets: list[str]) -> Fault:
    """Map an exception raised by a litellm call to what the executor should do."""
    name = type(exc).__name__
    # Redacted before it is cut: a key cut in two would no longer match.
    reason = f"{name}: {one_line(_secrets.redact(_message(exc), secrets), 160)}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Fault("transient", TIMEOUT)
    refused = refused_by_client(exc)
    if refused is not None:  # every call would fail the same way: not an outage
        return Fault("config", refused)
    lm = litellm_module()
    status = _status(exc)
    if isinstance(exc, lm.RateLimitError) or status == 429:
        return Fault.rate_limited(_headers(exc))
    if isinstance(exc, (lm.AuthenticationError, lm.PermissionDeniedError)) or status in (401, 403):
        return Fault.rejected_credentials(name, status)
    if isinstance(exc, lm.ContextWindowExceededError):
        return Fault("fatal", "prompt exceeds the judge's context window")
    if isinstance(exc, lm.Timeout):
        return Fault("transient", TIMEOUT)
    if isinstance(exc, lm.BadRequestError) or status in (400, 404, 422):
        text = _message(exc).lower()
        if "llm provider not provided" in text:
            # Raised before any request, and for every call alike: the model string.
            return Fault("config", not_routed(getattr(exc, "model", None)))
        if "response_format" in text or "json_schema" in text or "tool" in text:
            return Fault("mode", reason)
        return Fault("fatal", reason, status=status)
    if any(isinstance(e, (UnicodeError, TypeError)) for e in chain(exc)):
        # The request could not even be encoded (litellm reports that as a 500 too):
        # sending it again cannot help.
        return Fault("fatal", reason)
    if never_connected(exc):
        # litellm reports a refused connection as "InternalServerError ... 500": say what
        # really happened, since the cure (check api_base) differs from a server error.
        cause = _secrets.redact(connect_cause(exc), secrets)
        return Fault("transient", f"could not connect ({cause})", connect=True)
    if isinstance(
        exc,
        (lm.InternalServerError, lm.ServiceUnavailableError, lm.APIConnectionError),
    ) or (status is not None and status >= 500):
        # A 503 may say when to come back; honouring it beats guessing.
        retry_after = parse_retry_after(header(exc, "retry-after"))
        return Fault("transient", reason, retry_after, status=status)
    if isinstance(exc, (ConnectionError, OSError)):
        return Fault("transient", reason)
    if isinstance(exc, lm.APIError) and status is None:
        # litellm wraps dropped connections and unreadable bodies as bare APIError.
        return Fault("transient", reason)
    return Fault("fatal", reason, status=status)


def _headers(exc: BaseException) -> dict[str, str]:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        return keep_headers(dict(headers.items())) if headers is not None else {}
    except Exception:
        return {}


# litellm repeats the class name: "litellm.RateLimitError: RateLimitError: OpenAIException - ".
_LITELLM_PREFIX = re.compile(r"^(?:litellm\.)?(\w+Error: )+(?:\w+Exception - )?")


def _message(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    return _LITELLM_PREFIX.sub("", text) or text
