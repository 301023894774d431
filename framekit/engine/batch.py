"""Sending chat requests through a provider's batch API: half price, within 24 hours.

The planner hands over the same unique, cache-missing requests the chat executor gets.
They are written as the provider's batch body (split under its request and size limits),
uploaded, and followed until the provider is done; then the results are read line by
line, each answer parsed by the direct path's parser and written to the cache as it is
read. ``custom_id`` is the cache key (without its ``chat:`` prefix, which providers do
not allow), so every answer joins back to its rows.

Every submitted batch is recorded in a manifest beside the cache
(:mod:`framekit.engine.batch_manifest`): a run that finds an unfinished batch for its keys
follows it instead of paying again, so Ctrl-C only detaches, and kill -9 loses nothing.
Lines that failed, expired or came back unreadable are asked again, in a follow-up batch
or directly, within the direct path's retry and re-ask budgets; a batch rejected as a
whole is one run error naming the provider's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from framekit import _secrets
from framekit._errors import BatchPending, FaultRaised, JudgeError
from framekit._progress import BatchBar
from framekit._results import Outcome
from framekit.engine.batch_manifest import Manifest, ManifestStore
from framekit.engine.budget import BatchGate
from framekit.engine.cache import Cache
from framekit.engine.executor import ChatExecutor, Executor, Sink
from framekit.engine.limiter import Limiter
from framekit.engine.stats import RunStats
from framekit.judges.batch import BatchClient, BatchStatus, LineResult, client_for
from framekit.judges.batch.base import LineEncoder
from framekit.judges.faults import Fault, raise_for_run
from framekit.judges.judge import Judge
from framekit.judges.request import ChatRequest, Modes, build_call_kwargs, load_json, read_reply

#: Longest pause between two polls of a batch, in seconds.
MAX_POLL = 60.0
#: Answers written to the cache per transaction while a batch's results are read.
CACHE_CHUNK = 500
#: Consecutive failed polls (5xx, connection errors) before the run stops.
MAX_POLL_FAILURES = 10

Line = tuple[str, list[dict[str, Any]], ChatRequest]  # key, messages, answer shape

__all__ = ["BatchExecutor", "BatchPending"]


def recorded_endpoint(api_base: str) -> str:
    """The endpoint as manifests record it (never with credentials in the URL); a manifest
    is followed only where this equals the endpoint the user gave."""
    return _secrets.safe_url(api_base) or api_base


def custom_id(key: str) -> str:
    """A cache key as a provider ``custom_id`` (Anthropic allows ``[a-zA-Z0-9_-]{1,64}``)."""
    return key.rpartition(":")[2]


def key_of(cid: str) -> str:
    return "chat:" + cid


def _in_prose(text: str | None) -> bool:
    """Whether a reply is more than one JSON object (prose, fences, several objects): it
    is then read against its prompt's data blocks (:func:`~framekit.judges.request.parse_answer`)."""
    if text is None:
        return False
    try:
        return not isinstance(load_json(text), dict)
    except ValueError:
        return True


