"""What a run would send, before sending anything: ``framekit evaluate --dry-run``.

The dry run is a second reader of a real run's plan, not a copy of it: each frame is
prepared exactly as for a run (:func:`framekit.engine.prepare.prepare`: the mapping,
identical rows collapsed, records fitted to the context window), the run's own
:class:`~framekit.engine.plan.ChatPlan` keys its chat requests, and the plan hands them to
executors that send nothing (:class:`DryExecutor`): what they are handed is what a run's
executors would send.
Distinct keys not already in the cache are the requests a real run sends (one each, when
nothing is retried or re-asked), so the count matches ``RunStats.requests_sent`` of that
run.

Token and cost figures are estimates: prompt tokens are characters / 4 (no tokenizer is
loaded: litellm's may try to download one), answers are assumed to be
``ANSWER_TOKENS`` tokens, none of them read from a provider's prompt cache, and each
judge is priced as its run prices it (:meth:`Judge.pricing
<framekit.judges.judge.Judge.pricing>`: the price given, else a list price, which imports
litellm, a few seconds, only when there is something to price). A judge whose run would
report no cost has none here either, said in the same words
(:data:`~framekit.judges.pricing.UNKNOWN_COST`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from framekit._aio import run_sync
from framekit._errors import RecordError
from framekit.engine.cache import Cache, NullCache, default_cache_dir
from framekit.engine.cascade import planned_stages
from framekit.engine.embeddings import embedding_key
from framekit.engine.executor import Executor, Requests, Sink
from framekit.engine.limiter import RateLimiter
from framekit.engine.mapping import MappingValue
from framekit.engine.plan import ChatPlan
from framekit.engine.prepare import Prepared, prepare
from framekit.engine.sampling import sample_key
from framekit.evaluators.base import Evaluator, check_evaluators
from framekit.judges.judge import Judge
from framekit.judges.local.likelihood import LikelihoodHooks, likelihood_key
from framekit.judges.pricing import UNKNOWN_COST, Price
from framekit.judges.resolve import JudgeLike, JudgeResolver
from framekit.judges.usage import CHARS_PER_TOKEN

#: Assumed length of one judge answer (an explanation of a few sentences and a label).
ANSWER_TOKENS = 120
_LOOKUP_CHUNK = 10_000


@dataclass
class RequestPlan:
    """The requests a run would make, after deduplication and the cache.

    ``requests`` is what would be sent; ``unique_requests`` counts distinct requests
    before the cache, ``cached`` those already answered. ``local_texts`` counts distinct
    texts the offline judge would embed that are not cached yet, ``likelihood_texts`` those
    its likelihood scorer would read (the ``lm`` extra; about 1 per second). ``skipped`` counts
    evaluations that fail before any call (a null or empty required field). ``judges``
    names the judge models; ``local_judge`` says whether the offline judge is one of them.
    """

    rows: int = 0
    evaluations: int = 0
    unique_requests: int = 0
    cached: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    answer_tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True
    local_texts: int = 0
    likelihood_texts: int = 0
    #: Distinct texts of the offline judge already cached.
    local_cached: int = 0
    local_judge: bool = False
    skipped: int = 0
    judges: list[str] = field(default_factory=list)
    #: Why a real run would stop at its first call (missing or malformed credentials...).
    warnings: list[str] = field(default_factory=list)
    by_evaluator: dict[str, int] = field(default_factory=dict)
    #: Requests that would go through a provider batch API (priced at its discount).
    batch_requests: int = 0
    #: The least time the requests take at the judges' ``rpm`` (judges run side by
    #: side, so the slowest one's); ``None`` when some judge sends without an rpm.
    min_seconds: float | None = None
    #: Cascaded evaluator -> the share of rows expected to reach each stage (from a
    #: calibration), or ``None``: every row counted at every stage, an upper bound.
    cascades: dict[str, tuple[float, ...] | None] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Estimated prompt + answer tokens of the requests to send."""
        return self.prompt_tokens + self.answer_tokens

    def describe(self) -> str:
        """A few lines for a terminal."""
        if not self.cost_known:
            cost = UNKNOWN_COST
        else:
            cost = f"${self.cost_usd or 0.0:.4f}"
        per = ", ".join(f"{k} {v}" for k, v in self.by_evaluator.items()) or "none"
        lines = [
            f"dry run: {_count(self.rows, 'row')} x {_count(len(self.by_evaluator), 'evaluator')}"
            f" = {_count(self.evaluations, 'evaluation')}",
            f"  judge: {', '.join(self.judges) or 'none'}",
            f"  requests to send: {self.requests} "
            f"({self.unique_requests} distinct after dedup, {self.cached} already cached)",
        ]
        if self.unique_requests:
            lines += [
                f"  per evaluator: {per}",
                f"  estimated tokens: {self.tokens} "
                f"({self.prompt_tokens} prompt + {self.answer_tokens} answer)",
            ]
        if self.batch_requests and self.cost_known:
            cost += f" ({self.batch_requests} requests at the batch API's 50 % price)"
        elif self.batch_requests:
            cost += f"; {self.batch_requests} requests through the batch API"
        lines.append(f"  estimated cost: {cost}")
        for name, reach in self.cascades.items():
            if reach is None:
                lines.append(
                    f"  cascade {name}: up to every row at every stage (requests and cost "
                    "are upper bounds; a calibrated cascade gives expected figures)"
                )
            else:
                shares = ", ".join(f"{r:.0%}" for r in reach)
                lines.append(
                    f"  cascade {name}: expected share of rows reaching each stage {shares}"
                )
        if self.requests and self.min_seconds is not None:
            shown = (
                f"{self.min_seconds:.1f}" if self.min_seconds < 10 else f"{self.min_seconds:.0f}"
            )
            lines.append(
                f"  estimated time: at least {shown} s at the judge's rpm "
                "(more if answers are slower than the pacing)"
            )
        if self.local_judge:
            rest = " (the rest are cached)" if self.local_cached else ""
            read = (
                f" and {self.likelihood_texts} to read with the likelihood scorer"
                if self.likelihood_texts
                else ""
            )
            lines.append(
                f"  offline judge: {self.local_texts} texts to embed on the CPU{read}{rest}, "
                "no API calls"
            )
        if self.skipped:
            lines.append(
                f"  {self.skipped} evaluations will fail before any call "
                "(null or empty required fields)"
            )
        lines += [f"  warning: {w}; a real run would stop here" for w in self.warnings]
        return "\n".join(lines)


