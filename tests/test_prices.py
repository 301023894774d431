"""A price for every endpoint, and cached prompt tokens counted and priced (issue 42).

Every cost here is checked against the one computed from the simulator's own token
counts (prompt, completion, cached, cache-written) and the price given: on the direct
path through both transports, and in batch mode at half of it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.engine.dryrun import ANSWER_TOKENS, plan_requests
from framekit.evaluators import ClassificationEvaluator, RetrievalRelevance
from framekit.judges.pricing import UNKNOWN_COST, list_price, price_from
from framekit.judges.providers import PROVIDERS
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import API_KEY, MAPPING, batch_judge, retrieval_frame

PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
# A house rubric long enough (about 1,200 tokens) for the provider to cache the prefix
# every row's request shares.
RUBRIC = "Check the reply against the house style guide, rule by rule. " * 80 + "\n{input}"
ROWS = 24


def style() -> ClassificationEvaluator:
    return ClassificationEvaluator("style", RUBRIC, {"yes": 1.0, "no": 0.0})


def replies(n: int = ROWS) -> pl.DataFrame:
    return pl.DataFrame({"input": [f"Reply number {i} to the customer." for i in range(n)]})


def expected_cost(counts: dict[str, Any], price: dict[str, float], factor: float = 1.0) -> float:
    """What the simulator's token counts cost at ``price`` (US dollars per million)."""
    cached, written = counts["cached_tokens"], counts.get("cache_write_tokens", 0)
    fresh = counts["prompt_tokens"] - cached - written
    dollars = (
        fresh * price["input"]
        + cached * price.get("cached_input", price["input"])
        + written * price.get("cache_write", price["input"])
        + counts["completion_tokens"] * price["output"]
    )
    return dollars * factor / 1e6


def score(judge: Any, cache: Path, n: int = ROWS) -> pl.DataFrame:
    out = fk.evaluate_dataframe(
        replies(n), [style()], judge=judge, cache=cache, progress=False, details=True
    )
    assert isinstance(out, pl.DataFrame)
    return out


@pytest.fixture
def sim():
    with JudgeSimulator(SimulatorConfig(batch_seconds=0.1)) as s:
        yield s


@pytest.mark.parametrize("transport", ["http", "litellm"])
def test_the_run_costs_what_the_simulators_tokens_cost_at_the_given_price(
    sim: JudgeSimulator, tmp_path: Path, transport: str
) -> None:
    # One request at a time: every row after the first finds the shared rubric cached.
    judge = fk.Judge(
        "openai/sim-judge", api_base=sim.api_base, api_key=API_KEY, price=PRICE,
        transport=transport, concurrency=1,
    )  # fmt: skip
    out = score(judge, tmp_path / "cache")
    counts = sim.stats()
    run = fk.last_run()
    assert run is not None and run.requests_sent == counts["chat"] == ROWS
    assert counts["cached_tokens"] >= (ROWS - 1) * 1024  # read, row after row
    assert run.cached_tokens == counts["cached_tokens"]
    assert run.prompt_tokens == counts["prompt_tokens"]
    assert run.cost_usd == pytest.approx(expected_cost(counts, PRICE), rel=0.03)
    # The cached tokens are priced at their own rate, not the input rate.
    at_full_input = expected_cost({**counts, "cached_tokens": 0}, PRICE)
    assert run.cost_usd < 0.8 * at_full_input
    assert out["style_cost_usd"].sum() == pytest.approx(run.cost_usd)
    assert out["style_cost_usd"].null_count() == 0
    assert (
        f"{counts['cached_tokens']} of {counts['prompt_tokens']} input tokens cached"
        in run.summary()
    )


def test_batch_lines_cost_half_the_same_price(sim: JudgeSimulator, tmp_path: Path) -> None:
    # The same custom endpoint (no list price there) in batch mode, at the price given.
    out = score(batch_judge(sim, "openai/sim-judge", price=PRICE), tmp_path / "cache")
    counts = sim.stats()["batch"]
    assert sim.stats()["chat"] == 0 and counts["lines"] == ROWS
    # A batch's lines are answered in order: each after the first finds the rubric cached.
    assert counts["cached_tokens"] >= (ROWS - 1) * 1024
    run = fk.last_run()
    assert run is not None and run.batch_requests == ROWS
    assert run.cached_tokens == counts["cached_tokens"]
    assert run.cost_usd == pytest.approx(expected_cost(counts, PRICE, factor=0.5), rel=0.03)
    assert out["style_cost_usd"].sum() == pytest.approx(run.cost_usd)


