"""Reading the rate limits an endpoint announces in its response headers.

OpenAI (and the OpenAI-compatible servers that copy it) sends
``x-ratelimit-limit-requests`` / ``-remaining-requests`` / ``-reset-requests`` and the
same for ``-tokens`` on every answer; Anthropic sends ``anthropic-ratelimit-requests-
limit`` / ``-remaining`` / ``-reset`` (and ``-tokens-``). Limits are per minute; a reset
is a duration (``"1s"``, ``"6m0s"``, ``"120ms"``) or an RFC 3339 time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Announced:
    """What one answer's headers said; ``None`` where they said nothing."""

    rpm: float | None = None
    tpm: float | None = None
    requests_left: float | None = None
    requests_reset_s: float | None = None


def parse_reset(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a limit resets: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"0.5"``, or an
    RFC 3339 time (Anthropic).

    Examples
    --------
    >>> parse_reset("6m0s"), parse_reset("120ms"), parse_reset("2")
    (360.0, 0.12, 2.0)
    """
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNIT_S[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    stamp = datetime.now(when.tzinfo).timestamp() if now is None else now
    return max(0.0, when.timestamp() - stamp)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number >= 0 else None


def read_limits(headers: Mapping[str, str]) -> Announced | None:
    """The limits in ``headers`` (lower-case names), or ``None`` when there are none.

    Examples
    --------
    >>> read_limits({"x-ratelimit-limit-requests": "3000", "x-ratelimit-remaining-requests": "0",
    ...              "x-ratelimit-reset-requests": "20ms"})
    Announced(rpm=3000.0, tpm=None, requests_left=0.0, requests_reset_s=0.02)
    """
    get = headers.get
    if "x-ratelimit-limit-requests" in headers or "x-ratelimit-limit-tokens" in headers:
        return Announced(
            rpm=_number(get("x-ratelimit-limit-requests")),
            tpm=_number(get("x-ratelimit-limit-tokens")),
            requests_left=_number(get("x-ratelimit-remaining-requests")),
            requests_reset_s=parse_reset(get("x-ratelimit-reset-requests")),
        )
    if "anthropic-ratelimit-requests-limit" in headers:
        return Announced(
            rpm=_number(get("anthropic-ratelimit-requests-limit")),
            tpm=_number(get("anthropic-ratelimit-tokens-limit")),
            requests_left=_number(get("anthropic-ratelimit-requests-remaining")),
            requests_reset_s=parse_reset(get("anthropic-ratelimit-requests-reset")),
        )
    return None
