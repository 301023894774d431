"""DuckDB in and out: relations and SQL as inputs, scored frames and files as views."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

import framekit as fk
from framekit import io
from framekit.evaluators import RetrievalRelevance

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"input": "question", "context": "docs"}


def sim_judge(sim: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    path = tmp_path / "runs.parquet"
    pl.DataFrame(
        {
            "row_id": list(range(12)),
            "strategy": ["bm25", "dense"] * 6,
            "question": [f"What is item {i // 2}?" for i in range(12)],
            "docs": [[f"Item {i // 2} is a thing."] for i in range(12)],
        }
    ).write_parquet(path)
    return path


def test_a_relation_is_scored_in_memory_and_comes_back_as_polars(runs, judge_simulator):
    con = duckdb.connect()
    rel = con.sql(f"select * from '{runs}' where strategy = 'dense' order by row_id")
    scored = fk.evaluate_dataframe(
        rel,
        RetrievalRelevance(),
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert isinstance(scored, pl.DataFrame)
    assert scored["row_id"].to_list() == [1, 3, 5, 7, 9, 11]
    assert scored["retrieval_relevance_error"].null_count() == 6


def test_evaluate_sql_uses_the_connection_and_its_views(tmp_path, runs, judge_simulator):
    con = duckdb.connect()
    io.register(con, "runs", runs)
    run = fk.evaluate_sql(
        "select row_id, question, docs from runs where strategy = 'bm25' order by row_id",
        tmp_path / "bm25.parquet",
        RetrievalRelevance(),
        MAPPING,
        con=con,
        judge=sim_judge(judge_simulator),
        cache=tmp_path / "cache",
        progress=False,
    )
    assert run.rows == 6
    out = pl.read_parquet(tmp_path / "bm25.parquet")
    assert out["row_id"].to_list() == [0, 2, 4, 6, 8, 10]
    assert out.columns[:3] == ["row_id", "question", "docs"]
    # The same query again resumes nothing (it finished) and pays nothing (cached).
    again = fk.evaluate_sql(
        "select row_id, question, docs from runs where strategy = 'bm25' order by row_id",
        tmp_path / "bm25.parquet",
        RetrievalRelevance(),
        MAPPING,
        con=con,
        judge=sim_judge(judge_simulator),
        cache=tmp_path / "cache",
        progress=False,
    )
    assert again.stats.requests_sent == 0 and again.stats.cache_hits == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bm25.parquet", "cache", "runs.parquet"]


def test_register_a_scored_frame_a_file_and_a_list_of_files(tmp_path, runs):
    con = duckdb.connect()
    scored = pl.DataFrame({"strategy": ["a", "a", "b"], "coherence_score": [1.0, 0.5, 0.25]})
    io.register(con, "scored", scored)
    rows = con.sql("select strategy, avg(coherence_score) from scored group by 1 order by 1")
    assert rows.fetchall() == [("a", 0.75), ("b", 0.25)]

    io.register(con, "runs", runs)
    assert con.sql("select count(*) from runs").fetchall() == [(12,)]
    io.register(con, "twice", [runs, str(runs)])
    assert con.sql("select count(*) from twice").fetchall() == [(24,)]
    io.register(con, "runs", scored)  # names can be reused
    assert con.sql("select count(*) from runs").fetchall() == [(3,)]
    with pytest.raises(fk.InputError, match="no such file"):
        io.register(con, "gone", tmp_path / "gone.parquet")


ZERO_COPY = """
import json, sys
import duckdb, polars as pl
from framekit import io

def rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

n = 1_000_000
scored = pl.select(i=pl.int_range(n)).select(
    explanation=pl.format("The answer explains step {} of the procedure in detail.", "i"),
    coherence_label=pl.lit("Generally Yes"),
    coherence_score=pl.col("i").cast(pl.Float64) / n,
)
con = duckdb.connect()
con.register("warm", pl.DataFrame({"a": ["x"]}).to_arrow()); con.sql("select * from warm").fetchall()
before = rss_mb()
io.register(con, "scored", scored)
con.sql("select sum(length(explanation)), avg(coherence_score) from scored").fetchall()
after = rss_mb()
print(json.dumps({"frame_mb": scored.estimated_size() / 2**20, "growth_mb": after - before}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc for RSS")
def test_register_hands_a_frame_to_duckdb_without_copying_it(tmp_path):
    script = tmp_path / "zero_copy.py"
    script.write_text(textwrap.dedent(ZERO_COPY))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["frame_mb"] > 20
    # A copy would add about the frame's size; sharing adds DuckDB's working memory only.
    assert measured["growth_mb"] < 0.25 * measured["frame_mb"], measured
