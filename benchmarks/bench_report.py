"""The HTML report of a large scored table: its size and how long it takes to write.

    python benchmarks/bench_report.py [--rows 100000]

A synthetic scored table (two strategies, paired by question id, two evaluators, 2% failed
rows, a label and an explanation per row, input and output text) is reported three ways,
in one process:

- ``summary``: ``fk.summarize`` alone (the floor: the bootstrap intervals);
- ``report``: ``write_html_report`` with ``by``/``on`` (comparison, charts, rows to look at);
- ``report_by_question_id``: grouped by a column with 50,000 values (capped at 30 groups,
  with a note, no pairwise comparison);
- ``report_1pct``: the same report over a table of 1/100 of the rows.

The size claim: the page holds summaries and a capped drill-down (failed rows capped at
50, lowest-scored at 20 per evaluator), so it grows with evaluators and groups, not rows:
``size_ratio_full_to_1pct`` stays near 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import write_results  # noqa: E402
from framekit.analysis import summarize, write_html_report  # noqa: E402


def scored_table(rows: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    half = rows // 2
    columns: dict[str, object] = {
        "question_id": np.tile(np.arange(half), 2),
        "strategy": ["bm25"] * half + ["dense"] * half,
        "question": [f"How do I do task number {i % half}?" for i in range(2 * half)],
        "answer": [f"You do task {i % half} by following steps {i % 13}." for i in range(2 * half)],
    }
    for name, shift in (("retrieval_relevance", 0.0), ("coherence", 0.05)):
        score = np.clip(rng.normal(0.6 + shift, 0.2, 2 * half), 0, 1).round(2)
        failed = rng.random(2 * half) < 0.02
        columns[f"{name}_score"] = np.where(failed, np.nan, score)
        columns[f"{name}_label"] = np.where(score >= 0.5, "relevant", "irrelevant")
        columns[f"{name}_explanation"] = [f"cosine {s:.2f} to the best document" for s in score]
        columns[f"{name}_passed"] = score >= 0.5
        columns[f"{name}_error"] = pl.Series(
            [("judge timed out after 60s" if f else None) for f in failed], dtype=pl.String
        )
    frame = pl.DataFrame(columns).with_columns(pl.col("^.*_score$").fill_nan(None))
    names = ("retrieval_relevance", "coherence")
    return frame.with_columns(
        [
            pl.when(pl.col(f"{n}_error").is_not_null()).then(None).otherwise(pl.col(c)).alias(c)
            for n in names
            for c in (f"{n}_label", f"{n}_passed", f"{n}_explanation")
        ]
    )


def timed_report(frame: pl.DataFrame, path: Path, by: str = "strategy") -> tuple[float, int]:
    started = time.perf_counter()
    write_html_report(frame, path, by=by, on="question_id" if by == "strategy" else None)
    return time.perf_counter() - started, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    frame = scored_table(args.rows)
    started = time.perf_counter()
    summarize(frame, by="strategy")
    summary_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        full_s, full_bytes = timed_report(frame, Path(tmp) / "full.html")
        many_s, many_bytes = timed_report(frame, Path(tmp) / "many.html", by="question_id")
        small_s, small_bytes = timed_report(
            scored_table(args.rows // 100), Path(tmp) / "small.html"
        )
    figures = {
        "rows": frame.height,
        "evaluators": 2,
        "summary_by_strategy_s": round(summary_s, 3),
        "report_s": round(full_s, 3),
        "report_bytes": full_bytes,
        "report_1pct_rows": frame.height // 100,
        "report_1pct_s": round(small_s, 3),
        "report_1pct_bytes": small_bytes,
        "report_by_question_id_groups": frame.get_column("question_id").n_unique(),
        "report_by_question_id_s": round(many_s, 3),
        "report_by_question_id_bytes": many_bytes,
        "size_ratio_full_to_1pct": round(full_bytes / small_bytes, 3),
        "time_ratio_report_to_summary": round(full_s / summary_s, 2),
    }
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(f"wrote {write_results('report', figures)}")


if __name__ == "__main__":
    main()
