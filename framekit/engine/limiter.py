"""Request pacing: requests-per-minute and tokens-per-minute buckets, 429 back-off, outages.

Every worker asks the limiter before each attempt. Requests are spaced evenly (no burst
at start-up) because providers count requests over sliding windows: a burst that is
"within the minute's budget" still draws 429s. On a 429 all workers pause until the
server's ``Retry-After`` (or a jittered back-off), the request rate is trimmed a
little, and then recovers additively with each success.

The limit is the configured ``rpm``/``tpm`` or the one the endpoint announces in its
rate-limit headers (:func:`read_limits`), whichever is lower: the first request of a run
goes out alone and its answer's headers set the pace for the rest. OpenAI (and the
OpenAI-compatible servers that copy it) sends ``x-ratelimit-limit-requests`` /
``-remaining-requests`` / ``-reset-requests`` and the same for ``-tokens`` on every
answer; Anthropic sends ``anthropic-ratelimit-requests-limit`` / ``-remaining`` /
``-reset`` (and ``-tokens-``). Limits are per minute; a reset is a duration (``"1s"``,
``"6m0s"``, ``"120ms"``) or an RFC 3339 time.
Requests are paced a small margin under the limit with almost nothing banked, because
providers enforce a minute's budget over windows as short as one second (60,000 RPM as
about 1,000 per second): pacing at exactly the limit meets those windows' edges with 429s.

When the endpoint as a whole fails (an outage: a 503 storm, a restart), the limiter
lets one probe request through per interval instead of every worker hammering it, and
the first success reopens the gate. An outage is many distinct requests failing the same
way in a short time, never one request failing every retry (see :class:`EndpointHealth`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

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


class TokenBucket:
    """A bucket refilled at ``rate`` units per second, holding at most ``capacity``."""

    def __init__(self, rate: float, capacity: float, level: float | None = None) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity if level is None else level
        self.stamp = time.monotonic()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_time(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` is available (0 when it is now)."""
        self._refill(now)
        # A request larger than the whole bucket may go once the bucket is full.
        needed = min(amount, self.capacity)
        if self.level >= needed:
            return 0.0
        return (needed - self.level) / self.rate

    def take(self, amount: float) -> None:
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


class EndpointHealth:
    """Tells an outage of the whole endpoint from failures of single calls.

    A *streak* is the run of retryable failures (429, 5xx, timeouts, dropped or refused
    connections) since the last success. The rule: **an outage is many distinct requests
    failing the same way in a short time; the same request failing every retry is that
    request's (its row's) error.** In numbers:

    - the streak holds failures of the same way (:attr:`Fault.way
      <framekit.judges.faults.Fault.way>`: 5xx, a timeout, a refused connection, an
      unreadable answer...) from ``OUTAGE_REQUESTS`` distinct requests within
      ``OUTAGE_WINDOW`` seconds; ``FIRST_OUTAGE_REQUESTS`` while the endpoint has not
      answered once in this run (nothing says the rows are at fault then);
    - a request that already failed before a success and fails again is failing while
      other requests get through: its failures are its own and never count towards an
      outage. Three rows whose every answer is unreadable thus fail after their own
      retries, while the rest of the run is scored, instead of passing for an outage that
      stops the run.

    During an outage at most one probe goes out per interval (growing with the outage
    from ``PROBE_MIN`` to ``PROBE_MAX`` seconds) and the first success ends it. The
    executor decides what an outage costs (see ``ChatExecutor``).
    """

    #: Distinct requests failing alike that make an outage once the endpoint has answered:
    #: a real outage fails every call in flight (16 at the default concurrency) within a
    #: timeout, while a few bad rows left at the end of a run fail alone (up to 4 of them
    #: failing the same way for the first time after the last success still read as rows).
    OUTAGE_REQUESTS = 5
    #: The same before the endpoint's first answer of the run (an endpoint down from the
    #: start is told within the first wave of calls).
    FIRST_OUTAGE_REQUESTS = 3
    #: Seconds within which those failures must fall (a "short time": a wave of calls
    #: failing together, not rows failing one by one over minutes).
    OUTAGE_WINDOW = 30.0
    PROBE_MIN = 0.5
    PROBE_MAX = 8.0

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self.succeeded = False
        self.streak = 0
        self.streak_since = 0.0
        self.connect_failures = 0
        self.not_found = 0
        self._in_outage = False
        # The requests failing in this streak: key -> (way, when it last failed).
        self._failing: dict[str, tuple[str, float]] = {}
        # Requests that failed before a success: their later failures are their own.
        self._failed_before: set[str] = set()
        self._next_probe = 0.0

    @property
    def in_outage(self) -> bool:
        return self._in_outage

    def outage_seconds(self, now: float | None = None) -> float:
        """How long the current outage has lasted (0 when there is none)."""
        if not self._in_outage:
            return 0.0
        return (time.monotonic() if now is None else now) - self.streak_since

    def on_success(self) -> None:
        self.succeeded = True
        self.streak = 0
        self._in_outage = False
        if self._failing:
            self._failed_before.update(self._failing)
            self._failing.clear()
        self._next_probe = 0.0

    def on_failure(self, key: str, connect: bool = False, way: str = "") -> None:
        """Count one retryable failure of the request ``key``, failed in the way ``way``."""
        now = time.monotonic()
        if self.streak == 0:
            self.streak_since = now
        self.streak += 1
        if connect:
            self.connect_failures += 1
        if self._in_outage or key in self._failed_before:
            return
        self._failing[key] = (way, now)
        needed = self.OUTAGE_REQUESTS if self.succeeded else self.FIRST_OUTAGE_REQUESTS
        since = now - self.OUTAGE_WINDOW
        alike = sum(1 for w, when in self._failing.values() if w == way and when >= since)
        self._in_outage = alike >= needed

    def gate(self, now: float) -> float:
        """Seconds before the next request may go (0 outside an outage)."""
        if not self._in_outage:
            return 0.0
        return max(0.0, self._next_probe - now)

    def passed(self, now: float) -> None:
        """A request went out: during an outage, the next probe waits an interval."""
        if self._in_outage:
            interval = min(self.PROBE_MAX, max(self.PROBE_MIN, (now - self.streak_since) / 2))
            self._next_probe = now + interval * self._rng.uniform(0.8, 1.2)


