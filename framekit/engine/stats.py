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
