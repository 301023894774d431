"""A budget that holds (issue 42): ``max_cost_usd`` / ``--max-cost``.

Every figure is counted at the simulator: what a budget run paid (its token counts at the
price given), how many requests it sent, and that a re-run with a higher budget sends
exactly the rows the first one left.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.cli.main import main
from framekit.engine.budget import BUDGET_REACHED, budget_error
from framekit.evaluators import RetrievalRelevance
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import API_KEY, MAPPING, RETRIEVAL_CLI_ARGS, retrieval_frame

PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
ROWS = 40
CONCURRENCY = 4
#: A short answer budget, so that a request's reservation is near what it costs.
MAX_TOKENS = 200


def cost_of(counts: dict[str, Any], price: dict[str, float] = PRICE) -> float:
    """What the simulator's token counts cost at ``price`` (US dollars per million)."""
    cached = counts["cached_tokens"]
    fresh = counts["prompt_tokens"] - cached
    dollars = (
        fresh * price["input"]
        + cached * price["cached_input"]
        + counts["completion_tokens"] * price["output"]
    )
    return dollars / 1e6


@pytest.fixture
def sim():
    with JudgeSimulator(SimulatorConfig(batch_seconds=0.1)) as s:
        yield s


def judge(sim: JudgeSimulator, **options: Any) -> fk.Judge:
    options.setdefault("price", PRICE)
    options.setdefault("concurrency", CONCURRENCY)
    return fk.Judge(
        "openai/sim-judge",
        api_base=sim.api_base,
        api_key=API_KEY,
        max_tokens=MAX_TOKENS,
        **options,
    )


def score(
    sim: JudgeSimulator,
    cache: Path,
    budget: float | None,
    df: pl.DataFrame | None = None,
    transport: str = "auto",
):
    out = fk.evaluate_dataframe(
        retrieval_frame(ROWS) if df is None else df,
        [RetrievalRelevance()],
        MAPPING,
        judge=judge(sim, transport=transport),
        cache=cache,
        progress=False,
        max_cost_usd=budget,
    )
    assert isinstance(out, pl.DataFrame)
    return out


def one_request_cost(sim: JudgeSimulator, tmp_path: Path) -> float:
    """What one request of this workload costs at the simulator (the most of a few)."""
    with JudgeSimulator() as other:
        fk.evaluate_dataframe(
            retrieval_frame(4),
            [RetrievalRelevance()],
            MAPPING,
            judge=judge(other, concurrency=1),
            cache=False,
            progress=False,
        )
        counts = other.stats()
        assert counts["chat"] == 4
        return cost_of(counts) / 4 * 1.2  # rows differ by a few characters


@pytest.mark.parametrize("transport", ["http", "litellm"])
def test_a_budget_run_spends_at_most_the_budget_and_leaves_the_rest_resumable(
    sim: JudgeSimulator, tmp_path: Path, transport: str
) -> None:
    per_request = one_request_cost(sim, tmp_path)
    budget = 12 * per_request
    out = score(sim, tmp_path / "cache", budget, transport=transport)
    counts = sim.stats()
    sent = counts["chat"]
    paid = cost_of(counts)
    # Spent (counted at the simulator) within the budget plus one concurrency's worth.
    assert paid <= budget + CONCURRENCY * per_request
    assert 0 < sent < ROWS
    run = fk.last_run()
    assert run is not None and run.cost_usd == pytest.approx(paid, rel=0.03)
    errors = out["retrieval_relevance_error"]
    left = errors.str.starts_with(BUDGET_REACHED).fill_null(False)
    assert int(left.sum()) == ROWS - sent == run.rows_left
    assert errors.filter(left).unique().to_list() == [budget_error(budget)]
    # Rows answered have a score; rows left have none (never a 0 for a failure).
    assert out.filter(left)["retrieval_relevance_score"].null_count() == ROWS - sent
    assert out.filter(~left)["retrieval_relevance_score"].null_count() == 0
    summary = run.summary()
    assert f"budget: ${run.cost_usd:.4f} spent of ${budget:.4f}" in summary
    assert f"{ROWS - sent} rows left unscored" in summary
    record = run.provenance
    assert record is not None and record["cost"]["budget"]["rows_left"] == ROWS - sent

    # The re-run with a larger budget sends exactly the rows left, and finishes.
    again = score(sim, tmp_path / "cache", budget * 100, transport=transport)
    assert sim.stats()["chat"] - sent == ROWS - sent
    assert again["retrieval_relevance_error"].null_count() == ROWS
    rerun = fk.last_run()
    assert rerun is not None and rerun.rows_left == 0 and rerun.cache_hits == sent