class RateLimiter:
    """Shared pacing for one judge endpoint within one run.

    Parameters
    ----------
    rpm, tpm
        Requests and tokens per minute; ``None`` means unlimited.
    seed
        Seeds the back-off jitter (tests).
    """

    #: Fraction of the rate kept after each 429: a known limit was only just exceeded
    #: (a quantised window, a clock skew), so a small trim is enough; halving it would
    #: cost far more throughput than the 429 did.
    DECREASE = 0.95
    #: Fraction of the full rate regained per successful request.
    RECOVER = 0.002
    #: Fraction of the limit left unused, so that the shortest windows a provider counts
    #: in (one second) never see more than the limit, and the most the bucket may bank
    #: (in seconds of requests): a request sent late (a busy event loop) may be caught up,
    #: but never a burst over a one-second window's share.
    MARGIN = 0.06

    def __init__(self, rpm: float | None = None, tpm: float | None = None, seed: int | None = None):
        self.rpm = rpm
        self.tpm = tpm
        self._rng = random.Random(seed)
        self._rate_factor = 1.0
        self._spread = 0.0
        self._requests: TokenBucket | None = None
        self._tokens: TokenBucket | None = None
        #: The requests-per-minute limit in force: configured, or announced if lower.
        self.limit_rpm: float | None = None
        self.limit_tpm: float | None = None
        self._set_rpm(rpm)
        self._set_tpm(tpm)
        self._paused_until = 0.0
        self._lock = asyncio.Lock()
        self.health = EndpointHealth(self._rng)
        # One request goes out first and its answer (its headers) tells the limit before
        # the others follow: no start-up burst into a 429 storm when the endpoint's limit
        # is unknown or lower than the configured one. It costs one round trip per run.
        self._first_answer: asyncio.Event | None = asyncio.Event()
        self._first_sent = False

    def _set_rpm(self, rpm: float | None) -> None:
        if not rpm or rpm == self.limit_rpm:
            return
        self.limit_rpm = rpm
        per_second = rpm / 60.0
        rate = self._paced(per_second) * self._rate_factor
        capacity = max(1.0, per_second * self.MARGIN)
        level = 1.0 if self._requests is None else min(self._requests.level, capacity)
        # Starts with one request, not a full bucket: no start-up burst.
        self._requests = TokenBucket(rate, capacity=capacity, level=level)

    def _set_tpm(self, tpm: float | None) -> None:
        if not tpm or tpm == self.limit_tpm:
            return
        self.limit_tpm = tpm
        per_second = tpm / 60.0
        level = None if self._tokens is None else min(self._tokens.level, per_second)
        self._tokens = TokenBucket(self._paced(per_second), per_second, level)

    @property
    def request_rate(self) -> float | None:
        """Requests per second the pacing currently allows (``None``: unpaced)."""
        return None if self._requests is None else self._requests.rate

    def paused_for(self) -> float:
        """Seconds every worker still waits after a 429 or an exhausted limit."""
        return max(0.0, self._paused_until - time.monotonic())

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn from an answer's rate-limit headers: adopt an announced limit lower than
        the configured one (or the only one), and pause when none is left."""
        if self._first_answer is not None:
            self._first_answer.set()
        if not headers:
            return
        announced = read_limits(headers)
        if announced is None:
            return
        if announced.rpm and (self.rpm is None or announced.rpm < self.rpm):
            self._set_rpm(announced.rpm)
        if announced.tpm and (self.tpm is None or announced.tpm < self.tpm):
            self._set_tpm(announced.tpm)
        if announced.requests_left == 0 and announced.requests_reset_s:
            self.pause(min(60.0, announced.requests_reset_s))

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about ``tokens`` tokens may be sent."""
        first_answered = self._first_answer is None or self._first_answer.is_set()
        if first_answered and not self._lock.locked():
            # Nobody queued and, most often, nothing to wait for: through at once, without
            # the lock (the check and the take have no await between them).
            now = time.monotonic()
            wait, gate = self._waits(tokens, now)
            if wait <= 0 and gate <= 0:
                self._take(tokens, now)
                return
        async with self._lock:
            if self._first_answer is not None and not self._first_answer.is_set():
                if self._first_sent:
                    await self._first_answer.wait()
                self._first_sent = True
            while True:
                now = time.monotonic()
                wait, gate = self._waits(tokens, now)
                if wait <= 0 and gate <= 0:
                    break
                # A probe's success reopens the gate at once: poll it rather than sleep
                # through the whole interval.
                await asyncio.sleep(max(wait, min(gate, 0.1)))
            self._take(tokens, now)

    def _waits(self, tokens: int, now: float) -> tuple[float, float]:
        """(seconds the limits and pauses still hold a request back, seconds the outage
        gate does), each at least 0."""
        wait = max(0.0, self._paused_until - now)
        if self._requests is not None:
            wait = max(wait, self._requests.wait_time(1.0, now))
        if self._tokens is not None and tokens:
            wait = max(wait, self._tokens.wait_time(tokens, now))
        return wait, self.health.gate(now)

    def _take(self, tokens: int, now: float) -> None:
        """One request goes out now: count it against the outage gate and the buckets."""
        self.health.passed(now)
        if self._requests is not None:
            self._requests.take(1.0)
        if self._tokens is not None and tokens:
            self._tokens.take(tokens)

    def settle(self, estimated: int, actual: int | None) -> None:
        """Correct the token bucket once ``usage`` tells the real token count."""
        if self._tokens is not None and actual is not None:
            self._tokens.give_back(estimated - actual)

    def on_success(self) -> None:
        self.health.on_success()
        if self._rate_factor < 1.0:
            self._rate_factor = min(1.0, self._rate_factor + self.RECOVER)
            self._apply_rate()

    def on_rate_limited(self, retry_after: float | None, attempt: int) -> float:
        """Pause every worker after a 429; returns the pause in seconds."""
        pause = retry_after if retry_after is not None else self.backoff(attempt)
        self._paused_until = max(self._paused_until, time.monotonic() + pause)
        if self.limit_rpm:
            self._rate_factor = max(0.05, self._rate_factor * self.DECREASE)
            self._apply_rate()
        return pause

    def pause(self, seconds: float) -> None:
        """Pause every worker for ``seconds`` (a 503's ``Retry-After``), rate unchanged."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    def backoff(self, attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
        """Full-jitter exponential back-off for attempt ``attempt`` (0-based)."""
        return self._rng.uniform(0, min(cap, base * 2**attempt))

    def spread_sends(self, seconds: float) -> None:
        """Pace for requests that may reach the endpoint up to ``seconds`` late.

        A limiter shared by several processes (``framekit.ray``'s actor) grants each
        request a send time, and a process starved of CPU sends late (up to ``seconds``
        beyond what ``MARGIN`` absorbs; later grants are given up). The requests granted
        over any ``1 + seconds`` may then land in one 1-second window, so the rate is cut
        to ``1 / (1 + seconds)`` of itself: such a window still holds no more than the
        limit. 0 (the default) paces as usual.

        Examples
        --------
        >>> limiter = RateLimiter(rpm=3000)
        >>> limiter.spread_sends(0.25)
        >>> round(limiter.request_rate, 1)  # 50/s, less the margin, / 1.25
        37.6
        """
        self._spread = max(0.0, seconds)
        self._apply_rate()
        if self._tokens is not None and self.limit_tpm:
            self._tokens.rate = self._paced(self.limit_tpm / 60.0)

    def _paced(self, per_second: float) -> float:
        """The rate requests (or tokens) are granted at for a limit of ``per_second``."""
        return per_second * (1.0 - self.MARGIN) / (1.0 + self._spread)

    def _apply_rate(self) -> None:
        if self._requests is not None and self.limit_rpm:
            self._requests.rate = self._paced(self.limit_rpm / 60.0) * self._rate_factor


class Limiter(Protocol):
    """What the executor asks of a limiter: :class:`RateLimiter`'s interface. A run may be
    handed one shared beyond this process (``framekit.ray``'s, which asks the cluster's
    limiter actor); otherwise each judge gets a :class:`RateLimiter` of its own."""

    health: EndpointHealth

    async def acquire(self, tokens: int = 0) -> None: ...

    def observe(self, headers: Mapping[str, str]) -> None: ...

    def settle(self, estimated: int, actual: int | None) -> None: ...

    def on_success(self) -> None: ...

    def on_rate_limited(self, retry_after: float | None, attempt: int) -> float: ...

    def pause(self, seconds: float) -> None: ...

    def backoff(self, attempt: int, base: float = 0.5, cap: float = 30.0) -> float: ...
