"""What a run cost per 1,000 rows, and what each of framekit's four savings saved.

Definitions (the same in the summary line, ``fk.last_run()``, the run record in a Parquet
file's footer and the HTML report; all in US dollars at the judge's price):

- **cost per 1,000 rows**: what this run paid (``cost_usd``; 0 when it sent nothing)
  divided by its rows, times 1,000.
- **dedup**: rows whose request was the same as another row's (identical rows of one
  evaluator) are asked once; each duplicate not sent is priced at the average cost of
  the run's distinct answers (those paid now and those read from the cache at what they
  cost when first paid).
- **cache**: answers read from framekit's response cache instead of being paid again, at
  what each cost when it was first paid (recorded with the answer); an answer recorded
  without a cost is priced at the same average.
- **batch**: what the batch lines would have cost at the judge's direct price, minus what
  they cost at the batch price (the discount).
- **prompt cache**: what the replies would have cost with every prompt token at the input
  rate, minus what they cost with the provider's cached prompt tokens at the cached-input
  rate (and, for Anthropic, cache writes at the higher write rate, which count against
  it).

A saving is ``None`` (unknown) where a price is unknown. The counts behind the first two
are taken from the prepared shares when the run ends (:func:`tally`); the last two are
added as each reply is read (:func:`prompt_cache_saving`, :func:`batch_saving`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from framekit.judges.usage import Price

#: The savings' names, in the order they are shown.
SAVINGS = ("dedup", "cache", "batch", "prompt_cache")


def prompt_cache_saving(reply: Any, price: Price | None) -> float:
    """What the provider's prompt cache saved on ``reply`` (a raw reply) at ``price``: its
    cost with every prompt token at the input rate minus its cost as billed.

    Examples
    --------
    >>> from framekit.judges.transport import RawReply
    >>> reply = RawReply("{}", None, 2000, 100, None, 0.1, cached_tokens=1024)
    >>> round(prompt_cache_saving(reply, Price(2e-6, 8e-6, cached=0.5e-6)), 6)  # 1024 x 1.5e-6
    0.001536
    """
    if price is None:
        return 0.0
    full = replace(price, cached=None, written=None)
    args = (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens, reply.written_tokens)
    return full.cost(*args) - price.cost(*args)


def batch_saving(reply: Any, direct: Price | None, paid: float | None) -> float:
    """What batch mode saved on one line: its cost at the ``direct`` price minus ``paid``.

    Examples
    --------
    >>> from framekit.judges.transport import RawReply
    >>> reply = RawReply("{}", None, 1000, 100, None, 0.1)
    >>> round(batch_saving(reply, Price(2e-6, 8e-6), 0.0014), 6)
    0.0014
    """
    if direct is None or paid is None:
        return 0.0
    return reply.cost_at(direct) - paid


def tally(prepared: Sequence[Any], stats: Any) -> None:
    """Count, when a run ends, what dedup and the cache saved (see the module docstring)
    into ``stats.saved_dedup_usd`` and ``stats.saved_cache_usd``, from each LLM judge's
    share: its distinct answers' costs, the rows behind them, which came from the cache."""
    costs: list[float] = []
    duplicates = cached_unpriced = 0
    cached_cost = 0.0
    for share in prepared:
        if share.judge.chat_endpoint is None:
            continue  # the offline judge is free; a cascade's stages are counted apart
        rows = len(share.inverse)
        distinct = len(set(share.inverse)) if share.inverse else 0
        duplicates += rows - distinct
        answered = share.answered
        if answered is not None:
            for label, cost in zip(answered.label, answered.cost_usd):
                if label is None:
                    continue
                if cost is None:
                    cached_unpriced += 1
                else:
                    costs.append(cost)
                    cached_cost += cost
        for record in share.records:
            if record.error is not None:  # its rows were not answered: nothing saved
                duplicates -= record.weight - 1
                continue
            if record.cost_usd is not None:
                costs.append(record.cost_usd)
                if record.cached:
                    cached_cost += record.cost_usd
            elif record.cached:
                cached_unpriced += 1
    average = sum(costs) / len(costs) if costs else None
    stats.saved_dedup_usd = _priced(duplicates, average)
    unpriced = _priced(cached_unpriced, average)
    stats.saved_cache_usd = None if unpriced is None else cached_cost + unpriced


