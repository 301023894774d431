"""What a run did: requests, cache hits, failures, tokens and cost."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from framekit.engine import savings
from framekit.judges.pricing import UNKNOWN_COST


@dataclass
class RunStats:
    """Counters of one ``evaluate_dataframe`` run; ``fk.last_run()`` returns the latest.

    Each run fills its own object and hands it back with its frame; ``fk.last_run()`` is
    only set at the public entry points, for a person to look at after a run.

    ``requests_sent`` counts every HTTP attempt (retries and re-asks included);
    ``cache_hits`` counts unique requests answered from the cache. ``tokens`` counts
    the prompt and answer tokens the judges were paid for, ``prompt_tokens`` the prompt's
    share, ``cached_tokens`` the prompt tokens the provider read from its prompt cache
    (billed at its cached-input rate); ``cost_usd`` is what they cost (``None``: no
    price known, see :data:`~framekit.judges.pricing.UNKNOWN_COST`).
    """

    rows: int = 0
    evaluations: int = 0
    unique_requests: int = 0
    requests_sent: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    rate_limited: int = 0
    reasks: int = 0
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    embeddings_computed: int = 0
    #: Texts the offline likelihood scorer read (the ``lm`` extra; cache misses only).
    likelihoods_computed: int = 0
    #: Evaluations whose text was cut to fit the judge's context window (their
    #: explanation ends with a note saying what was cut).
    cut_to_fit: int = 0
    #: Requests on the wire right now (the progress display reads it live).
    sending: int = 0
    elapsed_s: float = 0.0
    per_evaluator_failures: dict[str, int] = field(default_factory=dict)
    #: The first failed evaluation, as ``row N, <evaluator>: <error>`` (``None`` if none).
    first_error: str | None = None
    #: Requests answered through a provider batch API (priced at its batch discount),
    #: and the provider's ids of the batches this run submitted.
    batch_requests: int = 0
    batches: list[str] = field(default_factory=list)
    #: The judge transports the run's calls went through ("http", "litellm").
    transports: list[str] = field(default_factory=list)
    #: Per stage of each cascade (:mod:`framekit.engine.cascade`): ``evaluator``,
    #: ``stage`` (1, 2...), ``judge``, ``escalate_below``, ``rows`` it was asked about,
    #: ``rows_decided``, ``requests`` sent and ``cache_hits`` by the stage's run (shared
    #: by the cascaded evaluators that reach a stage in one run), ``cost_usd`` paid for
    #: this evaluator's distinct records (rows deduplicated into one count once).
    stages: list[dict[str, Any]] = field(default_factory=list)
    #: Per evaluator: where its confidences came from (``method``: "logprobs",
    #: "calibrated offline", "self-consistency k=N", or ``None``), how many scored rows
    #: have one, its ``scoring``, and with ``scoring="expected"`` the rows that had to be
    #: scored by their label (no probabilities); see :meth:`Prepared.confidence_summary <framekit.engine.prepare.Prepared.confidence_summary>`.
    confidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: A pairwise run (``fk.evaluate_pairwise``): per evaluator, the share of pairs (of
    #: those with a verdict in both orders) in which the judge chose the same position,
    #: first or second, whatever the candidates (``None``: no such pair).
    position_bias: dict[str, float | None] = field(default_factory=dict)
    #: A pairwise run's counts: ``pairs``, and per evaluator ``judged`` (pairs with both
    #: verdicts), ``same_position``, ``inconsistent`` (the two orders named different
    #: winners: a tie).
    pairwise: dict[str, Any] = field(default_factory=dict)
    #: What would have made the run faster, e.g. worker processes for a CPU-bound client.
    hints: list[str] = field(default_factory=list)
    #: The run's budget (``max_cost_usd``; ``None``: none) and the rows it left unscored
    #: (their ``_error`` says the budget was reached: see :mod:`framekit.engine.budget`).
    budget_usd: float | None = None
    rows_left: int = 0
    #: What dedup, framekit's cache, batch mode and the provider's prompt cache saved, in
    #: US dollars (``None``: unknown); defined in :mod:`framekit.engine.savings`.
    saved_dedup_usd: float | None = 0.0
    saved_cache_usd: float | None = 0.0
    saved_batch_usd: float = 0.0
    saved_prompt_cache_usd: float = 0.0
    #: The run record: version, time, input, judge, evaluators, mapping, counts, cost
    #: (see :mod:`framekit._provenance`); stored in Parquet files this run writes.
    provenance: dict[str, Any] | None = None

    def summary(self) -> str:
        """One line: what was sent, what came from the cache, what failed, what it cost;
        then one line per hint."""
        line = (
            f"framekit: {self.rows} row{'' if self.rows == 1 else 's'} x {_evaluators(self)} = "
            f"{self.evaluations} scores in "
            f"{self.elapsed_s:.1f}s; {self.requests_sent} requests sent, "
            f"{self.cache_hits} cache hits, {self.failures} failed, "
            f"{self.tokens_text()}, {self.cost_text()}"
        )
        if self.transports:
            line += f" (via {', '.join(self.transports)})"
        if self.batch_requests:
            line += f" ({self.batch_requests} answered by batch API at 50 % price)"
        line += self.per_1000_text()
        line += cut_note(self.cut_to_fit)
        if self.pairwise:
            line += f"\nframekit: {describe_pairwise(self.pairwise, self.position_bias)}"
        said = describe_confidence(self.confidence)
        if said:
            line += f"\nframekit: {said}"
        lines = [line, *cascade_lines(self.stages)]
        budget = savings.budget_line(self)
        if budget is not None:
            lines.append(budget)
        return self.with_hints("\n".join(lines))

    def per_1000_text(self) -> str:
        """``; $0.0123 per 1,000 rows; saved ...`` (see :mod:`framekit.engine.savings`),
        or nothing when the cost is unknown."""
        said = savings.describe(self)
        return f"; {said}" if said else ""

    def cost_figures(self) -> dict[str, Any]:
        """Cost per 1,000 rows, what each saving saved and the budget, as the run record
        keeps them (:func:`framekit.engine.savings.cost_figures`)."""
        return savings.cost_figures(self)

    def cost_text(self) -> str:
        """``$0.0123``, or ``cost unknown (...)`` in the words every path uses."""
        return f"cost {UNKNOWN_COST}" if self.cost_usd is None else f"${self.cost_usd:.4f}"

    def tokens_text(self) -> str:
        """``1200 tokens (512 of 1000 input tokens cached)``: the tokens paid for, and how
        many of the prompt's the provider read from its prompt cache.

        Examples
        --------
        >>> RunStats(tokens=1200, prompt_tokens=1000, cached_tokens=512).tokens_text()
        '1200 tokens (512 of 1000 input tokens cached)'
        """
        if not self.prompt_tokens:
            return f"{self.tokens} tokens"
        return (
            f"{self.tokens} tokens ({self.cached_tokens} of {self.prompt_tokens} "
            "input tokens cached)"
        )

    def with_hints(self, line: str) -> str:
        """``line``, then one ``framekit: hint:`` line per hint."""
        return "\n".join([line, *(f"framekit: hint: {hint}" for hint in self.hints)])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_stages(total: list[dict[str, Any]], part: list[dict[str, Any]]) -> None:
    """Add the stage counts of one part of a run (a Parquet slice, a Ray block) to
    ``total``, stage by stage: one entry per (evaluator, stage) however many parts."""
    for entry in part:
        same = next(
            (
                t
                for t in total
                if (t["evaluator"], t["stage"]) == (entry["evaluator"], entry["stage"])
            ),
            None,
        )
        if same is None:
            total.append(dict(entry))
            continue
        for name in ("rows", "rows_decided", "rows_failed", "requests", "cache_hits"):
            same[name] = same.get(name, 0) + entry.get(name, 0)
        if entry.get("cost_usd") is not None:
            same["cost_usd"] = (same.get("cost_usd") or 0.0) + entry["cost_usd"]


def cut_note(cut: int) -> str:
    """What a summary line says of evaluations cut to fit the context window.

    Examples
    --------
    >>> cut_note(2)
    "; 2 evaluations had their text cut to fit the judge's context window"
    """
    if not cut:
        return ""
    evaluations = f"{cut} evaluation{'' if cut == 1 else 's'}"
    return f"; {evaluations} had their text cut to fit the judge's context window"


def cascade_lines(stages: list[dict[str, Any]]) -> list[str]:
    """One line per cascaded evaluator: what each stage decided, sent and cost.

    Examples
    --------
    >>> print(cascade_lines([
    ...     {"evaluator": "rel", "stage": 1, "judge": "local/m", "rows": 10, "rows_decided": 7,
    ...      "requests": 0, "cost_usd": None},
    ...     {"evaluator": "rel", "stage": 2, "judge": "openai/big", "rows": 3, "rows_decided": 3,
    ...      "rows_failed": 1, "requests": 3, "cost_usd": 0.0012}])[0])
    framekit: cascade rel: local/m decided 7 of 10 rows (0 requests); openai/big decided 2 of 3 rows, failed 1 (3 requests, $0.0012)
    """
    by_evaluator: dict[str, list[str]] = {}
    for s in stages:
        cost = "" if s.get("cost_usd") is None else f", ${s['cost_usd']:.4f}"
        requests, hits = s.get("requests", 0), s.get("cache_hits", 0)
        cached = f", {hits} cached" if hits else ""
        # A row that failed at the last stage has no verdict: it was not decided.
        failed = s.get("rows_failed", 0)
        shown_failed = f", failed {failed}" if failed else ""
        by_evaluator.setdefault(str(s["evaluator"]), []).append(
            f"{s['judge']} decided {s['rows_decided'] - failed} of {s['rows']} rows"
            f"{shown_failed} ({requests} request{'' if requests == 1 else 's'}{cached}{cost})"
        )
    return [f"framekit: cascade {name}: {'; '.join(parts)}" for name, parts in by_evaluator.items()]


def _evaluators(stats: RunStats) -> str:
    n = stats.evaluations // stats.rows if stats.rows else None
    if n is None and stats.provenance:
        n = len(stats.provenance.get("evaluators") or [])
    if n is None:
        return "evaluators"
    return f"{n} evaluator" + ("" if n == 1 else "s")


def add_confidence(total: dict[str, dict[str, Any]], part: dict[str, dict[str, Any]]) -> None:
    """Add the confidence figures of one slice of a run (``part``) to the run's (in place).

    Examples
    --------
    >>> total = {}
    >>> part = {"c": {"method": "logprobs", "scored_rows": 2, "rows_with_confidence": 1,
    ...               "scoring": "expected", "rows_scored_by_label": 1}}
    >>> add_confidence(total, part); add_confidence(total, part)
    >>> total["c"]["scored_rows"], total["c"]["rows_scored_by_label"], total["c"]["method"]
    (4, 2, 'logprobs')
    """
    for name, entry in part.items():
        mine = total.setdefault(name, {"method": None, "scoring": entry.get("scoring")})
        for key, value in entry.items():
            if isinstance(value, int) and not isinstance(value, bool):
                mine[key] = mine.get(key, 0) + value
        mine["method"] = mine.get("method") or entry.get("method")


def describe_confidence(confidence: dict[str, dict[str, Any]]) -> str | None:
    """One line for the run's summary, e.g. ``confidence: coherence by logprobs (98 of
    100 rows)``; ``None`` when no evaluator has a confidence or an expected score."""
    parts = []
    for name, entry in confidence.items():
        method = entry.get("method")
        fallback = entry.get("rows_scored_by_label")
        if method is None and not fallback:
            continue
        text = f"{name} by {method or 'none'} ({entry['rows_with_confidence']} of "
        text += f"{entry['scored_rows']} rows)"
        if fallback:
            text += f", {fallback} rows scored by label for want of probabilities"
        parts.append(text)
    return "confidence: " + "; ".join(parts) if parts else None


def describe_pairwise(pairwise: dict[str, Any], bias: dict[str, float | None]) -> str:
    """One line for a pairwise run's summary: pairs, and per evaluator its position bias.

    Examples
    --------
    >>> describe_pairwise({"pairs": 450, "evaluators": {"preference": {"judged": 450,
    ...     "same_position": 54, "inconsistent": 60}}}, {"preference": 0.12})
    'pairwise: 450 pairs, each asked in both orders; preference: position bias 0.120 (the same position chosen in both orders in 54 of 450 pairs), 60 inconsistent pairs counted as ties'
    """
    parts = [f"pairwise: {pairwise.get('pairs', 0)} pairs, each asked in both orders"]
    for name, counts in (pairwise.get("evaluators") or {}).items():
        share = bias.get(name)
        shown = "unknown" if share is None else f"{share:.3f}"
        parts.append(
            f"{name}: position bias {shown} (the same position chosen in both orders in "
            f"{counts['same_position']} of {counts['judged']} pairs), "
            f"{counts['inconsistent']} inconsistent pairs counted as ties"
        )
    return "; ".join(parts)


_last_global: list[RunStats] = []


def record_last(stats: RunStats) -> None:
    _last_global[:] = [stats]


def last_run() -> RunStats | None:
    """The statistics of the most recent run in this process (``None`` before any).

    Examples
    --------
    >>> import framekit as fk
    >>> stats = fk.last_run()  # after fk.evaluate_dataframe(...)
    """
    return _last_global[0] if _last_global else None
