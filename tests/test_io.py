"""``fk.evaluate_parquet``: streamed, atomic, resumable scoring of Parquet files."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit import io
from framekit._result_columns import result_columns
from framekit.evaluators import RetrievalRelevance
from framekit.io import _evaluate  # the slice loop, where evaluate_with_stats is called

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"input": "question", "context": "docs"}


def sim_judge(sim: Any, **options: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test", **options)


def write_input(path: Path, n: int, distinct: int, row_group_size: int | None = None) -> Path:
    """``n`` rows whose (question, docs) pairs repeat every ``distinct`` rows."""
    frame = pl.DataFrame(
        {
            "row_id": list(range(n)),
            "question": [f"What is item {i % distinct}?" for i in range(n)],
            "docs": [[f"Item {i % distinct} is a thing.", "Unrelated."] for i in range(n)],
            "meta": [{"user": f"u{i % 7}", "turn": i % 3} for i in range(n)],
            "payload": [f"unused column {i}" for i in range(n)],
        }
    )
    frame.write_parquet(path, row_group_size=row_group_size)
    return path


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_output_equals_evaluate_dataframe_over_several_slices(tmp_path, judge_simulator):
    src = write_input(tmp_path / "in.parquet", 250, 40)
    dest = tmp_path / "out.parquet"
    judge = sim_judge(judge_simulator)
    run = fk.evaluate_parquet(
        src,
        dest,
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=tmp_path / "c",
        progress=False,
        slice_rows=60,
    )
    assert (run.rows, run.slices, run.skipped_slices, run.failed_rows) == (250, 5, 0, 0)
    assert run.stats.requests_sent == 40  # later slices are answered by the cache
    assert fk.last_run() is run.stats
    out = pl.read_parquet(dest)
    whole = fk.evaluate_dataframe(
        pl.read_parquet(src),
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=tmp_path / "c",
        progress=False,
    )
    assert out.equals(whole)
    assert out.columns[:5] == ["row_id", "question", "docs", "meta", "payload"]
    assert leftovers(tmp_path) == ["c", "in.parquet", "out.parquet"]  # parts removed


def test_glob_and_list_of_files_keep_file_then_row_order(tmp_path, judge_simulator):
    for k in range(3):
        part = pl.DataFrame(
            {
                "row_id": [k * 10 + i for i in range(10)],
                "question": [f"q{i}" for i in range(10)],
                "docs": ["d"] * 10,
            }
        )
        part.write_parquet(tmp_path / f"part-{k}.parquet")
    judge = sim_judge(judge_simulator)
    for source in (str(tmp_path / "part-*.parquet"), sorted(tmp_path.glob("part-*.parquet"))):
        dest = tmp_path / "out" / "scored.parquet"
        fk.evaluate_parquet(
            source, dest, RetrievalRelevance(), MAPPING, judge=judge, cache=False, progress=False
        )
        assert pl.read_parquet(dest)["row_id"].to_list() == list(range(30))


def test_only_needed_columns_are_read_for_scoring(monkeypatch, tmp_path, judge_simulator):
    src = write_input(tmp_path / "in.parquet", 30, 30)
    seen: list[list[str]] = []
    original = _evaluate.evaluate_with_stats

    async def spy(frame: pl.DataFrame, *args: Any, **kwargs: Any) -> Any:
        seen.append(frame.columns)
        return await original(frame, *args, **kwargs)

    monkeypatch.setattr(_evaluate, "evaluate_with_stats", spy)
    run = fk.evaluate_parquet(
        src,
        tmp_path / "o.parquet",
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert seen == [["question", "docs"]]
    assert pl.read_parquet(tmp_path / "o.parquet").columns[:5] == pl.read_parquet(src).columns
    assert run.rows == 30


def test_interrupted_run_resumes_and_a_changed_run_starts_over(
    monkeypatch, tmp_path, judge_simulator
):
    src = write_input(tmp_path / "in.parquet", 100, 100)
    dest = tmp_path / "out.parquet"
    judge = sim_judge(judge_simulator)
    original = _evaluate.evaluate_with_stats
    calls = {"n": 0}

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return await original(*args, **kwargs)

    monkeypatch.setattr(_evaluate, "evaluate_with_stats", flaky)
    options: dict[str, Any] = dict(judge=judge, cache=tmp_path / "c", progress=False, slice_rows=25)
    with pytest.raises(KeyboardInterrupt):
        fk.evaluate_parquet(src, dest, [RetrievalRelevance()], MAPPING, **options)
    assert not dest.exists()  # never a half-written destination
    parts = tmp_path / ".out.parquet.framekit-parts"
    assert sorted(p.name for p in parts.glob("part-*")) == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", original)
    sent = judge_simulator.stats()["chat"]

    run = fk.evaluate_parquet(src, dest, [RetrievalRelevance()], MAPPING, **options)
    assert (run.skipped_slices, run.skipped_rows) == (2, 50)
    assert judge_simulator.stats()["chat"] - sent == 50  # only the unfinished rows
    assert pl.read_parquet(dest)["row_id"].to_list() == list(range(100))
    assert not parts.exists()

    # A different evaluator configuration never reuses parts of another one.
    calls["n"] = 0
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", flaky)
    with pytest.raises(KeyboardInterrupt):
        fk.evaluate_parquet(src, dest, [RetrievalRelevance()], MAPPING, **options)
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", original)
    run = fk.evaluate_parquet(src, dest, [RetrievalRelevance(threshold=0.9)], MAPPING, **options)
    assert run.skipped_slices == 0
    assert run.stats.requests_sent == 0  # the threshold does not change the answers
    assert (
        pl.read_parquet(dest)["retrieval_relevance_passed"].sum()
        == (pl.read_parquet(dest)["retrieval_relevance_score"] >= 0.9).sum()
    )


KILLED_RUN = """
import sys
import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit._result_columns import result_columns
judge = fk.Judge("openai/sim", api_base=sys.argv[1], api_key="sk-test", concurrency=4)
fk.evaluate_parquet(sys.argv[2], sys.argv[3], [RetrievalRelevance()],
                    {"input": "question", "context": "docs"}, judge=judge,
                    cache=sys.argv[4], progress=False, slice_rows=100)
