"""Cascades in a run: each stage an ordinary run of its judge over the rows still open.

:func:`framekit.engine.plan.run` hands every share whose judge is a
:class:`~framekit.judges.cascade.Cascade` to :func:`run_cascades`, which settles it stage
by stage: stage 1 gets a copy of every record still to ask about, and the planner settles
those copies as it would any record (cache, deduplication, the judge's rate limits, batch
mode, embeddings); a copy whose verdict is trusted (:func:`~framekit.judges.cascade.escalates`
says no) decides its record, every other record is copied to the next stage; the last
stage decides what is left. Stages of every cascaded evaluator run together, one planner
run per stage depth, so two evaluators escalating to the same judge share its limits and
its deduplication. A run without a cascade never comes here.

Each stage's copies are settled by the plan's one reader (:class:`~framekit.engine.plan.Reader`),
as any record is; a record takes the result of the stage that decides it
(:meth:`Record.take <framekit._results.Record.take>`), and its tokens, cost and latency add
up over the stages it went through (:meth:`Record.add_stage
<framekit._results.Record.add_stage>`: an escalated row is paid at every stage); ``cached``
is true only when every stage answered from the cache. Failures are counted once, on the verdicts that stand: a stage's failed call is
escalated, not counted. What each stage did goes to :attr:`RunStats.stages
<framekit.engine.stats.RunStats.stages>` (rows it got, rows it decided, requests, cost).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framekit._results import ProgressFn, Record
from framekit.engine.prepare import Prepared
from framekit.engine.stats import RunStats, add_stages
from framekit.judges.cascade import Cascade, escalates

#: RunStats counters a stage's run adds to the whole run's (failures are counted on the
#: verdicts that stand, not per stage).
_SUMMED = (
    "unique_requests",
    "requests_sent",
    "cache_hits",
    "retries",
    "rate_limited",
    "reasks",
    "tokens",
    "prompt_tokens",
    "cached_tokens",
    "embeddings_computed",
    "batch_requests",
    "saved_batch_usd",
    "saved_prompt_cache_usd",
)


#: Runs one stage's shares through the planner, counting into the stage's own stats.
StageRunner = Callable[[list[Prepared], RunStats], Awaitable[None]]


async def run_cascades(
    cascaded: Sequence[Prepared],
    stats: RunStats,
    progress: ProgressFn | None,
    run_stage: StageRunner,
) -> None:
    """Settle every record of ``cascaded`` (shares whose judge is a cascade) stage by
    stage, each stage's shares through ``run_stage``."""
    routes = [_Route(share) for share in cascaded]
    report = progress or _silent
    for route in routes:
        route.start(report)
    depth = max(len(route.cascade.judges) for route in routes)
    for k in range(depth):
        stage = [share for route in routes if (share := route.stage_share(k)) is not None]
        if not stage:
            break
        stage_stats = RunStats()
        try:
            await run_stage(stage, stage_stats)
        finally:
            _add(stats, stage_stats)
        for route in routes:
            route.settle_stage(k, stage_stats, report)
    for route in routes:
        add_stages(stats.stages, route.summaries)
        stats.confidence[route.share.evaluator.name] = _confidence_summary(route)
        failed = route.share.failures()
        stats.failures += failed
        if failed:
            stats.per_evaluator_failures[route.share.evaluator.name] = failed