def existing_cache(cache: Cache | str | os.PathLike[str] | bool | None) -> Cache:
    """The cache a run would use, opened only if it exists (a dry run creates nothing)."""
    if cache is False:
        return NullCache()
    if isinstance(cache, Cache):
        return cache
    path = default_cache_dir() if cache is None or cache is True else Path(cache)
    return Cache(path) if path.is_dir() else NullCache()


def _present(cache: Cache, keys: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        found.update(cache.get_many(keys[start : start + _LOOKUP_CHUNK]))
    return found


def plan_requests(
    frames: Iterable[pl.DataFrame],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
) -> RequestPlan:
    """Plan a run over one or more frames (slices of one table), sending nothing.

    Parameters
    ----------
    frames
        The table, whole or in slices (only the mapped columns are needed).
    evaluators, mapping, judge, cache
        As for :func:`framekit.evaluate_dataframe`.

    Returns
    -------
    RequestPlan

    Examples
    --------
    >>> import polars as pl
    >>> from framekit.evaluators import RetrievalRelevance
    >>> df = pl.DataFrame({"question": ["a?", "a?", "b?"], "docs": ["x", "x", "y"]})
    >>> plan = plan_requests([df], [RetrievalRelevance()], {"input": "question",
    ...     "context": "docs"}, judge="openai/gpt-4o-mini", cache=False)
    >>> plan.rows, plan.requests
    (3, 2)
    """
    evs = check_evaluators(evaluators)
    store = existing_cache(cache)
    judge_for = JudgeResolver(judge)
    plan = RequestPlan()
    # key -> (evaluator name, judge, prompt characters, its price, share of rows
    # expected to ask it); insertion order = first use.
    chats: dict[str, tuple[str, Judge, int, Price | None, float]] = {}
    prices: dict[int, Price | None] = {}  # id(judge) -> what its calls cost
    texts: dict[str, None] = {}
    likelihood_keys: set[str] = set()
    for frame in frames:
        plan.rows += frame.height
        plan.evaluations += frame.height * len(evs)
        if frame.height == 0:
            continue
        # A real run's own steps: the records it prepares, the requests it plans.
        prepared = run_sync(prepare(frame, evs, mapping, judge_for))
        # A cascade's stages are planned over every record, each weighted by the share
        # of rows expected to reach it (1 without a calibration: "up to").
        units: list[tuple[list[Prepared], float]] = [
            ([s for s in prepared if s.judge.cascade is None], 1.0)
        ]
        for share in prepared:
            cascade = share.judge.cascade
            if cascade is not None:
                plan.cascades[share.evaluator.name] = cascade.expected_share
                units += [([stage], reach) for stage, reach in planned_stages(share)]
        for shares, reach in units:
            # The plan a run makes, walked with executors that send nothing.
            planned = ChatPlan(shares)
            asked: dict[str, tuple[str, Judge, int]] = {}
            run_sync(_walk(planned, asked))
            for sub, (key, sender, chars) in asked.items():
                if sub not in chats:
                    if id(sender) not in prices:
                        prices[id(sender)] = sender.pricing()
                    name = planned[key][0][0].evaluator.name
                    chats[sub] = (name, sender, chars, prices[id(sender)], reach)
        for share in (s for shares, _ in units for s in shares):
            if share.judge.embeds_locally:  # the offline judge: texts, not requests
                read = share.scores_likelihood
                for record in share.pending():
                    assert record.fields is not None
                    try:
                        hooks = cast(LikelihoodHooks, share.evaluator)
                        scored = hooks.local_likelihood_inputs(record.fields) if read else None
                        if scored is not None:
                            likelihood_keys.add(likelihood_key(scored))
                        else:  # the embedding proxy reads it
                            texts.update(dict.fromkeys(share.evaluator.local_texts(record.fields)))
                    except RecordError as exc:
                        record.fail(str(exc))
            plan.skipped += share.failures()
    keys = list(chats)
    hits = _present(store, keys)
    plan.unique_requests, plan.cached = len(keys), len(hits)
    plan.by_evaluator = {ev.name: 0 for ev in evs}
    expected: dict[str, float] = {}  # evaluator -> requests expected (a share of some)
    for key, (name, sender, chars, price, reach) in chats.items():
        if key in hits:
            continue
        expected[name] = expected.get(name, 0.0) + reach
        prompt = chars // CHARS_PER_TOKEN
        plan.prompt_tokens += round(prompt * reach)
        plan.answer_tokens += round(ANSWER_TOKENS * reach)
        plan.batch_requests += int(sender.batch)
        if price is None:
            plan.cost_known = False
        else:
            plan.cost_usd = (plan.cost_usd or 0.0) + price.cost(prompt, ANSWER_TOKENS) * reach
    plan.by_evaluator.update({name: round(n) for name, n in expected.items()})
    plan.requests = sum(plan.by_evaluator.values())
    plan.min_seconds = _min_seconds([chats[k][1] for k in keys if k not in hits])
    judges = [stage for j in judge_for.judges.values() for stage in j.stages()]
    plan.local_texts = _uncached_texts(list(texts), judges, store)
    plan.likelihood_texts = len(likelihood_keys) - len(_present(store, list(likelihood_keys)))
    plan.local_cached = len(texts) - plan.local_texts
    plan.judges = sorted({j.model for j in judges})
    plan.local_judge = any(j.embeds_locally for j in judges)
    if plan.requests:
        endpoints = (j.chat_endpoint for j in judges)
        problems = (e.configuration_problem() for e in endpoints if e is not None)
        plan.warnings = sorted({p for p in problems if p})
    if not plan.requests:
        plan.cost_known, plan.cost_usd = True, 0.0
    return plan


class DryExecutor(Executor):
    """An executor that sends nothing: it notes each request the plan hands it, as the
    cache keys a run would ask (a sampled judge's samples each under its own key, as
    :class:`~framekit.engine.executor.ChatExecutor` asks them), with the request's key
    and its prompt's characters in ``asked``, and answers none (the records stay open)."""

    def __init__(self, judge: Judge, asked: dict[str, tuple[str, Judge, int]]) -> None:
        self.judge, self.asked = judge, asked

    async def _drive(self, items: Requests, on_done: Sink) -> None:
        samples = self.judge.samples
        for key, request in items:
            chars = sum(len(str(m.get("content") or "")) for m in request.messages)
            subs = [sample_key(key, i) for i in range(samples)] if samples > 1 else [key]
            for sub in subs:
                self.asked[sub] = (key, self.judge, chars)


async def _walk(plan: ChatPlan, asked: dict[str, tuple[str, Judge, int]]) -> None:
    """Hand each judge's requests of ``plan`` to a :class:`DryExecutor`, in plan order."""
    for judge, keys in plan.by_judge():
        await plan.answer(DryExecutor(judge, asked), keys)


def _uncached_texts(texts: list[str], judges: Iterable[Any], store: Cache) -> int:
    if not texts:
        return 0
    local = next((j.offline for j in judges if j.offline is not None), None)
    try:
        model_id = local.model_id if local is not None else ""
    except Exception:  # the local model is not installed: nothing can be cached for it
        return len(texts)
    keys = [embedding_key(model_id, t) for t in texts]
    return len(texts) - len(_present(store, keys))


def _count(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``: an exact count, said right."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _min_seconds(senders: Sequence[Any]) -> float | None:
    """The least time ``senders``' requests take at their judges' rpm (the judges run
    side by side: the slowest one's), or ``None`` when one has no rpm (or is batched).

    The limiter paces :attr:`RateLimiter.MARGIN <framekit.engine.limiter.RateLimiter.MARGIN>`
    under the rpm, so that is the rate used here; the first answer's latency (the run
    waits for it before sending the rest) cannot be known in advance and is left out."""
    counts: dict[int, tuple[Any, int]] = {}
    for judge in senders:
        counts[id(judge)] = (judge, counts.get(id(judge), (judge, 0))[1] + 1)
    seconds = 0.0
    for judge, n in counts.values():
        rpm = getattr(judge, "rpm", None)
        if not rpm or getattr(judge, "batch", False):
            return None
        seconds = max(seconds, n * 60.0 / (float(rpm) * (1.0 - RateLimiter.MARGIN)))
    return seconds