class BatchExecutor(Executor):
    """Runs the unique chat requests of one run against one judge, as provider batches."""

    def __init__(
        self,
        judge: Judge,
        cache: Cache,
        stats: RunStats,
        show_progress: bool = False,
        limiter: Limiter | None = None,
    ) -> None:
        self.judge = judge
        self.limiter = limiter  # for lines sent directly (batch_followup="direct")
        self.cache = cache
        self.stats = stats
        self.show = show_progress
        self.client: BatchClient = client_for(judge)
        self.store = ManifestStore.of_cache(cache.path if cache.writable else None)
        # Structured output as the provider's batch endpoint takes it; like the chat
        # executor's, the mode belongs to this run (it falls back when rejected).
        self.modes = Modes("tool" if self.client.provider == "anthropic" else "json_schema")
        # Where manifests say the batches went: never with credentials in the URL.
        self.endpoint = recorded_endpoint(self.client.api_base)
        # The judge's price at the batch discount, by the rule every path prices by
        # (a custom api_base given no price has none).
        self.price = judge.pricing(batch=True)
        self.gate = BatchGate(judge, stats)  # the run's budget (engine/budget.py)
        self.shapes: dict[str, ChatRequest] = {}
        self.finished: set[str] = set()
        self.retries: dict[str, int] = {}
        self.reasks: dict[str, int] = {}
        self.open: dict[str, Manifest] = {}
        self.resumed: set[str] = set()
        self._shape_memo: dict[tuple[Any, ...], ChatRequest] = {}
        self._last_shape: ChatRequest | None = None
        self._on_done: Callable[[str, Outcome], None] = lambda key, outcome: None
        self._bar: BatchBar | None = None

    # -- the run -----------------------------------------------------------------------
    async def _drive(self, items: Iterable[tuple[str, ChatRequest]], on_done: Sink) -> None:
        """Answer every ``(key, request)``, each outcome to ``on_done`` as its line is read.

        ``items`` is iterated twice (keys first, then messages while writing the
        batch files); a one-shot iterator is materialised first.
        """
        if iter(items) is items:
            items = list(items)
        self._on_done = on_done
        try:
            await self._run(items)
        except asyncio.CancelledError:
            self._say_detached()
            raise
        finally:
            if self._bar is not None:
                self._bar.close()
            await self.client.close()

    async def _run(self, items: Iterable[tuple[str, ChatRequest]]) -> None:
        # The plan's view gives each answer's shape without rendering its prompt.
        shapes = items.shapes() if hasattr(items, "shapes") else items
        for key, request in shapes:
            self.shapes[key] = self._shape(request)
        if not self.shapes:
            return
        provider, endpoint = self.client.provider, self.endpoint
        resumed = self.store.open_for(provider, endpoint, self.shapes)
        resumed = [m for m in resumed if m.state != "uploading" or await self._adopt(m)]
        covered = {k for m in resumed for k in m.keys}
        self.resumed = {m.local_id for m in resumed}
        if resumed:
            ids = ", ".join(m.batch_id or m.local_id for m in resumed)
            self._say(f"resuming {len(resumed)} batch(es) already submitted for these rows: {ids}")
        fresh = ((k, r.messages, self.shapes[k]) for k, r in items if k not in covered)
        manifests = resumed + self.write_spools(self.gate.admit(fresh, self._left), round_=0)
        while manifests:
            for m in manifests:
                if m.state == "uploading":
                    await self._submit(m)
            followups: dict[str, tuple[Manifest, list[dict[str, Any]]]] = {}
            statuses = await _all(self._follow(m, followups) for m in manifests)
            pending = [s for s in statuses if s is not None]
            if pending:
                self._pending(pending)
            sources = manifests
            if not followups:
                manifests = []
            elif self.judge.batching.followup == "direct":
                await self._direct(followups)
                manifests = []
            else:
                rnd = max(m.round for m in sources) + 1
                lines = self.gate.admit(self._followup_lines(followups), self._left)
                manifests = self.write_spools(lines, round_=rnd)
            for m in sources:
                if m.state == "collected":
                    self.store.drop_spool(m)

    # -- writing -------------------------------------------------------------------------
    def _shape(self, request: ChatRequest) -> ChatRequest:
        """The request without its messages: all that parsing an answer needs. Shared per
        evaluator, so a million pending keys cost a dict entry each, not a prompt."""
        # The same schema object as the last request's (one per evaluator): its shape.
        last = self._last_shape
        if (
            last is not None
            and last.schema is request.schema
            and last.schema_name == request.schema_name
            and last.label_field == request.label_field
            and last.choices == request.choices
        ):
            return last
        # Else by content: evaluators may build a fresh schema dict for every request.
        schema = json.dumps(request.schema, sort_keys=True)
        memo = (schema, request.schema_name, request.label_field, request.choices)
        shape = self._shape_memo.get(memo)
        if shape is None:
            shape = ChatRequest(
                [], request.schema_name, request.schema, request.label_field, request.choices
            )
            self._shape_memo[memo] = shape
        self._last_shape = shape
        return shape

    def write_spools(self, lines: Iterable[Line], round_: int) -> list[Manifest]:
        """Write batch bodies streaming, a new file at the provider's request or size
        limit; returns their manifests (saved, state ``uploading``)."""
        client, judge = self.client, self.judge
        done: list[Manifest] = []
        manifest: Manifest | None = None
        handle: Any = None
        size = 0
        limit = client.max_bytes - len(client.footer)

        def close() -> None:
            nonlocal handle
            if manifest is None or handle is None:
                return
            handle.write(client.footer)
            handle.close()
            handle = None
            client.finish_spool(self.store.spool_of(manifest), size + len(client.footer))
            self.store.save(manifest)
            done.append(manifest)

        # Per answer shape (one per evaluator), what every line of it shares: the turns
        # appended to its messages and the encoder with the rest of the call fixed.
        encoders: dict[int, tuple[ChatRequest, list[dict[str, Any]], LineEncoder]] = {}
        try:
            for key, messages, shape in lines:
                known = encoders.get(id(shape))
                if known is None or known[0] is not shape:
                    known = encoders[id(shape)] = self._encoder(shape)
                _, extra, encode = known
                data = encode(custom_id(key), messages + extra if extra else messages)
                if (
                    manifest is None
                    or len(manifest.keys) >= client.max_requests
                    or size + len(data) > limit
                ):
                    close()
                    manifest = self.store.new(client.provider, self.endpoint, judge.model, round_)
                    manifest.mode = self.modes.current
                    spool = self.store.spool_of(manifest)
                    # 1 MB of buffer: a 200 MB file in 200 writes, not 25,000.
                    handle = open(spool, "wb", buffering=1 << 20)  # noqa: SIM115 (closed in close())
                    handle.write(client.header)
                    size = len(client.header)
                handle.write(data)
                size += len(data)
                manifest.keys.append(key)
        except BaseException:
            # No half-written batch file outlives a failed write (full disk, Ctrl-C).
            if handle is not None and manifest is not None:
                handle.close()
                self.store.drop_spool(manifest)
            raise
        close()
        return done

    def _encoder(self, shape: ChatRequest) -> tuple[ChatRequest, list[dict[str, Any]], LineEncoder]:
        """``(shape, turns appended to each line's messages, line encoder)`` for the
        lines answered in ``shape``, in this run's structured-output mode."""
        call = build_call_kwargs(shape, [], self.modes.current)
        if shape.choices:  # a rubric answer: its labels' probabilities, if given
            call.update(self.client.logprobs_request())
        # Prompt mode appends its instruction to the messages; the others add nothing.
        extra = call.pop("messages")
        return shape, extra, self.client.line_encoder(call)

    def _followup_lines(
        self, followups: dict[str, tuple[Manifest, list[dict[str, Any]]]]
    ) -> Iterator[Line]:
        """The failed lines again, their messages read back from the spools they came in
        (plus the re-ask turns for an unreadable answer)."""
        by_source: dict[str, list[str]] = {}
        sources: dict[str, Manifest] = {}
        for key, (source, _) in followups.items():
            by_source.setdefault(source.local_id, []).append(key)
            sources[source.local_id] = source
        for local_id, keys in by_source.items():
            wanted = set(keys)
            source = sources[local_id]
            for key, messages in self._spool_messages(source, wanted):
                if source.mode == "prompt":  # written with its instruction: not twice
                    messages = _without_instruction(messages, self.shapes[key])
                yield key, messages + followups[key][1], self.shapes[key]

    def _spool_messages(
        self, manifest: Manifest, wanted: set[str]
    ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        with open(self.store.spool_of(manifest), "rb") as handle:
            for line in handle:
                decoded = self.client.decode(line)
                if decoded is not None and key_of(decoded[0]) in wanted:
                    yield key_of(decoded[0]), decoded[1]

    # -- submitting and following ----------------------------------------------------------
    async def _adopt(self, m: Manifest) -> bool:
        """A run killed between creating a batch and recording its id left the manifest
        at ``uploading``: find that batch by the tag it was created with, not pay again.

        A batch the provider never created is discarded, spool and all, and its requests
        are written again from this run's own plan: a spool on disk is never uploaded by a
        run that did not write it (whoever can write the cache could have rewritten it)."""
        # Page by page through the provider's list: the batch may be past the first 100.
        pages = self.client.batches()
        found: BatchStatus | None = None
        try:
            async with contextlib.aclosing(pages):
                async for status in pages:
                    if status.tag == m.local_id:
                        found = status
                        break
        except FaultRaised as exc:
            raise_for_run(exc.fault)
            found = None
        if found is None:
            self.store.discard(m)
            return False
        m.batch_id, m.state = found.id, "submitted"
        self.store.save(m)
        return True

    async def _submit(self, m: Manifest) -> None:
        attempt = 0
        while True:
            try:
                batch_id, file_id = await self.client.submit(
                    self.store.spool_of(m), len(m.keys), {"framekit": m.local_id}
                )
                break
            except FaultRaised as exc:
                raise_for_run(exc.fault)
                if not exc.fault.retryable or attempt >= self.judge.max_retries:
                    m.state, m.reason = "failed", self._redact(exc.fault.reason)
                    self.store.save(m)
                    self.store.drop_spool(m)
                    raise JudgeError(
                        f"the {self.client.provider} batch API refused a batch at "
                        f"{self._where()}: {self._redact(exc.fault.reason)}"
                    ) from None
                attempt += 1
                await asyncio.sleep(min(MAX_POLL, 0.5 * 2**attempt))
        m.batch_id, m.input_file_id, m.state = batch_id, file_id or None, "submitted"
        self.store.save(m)
        self.stats.batches.append(batch_id)
        self._say(
            f"submitted batch {batch_id} ({len(m.keys)} requests, {self.client.provider} batch "
            "API at 50 % price); Ctrl-C detaches, the same call collects it later"
        )

    async def _follow(
        self, m: Manifest, followups: dict[str, tuple[Manifest, list[dict[str, Any]]]]
    ) -> BatchStatus | None:
        """Poll ``m`` until the provider is done, then read its results. Returns the
        status when the run stops waiting first (``wait=False`` or the timeout)."""
        assert m.batch_id is not None
        self.open[m.batch_id] = m
        delay, failures = self.judge.batching.poll_s, 0
        started = time.monotonic()
        while True:
            try:
                status = await self.client.retrieve(m.batch_id)
                failures = 0
            except FaultRaised as exc:
                raise_for_run(exc.fault)
                failures += 1
                if not exc.fault.retryable or failures > MAX_POLL_FAILURES:
                    raise JudgeError(
                        f"could not check batch {m.batch_id} at {self._where()}: {self._redact(exc.fault.reason)}. "
                        "It goes on at the provider; run the same call again to collect it."
                    ) from None
                await asyncio.sleep(delay)
                continue
            if status.state != m.provider_state:
                m.provider_state = status.state
                self.store.save(m)
            m.completed, m.failed = status.completed, status.failed
            self._progress(m, status)
            if status.done:
                break
            waited_h = (time.monotonic() - started) / 3600
            if not self.judge.batching.wait or waited_h >= self.judge.batching.timeout_h:
                return status
            await asyncio.sleep(delay)
            delay = min(MAX_POLL, delay * 1.5)
        if status.state == "failed":
            m.state, m.reason = "failed", self._redact(status.reason or "") or None
            self.store.save(m)
            self.store.drop_spool(m)
            raise JudgeError(
                f"the {self.client.provider} batch API rejected batch {m.batch_id} as a whole: "
                f"{m.reason or 'no reason given'}"
            )
        await self._collect(m, status, followups)
        del self.open[m.batch_id]
        return None

    async def _collect(
        self,
        m: Manifest,
        status: BatchStatus,
        followups: dict[str, tuple[Manifest, list[dict[str, Any]]]],
    ) -> None:
        cancelled = status.state in ("cancelled", "cancelling")
        seen: set[str] = set()
        batch: list[tuple[str, Outcome]] = []
        prose: dict[str, tuple[Any, float | None, int]] = {}
        async for line in self._results(status):
            key = key_of(line.custom_id)
            if key in seen or key not in self.shapes or key in self.finished:
                continue  # a duplicate, another run's key, or already settled
            seen.add(key)
            reply = line.result
            self.gate.settle_line(key, reply)
            if isinstance(reply, Fault):
                if reply.kind == "mode" and self.modes.rejected(m.mode):
                    followups[key] = (m, [])  # the endpoint's fault, not the request's
                    continue
                error = self._redact(reply.reason)
                self._line_failed(key, m, error, reply.retryable and not cancelled, followups)
                continue
            cost = reply.cost_at(self.price)
            tokens = reply.tokens
            self.stats.tokens += tokens
            self.stats.prompt_tokens += reply.prompt_tokens
            self.stats.cached_tokens += reply.cached_tokens
            self.stats.batch_requests += 1
            if cost is not None:
                self.stats.cost_usd = (self.stats.cost_usd or 0.0) + cost
                m.cost_usd += cost
            if _in_prose(reply.text):  # read once its request's data blocks are known
                prose[key] = (reply, cost, tokens)
                continue
            self._read_line(key, m, reply, self.shapes[key], (cost, tokens), followups, batch)
            if len(batch) >= CACHE_CHUNK:
                self._store_answers(batch)
        # A reply in prose is read against the data blocks of the prompt that asked it, as
        # on the direct path (an object quoted from the evaluated text is never the
        # verdict): the prompts are read back from the batch's spool, for those keys only.
        spooled = self._spool_messages(m, set(prose)) if self._has_spool(m) else iter(())
        for key, messages in spooled:
            reply, cost, tokens = prose.pop(key)
            request = replace(self.shapes[key], messages=messages)
            self._read_line(key, m, reply, request, (cost, tokens), followups, batch)
        for key, (reply, cost, tokens) in prose.items():  # no spool left: the shape alone
            self._read_line(key, m, reply, self.shapes[key], (cost, tokens), followups, batch)
        self._store_answers(batch)
        for key in m.keys:
            if key in self.shapes and key not in seen and key not in self.finished:
                reason = (
                    "batch cancelled before this request ran"
                    if cancelled
                    else ("missing from the batch output")
                )
                self._line_failed(key, m, reason, not cancelled, followups)
        # Keys of other runs keep the batch open for them, unless already answered (a run
        # killed while reading this output cached part of it).
        others = [k for k in m.keys if k not in self.shapes]
        if not others or len(self.cache.get_many(others)) == len(others):
            m.state, m.count, m.keys = "collected", len(m.keys), []
        self.store.save(m)

    def _read_line(
        self,
        key: str,
        m: Manifest,
        reply: Any,
        request: ChatRequest,
        paid: tuple[float | None, int],
        followups: dict[str, tuple[Manifest, list[dict[str, Any]]]],
        batch: list[tuple[str, Outcome]],
    ) -> None:
        """One answered line read into an answer (queued in ``batch`` for the cache), a
        re-ask (into ``followups``) or the row's error. ``paid``: its cost and tokens."""
        cost, tokens = paid
        used = self.reasks.get(key, 0)
        reading = read_reply(
            reply.text, reply.refusal, request, used, self.client.secrets, reply.logprobs
        )
        if reading.reask is not None:
            self.reasks[key] = used + 1
            self.stats.reasks += 1
            followups[key] = (m, reading.reask)
            return
        if reading.answer is None:
            self._settle(key, Outcome(None, reading.error, tokens, cost))
            return
        latency = time.time() - m.created
        outcome = Outcome(reading.answer, None, tokens, cost, latency, False, reading.probabilities)
        batch.append((key, outcome))

    def _has_spool(self, m: Manifest) -> bool:
        return self.store.spool_of(m).exists()

    def _store_answers(self, batch: list[tuple[str, Outcome]]) -> None:
        """Write answers to the cache in one transaction, then report them. Until the
        batch is marked collected its output stays at the provider, so a kill between
        two chunks loses nothing: the next run reads the output again."""
        self.cache.set_many([(key, outcome.entry()) for key, outcome in batch])
        for key, outcome in batch:
            self._settle(key, outcome)
        batch.clear()

    def _line_failed(
        self,
        key: str,
        m: Manifest,
        reason: str,
        retryable: bool,
        followups: dict[str, tuple[Manifest, list[dict[str, Any]]]],
    ) -> None:
        used = self.retries.get(key, 0)
        if retryable and used < self.judge.max_retries:
            self.retries[key] = used + 1
            self.stats.retries += 1
            followups[key] = (m, [])
            return
        suffix = f" (after {used} retries)" if used else ""
        self._settle(key, Outcome(None, reason + suffix))

    def _left(self, key: str, error: str) -> None:
        """A line the budget kept from being submitted: its rows are left."""
        self._settle(key, Outcome(None, error))

    def _settle(self, key: str, outcome: Outcome) -> None:
        self.finished.add(key)
        self._on_done(key, outcome)

    async def _direct(self, followups: dict[str, tuple[Manifest, list[dict[str, Any]]]]) -> None:
        """``batch_followup="direct"``: failed lines as ordinary chat calls."""
        shapes = self.shapes
        items = [
            (key, ChatRequest(messages, s.schema_name, s.schema, s.label_field, s.choices))
            for key, messages, s in (
                (k, msgs, shapes[k])
                for source in {id(m): m for m, _ in followups.values()}.values()
                for k, msgs in self._spool_messages(source, set(followups))
            )
        ]
        self._say(f"sending {len(items)} failed batch lines directly")
        # The run's modes: one the endpoint already rejected is not tried again.
        direct = ChatExecutor(self.judge, self.cache, self.stats, self.limiter, self.modes)
        async for key, outcome in direct.outcomes(items):
            self._settle(key, outcome)

    # -- telling the user -------------------------------------------------------------------
    def _pending(self, statuses: list[BatchStatus]) -> None:
        states = ", ".join(
            f"{s.id} ({s.state}, {s.completed}/{s.total or '?'} done)" for s in statuses
        )
        why = (
            "wait=False"
            if not self.judge.batching.wait
            else f"still running after {self.judge.batching.timeout_h:g} h"
        )
        raise BatchPending(
            f"batch(es) {states} go on at the provider ({why}); nothing is lost: run the same "
            "call again to collect the answers (`framekit batches` lists them)",
            [s.id for s in statuses],
        )

    async def _results(self, status: BatchStatus) -> AsyncIterator[LineResult]:
        """The batch's result lines; credentials rejected while downloading them stop
        the run as they do everywhere else."""
        try:
            async for line in self.client.results(status):
                yield line
        except FaultRaised as exc:
            raise_for_run(exc.fault)
            raise

    def _say_detached(self) -> None:
        if self.open:
            ids = ", ".join(self.open)
            self._say(
                f"detached from batch(es) {ids}: they go on at the provider (not cancelled); "
                "run the same call again to collect them, or `framekit batches cancel ID`"
            )

    def _say(self, text: str) -> None:
        if self.show:
            print(f"framekit: {text}", file=sys.stderr)

    def _where(self) -> str:
        return self.endpoint

    def _redact(self, text: str) -> str:
        return _secrets.redact(text, self.client.secrets)

    def _progress(self, m: Manifest, status: BatchStatus) -> None:
        if not self.show:
            return
        if self._bar is None:
            self._bar = BatchBar()
        assert m.batch_id is not None
        self._bar.update(m.batch_id, status)


def _without_instruction(
    messages: list[dict[str, Any]], shape: ChatRequest
) -> list[dict[str, Any]]:
    instruction = build_call_kwargs(shape, [], "prompt")["messages"][-1]
    return messages[:-1] if messages and messages[-1] == instruction else messages


async def _all(coros: Iterable[Any]) -> list[Any]:
    """Await all; when one fails, cancel the rest (plain gather would leave them running)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