@dataclass(eq=False)
class _Route:
    """One cascaded evaluator's share and the stage copies of its open records."""

    share: Prepared
    open: list[Record] = field(default_factory=list)
    copies: list[Record] = field(default_factory=list)
    summaries: list[dict[str, object]] = field(default_factory=list)
    #: How each stage run gave its confidences ("logprobs", "calibrated offline"...).
    methods: list[str | None] = field(default_factory=list)

    @property
    def cascade(self) -> Cascade:
        cascade = self.share.judge.cascade
        assert cascade is not None, "a cascade's share"
        return cascade

    def start(self, report: ProgressFn) -> None:
        """Count what was settled while prepared; the rest is open for stage 1."""
        first = self.cascade.stage_names[0]
        for record in self.share.records:
            if record.fields is not None:
                self.open.append(record)
                record.start_stages()
            else:
                if record.error is None:
                    record.judge = first  # a verdict known without a call (empty retrieval)
                record.report(report)

    def stage_share(self, k: int) -> Prepared | None:
        """Stage ``k``'s share: a fresh copy of each open record, for that stage's judge."""
        if k >= len(self.cascade.judges) or not self.open:
            self.copies = []
            return None
        self.copies = _copies(self.open)
        return Prepared(self.share.evaluator, self.cascade.judges[k], self.copies)

    def settle_stage(self, k: int, stage_stats: RunStats, report: ProgressFn) -> None:
        """Decide the records whose stage-``k`` verdict is trusted (all of them at the last
        stage); keep the others open."""
        if not self.copies:
            return
        self.methods.append(stage_stats.confidence.get(self.share.evaluator.name, {}).get("method"))
        judges, below = self.cascade.judges, self.cascade.escalate_below
        name = self.cascade.stage_names[k]
        last = k == len(judges) - 1
        still_open = []
        decided = failed = 0
        cost: float | None = None
        for record, copy in zip(self.open, self.copies, strict=True):
            record.add_stage(copy)
            if copy.cost_usd is not None and not copy.cached:  # paid in this run
                cost = (cost or 0.0) + copy.cost_usd
            if last or not escalates(copy.confidence, below[k], copy.error is None):
                record.take(copy, name)
                record.report(report)
                decided += record.weight
                failed += record.weight if copy.error is not None else 0
            else:
                still_open.append(record)
        self.summaries.append(
            {
                "evaluator": self.share.evaluator.name,
                "stage": k + 1,
                "judge": name,
                "escalate_below": None if last else below[k],
                "rows": sum(c.weight for c in self.copies),
                "rows_decided": decided,
                "rows_failed": failed,  # of those decided: errors at the last stage
                "requests": stage_stats.requests_sent,
                "cache_hits": stage_stats.cache_hits,
                "cost_usd": cost,
            }
        )
        self.open, self.copies = still_open, []


def planned_stages(share: Prepared) -> list[tuple[Prepared, float]]:
    """For the dry run: each stage of a cascaded share over every record still to ask
    about, with the share of rows expected to reach it (the cascade's
    ``expected_share`` from a calibration, else 1: "up to" every row at every stage)."""
    cascade = share.judge.cascade
    assert cascade is not None, "a cascade's share"
    reach = cascade.expected_share or (1.0,) * len(cascade.judges)
    records = share.pending()
    return [
        (Prepared(share.evaluator, judge, _copies(records)), reach[k])
        for k, judge in enumerate(cascade.judges)
    ]


def _copies(records: Sequence[Record]) -> list[Record]:
    """A fresh record to ask one stage's judge about, per open record."""
    return [Record(dict(r.fields), r.weight, note=r.note) for r in records if r.fields is not None]


def _confidence_summary(route: _Route) -> dict[str, Any]:
    """The run record's confidence entry of a cascaded evaluator: the rows that stand,
    and how each stage that ran gave its confidences."""
    last = Prepared(route.share.evaluator, route.cascade.judges[-1], route.share.records)
    entry = last.confidence_summary()
    entry["method"] = "cascade: " + " -> ".join(m or "none" for m in route.methods)
    return entry


def _add(total: RunStats, stage: RunStats) -> None:
    for name in _SUMMED:
        setattr(total, name, getattr(total, name) + getattr(stage, name))
    if stage.cost_usd is not None:
        total.cost_usd = (total.cost_usd or 0.0) + stage.cost_usd
    total.batches.extend(stage.batches)
    total.transports.extend(t for t in stage.transports if t not in total.transports)
    total.hints.extend(h for h in stage.hints if h not in total.hints)


def _silent(rows: int, kind: str) -> None:
    """A progress display that shows nothing."""
