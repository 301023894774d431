"""One rate limit for the whole cluster: a named limiter actor and its worker-side proxy.

A provider's RPM and TPM belong to the API key, not to the worker, so every Ray worker's
judge asks one actor before each call. The actor runs the engine's own
:class:`~framekit.engine.limiter.RateLimiter` (even spacing, RPM and TPM buckets, the
pause after a 429 until ``Retry-After``, the multiplicative rate cut and its additive
recovery), so N workers behave as one process would.

Each call costs one actor round trip (2-5 ms on the 2-core test machine, measured in
``benchmarks/bench_ray.py``; one actor grants 200-600 requests a second there):
negligible next to a judge call at the rates of one API key, so permits are not leased in
batches. Successes, token corrections and the workers' timings ride along with the next
ask instead of costing messages of their own; a 429's pause is sent at once (fire and
forget). Outage detection (:class:`~framekit.engine.limiter.EndpointHealth`) stays per
worker.

A grant is a *slot*: a send time on the cluster's clock, a lead after the grant, and a
tolerance. The worker sends at the slot, no later than the tolerance after it; a grant
that reaches a starved worker (or wakes it) later than that has expired, and the worker
asks again. Sent on arrival instead, grants delayed by a busy machine pile up and go out
together, and a provider counting requests per fixed window sees some windows over the
limit. The workers report how late each grant arrived and how late they woke for it;
from those the actor sets the lead (so that few grants arrive after their slot) and the
tolerance (so that few expire), and slows its pacing by as much as the tolerance exceeds
the margin the pacing keeps anyway (:meth:`RateLimiter.spread_sends`): requests sent
anywhere within their tolerance still put no more than the limit into any 1-second
window. On a quiet machine the lead is 0.1 s, the tolerance 30 ms and the pace that of one
process; on a starved one, calls wait longer for their slots and the pace drops instead
of 429s arriving (figures in ``docs/ray.md``).

The clock is the wall clock (``time.time``), the one clock the nodes of a cluster share;
they must agree within a few milliseconds, as NTP or chrony keeps them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from framekit.engine.limiter import EndpointHealth, RateLimiter, read_limits

#: Ray namespace of the limiter actors: jobs of one cluster using one key share a limit.
NAMESPACE = "framekit"
#: Each grant's slot is at least this far after it. The grant's trip back to the worker
#: takes a varying time (2-5 ms on a quiet machine); the lead absorbs that variation, at
#: the cost of this much latency per call (not of throughput).
MIN_LEAD_S = 0.1
#: How late after its slot a grant may be used, at the least. Requests paced at
#: ``1 - MARGIN`` of the limit (``RateLimiter.MARGIN``, 6 %) may each be 64 ms late
#: (0.06 / 0.94 s) without a 1-second window holding more than the limit; half of that is
#: left for the time between the worker's check and the request reaching the endpoint.
MIN_TOLERANCE_S = 0.03
#: The most the lead and the tolerance grow to on a starved machine: a call waits at most
#: ``MAX_LEAD_S`` for its slot, and the pace drops to at most 1 / (1 + 0.5 - 0.03) of
#: itself. Later trips and wake-ups expire their grants.
MAX_LEAD_S = 1.0
MAX_TOLERANCE_S = 0.5
#: The share of trips the lead covers and of wake-ups the tolerance covers: about 2 % of
#: grants expire on a busy machine, and each costs one more round trip.
COVERED = 0.98
#: A request whose grant has expired this many times in a row goes at its next grant,
#: however late: progress before pacing (a worker starved beyond the maxima every time, or
#: on a node whose clock is far off).
MAX_EXPIRIES = 8
#: How many of the workers' latest grants the lead and the tolerance are set from.
TIMINGS_KEPT = 200


class _LimiterActor:
    """The cluster's pacing state for one judge endpoint (runs as a Ray actor)."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self._limiter = RateLimiter(rpm, tpm)
        self._granted = 0
        self._rate_limited = 0
        self._expired = 0
        self._trips: deque[float] = deque(maxlen=TIMINGS_KEPT)
        self._wakes: deque[float] = deque(maxlen=TIMINGS_KEPT)
        self._lead = MIN_LEAD_S
        self._tolerance = MIN_TOLERANCE_S

    async def acquire(
        self,
        tokens: int,
        successes: int = 0,
        token_correction: int = 0,
        timings: Sequence[tuple[float, float]] = (),
        expired: int = 0,
    ) -> tuple[float, float, float]:
        """Grant one request: ``(granted_at, send_at, tolerance)``, the first two on the
        wall clock; the request is to be sent from ``send_at`` to ``send_at + tolerance``.

        The arguments after ``tokens`` report what the asking worker saw since its last
        ask: answers, the token count's correction, each grant's timings (seconds from
        ``granted_at`` to its arrival, and how late after ``send_at`` the worker woke for
        it) and how many grants expired unused.
        """
        for _ in range(successes):
            self._limiter.on_success()
        if token_correction:
            self._limiter.settle(token_correction, 0)
        if timings:
            self._learn(timings)
        self._expired += expired
        await self._limiter.acquire(tokens)
        self._granted += 1
        now = time.time()
        return now, now + self._lead, self._tolerance

    def _learn(self, timings: Sequence[tuple[float, float]]) -> None:
        """Set the lead and the tolerance from the workers' latest timings."""
        for trip, wake in timings:
            self._trips.append(trip)
            self._wakes.append(wake)
        self._lead = _covering(self._trips, MIN_LEAD_S, MAX_LEAD_S)
        tolerance = _covering(self._wakes, MIN_TOLERANCE_S, MAX_TOLERANCE_S)
        if tolerance != self._tolerance:
            self._tolerance = tolerance
            # The margin absorbs the least tolerance; the pace makes room for the rest.
            self._limiter.spread_sends(tolerance - MIN_TOLERANCE_S)

    async def observe(self, headers: dict[str, str]) -> None:
        self._limiter.observe(headers)

    async def on_rate_limited(self, pause: float) -> None:
        self._rate_limited += 1
        self._limiter.on_rate_limited(pause, 0)

    async def pause(self, seconds: float) -> None:
        self._limiter.pause(seconds)

    async def counts(self) -> dict[str, float]:
        """Grants made, 429s reported, grants expired unused, and the lead and the
        tolerance now (seconds)."""
        return {
            "granted": self._granted,
            "rate_limited": self._rate_limited,
            "expired": self._expired,
            "lead_s": self._lead,
            "tolerance_s": self._tolerance,
        }


