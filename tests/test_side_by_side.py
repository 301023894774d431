"""``fk.side_by_side`` and the report's side-by-side view: the same key under every group,
largest score gaps first, errors never making a gap."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from tests.helpers import STRATEGIES, rag_frame
from tests.test_cli import framekit


def test_one_row_per_key_a_column_group_per_strategy_largest_gap_first() -> None:
    out = fk.side_by_side(rag_frame(), by="strategy", on="question_id")
    assert out.height == 30 and out["question_id"].n_unique() == 30
    assert out.columns[:3] == ["question_id", "gap", "question"]  # the input shown once
    for strategy in STRATEGIES:
        for column in ("answer", "documents", "rr_score", "rr_label", "rr_explanation"):
            assert f"{strategy}/{column}" in out.columns
    assert out.row(0, named=True)["question_id"] == 7 and out["gap"][0] == 1.0
    assert out["gap"].is_sorted(descending=True, nulls_last=True)
    seven = out.row(0, named=True)
    assert (seven["bm25/rr_score"], seven["dense/rr_score"]) == (0.0, 1.0)
    assert seven["dense/documents"][0].startswith("Doc 7.dense.0")


def test_an_error_is_no_score_and_a_key_in_one_group_has_no_gap() -> None:
    frame = pl.DataFrame(
        {
            "q": [1, 1, 2, 2, 3],
            "s": ["a", "b", "a", "b", "a"],
            "c_score": [0.0, 1.0, 0.0, 1.0, 0.5],
            # Row (2, b) failed: its 1.0 must not read as a gap of 1.0.
            "c_error": [None, None, None, "timeout", None],
        }
    )
    out = fk.side_by_side(frame, by="s", on="q")
    assert out.select("q", "gap").rows() == [(1, 1.0), (2, None), (3, None)]
    three = out.filter(pl.col("q") == 3).row(0, named=True)
    assert three["a/c_score"] == 0.5 and three["b/c_score"] is None


def test_several_evaluators_each_have_a_gap_and_gap_is_the_largest() -> None:
    frame = pl.DataFrame(
        {
            "q": [1, 1, 2, 2],
            "s": ["a", "b", "a", "b"],
            "x_score": [0.0, 0.2, 0.0, 0.9],
            "x_error": [None] * 4,
            "y_score": [0.0, 0.5, 0.0, 0.0],
            "y_error": [None] * 4,
        }
    )
    out = fk.side_by_side(frame, by="s", on="q")
    assert out.select("q", "gap", "x_gap", "y_gap").rows() == [
        (2, 0.9, 0.9, 0.0),
        (1, 0.5, 0.2, 0.5),
    ]


def test_a_key_twice_in_one_group_is_an_input_error() -> None:
    frame = rag_frame(3).with_columns(pl.lit(1).alias("question_id"))
    with pytest.raises(fk.InputError, match="appears more than once in group 'bm25'"):
        fk.side_by_side(frame, by="strategy", on="question_id")
    with pytest.raises(fk.InputError, match="at least two groups"):
        fk.side_by_side(
            rag_frame(3).filter(pl.col("strategy") == "bm25"), "strategy", "question_id"
        )


def test_report_by_and_on_adds_the_side_by_side_view_to_the_html(tmp_path: Path) -> None:
    rag_frame().write_parquet(tmp_path / "scored.parquet")
    result = framekit(
        "report", "scored.parquet", "--by", "strategy", "--on", "question_id",
        "--html", "r.html", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r.html").read_text()
    assert 'id="side-by-side"' in page and 'href="#side-by-side"' in page
    keys = re.findall(r'<tr data-key="([^"]+)">', page)
    assert keys[0] == "7" and len(keys) == 30
    # The rows table carries the documents, the group and the key read from the file.
    assert ">documents</th>" in page and ">strategy</th>" in page and ">question_id</th>" in page
    assert "3 documents: Doc 4.hybrid.0" in page

    unpaired = framekit(
        "report", "scored.parquet", "--by", "strategy", "--html", "u.html", cwd=tmp_path
    )
    assert unpaired.returncode == 0, unpaired.stderr
    assert 'id="side-by-side"' not in (tmp_path / "u.html").read_text()  # no key, no pairs
