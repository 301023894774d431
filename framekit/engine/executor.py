"""Sending chat requests: a fixed pool of workers, a shared limiter, retries and re-asks.

Each unique request is sent at most once per run (the planner deduplicates), and every
parsed answer is handed to the cache's writer thread the moment it arrives
(:class:`~framekit.engine.cache.GroupWriter`: group commit, one transaction for what has
queued, so the event loop never waits on sqlite). A killed run loses only the calls in
flight and the answers not yet written (at most
:data:`~framekit.engine.cache.WRITE_GROUP_MAX`, in practice the last 50 ms or so of
answers: a small group waits that long to fill); a run that ends, fails, is cancelled or is
interrupted writes them all before it returns. Just before requests go out the cache is
asked again (one query for a few of them), so a second process working through the same
rows does not pay for answers the first one already has, and a request the other process
is asking right now is claimed by it (:mod:`framekit.engine.claims`): this run waits for
its answer instead of paying for it too (:mod:`framekit.engine.lookahead`).

Two runs at once in one process (two threads of a notebook) would each find the same
misses and pay for every one twice; with one table of calls in flight per cache
directory (:class:`InFlight`), the second run to want an answer waits for the first
run's call and takes its answer (a failed call is made again by the waiting run, which
has its own retry budget). An answered call stays in that table until its answer is
written, so a run arriving in between takes it from there rather than paying again.

When the endpoint as a whole is down, rows do not pay for it: retries during an outage
(see :class:`~framekit.engine.limiter.EndpointHealth`) are not counted against each
request's ``max_retries``. The outage itself has a budget, and some failures stop the
run at once with one :class:`~framekit.JudgeError` rather than one error per row:
a rejected key (401/403), a model string litellm cannot route, an endpoint that answers
404 to the first calls (a wrong model name or path), an endpoint that no call could
connect to, and an outage longer than the budget. The first three are the user's to fix
(:class:`~framekit.JudgeAuthenticationError`, :class:`~framekit.JudgeConfigurationError`;
exit 2 in the command line), the last two may pass (exit 1).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from framekit import _secrets
from framekit._errors import JudgeConfigurationError, JudgeError
from framekit._results import Outcome
from framekit.engine.budget import UNLIMITED, Gate
from framekit.engine.cache import Cache, GroupWriter, NullCache
from framekit.engine.claims import Claims, claims_for
from framekit.engine.limiter import Limiter, RateLimiter
from framekit.engine.lookahead import LookAhead
from framekit.engine.sampling import sample_key, vote
from framekit.engine.stagger import PrefixOrder
from framekit.engine.stats import RunStats
from framekit.judges.faults import Fault, raise_for_run
from framekit.judges.judge import Judge
from framekit.judges.request import ChatRequest, Modes, read_reply
from framekit.judges.transport import RawReply, Transport
from framekit.judges.usage import CHARS_PER_TOKEN

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
class _Progress:
    """Where one request stands: the conversation so far and what it has cost."""

    messages: list[dict[str, Any]]
    started: float
    retries: int = 0
    reasks: int = 0
    tokens: int = 0
    cost: float | None = None

    def outcome(
        self,
        answer: dict[str, Any] | None,
        error: str | None,
        probabilities: dict[str, float] | None = None,
    ) -> Outcome:
        elapsed = time.perf_counter() - self.started
        return Outcome(answer, error, self.tokens, self.cost, elapsed, False, probabilities)


def cpu_hint(requests: int, busy: float, processes: int, transport: str) -> str | None:
    """The summary's hint when this process's CPU, not the judge, set a run's pace.

    ``busy`` is CPU seconds per wall second while sending. A short run says nothing (its
    start-up dominates); worker processes are suggested only where they exist (litellm).

    Examples
    --------
    >>> cpu_hint(1000, 0.95, 1, "http") is not None
    True
    >>> cpu_hint(1000, 0.3, 1, "litellm") is None
    True
    """
    if processes != 1 or requests < CPU_HINT_MIN_REQUESTS or busy < CPU_HINT_BUSY:
        return None
    if transport == "litellm":
        return (
            f"this process's CPU, not the judge, set the pace ({busy:.0%} busy while "
            "sending; litellm spends ~4 ms of CPU per call): worker processes would "
            "share the work (fk.Judge(..., processes=2), or --processes 2)"
        )
    return (
        f"this process's CPU, not the judge, set the pace ({busy:.0%} busy while sending): "
        "other work in this process (or a busy machine) competes with the calls"
    )


@dataclass(frozen=True)
class _Published:
    outcome: Any


_ABSENT = object()

_tables: dict[str, InFlight] = {}
_tables_lock = threading.Lock()


class InFlight:
    """Keys being answered right now, and the future each answer will arrive on.

    Futures are ``concurrent.futures`` ones because the runs sharing a table run on
    different event loops in different threads. A future is made only when a second run
    asks for a key (rarely): a run alone pays for a dict entry per call, no more.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> None (claimed, nobody waits), the future a waiting run awaits, or the
        # answer published but not yet written (_Published).
        self._calls: dict[str, concurrent.futures.Future[Any] | _Published | None] = {}
        #: Answers written to the cache by every run of this process on it, so far.
        self.written = 0

    def claim(self, key: str) -> concurrent.futures.Future[Any] | None:
        """``None``: the caller now owns the call and must :meth:`finish` it; otherwise
        the future of the run that owns it."""
        with self._lock:
            if key not in self._calls:
                self._calls[key] = None
                return None
            entry = self._calls[key]
            if isinstance(entry, concurrent.futures.Future):
                return entry
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            if isinstance(entry, _Published):
                future.set_result(entry.outcome)
            else:
                self._calls[key] = future
            return future

    def finish(self, key: str, outcome: Any) -> None:
        """Publish the owner's outcome (``None``: no answer) to every waiting run."""
        with self._lock:
            entry = self._calls.pop(key, None)
        if isinstance(entry, concurrent.futures.Future) and not entry.done():
            entry.set_result(outcome)

    def publish(self, key: str, outcome: Any) -> None:
        """Publish an answer that is queued for the cache but not yet written: the key
        stays claimed, answered, until :meth:`release`, so a run that asks meanwhile
        takes this answer instead of paying for it again."""
        with self._lock:
            entry = self._calls.get(key, _ABSENT)
            if entry is _ABSENT:
                return
            self._calls[key] = _Published(outcome)
        if isinstance(entry, concurrent.futures.Future) and not entry.done():
            entry.set_result(outcome)

    def release(self, keys: list[str]) -> None:
        """Forget published answers now in the cache (called by the writer thread), and
        count them written."""
        with self._lock:
            self.written += len(keys)
            calls = self._calls
            for key in keys:
                if isinstance(calls.get(key), _Published):
                    del calls[key]

    def __len__(self) -> int:
        return len(self._calls)