def test_the_budget_holds_across_retries_and_reasks(sim: JudgeSimulator, tmp_path: Path) -> None:
    # Half the rows are answered unreadably first (a re-ask is a second paid request):
    # every attempt passes the gate, so the spend still stays within the bound.
    df = retrieval_frame(ROWS).with_columns(
        pl.when(pl.col("row_id") % 2 == 0)
        .then(pl.col("question") + " @sim(fault=malformed, first=1)")
        .otherwise(pl.col("question"))
        .alias("question")
    )
    per_request = one_request_cost(sim, tmp_path)
    budget = 10 * per_request
    score(sim, tmp_path / "cache", budget, df)
    paid = cost_of(sim.stats())
    assert paid <= budget + CONCURRENCY * per_request


def test_an_unknown_price_with_a_budget_is_an_input_error_before_any_call(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    unpriced = judge(sim, price=None)
    with pytest.raises(fk.InputError, match="max_cost_usd needs a price.*sim-judge"):
        fk.evaluate_dataframe(
            retrieval_frame(4), [RetrievalRelevance()], MAPPING,
            judge=unpriced, cache=tmp_path / "c", progress=False, max_cost_usd=1.0,
        )  # fmt: skip
    assert sim.stats()["chat"] == 0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "5"])
def test_a_budget_must_be_a_positive_number(bad: Any, sim: JudgeSimulator) -> None:
    with pytest.raises(fk.InputError, match="max_cost_usd must be a positive number"):
        fk.evaluate_dataframe(
            retrieval_frame(2), [RetrievalRelevance()], MAPPING,
            judge=judge(sim), cache=False, progress=False, max_cost_usd=bad,
        )  # fmt: skip
    assert sim.stats()["chat"] == 0


def test_a_budget_that_fits_changes_nothing(sim: JudgeSimulator, tmp_path: Path) -> None:
    out = score(sim, tmp_path / "cache", 100.0)
    assert sim.stats()["chat"] == ROWS
    assert out["retrieval_relevance_error"].null_count() == ROWS
    run = fk.last_run()
    assert run is not None and run.rows_left == 0
    assert "no row left" in run.summary()


def cli_args(sim: JudgeSimulator, tmp_path: Path) -> list[str]:
    source = tmp_path / "runs.parquet"
    if not source.exists():
        retrieval_frame(ROWS).write_parquet(source)
    return [
        "evaluate", str(source), *RETRIEVAL_CLI_ARGS, "--judge", "openai/sim-judge",
        "--api-base", sim.api_base, "--cache", str(tmp_path / "cache"), "-q",
        "--concurrency", str(CONCURRENCY), "--price", "input=2,output=8,cached_input=0.5",
    ]  # fmt: skip


