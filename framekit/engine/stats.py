"""What a run did: requests, cache hits, failures, tokens and cost."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunStats:
    """Counters of one ``evaluate_dataframe`` run; ``fk.last_run()`` returns the latest.

    Each run fills its own object and hands it back with its frame; ``fk.last_run()`` is
    only set at the public entry points, for a person to look at after a run.

    ``requests_sent`` counts every HTTP attempt (retries and re-asks included);
    ``cache_hits`` counts unique requests answered from the cache.
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
    cost_usd: float | None = None
    embeddings_computed: int = 0
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
    #: Per evaluator: where its confidences came from (``method``: "logprobs",
    #: "calibrated offline", "self-consistency k=N", or ``None``), how many scored rows
    #: have one, its ``scoring``, and with ``scoring="expected"`` the rows that had to be
    #: scored by their label (no probabilities); see :mod:`framekit.engine.confidence`.
    confidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What would have made the run faster, e.g. worker processes for a CPU-bound client.
    hints: list[str] = field(default_factory=list)
    #: The run record: version, time, input, judge, evaluators, mapping, counts, cost
    #: (see :mod:`framekit._provenance`); stored in Parquet files this run writes.
    provenance: dict[str, Any] | None = None

    def summary(self) -> str:
        """One line: what was sent, what came from the cache, what failed, what it cost;
        then one line per hint."""
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        line = (
            f"framekit: {self.rows} row{'' if self.rows == 1 else 's'} x {_evaluators(self)} = "
            f"{self.evaluations} scores in "
            f"{self.elapsed_s:.1f}s; {self.requests_sent} requests sent, "
            f"{self.cache_hits} cache hits, {self.failures} failed, "
            f"{self.tokens} tokens, {cost}"
        )
        if self.transports:
            line += f" (via {', '.join(self.transports)})"
        if self.batch_requests:
            line += f" ({self.batch_requests} answered by batch API at 50 % price)"
        said = describe_confidence(self.confidence)
        if said:
            line += f"\nframekit: {said}"
        return self.with_hints(line)

    def with_hints(self, line: str) -> str:
        """``line``, then one ``framekit: hint:`` line per hint."""
        return "\n".join([line, *(f"framekit: hint: {hint}" for hint in self.hints)])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
