"""Sending chat requests: a fixed pool of workers, a shared limiter, retries and re-asks.

Each unique request is sent at most once per run (the planner deduplicates), and every
parsed answer is written to the cache the moment it arrives, so a killed run loses only
the calls in flight.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from framekit._errors import JudgeAuthenticationError
from framekit.engine.cache import Cache
from framekit.engine.faults import classify, redact
from framekit.engine.limiter import RateLimiter
from framekit.engine.stats import RunStats
from framekit.judges import _litellm
from framekit.judges.base import ChatRequest
from framekit.judges.litellm_judge import Judge
from framekit.judges.structured import ParseFailure, parse_answer, reask_message

T = TypeVar("T")


async def _bounded(call: Awaitable[T], seconds: float) -> T:
    """Await ``call`` for at most ``seconds`` (no extra task per call on 3.11+)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await call
    return await asyncio.wait_for(call, seconds)  # pragma: no cover


#: Times a reply with an out-of-rubric label or unreadable JSON is re-asked.
MAX_REASKS = 2


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
        self.limiter = RateLimiter(judge.rpm, judge.tpm, seed=seed)

    async def run(
        self,
        items: Iterable[tuple[str, ChatRequest]],
        on_done: Callable[[str, Outcome], None],
    ) -> None:
        """Send every ``(key, request)``; ``on_done`` is called as each finishes."""
        # The first import of litellm takes seconds: do it off the event loop.
        await asyncio.to_thread(_litellm.litellm)
        queue = iter(items)
        workers = [
            asyncio.create_task(self._worker(queue, on_done)) for _ in range(self.judge.concurrency)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, queue: Any, on_done: Callable[[str, Outcome], None]) -> None:
        for key, request in queue:
            outcome = await self.send(request)
            if outcome.answer is not None:
                self.cache.set(
                    key,
                    {
                        "answer": outcome.answer,
                        "tokens": outcome.tokens,
                        "cost_usd": outcome.cost_usd,
                    },
                )
            on_done(key, outcome)

    async def send(self, request: ChatRequest) -> Outcome:
        """One request through pacing, retries and re-asks, to an answer or an error."""
        judge, stats = self.judge, self.stats
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
                # litellm enforces judge.timeout; this outer bound only catches a client
                # that ignores it, without wait_for's extra task per call.
                raw = await _bounded(judge.attempt(request, messages), judge.timeout + 5.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                fault = classify(exc, judge.secrets)
                if fault.kind == "auth":
                    raise JudgeAuthenticationError(fault.reason) from None
                if fault.kind == "mode" and sent_mode != "prompt":
                    # The endpoint rejects this structured-output mode: downgrade once for
                    # the judge (other workers may have already), then resend.
                    if judge.mode == sent_mode:
                        judge.mode = "tool" if sent_mode == "json_schema" else "prompt"
                    continue
                if fault.kind in ("rate_limited", "transient") and retries < judge.max_retries:
                    stats.retries += 1
                    if fault.kind == "rate_limited":
                        stats.rate_limited += 1
                        self.limiter.on_rate_limited(fault.retry_after, retries)
                    else:
                        await asyncio.sleep(self.limiter.backoff(retries))
                    retries += 1
                    continue
                suffix = f" (after {retries} retries)" if retries else ""
                return Outcome(
                    None, fault.reason + suffix, tokens, cost, time.perf_counter() - started
                )
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
