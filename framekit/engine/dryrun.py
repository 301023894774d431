"""What a run would send, before sending anything: ``framekit evaluate --dry-run``.

The plan is built exactly as the planner builds a real run: the mapping is resolved,
identical records are collapsed, each evaluator prepares its records and builds its chat
requests, and each request gets the planner's own cache key (``chat_key``). Distinct keys
not already in the cache are the requests a real run sends (one each, when nothing is
retried or re-asked), so the count matches ``RunStats.requests_sent`` of that run.

Token and cost figures are estimates: prompt tokens are characters / 4 (no tokenizer is
loaded: litellm's may try to download one), answers are assumed to be
``ANSWER_TOKENS`` tokens, and prices per token come from litellm's bundled price map, read
as a file (unknown models have no cost).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from framekit._errors import InputError, RecordError
from framekit._mapping import MappingValue, resolve_mapping
from framekit.engine.cache import Cache, NullCache, default_cache_dir
from framekit.engine.embeddings import embedding_key
from framekit.engine.planner import _chat_prefix, chat_key
from framekit.evaluators.base import Evaluator
from framekit.frame import _check_evaluators, _distinct_records
from framekit.judges.base import JudgeLike, resolve_judge
from framekit.judges.batch.pricing import batch_price
from framekit.judges.litellm_judge import Judge
from framekit.judges.local import LocalJudge

#: Assumed length of one judge answer (an explanation of a few sentences and a label).
ANSWER_TOKENS = 120
_LOOKUP_CHUNK = 10_000


@dataclass
class RequestPlan:
    """The requests a run would make, after deduplication and the cache.

    ``requests`` is what would be sent; ``unique_requests`` counts distinct requests
    before the cache, ``cached`` those already answered. ``local_texts`` counts distinct
    texts the offline judge would embed that are not cached yet. ``skipped`` counts
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
    local_judge: bool = False
    skipped: int = 0
    judges: list[str] = field(default_factory=list)
    by_evaluator: dict[str, int] = field(default_factory=dict)
    #: Requests that would go through a provider batch API (priced at its discount).
    batch_requests: int = 0

    @property
    def tokens(self) -> int:
        """Estimated prompt + answer tokens of the requests to send."""
        return self.prompt_tokens + self.answer_tokens

    def describe(self) -> str:
        """A few lines for a terminal."""
        if not self.cost_known:
            cost = "unknown (model not in litellm's price map)"
        else:
            cost = f"${self.cost_usd or 0.0:.4f}"
        per = ", ".join(f"{k} {v}" for k, v in self.by_evaluator.items()) or "none"
        lines = [
            f"dry run: {self.rows} rows x evaluators = {self.evaluations} evaluations",
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
        lines.append(f"  estimated cost: {cost}")
        if self.local_judge:
            lines.append(
                f"  offline judge: {self.local_texts} texts to embed on the CPU "
                "(the rest are cached), no API calls"
            )
        if self.skipped:
            lines.append(f"  {self.skipped} evaluations will fail before any call (null fields)")
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
    evs = _check_evaluators(evaluators)
    store = existing_cache(cache)
    judges: dict[Any, Judge | LocalJudge] = {}

    def judge_for(ev: Evaluator) -> Judge | LocalJudge:
        spec = ev.judge if ev.judge is not None else judge
        key = spec if isinstance(spec, str) or spec is None else id(spec)
        if key not in judges:
            judges[key] = resolve_judge(spec)
        return judges[key]

    plan = RequestPlan()
    # key -> (evaluator name, judge, prompt characters); insertion order = first use.
    chats: dict[str, tuple[str, Judge, int]] = {}
    texts: dict[str, None] = {}
    needed = {f for ev in evs for f in ev.fields}
    for frame in frames:
        plan.rows += frame.height
        plan.evaluations += frame.height * len(evs)
        if frame.height == 0:
            continue
        fields = resolve_mapping(frame, mapping, needed)
        for ev in evs:
            ev.check_fields(fields.available, frame.columns)
        for ev in evs:
            j = judge_for(ev)
            names = [f for f in ev.fields if f in fields.available]
            records, _, weights = _distinct_records(fields.columns, names, frame.height)
            failing = {i for f in ev.fields for i in fields.row_errors.get(f, {})}
            plan.skipped += len(failing)
            prefix = _chat_prefix(ev, j) if isinstance(j, Judge) else b""
            for record, weight in zip(records, weights):
                try:
                    prepared = ev.prepare(record)
                    if isinstance(j, Judge):
                        request = ev.build_request(prepared)
                    else:
                        local = ev.local_texts(prepared)
                except RecordError:
                    plan.skipped += weight
                    continue
                if isinstance(j, Judge):
                    key = chat_key(prefix, request)
                    if key not in chats:
                        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
                        chats[key] = (ev.name, j, chars)
                else:
                    texts.update(dict.fromkeys(local))
    keys = list(chats)
    hits = _present(store, keys)
    plan.unique_requests, plan.cached = len(keys), len(hits)
    plan.by_evaluator = {ev.name: 0 for ev in evs}
    for key, (name, j, chars) in chats.items():
        if key in hits:
            continue
        plan.requests += 1
        plan.by_evaluator[name] += 1
        prompt = chars // 4
        plan.prompt_tokens += prompt
        plan.answer_tokens += ANSWER_TOKENS
        price = _price(j.model, prompt, ANSWER_TOKENS)
        if j.batch:
            plan.batch_requests += 1
            price = batch_price(j.model, prompt, ANSWER_TOKENS)
        if price is None:
            plan.cost_known = False
        else:
            plan.cost_usd = (plan.cost_usd or 0.0) + price
    plan.local_texts = _uncached_texts(list(texts), judges.values(), store)
    plan.judges = sorted({j.model for j in judges.values()})
    plan.local_judge = any(isinstance(j, LocalJudge) for j in judges.values())
    if not plan.requests:
        plan.cost_known, plan.cost_usd = True, 0.0
    return plan


def _price(model: str, prompt: int, answer: int) -> float | None:
    prices = _price_map() or {}
    entry = prices.get(model) or prices.get(model.split("/", 1)[-1])
    if not isinstance(entry, dict) or "input_cost_per_token" not in entry:
        return None
    return float(
        entry["input_cost_per_token"] * prompt + entry.get("output_cost_per_token", 0.0) * answer
    )


@functools.lru_cache(maxsize=1)
def _price_map() -> dict[str, Any] | None:
    """litellm's bundled price map, read as JSON: importing litellm takes seconds, and a
    dry run should answer at once."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)))
    try:
        data = json.loads((path / "model_prices_and_context_window_backup.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _uncached_texts(texts: list[str], judges: Iterable[Any], store: Cache) -> int:
    if not texts:
        return 0
    local = next((j for j in judges if isinstance(j, LocalJudge)), None)
    try:
        model_id = local.model_id if local is not None else ""
    except Exception:  # the local model is not installed: nothing can be cached for it
        return len(texts)
    keys = [embedding_key(model_id, t) for t in texts]
    return len(texts) - len(_present(store, keys))


def plan_parquet(
    source: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    slice_rows: int | None = None,
) -> RequestPlan:
    """:func:`plan_requests` over a Parquet source (or DuckDB relation), slice by slice,
    reading only the mapped columns, as :func:`framekit.evaluate_parquet` would.

    Examples
    --------
    >>> plan = plan_parquet("runs/*.parquet", [RetrievalRelevance()],
    ...                     {"input": "question", "context": "docs"})  # doctest: +SKIP
    >>> print(plan.describe())  # doctest: +SKIP
    """
    from framekit import io
    from framekit.io._duckdb import _is_duckdb_relation
    from framekit.io._sources import _row_groups, _schema_of

    evs = _check_evaluators(evaluators)
    if _is_duckdb_relation(source):
        to_reader = getattr(source, "to_arrow_reader", None) or source.fetch_record_batch
        try:
            reader = to_reader(io.MAX_SLICE_ROWS)
        except Exception as exc:  # duckdb.Error: the query itself failed
            raise InputError(f"the SQL query failed: {str(exc).splitlines()[0]}") from None

        def batches() -> Iterable[pl.DataFrame]:
            for batch in reader:
                frame = pl.from_arrow(batch)
                assert isinstance(frame, pl.DataFrame)
                yield frame

        empty = pl.from_arrow(reader.schema.empty_table())
        assert isinstance(empty, pl.DataFrame)
        schema = empty.schema
        io.validate_inputs(schema, evs, mapping, overwrite=True, details=False)
        return plan_requests(batches(), evs, mapping, judge=judge, cache=cache)
    files = io.resolve_sources(source)
    schema = _schema_of(files)
    io.validate_inputs(schema, evs, mapping, overwrite=True, details=False)
    columns = io.needed_columns(schema, mapping, evs)
    scan = io.scan_sources(files).select(columns)
    slices = io.plan_slices(_row_groups(files), slice_rows)
    frames = (scan.slice(offset, length).collect() for offset, length in slices)
    return plan_requests(frames, evs, mapping, judge=judge, cache=cache)
