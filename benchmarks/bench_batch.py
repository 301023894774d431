"""Batch mode at scale: 1,000,000 distinct judge requests planned into provider batch files.

Runs the engine's own path, in one process, over a million distinct rows produced slice
by slice (50,000 rows, as ``evaluate_parquet`` feeds the engine): each slice is prepared
and planned (``prepare`` + ``ChatPlan``: records, prompts, cache keys, answer shapes),
and the batch executor writes the OpenAI batch JSONL from the plan (split at 50,000
requests / 200 MB per file, one manifest per file); then every file is read back line by
line and decoded (what a follow-up batch does). Nothing is sent: the upload is measured
against the simulator by ``bench_bulk.py``.

Figures: seconds and requests/s of planning, writing and reading; peak RSS
(``ru_maxrss``) after each; the load average. And identity: the first ``--sample`` lines
(default 10,000) are written again by the code of ``--before-commit`` (``git archive``,
in a fresh interpreter) and every line's ``custom_id`` and body must equal today's.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_batch.py [--rows 1000000] [--sample 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, before_tree, write_results  # noqa: E402

SLICE = 50_000
MODEL = "openai/gpt-4o-mini"
MAPPING = {"input": "question", "context": "docs"}
#: main before batch lines were written from a template (issue 25).
BEFORE_COMMIT = "b064a18"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def frame(ids: range) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question": [f"How do I configure feature {i} of the product?" for i in ids],
            "docs": [
                [f"Feature {i} is configured in Settings > Advanced.", f"Release note {i % 97}."]
                for i in ids
            ],
        }
    )


class Lines:
    """``(key, messages, shape)`` of ``rows`` distinct rows, planned a slice at a time
    through the engine (only framekit names that the before tree has too)."""

    def __init__(self, rows: int, executor: Any) -> None:
        self.rows, self.executor = rows, executor
        self.plan_s = 0.0
        self.plan_mb = 0.0

    def __iter__(self) -> Iterator[tuple[str, list[dict[str, Any]], Any]]:
        from framekit.engine.plan import ChatPlan
        from framekit.engine.prepare import prepare
        from framekit.evaluators import RetrievalRelevance
        from framekit.judges.resolve import JudgeResolver

        resolver = JudgeResolver(self.executor.judge)
        shapes = self.executor.shapes
        for start in range(0, self.rows, SLICE):
            t0 = time.perf_counter()
            df = frame(range(start, min(self.rows, start + SLICE)))
            prepared = asyncio.run(prepare(df, [RetrievalRelevance()], MAPPING, resolver))
            plan = ChatPlan(prepared)
            keys = list(plan)
            rendered = plan.requests(keys)
            for key, shape in rendered.shapes():  # the executor's first pass
                shapes[key] = self.executor._shape(shape)
            self.plan_s += time.perf_counter() - t0
            self.plan_mb = max(self.plan_mb, peak_mb())
            for key, request in rendered:
                yield key, request.messages, shapes[key]


def write(rows: int, workdir: Path) -> tuple[Any, list[Any], Lines]:
    """The batch files of ``rows`` requests, written by the framekit on ``sys.path``."""
    import framekit as fk
    from framekit.engine.batch import BatchExecutor
    from framekit.engine.cache import Cache
    from framekit.engine.stats import RunStats

    judge = fk.Judge(MODEL, api_key="sk-bench", batch=True)
    executor = BatchExecutor(judge, Cache(workdir / "cache"), RunStats())
    lines = Lines(rows, executor)
    return executor, executor.write_spools(lines, round_=0), lines


def sample(rows: int, out: Path) -> None:
    """``--write-sample``: the spool lines of the first ``rows`` requests, to ``out``."""
    with tempfile.TemporaryDirectory(prefix="fk-bench-batch-sample-") as tmp:
        executor, manifests, _ = write(rows, Path(tmp))
        with out.open("wb") as handle:
            for m in manifests:
                handle.write(executor.store.spool_of(m).read_bytes())


def identity(rows: int, commit: str, workdir: Path) -> dict[str, Any]:
    """Every line of the first ``rows`` requests, before and today: same bytes, and (the
    figure the issue asks for) the same ``custom_id`` and body."""
    before_root = workdir / "before"
    before_root.mkdir()
    commits = before_tree(commit, before_root)
    written: dict[str, list[bytes]] = {}
    for side, path in (("before", before_root), ("today", ROOT)):
        out = workdir / f"{side}.jsonl"
        env = {**os.environ, "PYTHONPATH": str(path), "LITELLM_OFFLINE_MODE": "true"}
        script = (
            "import sys, framekit; from pathlib import Path; "
            f"assert Path(framekit.__file__).is_relative_to({str(path)!r}); "
            f"sys.path.insert(0, {str(ROOT)!r}); from benchmarks import bench_batch; "
            f"bench_batch.sample({rows}, Path({str(out)!r}))"
        )
        subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=workdir)
        written[side] = out.read_bytes().splitlines()
    before, today = written["before"], written["today"]
    same_bytes = sum(a == b for a, b in zip(before, today))
    same_id_body = 0
    for a, b in zip(before, today):
        old, new = json.loads(a), json.loads(b)
        same_id_body += old["custom_id"] == new["custom_id"] and old["body"] == new["body"]
    return {
        **commits,
        "sample_lines": len(today),
        "before_lines": len(before),
        "same_custom_id_and_body": same_id_body,
        "same_bytes": same_bytes,
        "identical": len(before) == len(today) == rows == same_id_body == same_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=10_000, help="lines compared (0: none)")
    parser.add_argument("--before-commit", default=BEFORE_COMMIT)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    workdir = Path(tempfile.mkdtemp(prefix="fk-bench-batch-"))
    try:
        load_before = os.getloadavg()[0]
        start_mb = peak_mb()
        t0, cpu0 = time.perf_counter(), time.process_time()
        executor, manifests, lines = write(args.rows, workdir)
        total_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
        write_s, write_mb = total_s - lines.plan_s, peak_mb()
        sizes = [executor.store.spool_of(m).stat().st_size for m in manifests]

        t0 = time.perf_counter()
        read = 0
        for m in manifests:
            with open(executor.store.spool_of(m), "rb") as handle:
                for line in handle:
                    read += executor.client.decode(line) is not None
        read_s = time.perf_counter() - t0
        assert read == args.rows == sum(len(m.keys) for m in manifests)
        load_after = os.getloadavg()[0]
        for m in manifests:  # gigabytes of spools: gone before the sample runs
            executor.store.drop_spool(m)
        same = (
            identity(min(args.sample, args.rows), args.before_commit, workdir)
            if args.sample
            else None
        )

        write_results(
            "batch" if args.rows == 1_000_000 else f"batch-{args.rows}",
            {
                "requests": args.rows,
                "files": len(manifests),
                "max_requests_per_file": max(len(m.keys) for m in manifests),
                "max_file_mb": round(max(sizes) / 2**20, 1),
                "total_mb": round(sum(sizes) / 2**20, 1),
                "plan_s": round(lines.plan_s, 1),
                "write_s": round(write_s, 1),
                "plan_and_write_cpu_s": round(cpu_s, 1),
                "read_s": round(read_s, 1),
                "plan_requests_per_s": round(args.rows / lines.plan_s),
                "write_requests_per_s": round(args.rows / write_s),
                "read_requests_per_s": round(args.rows / read_s),
                "peak_rss_mb": {
                    "before": round(start_mb),
                    "after_plan": round(lines.plan_mb),
                    "after_write": round(write_mb),
                    "after_read": round(peak_mb()),
                },
                "peak_rss_under_1gb": peak_mb() < 1024,
                "load_1m": {"before": round(load_before, 2), "after": round(load_after, 2)},
                "identity_with_before": same,
            },
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
