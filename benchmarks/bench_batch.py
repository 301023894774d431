"""Batch mode at scale: plan 1,000,000 judge requests into provider batch files.

Measures, in one process, the batch executor's three streaming passes over a million
distinct records (produced slice by slice, as ``evaluate_parquet`` feeds the engine):

1. plan: build each request (evaluator prompt), its cache key, and the executor's
   per-key answer shape (what parsing needs; prompts are not kept);
2. write: the OpenAI batch JSONL, split at 50,000 requests / 200 MB per file, with a
   manifest per file;
3. read: every file read back line by line and decoded (what a follow-up batch does).

Peak RSS is the process's high-water mark (``ru_maxrss``) after each pass. Nothing is
sent: the upload and the provider are measured by the tests against the simulator.

    PYTHONPATH=. python benchmarks/bench_batch.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl

import framekit as fk
from benchmarks._common import write_results
from framekit.engine.batch import BatchExecutor
from framekit.engine.cache import Cache
from framekit.engine.planner import _chat_prefix, chat_key
from framekit.engine.stats import RunStats
from framekit.evaluators import RetrievalRelevance
from framekit.judges.request import ChatRequest

SLICE = 50_000


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Requests:
    """The (key, request) pairs of ``rows`` distinct records, rebuilt on every pass."""

    def __init__(self, rows: int, judge: fk.Judge) -> None:
        self.rows = rows
        self.evaluator = RetrievalRelevance()
        self.prefix = _chat_prefix(self.evaluator, judge)

    def __iter__(self) -> Iterator[tuple[str, ChatRequest]]:
        ev = self.evaluator
        for start in range(0, self.rows, SLICE):
            ids = range(start, min(self.rows, start + SLICE))
            frame = pl.DataFrame(
                {
                    "input": [f"How do I configure feature {i} of the product?" for i in ids],
                    "context": [
                        [
                            f"Feature {i} is configured in Settings > Advanced.",
                            f"Release note {i % 97}.",
                        ]
                        for i in ids
                    ],
                }
            )
            for record in frame.iter_rows(named=True):
                request = ev.build_request(ev.prepare(record))
                yield chat_key(self.prefix, request), request


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="fk-bench-batch-"))
    try:
        judge = fk.Judge("openai/gpt-4o-mini", api_key="sk-bench", batch=True)
        executor = BatchExecutor(judge, Cache(workdir / "cache"), RunStats())
        requests = Requests(args.rows, judge)
        start_mb = peak_mb()

        t0 = time.perf_counter()
        for key, request in requests:
            executor.shapes[key] = executor._shape(request)
        plan_s = time.perf_counter() - t0
        plan_mb = peak_mb()

        t0 = time.perf_counter()
        lines = ((k, r.messages, executor.shapes[k]) for k, r in requests)
        manifests = executor.write_spools(lines, round_=0)
        write_s = time.perf_counter() - t0
        write_mb = peak_mb()
        sizes = [executor.store.spool_of(m).stat().st_size for m in manifests]

        t0 = time.perf_counter()
        read = 0
        for m in manifests:
            with open(executor.store.spool_of(m), "rb") as handle:
                for line in handle:
                    read += executor.client.decode(line) is not None
        read_s = time.perf_counter() - t0
        assert read == args.rows == sum(len(m.keys) for m in manifests)

        write_results(
            "batch",
            {
                "requests": args.rows,
                "files": len(manifests),
                "max_requests_per_file": max(len(m.keys) for m in manifests),
                "max_file_mb": round(max(sizes) / 2**20, 1),
                "total_mb": round(sum(sizes) / 2**20, 1),
                "plan_s": round(plan_s, 1),
                "write_s": round(write_s, 1),
                "read_s": round(read_s, 1),
                "plan_requests_per_s": round(args.rows / plan_s),
                "write_requests_per_s": round(args.rows / write_s),
                "read_requests_per_s": round(args.rows / read_s),
                "peak_rss_mb": {
                    "before": round(start_mb),
                    "after_plan": round(plan_mb),
                    "after_write": round(write_mb),
                    "after_read": round(peak_mb()),
                },
                "peak_rss_under_1gb": peak_mb() < 1024,
            },
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