def _covering(samples: Sequence[float], least: float, most: float) -> float:
    """The value ``COVERED`` of ``samples`` are at or below, within ``least``..``most``.

    Examples
    --------
    >>> _covering([0.003] * 100, 0.1, 1.0)
    0.1
    >>> _covering([0.003] * 90 + [0.4] * 10, 0.1, 1.0)
    0.4
    """
    if len(samples) < 20:  # too few to tell a busy machine from one slow grant
        return least
    ordered = sorted(samples)
    return min(most, max(least, ordered[int(COVERED * (len(ordered) - 1))]))


def limiter_name(model: str, api_base: str | None, rpm: float | None, tpm: float | None) -> str:
    """The actor's name: one limiter per endpoint, model and limits.

    Examples
    --------
    >>> limiter_name("openai/gpt-4o-mini", None, 3000, None)[:17]
    'framekit-limiter-'
    """
    ident = json.dumps([model, api_base, rpm, tpm])
    return "framekit-limiter-" + hashlib.sha256(ident.encode()).hexdigest()[:16]


def shared_limiter(model: str, api_base: str | None, rpm: float | None, tpm: float | None) -> Any:
    """The cluster's limiter actor for this endpoint, created on first use.

    It is detached (it outlives the job that made it, so concurrent and later jobs on the
    same key share its state) and takes no CPU.
    """
    return (
        ray.remote(_LimiterActor)
        .options(
            num_cpus=0,
            # Every waiting request of every worker is one pending call.
            max_concurrency=10_000,
            name=limiter_name(model, api_base, rpm, tpm),
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
        )
        .remote(rpm, tpm)
    )


class RemoteLimiter:
    """Stands in for the executor's :class:`RateLimiter`, asking the cluster's actor.

    Same interface as :class:`~framekit.engine.limiter.RateLimiter`
    (:class:`~framekit.engine.limiter.Limiter`); a worker hands it to the runs it scores
    (``evaluate_with_stats(..., limiter_for=...)``), which pace their judge's calls
    through the actor.
    """

    def __init__(self, actor: Any, seed: int | None = None) -> None:
        self._actor = actor
        self._rng = random.Random(seed)
        self.health = EndpointHealth(self._rng)
        self._successes = 0
        self._token_correction = 0
        self._timings: list[tuple[float, float]] = []
        self._expired = 0
        self._observed: tuple[object, ...] | None = None

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about ``tokens`` tokens may be sent: until its slot,
        asking again while its grants expire (see the module's docstring)."""
        while True:
            gate = self.health.gate(time.monotonic())
            if gate <= 0:
                break
            await asyncio.sleep(min(gate, 0.1))
        for expiries in range(MAX_EXPIRIES + 1):
            grant = await self._actor.acquire.remote(tokens, *self._report())
            granted_at, send_at, tolerance = grant
            arrived = time.time()
            if send_at > arrived:
                await asyncio.sleep(send_at - arrived)
            # Checked after the sleep: a starved event loop wakes late too.
            late = time.time() - send_at
            self._timings.append((arrived - granted_at, late))
            if late <= tolerance or expiries == MAX_EXPIRIES:
                break
            self._expired += 1
        self.health.passed(time.monotonic())

    def _report(self) -> tuple[int, int, list[tuple[float, float]], int]:
        """What this worker saw since its last ask, for the actor (and now cleared)."""
        report = (self._successes, self._token_correction, self._timings, self._expired)
        self._successes = self._token_correction = self._expired = 0
        self._timings = []
        return report

    def observe(self, headers: Mapping[str, str]) -> None:
        """Pass an answer's rate-limit headers on to the cluster's limiter: the first
        answer (the actor holds later requests until it has seen one), then only a new
        limit or an exhausted window, so that the actor is not asked twice per call."""
        announced = read_limits(headers) if headers else None
        state = (
            None
            if announced is None
            else (announced.rpm, announced.tpm, announced.requests_left == 0)
        )
        if self._observed is not None and state == self._observed[0]:
            return
        self._observed = (state,)
        self._actor.observe.remote(dict(headers or {}))

    def settle(self, estimated: int, actual: int | None) -> None:
        if actual is not None:
            self._token_correction += estimated - actual

    def on_success(self) -> None:
        self.health.on_success()
        self._successes += 1

    def on_rate_limited(self, retry_after: float | None, attempt: int) -> float:
        pause = retry_after if retry_after is not None else self.backoff(attempt)
        self._actor.on_rate_limited.remote(pause)
        return pause

    def pause(self, seconds: float) -> None:
        self._actor.pause.remote(seconds)

    def backoff(self, attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
        """Full-jitter exponential back-off for attempt ``attempt`` (0-based)."""
        return self._rng.uniform(0, min(cap, base * 2**attempt))
