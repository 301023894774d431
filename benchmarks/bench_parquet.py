"""Streaming a Parquet file larger than memory through ``fk.evaluate_parquet``.

1. Writes a ``--rows`` row Parquet file (default 2,000,000) in chunks: a question and
   three retrieved passages drawn from ``--distinct`` combinations, plus a unique
   free-text column, so the file is far larger in memory than the RSS limit.
2. Warms the response cache: a child process scores the distinct (question, docs) pairs
   against the judge simulator (a subprocess at 0 ms latency) through litellm.
3. Scores the whole file in another child process with the same judge and cache, and
   reports that process's peak RSS (``VmHWM``), rows/s, and what the simulator saw;
   then a quarter-size file the same way, to show the peak does not grow with the file.

Prints the figures and writes ``benchmarks/results/parquet.json``.

    python benchmarks/bench_parquet.py [--rows 2000000] [--distinct 5000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "parquet.json"
RSS_LIMIT_MB = 1024
CHUNK = 100_000  # rows per generated chunk, and per row group

# Runs in a child: its own peak RSS is the figure, undisturbed by the generator. VmHWM is
# the high-water mark of this process's own memory since exec; ru_maxrss is not: Linux
# carries over the RSS of the forked copy of the parent, which here is the generator.
SCORE = """
import json, resource, sys, time

def peak_rss_mb():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

import framekit as fk
from framekit.evaluators import RetrievalRelevance
api_base, source, destination, cache = sys.argv[1:5]
judge = fk.Judge("openai/sim", api_base=api_base, api_key="sk-bench", concurrency=32)
started = time.perf_counter()
run = fk.evaluate_parquet(source, destination, [RetrievalRelevance()],
                          {"input": "question", "context": "docs"}, judge=judge, cache=cache,
                          progress=False)
elapsed = time.perf_counter() - started
print(json.dumps({
    "elapsed_s": elapsed,
    "rows": run.rows,
    "slices": run.slices,
    "failed_rows": run.failed_rows,
    "requests_sent": run.stats.requests_sent,
    "cache_hits": run.stats.cache_hits,
    "peak_rss_mb": peak_rss_mb(),
}))
"""

WARM = """
import json, resource, sys, time
import polars as pl
import framekit as fk
from framekit.evaluators import RetrievalRelevance
api_base, source, cache = sys.argv[1:4]
pairs = pl.scan_parquet(source).select("question", "docs").unique(maintain_order=True).collect()
judge = fk.Judge("openai/sim", api_base=api_base, api_key="sk-bench", concurrency=32)
started = time.perf_counter()
fk.evaluate_dataframe(pairs, [RetrievalRelevance()], {"input": "question", "context": "docs"},
                      judge=judge, cache=cache, progress=False)
elapsed = time.perf_counter() - started
stats = fk.last_run()
print(json.dumps({"distinct_pairs": pairs.height, "elapsed_s": elapsed,
                  "requests_sent": stats.requests_sent,
                  "requests_per_s": stats.requests_sent / elapsed}))
