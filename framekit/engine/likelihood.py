"""The likelihood stage of a run: the offline judge's reading with the ``lm`` extra.

When the offline judge scores an evaluator with likelihood hooks (Groundedness,
ContextRecall, Coherence) and ``framekit[lm]`` is installed, that evaluator's records
are scored here instead of by the embedding proxies: each record becomes a
:class:`~framekit.judges.local.likelihood.LikelihoodInput` (the evaluator's
``local_likelihood_inputs``), the scorer computes the mean token log-probability of its
text, and the evaluator turns that into its verdict (``likelihood_verdict``). Every
result is cached on disk by (model, prompt, text), so a repeated run loads no model.
Records sharing a prompt (the same documents) are scored in one call, which evaluates
the prompt once; each call's results are cached as it ends, so a stopped run resumes.
A record the evaluator keeps from the scorer (its hook answers ``None``: Coherence's
response without a request) stays pending here, for the embedding stage that follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from framekit import _progress
from framekit._errors import FramekitError, RecordError, one_line
from framekit._results import Record
from framekit._secrets import redact, registered
from framekit.engine.cache import Cache
from framekit.engine.prepare import Prepared
from framekit.engine.stats import RunStats
from framekit.judges.local import LocalJudge
from framekit.judges.local.likelihood import (
    Likelihood,
    LikelihoodHooks,
    LikelihoodInput,
    likelihood_from_cache,
    likelihood_key,
    likelihood_to_cache,
)


@dataclass
class _Item:
    share: Prepared
    record: Record
    scored: LikelihoodInput
    key: str


def _hooks(share: Prepared) -> LikelihoodHooks:
    # Only shares whose evaluator has the hooks reach this stage (scores_likelihood).
    return cast(LikelihoodHooks, share.evaluator)


async def ready_likelihood(prepared: Sequence[Prepared]) -> None:
    """Load the scorer before a run pays for answers: a missing extra or model
    (``LocalJudge(likelihood=True)``) stops the run here, not after its LLM calls."""
    for share in prepared:
        offline = share.judge.offline
        if offline is not None:
            await offline.prepare_likelihood()
            return


async def likelihood_stage(
    prepared: Sequence[Prepared], cache: Cache, stats: RunStats, show_progress: bool
) -> None:
    """Settle the pending records of ``prepared`` (shares whose offline judge reads
    likelihoods: :attr:`Prepared.scores_likelihood
    <framekit.engine.prepare.Prepared.scores_likelihood>`) from the cache or the scorer,
    but those their evaluator keeps for the embedding proxy."""
    items: list[_Item] = []
    judge: LocalJudge | None = None
    for share in prepared:
        assert share.judge.offline is not None, "only the offline judge reads likelihoods"
        judge = judge or share.judge.offline
        for record in share.pending():
            assert record.fields is not None
            try:
                scored = _hooks(share).local_likelihood_inputs(record.fields)
            except RecordError as exc:
                record.fail(str(exc))
                continue
            if scored is None:
                continue  # read by the embedding proxy: the embedding stage settles it
            items.append(_Item(share, record, scored, likelihood_key(scored)))
    if not items or judge is None:
        return
    hits = cache.get_many({item.key for item in items})
    found: dict[str, Likelihood] = {k: likelihood_from_cache(v) for k, v in hits.items()}
    errors: dict[str, str] = {}
    misses = {item.key: item.scored for item in items if item.key not in found}
    if misses:
        await _score(judge, misses, cache, stats, show_progress, found, errors)
    for item in items:
        record = item.record
        if item.key in errors:
            record.fail(errors[item.key])
            continue
        try:
            verdict = _hooks(item.share).likelihood_verdict(record.fields or {}, found[item.key])
        except RecordError as exc:
            record.fail(str(exc))
            continue
        record.free()
        record.cached = item.key in hits
        stats.cost_usd = stats.cost_usd or 0.0  # the offline judge is free
        record.settle(verdict)


async def _score(
    judge: LocalJudge,
    misses: dict[str, LikelihoodInput],
    cache: Cache,
    stats: RunStats,
    show_progress: bool,
    found: dict[str, Likelihood],
    errors: dict[str, str],
) -> None:
    """Score ``misses`` one prompt at a time (the prompt is evaluated once per call),
    caching each call's results as it ends."""
    groups: dict[str, list[str]] = {}
    for key, scored in misses.items():
        groups.setdefault(scored.prompt_text(), []).append(key)
    bar = _progress.bar(len(misses), "likelihood", "text", leave=False) if show_progress else None
    try:
        for keys in groups.values():
            try:
                results = await judge.score_likelihood([misses[k] for k in keys])
            except FramekitError:
                raise  # a missing extra or model: no record can be scored
            except Exception as exc:  # llama.cpp failing on this prompt fails its records
                text = f"likelihood scoring failed: {type(exc).__name__}: {one_line(str(exc), 160)}"
                errors.update(dict.fromkeys(keys, redact(text, registered())))
                continue
            found.update(zip(keys, results))
            cache.set_many((k, likelihood_to_cache(r)) for k, r in zip(keys, results))
            stats.likelihoods_computed += len(keys)
            if bar is not None:
                bar.update(len(keys))
    finally:
        if bar is not None:
            bar.close()
