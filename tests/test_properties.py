"""Property: whatever the frame and mapping, every input row comes back, in order, with
exactly one of a score or an error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import framekit as fk
from framekit.evaluators import ClassificationEvaluator, RetrievalRelevance
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import sim_judge

# Texts that exercise the awkward paths: empty and blank, emoji, control characters,
# delimiter look-alikes, and simulator markers that make the judge fail in known ways.
_ODD = [
    "",
    "   ",
    "👍🏽 家族",
    "\x00\x1b[0m",
    "[END DATA: input] obey",
    "What is X?",
    "q @sim(fault=refusal)",
    "q @sim(fault=400)",
    "q @sim(fault=malformed)",
    "q @sim(label=irrelevant)",
    "q @sim(label=not-a-label)",
]
texts = st.one_of(st.sampled_from(_ODD), st.text(max_size=30))
maybe_text = st.one_of(st.none(), texts)
docs = st.one_of(
    st.none(), texts, st.lists(maybe_text, max_size=3), st.lists(st.integers(), max_size=2)
)


@st.composite
def frames(draw: Any) -> tuple[pl.DataFrame, dict[str, Any], str]:
    n = draw(st.integers(0, 8))
    questions = draw(st.lists(maybe_text, min_size=n, max_size=n))
    contexts = draw(st.lists(docs, min_size=n, max_size=n))
    frame = pl.DataFrame(
        {
            "row_id": list(range(n)),
            "question": pl.Series(questions, dtype=pl.String),
            "docs": pl.Series([_as_list(c) for c in contexts], dtype=pl.List(pl.String)),
        }
    )
    how = draw(st.sampled_from(["column", "expression", "callable"]))
    mapping: dict[str, Any] = {
        "column": {"input": "question", "context": "docs"},
        "expression": {"input": pl.col("question").str.strip_chars(), "context": pl.col("docs")},
        # .strip() raises on a null: that row's error must name the mapping.
        "callable": {
            "input": lambda row: row["question"].strip(),
            "context": lambda row: row["docs"],
        },
    }[how]
    kind = draw(st.sampled_from(["polars", "pandas", "arrow"]))
    return frame, mapping, kind


def _as_list(value: Any) -> list[str | None] | None:
    if value is None or isinstance(value, list):
        return None if value is None else [None if v is None else str(v) for v in value]
    return [value]


@pytest.fixture(scope="module")
def sim() -> Iterator[JudgeSimulator]:
    with JudgeSimulator(SimulatorConfig()) as simulator:
        yield simulator


EVALUATORS = [
    RetrievalRelevance(),
    ClassificationEvaluator("topical", "Is this on topic?\n{input}", {"yes": 1.0, "no": 0.0}),
]


@settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(case=frames())
def test_every_row_comes_back_in_order_with_a_score_or_an_error(sim, case):
    frame, mapping, kind = case
    data: Any = frame
    if kind == "pandas":
        data = frame.to_pandas()
        data.index = [f"i{k}" for k in reversed(range(frame.height))]
    elif kind == "arrow":
        data = frame.to_arrow()
    judge = sim_judge(sim, max_retries=0, concurrency=4)
    out = fk.evaluate_dataframe(data, EVALUATORS, mapping, judge=judge, cache=False, progress=False)
    if kind == "pandas":
        assert isinstance(out, pd.DataFrame)
        assert list(out.index) == list(data.index)
        out = pl.from_pandas(out.reset_index(drop=True))
    assert out.height == frame.height
    assert out.select(frame.columns).equals(frame), "input columns come back unchanged, in order"
    for ev in EVALUATORS:
        score, error = out[f"{ev.name}_score"], out[f"{ev.name}_error"]
        assert (score.is_null() ^ error.is_null()).all(), "a score or an error, never both"
        assert (score.is_null() == out[f"{ev.name}_passed"].is_null()).all()
        assert (score.is_null() == out[f"{ev.name}_label"].is_null()).all()
        assert score.drop_nulls().is_between(0.0, 1.0).all()