"""


def test_sigkill_mid_run_then_rerun_pays_at_most_in_flight_requests_twice(
    tmp_path, simulator_factory
):
    distinct, concurrency = 400, 4
    src = write_input(tmp_path / "in.parquet", 1200, distinct)
    dest, cache = tmp_path / "out.parquet", tmp_path / "cache"
    sim = simulator_factory(latency=0.02)
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(KILLED_RUN))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    proc = subprocess.Popen(
        [sys.executable, str(script), sim.api_base, str(src), str(dest), str(cache)],
        env=env,
        stderr=subprocess.PIPE,
    )
    parts = tmp_path / ".out.parquet.framekit-parts"
    deadline = time.monotonic() + 120
    while len(list(parts.glob("part-*.parquet"))) < 2:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the run never finished two slices"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = sim.stats()["chat"]
    assert 200 <= killed_at < distinct, "killed mid-way: some answers, not all"
    assert not dest.exists()

    run = fk.evaluate_parquet(
        src,
        dest,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(sim, concurrency=concurrency),
        cache=cache,
        progress=False,
        slice_rows=100,
    )
    out = pl.read_parquet(dest)
    assert out.height == 1200
    assert out["row_id"].to_list() == list(range(1200))  # every row once, in order
    assert out["retrieval_relevance_error"].null_count() == 1200
    assert run.skipped_slices >= 2
    assert sim.stats()["chat"] <= distinct + concurrency


@pytest.mark.parametrize(
    ("make_source", "message"),
    [
        (lambda d: d / "missing.parquet", "no such file"),
        (lambda d: d / "nothing-*.parquet", "no file matches"),
        (
            lambda d: (d / "notes.parquet").write_text("a,b\n1,2\n") and d / "notes.parquet",
            "is not a Parquet file",
        ),
    ],
)
def test_bad_sources_raise_before_anything_is_written(tmp_path, make_source, message):
    source = make_source(tmp_path)
    before = leftovers(tmp_path)
    with pytest.raises(fk.InputError, match=message):
        fk.evaluate_parquet(
            source,
            tmp_path / "out.parquet",
            [RetrievalRelevance()],
            MAPPING,
            judge="openai/never-called",
            cache=False,
        )
    assert leftovers(tmp_path) == before


def test_mapping_errors_name_the_problem_and_write_nothing(tmp_path):
    src = write_input(tmp_path / "in.parquet", 5, 5)
    for mapping, message in [
        ({"input": "question", "context": "documents"}, "no column 'documents'"),
        ({"input": "question"}, "needs field 'context'"),
    ]:
        with pytest.raises(fk.MappingError, match=message):
            fk.evaluate_parquet(
                src,
                tmp_path / "o.parquet",
                [RetrievalRelevance()],
                mapping,
                judge="openai/never-called",
                cache=False,
            )
    assert leftovers(tmp_path) == ["in.parquet"]


def test_result_columns_in_the_input_need_overwrite(tmp_path, judge_simulator):
    src = tmp_path / "in.parquet"
    pl.DataFrame(
        {"question": ["q"], "docs": ["d"], "retrieval_relevance_score": [0.5]}
    ).write_parquet(src)
    judge = sim_judge(judge_simulator)
    with pytest.raises(fk.InputError, match="already exists"):
        fk.evaluate_parquet(
            src, tmp_path / "o.parquet", RetrievalRelevance(), MAPPING, judge=judge, cache=False
        )
    fk.evaluate_parquet(
        src,
        tmp_path / "o.parquet",
        RetrievalRelevance(),
        MAPPING,
        judge=judge,
        cache=False,
        overwrite=True,
        progress=False,
    )
    out = pl.read_parquet(tmp_path / "o.parquet")
    assert out.columns == ["question", "docs", *result_columns([RetrievalRelevance()])]


def test_failed_rows_are_counted_and_on_error_raise_still_writes(tmp_path, judge_simulator):
    src = tmp_path / "in.parquet"
    pl.DataFrame({"question": ["q1", None, "q3"], "docs": ["d", "d", "d"]}).write_parquet(src)
    dest = tmp_path / "o.parquet"
    with pytest.raises(fk.EvaluationFailed, match="1 rows have errors") as info:
        fk.evaluate_parquet(
            src,
            dest,
            RetrievalRelevance(),
            MAPPING,
            on_error="raise",
            judge=sim_judge(judge_simulator),
            cache=False,
            progress=False,
        )
    errors = pl.read_parquet(dest)["retrieval_relevance_error"].to_list()
    assert errors[0] is None and "null" in errors[1] and errors[2] is None
    assert info.value.frame.collect().height == 3


def test_empty_input_gives_typed_empty_output(tmp_path):
    src = tmp_path / "in.parquet"
    pl.DataFrame(schema={"question": pl.String, "docs": pl.List(pl.String)}).write_parquet(src)
    run = fk.evaluate_parquet(
        src,
        tmp_path / "o.parquet",
        RetrievalRelevance(),
        MAPPING,
        judge="openai/never-called",
        cache=False,
        progress=False,
    )
    out = pl.read_parquet(tmp_path / "o.parquet")
    assert (run.rows, out.height) == (0, 0)
    assert out.schema["retrieval_relevance_score"] == pl.Float64
    assert out.schema["retrieval_relevance_passed"] == pl.Boolean


def test_one_progress_bar_counts_rows_across_slices(tmp_path, judge_simulator, capsys, monkeypatch):
    from framekit import _progress

    monkeypatch.setattr(_progress, "display_kind", lambda: "bar")  # as in a terminal
    src = write_input(tmp_path / "in.parquet", 90, 9)
    fk.evaluate_parquet(
        src,
        tmp_path / "o.parquet",
        RetrievalRelevance(),
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=False,
        slice_rows=30,
    )
    err = capsys.readouterr().err
    assert "90/90 rows" in err and not re.search(r"\d+\.\d+/90", err)  # whole rows
    assert "/30 rows" not in err  # no per-slice bars
    assert "wrote 90 rows" in err and "(3 slices)" in err


def test_a_duckdb_relation_is_streamed_like_a_file(tmp_path, judge_simulator):
    import duckdb

    src = write_input(tmp_path / "in.parquet", 50, 10)
    rel = duckdb.sql(f"select * from '{src}' where row_id % 2 = 0 order by row_id")
    run = fk.evaluate_parquet(
        rel,
        tmp_path / "o.parquet",
        RetrievalRelevance(),
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert run.rows == 25
    assert pl.read_parquet(tmp_path / "o.parquet")["row_id"].to_list() == list(range(0, 50, 2))
    assert leftovers(tmp_path) == ["in.parquet", "o.parquet"]  # the copy is gone


def test_slices_follow_row_groups_merging_small_and_splitting_large():
    assert io.plan_slices([(4000, 10), (4000, 10), (4000, 10)]) == [(0, 8000), (8000, 4000)]
    assert io.plan_slices([(150_000, 10**6)]) == [(0, 75_000), (75_000, 75_000)]
    # A row group too big in bytes is split even when its row count is modest.
    assert len(io.plan_slices([(50_000, 3 * io.MAX_SLICE_BYTES)])) == 3
    assert io.plan_slices([], slice_rows=10) == []


def test_a_hint_repeated_by_every_slice_is_said_once():
    from framekit.engine.stats import RunStats
    from framekit.io._run import ParquetRun, _add_stats

    run = ParquetRun(rows=4, slices=2, destination=Path("out.parquet"))
    for _ in range(2):
        _add_stats(run.stats, RunStats(requests_sent=2, hints=["use worker processes"],
                                       transports=["http"]))  # fmt: skip
    assert run.stats.requests_sent == 4
    assert run.stats.transports == ["http"]
    assert run.summary().count("framekit: hint: use worker processes") == 1
