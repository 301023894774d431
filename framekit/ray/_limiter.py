"""One rate limit for the whole cluster: a named limiter actor and its worker-side proxy.

A provider's RPM and TPM belong to the API key, not to the worker, so every Ray worker's
judge asks one actor before each call. The actor runs the engine's own
:class:`~framekit.engine.limiter.RateLimiter` (even spacing, RPM and TPM buckets, the
pause after a 429 until ``Retry-After``, the multiplicative rate cut and its additive
recovery), so N workers behave as one process would.

Each call costs one actor round trip (2-5 ms on the 2-core test machine, measured in
``benchmarks/bench_ray.py``; one actor grants 200-600 requests a second there):
negligible next to a judge call at the rates of one API key, so permits are not leased in
batches. Grants carry a send time (see ``SEND_LEAD_S``) so that the round trip's jitter
does not bunch requests at the endpoint. Successes and token corrections ride along with the next ask instead of
costing messages of their own; a 429's pause is sent at once (fire and forget).
Outage detection (:class:`~framekit.engine.limiter.EndpointHealth`) stays per worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Mapping
from typing import Any

import ray

from framekit.engine.limiter import EndpointHealth, RateLimiter, read_limits

#: Ray namespace of the limiter actors: jobs of one cluster using one key share a limit.
NAMESPACE = "framekit"
#: Each grant names a send time this far after it. The grant's trip back to the worker
#: takes a varying time (milliseconds, far more on a busy machine); sent on arrival,
#: requests granted evenly would reach the endpoint unevenly, and a provider counting
#: requests per fixed window sees some windows over the limit. A fixed lead absorbs that
#: variation, at the cost of this much latency per call (not of throughput).
SEND_LEAD_S = 0.1


class _LimiterActor:
    """The cluster's pacing state for one judge endpoint (runs as a Ray actor)."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self._limiter = RateLimiter(rpm, tpm)
        self._granted = 0
        self._rate_limited = 0

    async def acquire(self, tokens: int, successes: int, token_correction: int) -> float:
        """Grant one request; returns the wall-clock time at which it is to be sent."""
        for _ in range(successes):
            self._limiter.on_success()
        if token_correction:
            self._limiter.settle(token_correction, 0)
        await self._limiter.acquire(tokens)
        self._granted += 1
        return time.time() + SEND_LEAD_S

    async def observe(self, headers: dict[str, str]) -> None:
        self._limiter.observe(headers)

    async def on_rate_limited(self, pause: float) -> None:
        self._rate_limited += 1
        self._limiter.on_rate_limited(pause, 0)

    async def pause(self, seconds: float) -> None:
        self._limiter.pause(seconds)

    async def counts(self) -> dict[str, int]:
        return {"granted": self._granted, "rate_limited": self._rate_limited}


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
        self._observed: tuple[object, ...] | None = None

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about ``tokens`` tokens may be sent."""
        while True:
            gate = self.health.gate(time.monotonic())
            if gate <= 0:
                break
            await asyncio.sleep(min(gate, 0.1))
        successes, correction = self._successes, self._token_correction
        self._successes = self._token_correction = 0
        send_at = await self._actor.acquire.remote(tokens, successes, correction)
        delay = send_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        self.health.passed(time.monotonic())

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
