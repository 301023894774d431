"""Classifying litellm's exceptions into :class:`~framekit.judges.faults.Fault` verdicts.

litellm raises ``RateLimitError``, ``InternalServerError`` (also for a refused
connection), ``Timeout``, ``AuthenticationError`` and ``BadRequestError`` subclasses; the
litellm transport (and its worker processes) turn them into faults here, so nothing
above the judges imports litellm.
"""

from __future__ import annotations

import asyncio
import re

from framekit._errors import FaultRaised
from framekit.judges import _litellm, _model_names
from framekit.judges._settings import refused_by_client
from framekit.judges.faults import (
    TIMEOUT,
    Fault,
    chain,
    connect_cause,
    never_connected,
    parse_retry_after,
    redact,
)
from framekit.judges.structured import one_line
from framekit.judges.transport import keep_headers


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return int(code) if isinstance(code, int) else None


def classify(exc: BaseException, secrets: list[str]) -> Fault:
    """Map an exception raised by a litellm call to what the executor should do."""
    if isinstance(exc, FaultRaised):
        return exc.fault
    name = type(exc).__name__
    reason = redact(f"{name}: {one_line(_message(exc), 160)}", secrets)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Fault("transient", TIMEOUT)
    refused = refused_by_client(exc)
    if refused is not None:  # every call would fail the same way: not an outage
        return Fault("config", refused)
    lm = _litellm.litellm()
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
            return Fault("config", _model_names.not_routed(getattr(exc, "model", None)))
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
        cause = redact(connect_cause(exc), secrets)
        return Fault("transient", f"could not connect ({cause})", connect=True)
    if isinstance(
        exc,
        (lm.InternalServerError, lm.ServiceUnavailableError, lm.APIConnectionError),
    ) or (status is not None and status >= 500):
        # A 503 may say when to come back; honouring it beats guessing.
        retry_after = parse_retry_after(_litellm.header(exc, "retry-after"))
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
