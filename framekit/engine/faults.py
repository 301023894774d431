"""Classifying what went wrong with a call: retry it, pause everyone, or give up.

Only transient failures (429, 5xx, timeouts, dropped connections) are retried;
deterministic ones (400, context too long, refusals) fail the row at once, and a 401/403
stops the run because every other row would fail the same way.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from dataclasses import dataclass
from typing import Literal

from framekit import _secrets
from framekit.judges import _litellm
from framekit.judges._settings import refused_by_client
from framekit.judges.structured import one_line

Kind = Literal["rate_limited", "transient", "auth", "mode", "fatal", "config"]


@dataclass(frozen=True)
class Fault:
    """What went wrong: ``kind`` decides the action, ``reason`` is the row's one-line error.

    ``connect`` marks a call that never reached the server (refused, unknown host): when
    every call of a run fails that way the endpoint is unreachable, not flaky.
    """

    kind: Kind
    reason: str
    retry_after: float | None = None
    connect: bool = False
    status: int | None = None


class FaultRaised(Exception):
    """A call that failed where it was made (a judge worker process) and was classified
    there: only the verdict crossed over, not the client library's exception."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.reason)
        self.fault = fault


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date relative to now."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return int(code) if isinstance(code, int) else None


def classify(exc: BaseException, secrets: list[str]) -> Fault:
    """Map an exception raised by a judge call to what the executor should do."""
    if isinstance(exc, FaultRaised):
        return exc.fault
    name = type(exc).__name__
    reason = redact(f"{name}: {one_line(_message(exc), 160)}", secrets)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Fault("transient", "Timeout: no answer within the judge's timeout")
    refused = refused_by_client(exc)
    if refused is not None:  # every call would fail the same way: not an outage
        return Fault("config", refused)
    lm = _litellm.litellm()
    status = _status(exc)
    if isinstance(exc, lm.RateLimitError) or status == 429:
        retry_after = parse_retry_after(_litellm.header(exc, "retry-after"))
        return Fault("rate_limited", "HTTP 429 rate limited", retry_after, status=429)
    if isinstance(exc, (lm.AuthenticationError, lm.PermissionDeniedError)) or status in (401, 403):
        return Fault("auth", f"the judge endpoint rejected the credentials ({name}, HTTP {status})")
    if isinstance(exc, lm.ContextWindowExceededError):
        return Fault("fatal", "prompt exceeds the judge's context window")
    if isinstance(exc, lm.Timeout):
        return Fault("transient", "Timeout: no answer within the judge's timeout")
    if isinstance(exc, lm.BadRequestError) or status in (400, 404, 422):
        text = _message(exc).lower()
        if "response_format" in text or "json_schema" in text or "tool" in text:
            return Fault("mode", reason)
        return Fault("fatal", reason, status=status)
    if any(isinstance(e, (UnicodeError, TypeError)) for e in _chain(exc)):
        # The request could not even be encoded (litellm reports that as a 500 too):
        # sending it again cannot help.
        return Fault("fatal", reason)
    if _never_connected(exc):
        # litellm reports a refused connection as "InternalServerError ... 500": say what
        # really happened, since the cure (check api_base) differs from a server error.
        cause = redact(_connect_cause(exc), secrets)
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


# Exceptions (by class name, so no client library needs importing) that mean the TCP
# connection was never established: httpx, aiohttp and the standard library spell it so.
_CONNECT_ERRORS = frozenset(
    {
        "ConnectError",
        "ClientConnectorError",
        "ClientConnectorDNSError",
        "ConnectionRefusedError",
        "gaierror",
    }
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 12:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _never_connected(exc: BaseException) -> bool:
    return any(type(e).__name__ in _CONNECT_ERRORS for e in _chain(exc))


def _connect_cause(exc: BaseException) -> str:
    for e in reversed(_chain(exc)):
        if type(e).__name__ in _CONNECT_ERRORS or isinstance(e, OSError):
            return f"{type(e).__name__}: {one_line(str(e) or 'no detail', 100)}"
    return type(exc).__name__


# litellm repeats the class name: "litellm.RateLimitError: RateLimitError: OpenAIException - ".
_LITELLM_PREFIX = re.compile(r"^(?:litellm\.)?(\w+Error: )+(?:\w+Exception - )?")


def _message(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    return _LITELLM_PREFIX.sub("", text) or text


def redact(text: str, secrets: list[str]) -> str:
    """Replace every secret (and its last-8-character tail) with ``***``; the one
    redaction layer is :func:`framekit._secrets.redact`."""
    return _secrets.redact(text, secrets)