def test_max_cost_on_the_command_line_exits_1_saying_so_and_the_rerun_finishes(
    sim: JudgeSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("FRAMEKIT_API_KEY", API_KEY)
    args = cli_args(sim, tmp_path)
    out = tmp_path / "out.parquet"
    # Each request holds its prompt and 1,024 answer tokens (about $0.009) while in flight.
    budget = 0.05
    assert main([*args, "-o", str(out), "--max-cost", str(budget)]) == 1
    err = capsys.readouterr().err
    sent = sim.stats()["chat"]
    assert 0 < sent < ROWS
    assert cost_of(sim.stats()) <= budget
    said = [line for line in err.splitlines() if line.startswith("framekit: budget reached")]
    assert said == [
        f"framekit: budget reached: ${fk.last_run().cost_usd:.4f} spent of --max-cost $0.05; "
        f"{ROWS - sent} rows left unscored in {out} (their *_error says so): the same command "
        "with a higher --max-cost scores exactly those"
    ]
    # The destination is written: the rows left carry the error, the others their scores.
    scored = pl.read_parquet(out)
    left = scored["retrieval_relevance_error"].str.starts_with(BUDGET_REACHED).fill_null(False)
    assert int(left.sum()) == ROWS - sent
    footer = pl.read_parquet_metadata(out)
    assert f'"rows_left": {ROWS - sent}' in footer["framekit"]

    assert main([*args, "-o", str(out), "--max-cost", "5"]) == 0
    assert sim.stats()["chat"] == ROWS  # exactly the rows left were sent
    assert pl.read_parquet(out)["retrieval_relevance_error"].null_count() == ROWS


def test_a_dry_run_with_max_cost_says_whether_the_estimate_fits(
    sim: JudgeSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("FRAMEKIT_API_KEY", API_KEY)
    args = [*cli_args(sim, tmp_path), "--dry-run"]
    assert main([*args, "--max-cost", "5"]) == 0
    assert "fits within --max-cost $5.00" in capsys.readouterr().out
    assert main([*args, "--max-cost", "0.001"]) == 1
    said = capsys.readouterr().out
    assert "is over --max-cost $0.00" in said and f"of the {ROWS} requests unsent" in said
    assert sim.stats()["total"] == 0


def test_evaluate_parquet_holds_one_budget_over_every_slice(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    source = tmp_path / "runs.parquet"
    retrieval_frame(ROWS).write_parquet(source)
    per_request = one_request_cost(sim, tmp_path)
    budget = 12 * per_request

    def run(limit: float) -> Any:
        return fk.evaluate_parquet(
            source, tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING,
            judge=judge(sim), cache=tmp_path / "cache", progress=False, slice_rows=8,
            max_cost_usd=limit,
        )  # fmt: skip

    first = run(budget)
    sent = sim.stats()["chat"]
    assert first.slices == ROWS // 8
    assert cost_of(sim.stats()) <= budget + CONCURRENCY * per_request
    assert 0 < sent < ROWS and first.stats.rows_left == ROWS - sent
    assert "rows left unscored" in first.summary()
    again = run(budget * 100)
    assert sim.stats()["chat"] == ROWS and again.stats.rows_left == 0


def test_batch_mode_submits_only_the_lines_that_fit_and_the_rerun_sends_the_rest(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # Batch lines are held at the batch price (half) as the batch file is written; the
    # lines that do not fit are not submitted, and are left as on the direct path.
    per_line = one_request_cost(sim, tmp_path) / 2
    reservation = per_line + MAX_TOKENS * PRICE["output"] / 2e6
    budget = 10 * reservation

    def run(limit: float) -> pl.DataFrame:
        out = fk.evaluate_dataframe(
            retrieval_frame(ROWS), [RetrievalRelevance()], MAPPING,
            judge=judge(sim, batch=True, batch_poll=0.02), cache=tmp_path / "cache",
            progress=False, max_cost_usd=limit,
        )  # fmt: skip
        assert isinstance(out, pl.DataFrame)
        return out

    out = run(budget)
    lines = sim.stats()["batch"]["lines"]
    assert sim.stats()["chat"] == 0
    assert 0 < lines < ROWS
    assert cost_of(sim.stats()["batch"]) / 2 <= budget
    left = out["retrieval_relevance_error"].str.starts_with(BUDGET_REACHED).fill_null(False)
    assert int(left.sum()) == ROWS - lines
    run_stats = fk.last_run()
    assert run_stats is not None and run_stats.saved_batch_usd == pytest.approx(
        run_stats.cost_usd, rel=0.01
    )  # half price: it saved what it paid
    run(budget * 100)
    assert sim.stats()["batch"]["lines"] == ROWS  # exactly the lines left, submitted now


def test_each_stage_of_a_cascade_passes_the_same_budget(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    per_request = one_request_cost(sim, tmp_path)
    budget = 50 * per_request  # the first stage's 40 rows, and a few of the second's
    weak = fk.Judge(
        "openai/sim-weak", api_base=sim.api_base, api_key=API_KEY, price=PRICE,
        concurrency=CONCURRENCY, max_tokens=MAX_TOKENS,
    )  # fmt: skip
    cascade = fk.Cascade([weak, judge(sim)], escalate_below=[math.inf])  # every row goes on

    def run(limit: float) -> pl.DataFrame:
        out = fk.evaluate_dataframe(
            retrieval_frame(ROWS), [RetrievalRelevance()], MAPPING, judge=cascade,
            cache=tmp_path / "cache", progress=False, max_cost_usd=limit,
        )  # fmt: skip
        assert isinstance(out, pl.DataFrame)
        return out

    out = run(budget)
    by_model = sim.stats()["by_model"]
    assert by_model["sim-weak"] == ROWS
    strong = by_model.get("sim-judge", 0)
    assert strong < ROWS
    assert cost_of(sim.stats()) <= budget + CONCURRENCY * per_request
    left = out["retrieval_relevance_error"].str.starts_with(BUDGET_REACHED).fill_null(False)
    assert int(left.sum()) == ROWS - strong
    run(budget * 100)
    by_model = sim.stats()["by_model"]
    assert by_model["sim-weak"] == ROWS and by_model["sim-judge"] == ROWS


def test_an_interrupted_budget_run_resumes_the_rows_left_not_only_the_unfinished_slices(
    sim: JudgeSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from framekit.io import _evaluate

    source = tmp_path / "runs.parquet"
    retrieval_frame(ROWS).write_parquet(source)
    original = _evaluate.evaluate_with_stats
    calls = {"n": 0}

    async def interrupted_at_the_fourth_slice(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return await original(*args, **kwargs)

    def run(limit: float) -> Any:
        return fk.evaluate_parquet(
            source, tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING,
            judge=judge(sim), cache=tmp_path / "cache", progress=False, slice_rows=8,
            max_cost_usd=limit,
        )  # fmt: skip

    monkeypatch.setattr(_evaluate, "evaluate_with_stats", interrupted_at_the_fourth_slice)
    with pytest.raises(KeyboardInterrupt):
        run(8 * one_request_cost(sim, tmp_path))  # the budget is reached in slice 1 or 2
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", original)
    sent = sim.stats()["chat"]
    assert 0 < sent < 24  # three slices of 8 were filed, some of their rows left
    again = run(100.0)
    assert sim.stats()["chat"] == ROWS  # every row left, and the slices never scored
    assert again.stats.rows_left == 0 and again.skipped_slices < 3
    assert (
        pl.read_parquet(tmp_path / "out.parquet")["retrieval_relevance_error"].null_count() == ROWS
    )


def test_reservations_grow_when_the_endpoint_counts_more_prompt_tokens_than_estimated() -> None:
    # An endpoint whose tokenizer reads fewer characters a token (code, other scripts)
    # bills more prompt tokens than 4 characters a token: once a reply shows it, later
    # requests hold that much more, so the budget's bound still holds.
    import asyncio

    from framekit.engine.budget import Gate, spending_limit
    from framekit.engine.stats import RunStats
    from framekit.judges.transport import RawReply

    priced = fk.Judge(
        "openai/m", api_base="http://127.0.0.1:9/v1", price={"input": 2.0, "output": 8.0},
        max_tokens=10,
    )  # fmt: skip
    messages = [{"role": "user", "content": "x" * 4000}]

    async def reservations() -> tuple[float, float, float]:
        with spending_limit(1.0) as budget:
            gate = Gate(priced, RunStats())
            first = await gate.reserve(messages)
            billed = first.tokens * 3
            reply = RawReply("{}", None, billed, 10, priced.pricing().cost(billed, 10), 0.1)
            gate.settle(first, reply)
            second = await gate.reserve(messages)
            assert budget is not None
            return first.held, second.held, reply.cost_usd or 0.0

    first, second, cost = asyncio.run(reservations())
    assert second > 2.5 * first
    assert second == pytest.approx(cost, rel=0.01)  # the second holds what the first cost
