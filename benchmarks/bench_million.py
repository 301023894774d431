"""``framekit evaluate`` of a 1,000,000-row Parquet file, every row distinct (issue 25).

The command line as a user runs it: RetrievalRelevance over a Parquet file of N distinct
(question, docs) rows, against the judge simulator at 0 ms latency (a subprocess, so its
CPU is not framekit's), concurrency 256, HTTP transport, a fresh cache, the scored
Parquet written. Recorded: rows/s, the framekit process's peak RSS and CPU per row (from
its own resource usage), and, in the same run against the same simulator, the rows/s of
a bare aiohttp loop posting the same kind of request (framekit's prompt sizes, the answer
schema, logprobs) at the same concurrency over ``--bare-rows`` requests (a rate: the
bare loop's pace does not depend on the row count). The load average is recorded before
and after: the machine is shared, and the simulator shares its two cores.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_million.py [--rows 1000000]
        [--bare-rows 100000] [--concurrency 256]

Writes benchmarks/results/million.json (another ``--rows`` writes million-<rows>.json).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import polars as pl  # noqa: E402

from benchmarks._common import write_results  # noqa: E402
from benchmarks.bench_bulk import _bare_chat  # noqa: E402
from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def write_source(rows: int, path: Path) -> None:
    """``rows`` distinct rows, written in row groups of 100,000 (as an export would be)."""
    ids = pl.int_range(0, rows, eager=True)
    frame = pl.DataFrame({"row_id": ids}).with_columns(
        question=pl.format("What is item {} of the catalogue?", pl.col("row_id")),
        docs=pl.concat_list(
            pl.format("Item {} is a thing.", pl.col("row_id")), pl.lit("Unrelated text.")
        ),
    )
    frame.write_parquet(path, row_group_size=100_000)


def run_cli(source: Path, workdir: Path, api_base: str, concurrency: int) -> dict[str, Any]:
    """The command, as a child process; its wall time and its own resource usage."""
    command = [
        sys.executable, "-m", "framekit.cli", "evaluate", str(source),
        "-e", "retrieval_relevance", "--map", "input=question", "--map", "context=docs",
        "--judge", "openai/sim", "--api-base", api_base, "--api-key-env", "SIM_KEY",
        "--concurrency", str(concurrency), "--cache", str(workdir / "cache"),
        "-o", str(workdir / "scored.parquet"), "-q",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIM_KEY": "sk-bench"}
    env.pop("FRAMEKIT_JUDGE", None)
    wall = time.perf_counter()
    proc = subprocess.Popen(command, cwd=workdir, env=env, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    # wait4: this child's own usage (peak RSS, CPU), not the simulator's.
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - wall
    stderr = proc.stderr.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, stderr[-2000:]
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "stderr_tail": stderr.strip().splitlines()[-3:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--bare-rows", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fk-bench-million-") as tmp:
        workdir = Path(tmp)
        source = workdir / "rows.parquet"
        write_source(args.rows, source)
        with JudgeSimulator.subprocess(SimulatorConfig(latency=0.0)) as sim:
            url = sim.api_base + "/chat/completions"
            asyncio.run(_bare_chat(500, url, args.concurrency))  # warm the simulator
            bare_wall = time.perf_counter()
            asyncio.run(_bare_chat(args.bare_rows, url, args.concurrency))
            bare_wall = time.perf_counter() - bare_wall
            print(f"bare: {args.bare_rows / bare_wall:.0f} rows/s", file=sys.stderr, flush=True)
            before = sim.stats()["chat"]
            ours = run_cli(source, workdir, sim.api_base, args.concurrency)
            calls = sim.stats()["chat"] - before
        scored = pl.scan_parquet(workdir / "scored.parquet")
        counts = scored.select(
            rows=pl.len(), failed=pl.col("retrieval_relevance_error").is_not_null().sum()
        ).collect()
    rows = int(counts["rows"][0])
    assert rows == args.rows, f"{rows} rows scored of {args.rows}"
    figures = {
        "rows": args.rows,
        "distinct": args.rows,
        "concurrency": args.concurrency,
        "latency_ms": 0,
        "rows_failed": int(counts["failed"][0]),
        "framekit_wall_s": round(ours["wall_s"], 1),
        "framekit_rows_per_s": round(args.rows / ours["wall_s"]),
        "framekit_cpu_ms_per_row": round(ours["cpu_s"] / args.rows * 1000, 3),
        "framekit_peak_rss_mb": round(ours["peak_rss_mb"]),
        "bare_rows": args.bare_rows,
        "bare_rows_per_s": round(args.bare_rows / bare_wall),
        "framekit_over_bare_rows_per_s": round(
            args.rows / ours["wall_s"] * bare_wall / args.bare_rows, 2
        ),
        "framekit_chat_calls": calls,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "framekit_stderr_tail": ours["stderr_tail"],
    }
    name = "million" if args.rows == 1_000_000 else f"million-{args.rows}"
    write_results(name, figures)


if __name__ == "__main__":
    main()