"""


def generate(path: Path, rows: int, distinct: int) -> dict[str, Any]:
    """Write the input in ``CHUNK``-row pieces so generating it needs little memory."""
    import polars as pl
    import pyarrow.parquet as pq

    topics = ["billing", "passwords", "shipping", "refunds", "storage", "sync", "sharing"]
    writer: pq.ParquetWriter | None = None
    for start in range(0, rows, CHUNK):
        n = min(CHUNK, rows - start)
        k = pl.col("row_id") % distinct
        frame = pl.select(row_id=pl.int_range(start, start + n)).with_columns(
            topic=(k % len(topics)).replace_strict(dict(enumerate(topics)), return_dtype=pl.String),
            question=pl.format("How do I fix problem {} with my account after the update?", k),
            docs=pl.concat_list(
                pl.format(
                    "Passage {}: to repair an account after an update, open Settings, choose "
                    "Account, then Repair; the repair keeps your files and signs you out of "
                    "other devices, which you can sign back into at any time.",
                    k,
                ),
                pl.format(
                    "Passage {}-b: the release notes of each version list the known issues, "
                    "their workarounds and the version that fixes them, newest first.",
                    k,
                ),
                pl.format(
                    "Passage {}-c: if nothing helps, contact support with your ticket number "
                    "and the time the problem started; replies take about one business day.",
                    k,
                ),
            ),
            # Unique per row, never scored: it makes the file large in memory.
            log=pl.format(
                "free-text log line {} from session {} with a user agent string and timing "
                "details that make every row unique and the whole file large in memory",
                pl.col("row_id"),
                (pl.col("row_id") * 7919) % 1_000_003,
            ),
        )
        table = frame.to_arrow(compat_level=pl.CompatLevel.oldest())
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=CHUNK)
    assert writer is not None
    writer.close()
    meta = pq.read_metadata(path)
    in_memory = frame.estimated_size() * rows / n
    uncompressed = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return {
        "rows": meta.num_rows,
        "row_groups": meta.num_row_groups,
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "uncompressed_mb": round(uncompressed / 2**20, 1),
        "in_memory_mb": round(in_memory / 2**20),  # as one polars DataFrame
        "columns": pq.read_schema(path).names,
    }


def child(script: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--distinct", type=int, default=5_000)
    parser.add_argument("--keep", type=Path, help="work directory to keep (default: temporary)")
    parser.add_argument("--no-write", action="store_true", help="do not write results/")
    args = parser.parse_args()

    import polars as pl

    from framekit.testing import SimulatorConfig, SimulatorProcess

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="framekit-bench-parquet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source, dest, cache = workdir / "input.parquet", workdir / "scored.parquet", workdir / "cache"
    started = time.perf_counter()
    data = generate(source, args.rows, args.distinct)
    data["generate_s"] = round(time.perf_counter() - started, 1)
    print(f"input: {json.dumps(data)}", file=sys.stderr)

    # A quarter-size file too: peak RSS should not depend on the file's size.
    small, small_dest = workdir / "input-quarter.parquet", workdir / "scored-quarter.parquet"
    generate(small, args.rows // 4, args.distinct)

    with SimulatorProcess(SimulatorConfig(latency=0.0)) as sim:
        warm = child(WARM, sim.api_base, str(source), str(cache))
        print(f"warm-up: {json.dumps(warm)}", file=sys.stderr)
        sim.reset()
        scoring = child(SCORE, sim.api_base, str(source), str(dest), str(cache))
        scoring["simulator_requests"] = sim.stats()["total"]
        quarter = child(SCORE, sim.api_base, str(small), str(small_dest), str(cache))

    out = pl.scan_parquet(dest)
    check = (
        out.select(
            pl.len().alias("rows"),
            pl.col("row_id").n_unique().alias("unique_ids"),
            pl.col("retrieval_relevance_score").null_count().alias("null_scores"),
        )
        .collect()
        .row(0, named=True)
    )
    scoring["rows_per_s"] = round(scoring["rows"] / scoring["elapsed_s"])
    scoring["output_rows"], scoring["output_unique_row_ids"] = check["rows"], check["unique_ids"]
    scoring["output_null_scores"] = check["null_scores"]
    scoring["output_columns"] = list(out.collect_schema())
    passed = (
        scoring["peak_rss_mb"] < RSS_LIMIT_MB
        and check["rows"] == check["unique_ids"] == args.rows
        and check["null_scores"] == 0
        and scoring["simulator_requests"] == 0
    )
    figures = {
        "benchmark": "evaluate_parquet: 2M rows, streamed",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "polars": pl.__version__,
            "date": time.strftime("%Y-%m-%d"),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
        "input": data,
        "warm_up": warm,
        "scoring": scoring,
        "peak_rss_mb_by_rows": {
            str(quarter["rows"]): round(quarter["peak_rss_mb"]),
            str(scoring["rows"]): round(scoring["peak_rss_mb"]),
        },
        "peak_rss_limit_mb": RSS_LIMIT_MB,
        "passed": passed,
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text + "\n")
    if args.keep is None:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
