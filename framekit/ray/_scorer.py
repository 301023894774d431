"""What each Ray worker (an actor of the ``map_batches`` pool) runs on its blocks.

A worker is built once: it unpickles the evaluators and the judge, loads the offline
judge's embedding model (once per actor, not per block), opens the cache and, for an API
judge, makes the proxy of the cluster's limiter that paces the judge's calls. Each block then goes through the ordinary engine
(:func:`framekit.aevaluate_dataframe`) on a polars frame made from the Arrow batch, on one
event loop kept for the worker's life (the judge's HTTP sessions stay valid across blocks).
Requests are deduplicated within the block; the cache spans blocks and workers.
"""

from __future__ import annotations

import asyncio
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from framekit._errors import InputError
from framekit._result_columns import result_columns
from framekit.engine.budget import Spending, spending_limit
from framekit.engine.limiter import Limiter
from framekit.engine.mapping import MappingValue
from framekit.engine.stats import RunStats
from framekit.evaluate import evaluate_with_stats
from framekit.evaluators.base import Evaluator
from framekit.judges.cascade import Cascade
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.providers import FRAMEKIT_KEY_VAR

#: Extra columns of a slice's output (evaluate_parquet on Ray), dropped by the driver.
SLICE_COL, ROW_COL, STATS_COL = "__fk_slice", "__fk_row", "__fk_stats"


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs, pickled once into each actor's constructor."""

    evaluators: Sequence[Evaluator]
    mapping: Mapping[str, MappingValue] | None
    judge: Judge | LocalJudge | Cascade
    cache: str | bool
    details: bool
    overwrite: bool
    limiter: Any = None  # the limiter actor's handle, or None: each worker paces alone
    key_from_env: bool = False  # the judge's key is read from each worker's environment
    budget: Any = None  # the run's budget actor (max_cost_usd), or None: no budget
    max_cost_usd: float | None = None


class BlockScorer:
    """Scores one Arrow batch: the input columns, then the result columns."""

    def __init__(self, spec: RunSpec) -> None:
        from framekit.engine.cache import resolve_cache

        self.spec = spec
        self.judge = spec.judge
        self.limiter: Limiter | None = None
        offline = self.judge.offline
        if offline is not None:
            self.judge = _local_judge_for_this_worker(offline)
        else:
            if spec.key_from_env and not os.environ.get(FRAMEKIT_KEY_VAR):
                raise InputError(
                    f"{FRAMEKIT_KEY_VAR} is not set on this Ray node: set it in the nodes' "
                    "environment, or pass api_key= to fk.Judge (it then travels to the "
                    "workers through Ray's object store)"
                )
            if spec.limiter is not None:
                from framekit.ray._limiter import RemoteLimiter

                self.limiter = RemoteLimiter(spec.limiter)
        self.budget: Spending | None = None
        if spec.budget is not None and spec.max_cost_usd is not None:
            from framekit.ray._budget import RemoteBudget

            self.budget = RemoteBudget(spec.budget, spec.max_cost_usd)
        self.cache = resolve_cache(spec.cache)
        self.columns = result_columns(spec.evaluators, spec.details)
        self.loop = asyncio.new_event_loop()

    def score(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, RunStats]:
        """The result columns for ``frame`` (same height, same row order), and the
        statistics of scoring it."""
        spec = self.spec
        with spending_limit(budget=self.budget):  # the cluster's one budget, if any
            scored, stats = self.loop.run_until_complete(
                evaluate_with_stats(
                    frame,
                    spec.evaluators,
                    spec.mapping,
                    judge=self.judge,
                    cache=self.cache,
                    progress=False,
                    details=spec.details,
                    overwrite=spec.overwrite,
                    limiter_for=self._limiter_for,
                )
            )
        return scored.select(self.columns), stats

    def _limiter_for(self, judge: Judge) -> Limiter | None:
        """The cluster's limiter paces the run's judge; evaluators with a judge of their
        own pace on this worker alone."""
        return self.limiter if judge is self.judge else None

    def __call__(self, batch: pa.Table) -> pa.Table:
        results, _ = self.score(pl.from_arrow(batch))  # type: ignore[arg-type]
        table = batch.drop_columns([c for c in self.columns if c in batch.column_names])
        for name, column in zip(self.columns, _arrow(results).columns, strict=True):
            table = table.append_column(name, column)
        return table


class SliceScorer(BlockScorer):
    """Reads and scores slices of Parquet files (``evaluate_parquet(..., engine="ray")``).

    Each input row names one slice (``slice``, ``offset``, ``length``); the worker reads
    only the columns scoring needs and returns the result columns, tagged with the slice
    and row so the driver can file them as that slice's part, and the run's stats.
    """

    def __init__(self, spec: RunSpec, files: list[str], columns: list[str]) -> None:
        super().__init__(spec)
        self.files = [Path(f) for f in files]
        self.read = columns

    def __call__(self, batch: pa.Table) -> pa.Table:
        from framekit.io._sources import read_slice

        out = []
        for index, offset, length in zip(
            *(batch.column(c).to_pylist() for c in ("slice", "offset", "length")), strict=True
        ):
            frame = read_slice(self.files, self.read, offset, length)
            results, stats = self.score(frame)
            out.append(
                results.with_columns(
                    pl.lit(index, pl.Int64).alias(SLICE_COL),
                    pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW_COL),
                    pl.Series(STATS_COL, [pickle.dumps(stats)] + [None] * (length - 1), pl.Binary),
                )
            )
        return _arrow(pl.concat(out))


def _local_judge_for_this_worker(judge: LocalJudge) -> LocalJudge:
    """The offline judge with its model loaded now (once per actor, not per block), using
    as many onnxruntime threads as Ray gave this worker CPUs: by default it would take
    every core of the machine, and N workers on one machine would fight over them."""
    import ray

    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
    judge = judge.with_threads(max(1, round(cpus)))
    _ = judge.embedder
    return judge


def _arrow(frame: pl.DataFrame) -> pa.Table:
    # Plain large_string/double/bool, the same types every block carries (polars' string
    # views would differ from block to block in Ray's schema checks and in the parts).
    return frame.to_arrow(compat_level=pl.CompatLevel.oldest())
