"""Sending chat requests: a fixed pool of workers, a shared limiter, retries and re-asks.

Each unique request is sent at most once per run (the planner deduplicates), and every
parsed answer is written to the cache the moment it arrives, so a killed run loses only
the calls in flight. Just before a request goes out the cache is asked again, so a second
process working through the same rows does not pay for answers the first one already has.

When the endpoint as a whole is down, rows do not pay for it: retries during an outage
(see :class:`~framekit.engine.limiter.EndpointHealth`) are not counted against each
request's ``max_retries``. The outage itself has a budget, and some failures stop the
run at once with one :class:`~framekit.JudgeError` rather than one error per row:
a rejected key (401/403), an endpoint that no call could connect to, an endpoint that
answers 404 to every call, and an outage longer than the budget.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from framekit import _secrets
from framekit._aio import bounded
from framekit._errors import JudgeAuthenticationError, JudgeConfigurationError, JudgeError
from framekit.engine.cache import Cache
from framekit.engine.faults import Fault, classify, redact
from framekit.engine.inflight import table_for, wait_for
from framekit.engine.limiter import RateLimiter
from framekit.engine.stats import RunStats
from framekit.judges.base import ChatRequest
from framekit.judges.litellm_judge import Judge
from framekit.judges.structured import ParseFailure, parse_answer, reask_message

#: Times a reply with an out-of-rubric label or unreadable JSON is re-asked.
MAX_REASKS = 2
#: A run that sent at least this many requests with this process's CPU at least this busy
#: (CPU seconds per second) was held back by the client: the summary says so.
CPU_HINT_MIN_REQUESTS = 500
CPU_HINT_BUSY = 0.8
#: Calls that must fail to connect, with none succeeding, before the endpoint is
#: declared unreachable (and, likewise, answer 404 before the model is declared unknown).
UNREACHABLE_AFTER = 3


def outage_budget(max_retries: int) -> float:
    """Seconds an outage of the whole endpoint is ridden out before the run stops.

    The same span that ``max_retries`` back-offs of 0.5 s, 1 s, 2 s ... add up to:
    63.5 s at the default of 6 retries (a 30-second 503 storm passes), 7.5 s at 3.
    """
    return 0.5 * (2 ** (max_retries + 1) - 1)


@dataclass
class Outcome:
    """The result of one unique request."""

    answer: dict[str, Any] | None
    error: str | None
    tokens: int = 0
    cost_usd: float | None = None
    latency_s: float | None = None
    cached: bool = False


def estimate_tokens(messages: list[dict[str, Any]], max_tokens: int) -> int:
    """Rough pre-call estimate for the TPM bucket (about 4 characters a token)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4 + min(max_tokens, 256)