async def wait_for(future: concurrent.futures.Future[Any]) -> Any:
    """Await another run's call without ever cancelling it (shielded)."""
    return await asyncio.shield(asyncio.wrap_future(future))


def table_for(cache: Cache) -> InFlight | None:
    """The in-flight table of a cache directory; ``None`` without a cache."""
    if isinstance(cache, NullCache):
        return None
    path = os.path.realpath(cache.path)
    with _tables_lock:
        table = _tables.get(path)
        if table is None:
            table = _tables[path] = InFlight()
        return table


#: One finished request: its cache key and what became of it.
Answered = tuple[str, Outcome]


async def stream(
    drive: Callable[[Callable[[str, Outcome], None]], Awaitable[None]],
) -> AsyncIterator[Answered]:
    """The outcomes an executor's ``drive`` produces, as an async iterator.

    ``drive`` runs as a task and hands each outcome to the sink it is given; they are
    yielded in the order they finish, and an error of ``drive`` (a run-wide
    :class:`~framekit.JudgeError`) is raised here once the outcomes before it are out.
    Leaving the loop early (or being cancelled) cancels ``drive``.
    """
    done: asyncio.Queue[Answered | None] = asyncio.Queue()

    async def run() -> None:
        try:
            await drive(lambda key, outcome: done.put_nowait((key, outcome)))
        finally:
            done.put_nowait(None)  # the end, or the error that follows it

    task = asyncio.create_task(run())
    try:
        while (item := await done.get()) is not None:
            yield item
        await task  # raises what stopped drive
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def estimate_tokens(messages: list[dict[str, Any]], max_tokens: int) -> int:
    """Rough pre-call estimate for the TPM bucket (:data:`CHARS_PER_TOKEN` a token)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // CHARS_PER_TOKEN + min(max_tokens, 256)


#: Where an executor's drive puts each outcome.
Sink = Callable[[str, Outcome], None]


class Requests:
    """The requests an executor answers: their keys, and each request rendered only when
    it is asked for (:meth:`request`: just before it is sent, so a run holds the prompts
    in flight, not every prompt of its plan). Iterated, ``(key, request)`` pairs; a batch
    reads :meth:`shapes` first, then the pairs.

    Examples
    --------
    >>> asked = Requests.of([("k1", ChatRequest([], "v", {}))])
    >>> list(asked.keys), asked.request("k1").schema_name
    (['k1'], 'v')
    """

    def __init__(
        self,
        keys: Sequence[str],
        render: Callable[[str], ChatRequest],
        shape: Callable[[str], ChatRequest] | None = None,
    ) -> None:
        self.keys = keys
        #: The request of a key, rendered now.
        self.request = render
        self._shape = shape or render

    @classmethod
    def of(cls, items: Iterable[tuple[str, ChatRequest]]) -> Requests:
        """Requests already built, as ``(key, request)`` pairs."""
        built = dict(items)
        return cls(list(built), built.__getitem__)

    def __iter__(self) -> Iterator[tuple[str, ChatRequest]]:
        return ((key, self.request(key)) for key in self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def shapes(self) -> Iterator[tuple[str, ChatRequest]]:
        """``(key, shape)``: what reading each answer needs, without rendering a prompt."""
        return ((key, self._shape(key)) for key in self.keys)

    def shape_of(self, key: str) -> ChatRequest:
        """The request of ``key`` without its messages (its schema and ``extra``)."""
        return self._shape(key)


class Executor:
    """What the planner asks of an executor: :meth:`outcomes`. A subclass sends in its
    own way (``_drive``) and hands each outcome to the sink it is given."""

    def outcomes(
        self, items: Requests | Iterable[tuple[str, ChatRequest]]
    ) -> AsyncIterator[Answered]:
        """Answer every request; ``(key, outcome)`` as each finishes."""
        asked = items if isinstance(items, Requests) else Requests.of(items)
        return stream(lambda sink: self._drive(asked, sink))

    async def _drive(self, items: Requests, on_done: Sink) -> None:
        raise NotImplementedError


class ChatExecutor(Executor):
    """Runs the unique chat requests of one run against one judge.

    ``limiter`` paces the calls (default: a :class:`~framekit.engine.limiter.RateLimiter`
    of the judge's own limits; ``framekit.ray`` hands in the cluster's); ``modes`` is the
    run's structured-output mode, shared with a batch run's direct follow-up.
    """

    def __init__(
        self,
        judge: Judge,
        cache: Cache,
        stats: RunStats,
        limiter: Limiter | None = None,
        modes: Modes | None = None,
        seed: int | None = None,
    ):
        self.judge = judge
        self.limits, self.max_tokens = judge.limits, judge.decoding.max_tokens
        self.cache = cache
        self.stats = stats
        self.limiter: Limiter = limiter or RateLimiter(judge.rpm, judge.tpm, seed=seed)
        self.modes = modes or Modes()
        # Shared with other runs of this process on the same cache directory.
        self.inflight = table_for(cache)
        # The table's count of written answers now (the plan has just asked the cache),
        # and this run's own: any others were written by another run meanwhile.
        self._written_before = self.inflight.written if self.inflight is not None else 0
        self._written_own = 0
        # When the plan asked the cache (just before this executor was made), and the
        # claims file of the cache, once the run has opened it (see _cache_changed).
        self._planned_at = time.time()
        self._claims: Claims | None = None
        self.secrets: list[str] = []
        self._transport: Transport | None = None
        # The run's answers go to the cache through a writer thread (see the module
        # docstring); ``None`` when nothing is saved (no cache, or a read-only one).
        self._writes: GroupWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._room = asyncio.Event()  # set by the writer when a full queue has room
        self._room_wanted = False
        # Answers of this turn of the event loop, handed to the writer together at its
        # end: one wake-up of the thread per turn, not one per answer.
        self._staged: list[tuple[str, Any]] = []
        self._lookahead: LookAhead | None = None
        self._gate = Gate(judge, stats)  # the run's budget (engine/budget.py)

    async def _drive(self, items: Requests, on_done: Sink) -> None:
        self._loop = asyncio.get_running_loop()
        self._writes = GroupWriter(self.cache, self._written) if self.cache.writable else None
        try:
            await self._send_all(items, on_done)
        finally:
            await self._drain()
            if self._lookahead is not None:  # after the drain: every answer written
                await self._lookahead.close()  # the claims of keys left unanswered go

    async def _send_all(self, items: Requests, on_done: Sink) -> None:
        self._transport = await self.judge.open()
        self.secrets = self.judge.secrets
        name = self._transport.name
        if name not in self.stats.transports:
            self.stats.transports.append(name)
        # The plan asked the cache for these keys once, before the run sent anything. The
        # requests are claimed just before they go (engine/lookahead.py, engine/claims.py), and
        # looked up again only when an answer may have reached the cache since the plan:
        # another run of this process wrote to it, or another process claimed in it.
        claims = claims_for(self.cache.path) if self.cache.writable else None
        self._claims = claims
        queue = self._lookahead = LookAhead(
            items.keys,
            self.cache,
            claims,
            self.limits.concurrency,
            self.judge.samples == 1,
            stale=self._cache_changed,
        )
        # Requests sharing a prompt prefix: the first goes alone, to warm the provider's
        # cache for the others (engine/stagger.py); other rows' requests fill the room.
        order = PrefixOrder(queue, on_done, items.shape_of, items.request)
        workers = [
            asyncio.create_task(self._worker(order, items, order.done))
            for _ in range(self.limits.concurrency)
        ]
        sent_before = self.stats.requests_sent
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await self.judge.release()
        busy = (time.process_time() - cpu_started) / max(1e-9, time.perf_counter() - wall_started)
        sent = self.stats.requests_sent - sent_before
        hint = cpu_hint(sent, busy, self.judge.processes, name)
        if hint is not None:
            self.stats.hints.append(hint)

    def _cache_changed(self) -> bool:
        """Whether an answer may have reached the cache since this run's plan asked it:
        another run of this process wrote to it, or another process has claimed in it."""
        table = self.inflight
        if table is not None and table.written - self._written_before - self._written_own > 0:
            return True
        claims = self._claims
        if claims is None or not claims.usable:
            # Without working claims nothing says whether another process wrote: look,
            # as every run did before claims (a second process opening claims.db at the
            # same instant can be refused it).
            return True
        return claims.others_since(self._planned_at)

    async def _worker(self, queue: PrefixOrder, items: Requests, on_done: Sink) -> None:
        while (item := await queue.next()) is not None:
            key, rendered, entry = item  # rendered: where the stagger needed its prefix
            if self.judge.samples > 1:
                on_done(key, await self._sampled(key, rendered or items.request(key)))
                continue
            cached = Outcome.from_entry(entry) if entry is not None else None
            if cached is not None:  # another run of this process answered it meanwhile
                self.stats.cache_hits += 1
                on_done(key, cached)
                continue
            owner = self.inflight.claim(key) if self.inflight is not None else None
            if owner is not None:
                # Another run of this process is paying for this very request.
                shared = await wait_for(owner)
                cached = Outcome.from_entry(shared.entry()) if shared is not None else None
                if cached is not None:  # it answered (a failed call is made again here)
                    self.stats.cache_hits += 1
                    on_done(key, cached)
                    continue
            outcome, queued = None, False
            try:
                # Rendered now, just before it is sent: only the prompts in flight are held.
                outcome = await self.send(rendered or items.request(key), key)
                if outcome.answer is not None:
                    queued = await self._save(key, outcome)
            finally:
                if owner is None and self.inflight is not None:
                    if queued:  # claimed until written: see InFlight.publish
                        self.inflight.publish(key, outcome)
                    else:
                        self.inflight.finish(key, outcome)
                if not queued:  # no answer to wait for: another process may ask it
                    queue.unanswered(key)
            on_done(key, outcome)

    async def _save(self, key: str, outcome: Outcome) -> bool:
        """Queue an answer for the writer thread; whether it was queued (``False``:
        nothing is saved in this run). Waits first while the writer is a full group
        behind, and queues the answer even when cancelled meanwhile (the drain writes it).
        """
        writes = self._writes
        if writes is None:
            return False
        try:
            while writes.unwritten + len(self._staged) >= writes.limit:
                self._room_wanted = True
                self._room.clear()
                await self._room.wait()
        finally:
            if not self._staged and self._loop is not None:
                self._loop.call_soon(self._hand_over)
            self._staged.append((key, outcome.entry()))
        return True

    def _hand_over(self) -> None:
        """Give the writer the answers staged during this turn of the event loop."""
        staged, self._staged = self._staged, []
        if staged and self._writes is not None:
            self._writes.put_many(staged)

    def _written(self, keys: list[str]) -> None:
        """The writer thread wrote a group: forget its calls, wake who waits for room."""
        self._written_own += len(keys)  # (before the table counts them: see _others_wrote)
        if self.inflight is not None:
            self.inflight.release(keys)
        if self._lookahead is not None:  # answered and written: claims given up
            self._lookahead.written(keys)
        loop = self._loop
        if self._room_wanted and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(self._room.set)

    async def _drain(self) -> None:
        """Write every queued answer before the run returns, however it ends (an error,
        a cancel, Ctrl-C): in a thread, and, cancelled again meanwhile, right here."""
        self._hand_over()
        writes, self._writes = self._writes, None
        if writes is None:
            return
        closing = asyncio.ensure_future(asyncio.to_thread(writes.close))
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            writes.close()
            raise

    async def _sampled(self, key: str, request: ChatRequest) -> Outcome:
        """A request asked ``judge.samples`` times, each sample cached on its own key; the
        samples' vote is the outcome (see :mod:`framekit.engine.sampling`)."""
        outcomes = []
        for index in range(self.judge.samples):
            sub = sample_key(key, index)
            cached = Outcome.from_entry(self.cache.get(sub))
            if cached is not None:
                self.stats.cache_hits += 1
                outcomes.append(cached)
                continue
            outcome = await self.send(request, sub)
            if outcome.answer is not None:
                await self._save(sub, outcome)
            outcomes.append(outcome)
        return vote(request, outcomes)

    async def send(self, request: ChatRequest, key: str = "") -> Outcome:
        """One request through pacing, retries and re-asks, to an answer or an error."""
        assert self._transport is not None, "_drive() opens the judge first"
        progress = _Progress(list(request.messages), time.perf_counter())
        while True:
            gate = self._gate  # without a budget, no prompt is measured for it
            ticket = (
                await gate.reserve(progress.messages, request.schema) if gate.limited else UNLIMITED
            )
            if ticket.refused is not None:  # the budget is reached: this row is left
                return progress.outcome(None, ticket.refused)
            estimate = estimate_tokens(progress.messages, self.max_tokens)
            await self.limiter.acquire(estimate)
            mode = self.modes.current
            self.stats.requests_sent += 1
            self.stats.sending += 1
            result: RawReply | Fault | None = None
            try:
                result = await self._transport.call(request, progress.messages, mode)
            finally:
                self.stats.sending -= 1
                self._gate.settle(ticket, result)
            if isinstance(result, Fault):
                outcome = await self._handle_fault(result, mode, progress, key or str(id(request)))
            else:
                outcome = self._take_reply(result, estimate, request, progress)
            if outcome is not None:
                return outcome

    async def _handle_fault(
        self, fault: Fault, mode: str, progress: _Progress, key: str
    ) -> Outcome | None:
        """Decide what a failed attempt means: ``None`` to send again, else the outcome.

        Raises :class:`JudgeError` when no row of the run could succeed.
        """
        limits, health = self.limits, self.limiter.health
        self.limiter.observe(fault.headers)
        raise_for_run(fault)
        if fault.kind == "mode" and self.modes.rejected(mode):
            # The endpoint rejects this structured-output mode: the run falls back (other
            # workers may have already), and this request is sent again.
            return None
        retryable = fault.retryable
        if retryable:
            health.on_failure(key, fault.connect, fault.way)
        self._stop_if_endpoint_is_down(fault)
        # During an outage the endpoint, not the request, is at fault: retry without
        # spending the request's budget (the outage has its own).
        outage = health.in_outage and limits.max_retries > 0
        if not retryable or not (outage or progress.retries < limits.max_retries):
            return progress.outcome(None, fault.given_up(progress.retries))
        self.stats.retries += 1
        if fault.kind == "rate_limited":
            self.stats.rate_limited += 1
            self.limiter.on_rate_limited(fault.retry_after, progress.retries)
        elif fault.retry_after is not None:
            self.limiter.pause(fault.retry_after)
        elif not outage:
            await asyncio.sleep(self.limiter.backoff(progress.retries))
        if not outage:
            progress.retries += 1
        return None

    def _take_reply(
        self, raw: RawReply, estimate: int, request: ChatRequest, progress: _Progress
    ) -> Outcome | None:
        """Account for an answer and read it: the outcome, or ``None`` after queueing a
        re-ask (an unreadable answer or an out-of-rubric label)."""
        stats = self.stats
        self.limiter.settle(estimate, raw.tokens)
        self.limiter.on_success()
        self.limiter.observe(raw.headers)
        stats.tokens += raw.tokens
        stats.prompt_tokens += raw.prompt_tokens
        stats.cached_tokens += raw.cached_tokens
        progress.tokens += raw.tokens
        if raw.cost_usd is not None:
            progress.cost = (progress.cost or 0.0) + raw.cost_usd
            stats.cost_usd = (stats.cost_usd or 0.0) + raw.cost_usd
        reading = read_reply(
            raw.text, raw.refusal, request, progress.reasks, self.secrets, raw.logprobs
        )
        if reading.reask is not None:
            progress.reasks += 1
            stats.reasks += 1
            progress.messages = [*progress.messages, *reading.reask]
            return None
        return progress.outcome(reading.answer, reading.error, reading.probabilities)

    def _stop_if_endpoint_is_down(self, fault: Fault) -> None:
        """Raise one run-wide :class:`JudgeError` when no row could ever succeed."""
        judge, health = self.judge, self.limiter.health
        where = _secrets.redact(
            _secrets.safe_url(judge.api_base) or f"the default endpoint of {judge.model!r}",
            self.secrets,
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
                # A wrong model name or path: configuration, not an outage (exit 2).
                raise JudgeConfigurationError(
                    f"the judge at {where} answered HTTP 404 to the first "
                    f"{health.not_found} calls and none succeeded ({fault.reason}). "
                    f"Check the model name {judge.model!r} and api_base."
                )
        budget = outage_budget(self.limits.max_retries)
        lasted = health.outage_seconds()
        if self.limits.max_retries > 0 and lasted > budget:
            raise JudgeError(
                f"the judge at {where} failed every call for {lasted:.1f} s, longer than "
                f"the {budget:g} s an outage is ridden out with max_retries="
                f"{self.limits.max_retries} (last: {fault.reason})"
            )
