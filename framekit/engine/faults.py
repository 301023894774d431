"""Classifying what went wrong with a call: retry it, pause everyone, or give up.

Only transient failures (429, 5xx, timeouts, dropped connections) are retried;
deterministic ones (400, context too long, refusals) fail the row at once, and a 401/403
stops the run because every other row would fail the same way.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from dataclasses import dataclass
from typing import Literal

from framekit.judges import _litellm
from framekit.judges.structured import one_line

Kind = Literal["rate_limited", "transient", "auth", "mode", "fatal"]


@dataclass(frozen=True)
class Fault:
    kind: Kind
    reason: str
    retry_after: float | None = None


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
    name = type(exc).__name__
    reason = redact(f"{name}: {one_line(_message(exc), 160)}", secrets)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Fault("transient", "Timeout: no answer within the judge's timeout")
    lm = _litellm.litellm()
    status = _status(exc)
    if isinstance(exc, lm.RateLimitError) or status == 429:
        retry_after = parse_retry_after(_litellm.header(exc, "retry-after"))
        return Fault("rate_limited", "HTTP 429 rate limited", retry_after)
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
        return Fault("fatal", reason)
    if isinstance(
        exc,
        (lm.InternalServerError, lm.ServiceUnavailableError, lm.APIConnectionError),
    ) or (status is not None and status >= 500):
        return Fault("transient", reason)
    if isinstance(exc, (ConnectionError, OSError)):
        return Fault("transient", reason)
    if isinstance(exc, lm.APIError) and status is None:
        # litellm wraps dropped connections and unreadable bodies as bare APIError.
        return Fault("transient", reason)
    return Fault("fatal", reason)


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc) or type(exc).__name__


def redact(text: str, secrets: list[str]) -> str:
    """Replace every secret (and its last-8-character tail) with ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
            if len(secret) > 12:
                text = text.replace(secret[-8:], "***")
    return text