class ChatExecutor:
    """Runs the unique chat requests of one run against one judge."""

    def __init__(self, judge: Judge, cache: Cache, stats: RunStats, seed: int | None = None):
        self.judge = judge
        self.cache = cache
        self.stats = stats
        # A judge may carry a limiter shared beyond this process (framekit.ray installs
        # one that asks the cluster's limiter actor); it has RateLimiter's interface.
        shared = getattr(judge, "shared_limiter", None)
        self.limiter = shared or RateLimiter(judge.rpm, judge.tpm, seed=seed)
        # Shared with other runs of this process on the same cache directory.
        self.inflight = table_for(cache)

    async def run(
        self,
        items: Iterable[tuple[str, ChatRequest]],
        on_done: Callable[[str, Outcome], None],
    ) -> None:
        """Send every ``(key, request)``; ``on_done`` is called as each finishes."""
        await self.judge.prepare()
        queue = iter(items)
        workers = [
            asyncio.create_task(self._worker(queue, on_done)) for _ in range(self.judge.concurrency)
        ]
        sent_before = self.stats.requests_sent
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        busy = (time.process_time() - cpu_started) / max(1e-9, time.perf_counter() - wall_started)
        if (
            self.judge.processes == 1
            and self.stats.requests_sent - sent_before >= CPU_HINT_MIN_REQUESTS
            and busy >= CPU_HINT_BUSY
        ):
            self.stats.hints.append(
                f"this process's CPU, not the judge, set the pace ({busy:.0%} busy while "
                "sending; litellm spends ~4 ms of CPU per call): worker processes would "
                "share the work (fk.Judge(..., processes=2), or --processes 2)"
            )

    async def _worker(self, queue: Any, on_done: Callable[[str, Outcome], None]) -> None:
        for key, request in queue:
            entry = self.cache.get(key)
            if entry is not None:
                # Another process (or an earlier, interrupted run) answered it meanwhile.
                self.stats.cache_hits += 1
                on_done(key, _cached_outcome(entry))
                continue
            owner = self.inflight.claim(key) if self.inflight is not None else None
            if owner is not None:
                # Another run of this process is paying for this very request.
                shared = await wait_for(owner)
                if shared is not None and shared.answer is not None:
                    self.stats.cache_hits += 1
                    on_done(key, replace(shared, cached=True, latency_s=0.0))
                    continue
            outcome = None
            try:
                outcome = await self.send(request, key)
                if outcome.answer is not None:
                    self.cache.set(
                        key,
                        {
                            "answer": outcome.answer,
                            "tokens": outcome.tokens,
                            "cost_usd": outcome.cost_usd,
                        },
                    )
            finally:
                if owner is None and self.inflight is not None:
                    self.inflight.finish(key, outcome)
            on_done(key, outcome)

    async def send(self, request: ChatRequest, key: str = "") -> Outcome:
        """One request through pacing, retries and re-asks, to an answer or an error."""
        judge, stats = self.judge, self.stats
        health = self.limiter.health
        messages = list(request.messages)
        retries = reasks = tokens = 0
        cost: float | None = None
        started = time.perf_counter()
        while True:
            estimate = estimate_tokens(messages, judge.max_tokens)
            await self.limiter.acquire(estimate)
            stats.requests_sent += 1
            sent_mode = judge.mode
            try:
                # litellm's timeout bounds each read, not the whole answer: a server that
                # trickles its reply byte by byte would hold the call far longer.
                raw = await bounded(judge.attempt(request, messages), judge.timeout)
            except (asyncio.CancelledError, JudgeError):
                raise
            except Exception as exc:
                fault = classify(exc, judge.secrets)
                if fault.kind == "auth":
                    raise JudgeAuthenticationError(fault.reason) from None
                if fault.kind == "config":
                    raise JudgeConfigurationError(fault.reason) from None
                if fault.kind == "mode" and sent_mode != "prompt":
                    # The endpoint rejects this structured-output mode: downgrade once for
                    # the judge (other workers may have already), then resend.
                    if judge.mode == sent_mode:
                        judge.mode = "tool" if sent_mode == "json_schema" else "prompt"
                    continue
                retryable = fault.kind in ("rate_limited", "transient")
                if retryable:
                    health.on_failure(key or str(id(request)), fault.connect)
                self._stop_if_endpoint_is_down(fault)
                # During an outage the endpoint, not the request, is at fault: retry
                # without spending the request's budget (the outage has its own).
                outage = health.in_outage and judge.max_retries > 0
                if retryable and (outage or retries < judge.max_retries):
                    stats.retries += 1
                    if fault.kind == "rate_limited":
                        stats.rate_limited += 1
                        self.limiter.on_rate_limited(fault.retry_after, retries)
                    elif fault.retry_after is not None:
                        self.limiter.pause(fault.retry_after)
                    elif not outage:
                        await asyncio.sleep(self.limiter.backoff(retries))
                    if not outage:
                        retries += 1
                    continue
                suffix = f" (after {retries} retries)" if retries else ""
                return Outcome(
                    None, fault.reason + suffix, tokens, cost, time.perf_counter() - started
                )
            # An endpoint may echo credentials into its answer: they must not reach the
            # cache, the output or a re-ask.
            raw.text = _secrets.redact(raw.text, judge.secrets) if raw.text else raw.text
            raw.refusal = _secrets.redact(raw.refusal, judge.secrets) if raw.refusal else None
            self.limiter.settle(estimate, raw.tokens)
            self.limiter.on_success()
            stats.tokens += raw.tokens
            tokens += raw.tokens
            if raw.cost_usd is not None:
                cost = (cost or 0.0) + raw.cost_usd
                stats.cost_usd = (stats.cost_usd or 0.0) + raw.cost_usd
            try:
                answer = parse_answer(raw.text, raw.refusal, request)
            except ParseFailure as failure:
                if failure.kind != "refusal" and reasks < MAX_REASKS:
                    reasks += 1
                    stats.reasks += 1
                    messages = [
                        *messages,
                        {"role": "assistant", "content": raw.text or ""},
                        {"role": "user", "content": reask_message(failure, request)},
                    ]
                    continue
                suffix = f" (after {reasks} re-asks)" if reasks else ""
                reason = redact(str(failure) + suffix, judge.secrets)
                return Outcome(None, reason, tokens, cost, time.perf_counter() - started)
            return Outcome(answer, None, tokens, cost, time.perf_counter() - started)

    def _stop_if_endpoint_is_down(self, fault: Fault) -> None:
        """Raise one run-wide :class:`JudgeError` when no row could ever succeed."""
        judge, health = self.judge, self.limiter.health
        where = redact(
            _secrets.safe_url(judge.api_base) or f"the default endpoint of {judge.model!r}",
            judge.secrets,
        )
        if fault.connect and not health.succeeded and health.connect_failures >= UNREACHABLE_AFTER:
            raise JudgeError(
                f"cannot reach the judge at {where}: the first {health.connect_failures} "
                f"calls all failed to connect, none succeeded (last: {fault.reason}). "
                "Check api_base and that the server is running."
            )
        if fault.kind == "fatal" and fault.status == 404 and not health.succeeded:
            health.not_found += 1
            if health.not_found >= UNREACHABLE_AFTER:
                raise JudgeError(
                    f"the judge at {where} answered HTTP 404 to the first "
                    f"{health.not_found} calls and none succeeded ({fault.reason}). "
                    f"Check the model name {judge.model!r} and api_base."
                )
        budget = outage_budget(judge.max_retries)
        lasted = health.outage_seconds()
        if judge.max_retries > 0 and lasted > budget:
            raise JudgeError(
                f"the judge at {where} failed every call for {lasted:.1f} s, longer than "
                f"the {budget:g} s an outage is ridden out with max_retries="
                f"{judge.max_retries} (last: {fault.reason})"
            )


def _cached_outcome(entry: dict[str, Any]) -> Outcome:
    return Outcome(entry["answer"], None, entry.get("tokens", 0), entry.get("cost_usd"), 0.0, True)