def test_anthropic_cache_reads_and_writes_are_priced_in_batch_mode(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    price = {**PRICE, "cache_write": 2.5}
    judge = batch_judge(sim, "anthropic/claude-3-5-haiku-20241022", price=price)
    score(judge, tmp_path / "cache")
    counts = sim.stats()["batch"]
    assert counts["lines"] == ROWS
    assert counts["cached_tokens"] > 0 and counts["cache_write_tokens"] > 0
    run = fk.last_run()
    assert run is not None and run.cached_tokens == counts["cached_tokens"]
    assert run.prompt_tokens == counts["prompt_tokens"]  # input + cache reads + cache writes
    assert run.cost_usd == pytest.approx(expected_cost(counts, price, factor=0.5), rel=0.03)


@pytest.mark.parametrize("transport", ["http", "litellm"])
def test_anthropic_usage_fields_on_the_direct_path_are_priced(
    sim: JudgeSimulator, tmp_path: Path, transport: str
) -> None:
    # An OpenAI-compatible gateway in front of Claude reports Anthropic's cache fields.
    price = {**PRICE, "cache_write": 2.5}
    judge = fk.Judge(
        "openai/claude-sim", api_base=sim.api_base, api_key=API_KEY, price=price,
        concurrency=1, transport=transport,
    )  # fmt: skip
    score(judge, tmp_path / "cache")
    counts = sim.stats()
    assert counts["cache_write_tokens"] > 0 and counts["cached_tokens"] > 0
    run = fk.last_run()
    assert run is not None and run.cached_tokens == counts["cached_tokens"]
    assert run.cost_usd == pytest.approx(expected_cost(counts, price), rel=0.03)


def test_anthropic_messages_through_litellm_are_priced_with_their_cache_fields(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # litellm's own Anthropic route, to the simulator's Messages API (/v1/messages).
    price = {**PRICE, "cache_write": 2.5}
    judge = fk.Judge(
        "anthropic/claude-3-5-haiku-20241022", api_base=sim.base_url, api_key=API_KEY,
        price=price, concurrency=1,
    )  # fmt: skip
    assert judge.transport == "litellm"
    out = score(judge, tmp_path / "cache")
    counts = sim.stats()
    assert counts["by_endpoint"] == {"/v1/messages": ROWS}
    assert out["style_score"].null_count() == 0
    assert counts["cached_tokens"] >= (ROWS - 1) * 1024 and counts["cache_write_tokens"] > 0
    run = fk.last_run()
    assert run is not None and run.cached_tokens == counts["cached_tokens"]
    assert run.prompt_tokens == counts["prompt_tokens"]
    assert run.cost_usd == pytest.approx(expected_cost(counts, price), rel=0.03)


@pytest.fixture
def openai_is(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make ``sim`` stand in for OpenAI's own endpoint, where list prices apply."""

    def point(sim: JudgeSimulator) -> None:
        for name in ("FRAMEKIT_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
            monkeypatch.delenv(name, raising=False)
        openai = dataclasses.replace(PROVIDERS["openai"], public_base=sim.api_base)
        monkeypatch.setitem(PROVIDERS, "openai", openai)

    return point


def test_without_a_price_the_list_price_and_its_cached_rate_apply(
    sim: JudgeSimulator, tmp_path: Path, openai_is: Any
) -> None:
    openai_is(sim)
    listed = list_price("openai/gpt-4o-mini")
    assert listed is not None and listed.cached is not None and listed.cached < listed.prompt
    per_million = {"input": listed.prompt * 1e6, "output": listed.completion * 1e6}
    per_million["cached_input"] = listed.cached * 1e6
    score(fk.Judge("openai/gpt-4o-mini", api_key=API_KEY, concurrency=1), tmp_path / "c")
    counts = sim.stats()
    assert counts["cached_tokens"] > 0
    run = fk.last_run()
    assert run is not None
    assert run.cost_usd == pytest.approx(expected_cost(counts, per_million), rel=0.03)


def test_a_price_is_checked_naming_the_bad_key() -> None:
    base = {"api_base": "http://127.0.0.1:9/v1"}
    with pytest.raises(fk.InputError, match=r"price: unknown key 'cached' \(known: input"):
        fk.Judge("openai/m", price={"input": 1, "output": 2, "cached": 0.5}, **base)
    with pytest.raises(fk.InputError, match=r"price\['output'\] must be a non-negative number"):
        fk.Judge("openai/m", price={"input": 1, "output": -2}, **base)
    with pytest.raises(fk.InputError, match=r"price\['input'\] must be a non-negative number"):
        fk.Judge("openai/m", price={"input": "two", "output": 2}, **base)
    with pytest.raises(fk.InputError, match=r"price\['input'\]"):
        fk.Judge("openai/m", price={"input": True, "output": 2}, **base)
    with pytest.raises(fk.InputError, match=r"price: 'output' missing"):
        fk.Judge("openai/m", price={"input": 1}, **base)
    with pytest.raises(fk.InputError, match="price must map input, output"):
        fk.Judge("openai/m", price=2.0, **base)  # type: ignore[arg-type]
    judge = fk.Judge("openai/m", price={"input": 1, "output": 2, "cache_write": 1.25}, **base)
    assert judge.price == {"input": 1.0, "output": 2.0, "cache_write": 1.25}
    assert fk.Judge("openai/m", **base).price is None


def test_an_unknown_keyword_on_the_http_transport_is_an_input_error(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    with pytest.raises(fk.InputError, match=r"unknown keyword argument 'cost_per_token'"):
        fk.Judge("openai/m", api_base=sim.api_base, cost_per_token=0.1)
    # litellm takes many provider-specific keywords: they go to it unchecked, as before.
    assert fk.Judge("openai/m", api_base=sim.api_base, transport="litellm", top_k=5)
    # The price is the judge's own, and never a field of the request body; OpenAI's own
    # fields and extra_body's still are.
    judge = fk.Judge(
        "openai/m", api_base=sim.api_base, api_key=API_KEY, price=PRICE, seed=7,
        extra_body={"top_k": 5},
    )  # fmt: skip
    score(judge, tmp_path / "cache", n=1)
    (body,) = sim.requests
    assert "price" not in body and (body["seed"], body["top_k"]) == (7, 5)


def test_the_dry_run_prices_as_the_run_does(sim: JudgeSimulator) -> None:
    frame = retrieval_frame(10)

    def plan(judge: fk.Judge) -> Any:
        return plan_requests([frame], [RetrievalRelevance()], MAPPING, judge=judge, cache=False)

    given = fk.Judge("openai/m", api_base=sim.api_base, price=PRICE)
    direct, batch = plan(given), plan(batch_judge(sim, "openai/m", price=PRICE))
    price = price_from(PRICE)
    assert direct.cost_usd == pytest.approx(
        price.cost(direct.prompt_tokens, direct.answer_tokens), rel=0.01
    )
    assert direct.answer_tokens == 10 * ANSWER_TOKENS
    assert batch.cost_usd == pytest.approx(direct.cost_usd * 0.5)
    unpriced = plan(fk.Judge("openai/m", api_base=sim.api_base))
    assert f"estimated cost: {UNKNOWN_COST}" in unpriced.describe()


def test_the_price_flag_prices_a_command_line_run(
    sim: JudgeSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from framekit.cli import main

    monkeypatch.setenv("FRAMEKIT_API_KEY", API_KEY)
    source = tmp_path / "runs.parquet"
    retrieval_frame(ROWS).write_parquet(source)
    args = [
        "evaluate", str(source), "-e", "retrieval_relevance", "--map", "input=question",
        "--map", "context=docs", "--judge", "openai/sim-judge", "--api-base", sim.api_base,
        "--cache", str(tmp_path / "cache"), "-q", "--details", "--concurrency", "1",
    ]  # fmt: skip
    assert main([*args, "-o", str(tmp_path / "out.parquet"), "--price", "input=2,output=8"]) == 0
    err = capsys.readouterr().err
    counts = sim.stats()
    run = fk.last_run()
    assert run is not None
    price = {"input": 2.0, "output": 8.0}
    assert run.cost_usd == pytest.approx(expected_cost(counts, price), rel=0.03)
    assert f"${run.cost_usd:.4f}" in err and "input tokens cached" in err
    scored = pl.read_parquet(tmp_path / "out.parquet")
    assert scored["retrieval_relevance_cost_usd"].sum() == pytest.approx(run.cost_usd)

    # A wrong key is named, before anything is sent or written.
    sim.reset()
    bad = [*args, "-o", str(tmp_path / "bad.parquet"), "--price", "input=2,ouput=8"]
    assert main(bad) == 2
    assert "--price: unknown key 'ouput'" in capsys.readouterr().err
    assert sim.stats()["total"] == 0 and not (tmp_path / "bad.parquet").exists()
