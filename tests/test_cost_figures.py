"""Cost per 1,000 rows, and what dedup, the cache, batch mode and the provider's prompt
cache each saved (issue 42), counted against the simulator's own token counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ClassificationEvaluator, RetrievalRelevance
from framekit.testing import JudgeSimulator
from tests.helpers import API_KEY, MAPPING, retrieval_frame

PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
RUBRIC = "Check the reply against the house style guide, rule by rule. " * 80 + "\n{input}"


def cost_of(counts: dict[str, Any]) -> float:
    cached = counts["cached_tokens"]
    dollars = (
        (counts["prompt_tokens"] - cached) * PRICE["input"]
        + cached * PRICE["cached_input"]
        + counts["completion_tokens"] * PRICE["output"]
    )
    return dollars / 1e6


@pytest.fixture
def sim():
    with JudgeSimulator() as s:
        yield s


def judge(sim: JudgeSimulator, **options: Any) -> fk.Judge:
    return fk.Judge(
        "openai/sim-judge", api_base=sim.api_base, api_key=API_KEY, price=PRICE, **options
    )


def test_dedup_and_the_cache_are_priced_and_the_cost_per_1000_rows_is_the_cost_per_row(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # 40 rows, 10 distinct: 10 requests, 30 rows answered by another row's request.
    df = retrieval_frame(40, distinct=10)
    fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge(sim), cache=tmp_path / "c",
        progress=False,
    )  # fmt: skip
    assert sim.stats()["chat"] == 10
    paid = cost_of(sim.stats())
    run = fk.last_run()
    assert run is not None and run.cost_usd == pytest.approx(paid, rel=0.03)
    figures = run.cost_figures()
    assert figures["cost_per_1000_rows_usd"] == pytest.approx(run.cost_usd / 40 * 1000, rel=1e-4)
    # Each of the 30 duplicates at the average cost of the 10 answers paid.
    assert figures["saved_usd"]["dedup"] == pytest.approx(3 * run.cost_usd, rel=1e-4)
    assert figures["saved_usd"]["cache"] == 0.0
    assert "per 1,000 rows; saved $" in run.summary() and "by dedup" in run.summary()
    first_cost = run.cost_usd

    # The re-run pays nothing: the cache saved what the 10 answers cost when first paid.
    fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge(sim), cache=tmp_path / "c",
        progress=False,
    )  # fmt: skip
    assert sim.stats()["chat"] == 10
    again = fk.last_run()
    assert again is not None
    figures = again.cost_figures()
    assert figures["cost_per_1000_rows_usd"] == 0.0
    assert figures["saved_usd"]["cache"] == pytest.approx(first_cost, rel=1e-4)
    assert figures["saved_usd"]["dedup"] == pytest.approx(3 * first_cost, rel=1e-4)
    assert again.provenance is not None and again.provenance["cost"] == figures


def test_cached_prompt_tokens_saved_the_difference_between_the_input_and_cached_rates(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    style = ClassificationEvaluator("style", RUBRIC, {"yes": 1.0, "no": 0.0})
    df = pl.DataFrame({"input": [f"Reply number {i} to the customer." for i in range(12)]})
    fk.evaluate_dataframe(
        df, [style], judge=judge(sim, concurrency=1), cache=tmp_path / "c", progress=False
    )
    cached = sim.stats()["cached_tokens"]
    assert cached >= 11 * 1024
    run = fk.last_run()
    assert run is not None
    saved = run.cost_figures()["saved_usd"]["prompt_cache"]
    assert saved == pytest.approx(cached * (PRICE["input"] - PRICE["cached_input"]) / 1e6, rel=1e-4)
    assert "by cached prompt tokens" in run.summary()


def test_the_parquet_footer_and_the_report_carry_the_cost_figures(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    source = tmp_path / "in.parquet"
    retrieval_frame(30, distinct=10).write_parquet(source)
    run = fk.evaluate_parquet(
        source, tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING, judge=judge(sim),
        cache=tmp_path / "c", progress=False, slice_rows=10,
    )  # fmt: skip
    record = fk.io.read_provenance(tmp_path / "out.parquet")
    cost = record["cost"]
    assert cost["cost_per_1000_rows_usd"] == pytest.approx(run.stats.cost_usd / 30 * 1000, rel=1e-3)
    # Slices of 10 distinct rows each: the first pays, the other two read its answers.
    assert sim.stats()["chat"] == 10
    assert cost["saved_usd"]["cache"] == pytest.approx(2 * run.stats.cost_usd, rel=1e-3)
    assert "per 1,000 rows" in run.summary()
    page = fk.write_html_report(
        pl.read_parquet(tmp_path / "out.parquet"), tmp_path / "r.html", provenance=record
    ).read_text()
    assert "cost per 1,000 rows" in page and "answers from framekit&#x27;s cache" in page


def test_framekit_report_prints_the_cost_figures_of_the_run_record(
    sim: JudgeSimulator, tmp_path: Path, capsys: Any
) -> None:
    from framekit.cli import main

    source = tmp_path / "in.parquet"
    retrieval_frame(20, distinct=5).write_parquet(source)
    fk.evaluate_parquet(
        source, tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING, judge=judge(sim),
        cache=tmp_path / "c", progress=False,
    )  # fmt: skip
    per_1000 = fk.last_run().cost_figures()["cost_per_1000_rows_usd"]
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out.parquet")]) == 0
    out = capsys.readouterr().out
    assert f"cost per 1,000 rows: ${per_1000:.4f}; saved: $" in out
    assert "by identical requests sent once" in out
