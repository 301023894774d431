"""Reading the rate limits an endpoint announces in its response headers.

OpenAI (and the OpenAI-compatible servers that copy it) sends
``x-ratelimit-limit-requests`` / ``-remaining-requests`` / ``-reset-requests`` and the
same for ``-tokens`` on every answer; Anthropic sends ``anthropic-ratelimit-requests-
limit`` / ``-remaining`` / ``-reset`` (and ``-tokens-``). Limits are per minute; a reset
is a duration (``"1s"``, ``"6m0s"``, ``"120ms"``) or an RFC 3339 time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from framekit.judges.faults import parse_retry_after


@dataclass(frozen=True)
class Announced:
    """What one answer's headers said; ``None`` where they said nothing."""

    rpm: float | None = None
    tpm: float | None = None
    requests_left: float | None = None
    requests_reset_s: float | None = None


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
            requests_reset_s=parse_retry_after(get("x-ratelimit-reset-requests")),
        )
    if "anthropic-ratelimit-requests-limit" in headers:
        return Announced(
            rpm=_number(get("anthropic-ratelimit-requests-limit")),
            tpm=_number(get("anthropic-ratelimit-tokens-limit")),
            requests_left=_number(get("anthropic-ratelimit-requests-remaining")),
            requests_reset_s=parse_retry_after(get("anthropic-ratelimit-requests-reset")),
        )
    return None