def _priced(count: int, average: float | None) -> float | None:
    if count == 0:
        return 0.0
    return None if average is None else count * average


def spent(stats: Any) -> float | None:
    """What the run paid: ``cost_usd``, 0 when it sent nothing, ``None`` when unknown."""
    if stats.cost_usd is not None:
        return float(stats.cost_usd)
    return 0.0 if stats.requests_sent == 0 else None


def cost_figures(stats: Any) -> dict[str, Any]:
    """The run's cost figures as the run record keeps them.

    Examples
    --------
    >>> from framekit.engine.stats import RunStats
    >>> stats = RunStats(rows=200, requests_sent=100, cost_usd=0.5, saved_dedup_usd=0.1,
    ...                  saved_cache_usd=0.0, saved_prompt_cache_usd=0.02)
    >>> cost_figures(stats)["cost_per_1000_rows_usd"]
    2.5
    >>> cost_figures(stats)["saved_usd"]
    {'dedup': 0.1, 'cache': 0.0, 'batch': 0.0, 'prompt_cache': 0.02}
    """
    paid = spent(stats)
    per_1000 = None if paid is None or not stats.rows else paid / stats.rows * 1000.0
    figures: dict[str, Any] = {
        "cost_per_1000_rows_usd": None if per_1000 is None else round(per_1000, 6),
        "saved_usd": {
            "dedup": _round(stats.saved_dedup_usd),
            "cache": _round(stats.saved_cache_usd),
            "batch": _round(stats.saved_batch_usd),
            "prompt_cache": _round(stats.saved_prompt_cache_usd),
        },
    }
    if stats.budget_usd is not None:
        figures["budget"] = {
            "max_cost_usd": stats.budget_usd,
            "spent_usd": _round(paid),
            "rows_left": stats.rows_left,
        }
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def describe(stats: Any) -> str:
    """The summary's cost clause: cost per 1,000 rows and the savings that saved anything;
    nothing for a run that paid nothing and saved nothing (the offline judge).

    Examples
    --------
    >>> from framekit.engine.stats import RunStats
    >>> describe(RunStats(rows=200, requests_sent=100, cost_usd=0.5, saved_dedup_usd=0.1,
    ...                   saved_cache_usd=0.0))
    '$2.5000 per 1,000 rows; saved $0.1000 by dedup'
    >>> describe(RunStats(rows=200, cost_usd=0.0))
    ''
    """
    paid = spent(stats)
    if paid is None or not stats.rows:
        return ""
    parts = []
    for name, label in (
        ("saved_dedup_usd", "dedup"),
        ("saved_cache_usd", "the cache"),
        ("saved_batch_usd", "batch"),
        ("saved_prompt_cache_usd", "cached prompt tokens"),
    ):
        value = getattr(stats, name)
        if value:
            parts.append(f"${value:.4f} by {label}")
    if paid == 0 and not parts:
        return ""
    text = f"${paid / stats.rows * 1000.0:.4f} per 1,000 rows"
    return text + ("; saved " + ", ".join(parts) if parts else "")


def budget_line(stats: Any) -> str | None:
    """The summary's budget line, when the run had one.

    Examples
    --------
    >>> from framekit.engine.stats import RunStats
    >>> print(budget_line(RunStats(rows=10, requests_sent=4, cost_usd=0.04,
    ...                            budget_usd=0.05, rows_left=6)))
    framekit: budget: $0.0400 spent of $0.0500; 6 rows left unscored (run again with a higher budget to score them)
    """
    if stats.budget_usd is None:
        return None
    paid = spent(stats) or 0.0
    line = f"framekit: budget: ${paid:.4f} spent of ${stats.budget_usd:.4f}"
    if stats.rows_left:
        rows = f"{stats.rows_left} row{'' if stats.rows_left == 1 else 's'}"
        line += f"; {rows} left unscored (run again with a higher budget to score them)"
    else:
        line += "; no row left"
    return line


def add_savings(total: Any, part: Any) -> None:
    """Add the savings of one part of a run (a slice, a Ray block) to ``total``'s: an
    unknown part makes the total unknown."""
    for name in ("saved_dedup_usd", "saved_cache_usd"):
        mine, theirs = getattr(total, name), getattr(part, name)
        setattr(total, name, None if mine is None or theirs is None else mine + theirs)
    total.budget_usd = total.budget_usd if part.budget_usd is None else part.budget_usd
