"""A failed judge call, as a verdict: :class:`Fault`, and the waits its headers ask for.

A client classifies its own failures into a :class:`Fault` where the call is made
(:mod:`framekit.judges.faults` holds the classification the clients share and what a
verdict means for the run); only the verdict travels on, inside a run's records or a
:class:`~framekit._errors.FaultRaised`. It sits below every module that carries it, the
errors included, and knows nothing of them.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

Kind = Literal["rate_limited", "transient", "auth", "mode", "fatal", "config"]
#: The kinds that asking again may cure.
RETRYABLE: frozenset[Kind] = frozenset({"rate_limited", "transient"})


@dataclass(frozen=True)
class Fault:
    """What went wrong: ``kind`` decides the action, ``reason`` is the row's one-line error.

    ``connect`` marks a call that never reached the server (refused, unknown host): when
    every call of a run fails that way the endpoint is unreachable, not flaky.
    ``headers`` holds the rate-limit headers of the failed answer (lower-case names), so
    pacing learns from a 429 as from a success.
    """

    kind: Kind
    reason: str
    retry_after: float | None = None
    connect: bool = False
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def retryable(self) -> bool:
        """Whether asking again may help (429, 5xx, a timeout, a dropped connection)."""
        return self.kind in RETRYABLE

    @property
    def way(self) -> str:
        """How the call failed, coarsely: what many requests failing alike share in an
        outage (see :class:`~framekit.engine.limiter.EndpointHealth`). A refused
        connection, a 429, any 5xx (a restarting server mixes 502 and 503), else the
        reason's first words (``Timeout``, ``APIError``...).

        Examples
        --------
        >>> Fault("transient", "HTTP 503 overloaded", status=503).way
        '5xx'
        >>> Fault("transient", "Timeout: no answer within the judge's timeout").way
        'Timeout'
        """
        if self.connect:
            return "connect"
        if self.status is not None:
            return "5xx" if self.status >= 500 else str(self.status)
        return self.reason.split(":", 1)[0]

    def given_up(self, retries: int) -> str:
        """The row's error once no retry is left: the reason, and how many were spent."""
        return self.reason + (f" (after {retries} retries)" if retries else "")

    @classmethod
    def rate_limited(cls, headers: Mapping[str, str]) -> Fault:
        """A 429, paused for as long as its headers say (every transport words it so)."""
        return cls(
            "rate_limited",
            "HTTP 429 rate limited",
            retry_after_from(headers),
            status=429,
            headers=headers,
        )

    @classmethod
    def rejected_credentials(cls, name: str, status: int | None) -> Fault:
        """A 401/403: the run stops, since every other call would fail the same way."""
        return cls("auth", f"the judge endpoint rejected the credentials ({name}, HTTP {status})")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait, in every form endpoints write it: a number of seconds or an HTTP
    date (``Retry-After``), a duration (``"6m0s"``, ``"120ms"``: OpenAI's
    ``x-ratelimit-reset-*``) or an RFC 3339 time (Anthropic's ``*-reset``).

    Examples
    --------
    >>> parse_retry_after("2"), parse_retry_after("6m0s"), parse_retry_after("120ms")
    (2.0, 360.0, 0.12)
    >>> parse_retry_after(None) is None
    True
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
    when: datetime | None = None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_after_from(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI's, more precise) or ``retry-after``."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))
