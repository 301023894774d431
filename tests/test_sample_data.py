"""The bundled sample dataset: shape, pairing, ground truth, and reproducibility."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from framekit.data import SAMPLE_PATH, load_sample

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "make_sample.py"

EXPECTED_SCHEMA = {
    "conversation_id": pl.String,
    "question_id": pl.Int64,
    "strategy": pl.String,
    "question": pl.String,
    "answer": pl.String,
    "documents": pl.List(pl.String),
    "history": pl.List(pl.Struct({"role": pl.String, "content": pl.String})),
    "expected_quality": pl.String,
    "retrieval_hit": pl.Boolean,
    "reference": pl.String,
}


@pytest.fixture(scope="module")
def sample() -> pl.DataFrame:
    return load_sample()


@pytest.fixture(scope="module")
def make_sample() -> ModuleType:
    # scripts/ is not a package: load the generator straight from its file.
    spec = importlib.util.spec_from_file_location("make_sample", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_sample"] = module  # NamedTuple needs its module registered
    spec.loader.exec_module(module)
    return module


def test_sample_has_documented_columns_and_dtypes(sample: pl.DataFrame) -> None:
    assert dict(sample.schema) == EXPECTED_SCHEMA
    assert sample.height == 200
    assert sample["conversation_id"].is_unique().all()
    assert SAMPLE_PATH.stat().st_size < 300_000


def test_each_question_appears_once_per_strategy(sample: pl.DataFrame) -> None:
    per_question = sample.group_by("question_id").agg(
        pl.col("strategy").sort(), pl.col("question").n_unique(), pl.col("history").n_unique()
    )
    assert per_question.height == 100
    assert per_question["strategy"].to_list() == [["bm25", "dense"]] * 100
    # Both strategies answer the same conversation: same question, same earlier turns.
    assert (per_question["question"] == 1).all()
    assert (per_question["history"] == 1).all()


def test_rows_have_three_nonempty_documents_and_valid_labels(sample: pl.DataFrame) -> None:
    assert (sample["documents"].list.len() == 3).all()
    assert (sample["documents"].list.eval(pl.element().str.len_chars() > 20).list.all()).all()
    assert set(sample["expected_quality"]) == {"good", "off_topic", "noncommittal", "incoherent"}
    assert (sample["answer"].str.len_chars() > 0).all()


def test_about_a_quarter_of_rows_are_multi_turn(sample: pl.DataFrame) -> None:
    history = sample["history"].drop_nulls()
    assert 0.2 <= history.len() / sample.height <= 0.3
    roles = history.explode().struct.field("role")
    assert set(roles) <= {"user", "assistant", "tool"}
    # Every history starts with the user and ends with the assistant's reply.
    assert (history.list.first().struct.field("role") == "user").all()
    assert (history.list.last().struct.field("role") == "assistant").all()


def test_dense_retrieves_the_gold_passage_more_often_than_bm25(
    sample: pl.DataFrame, make_sample: ModuleType
) -> None:
    # Recompute hits from the script's knowledge base rather than trusting the column.
    gold = {
        i + 1: {make_sample.PASSAGES[p] for p in question.gold}
        for i, question in enumerate(make_sample.QUESTIONS)
    }
    hits = [
        bool(gold[qid] & set(docs))
        for qid, docs in sample.select("question_id", "documents").iter_rows()
    ]
    sample = sample.with_columns(measured_hit=pl.Series(hits))
    assert sample["measured_hit"].to_list() == sample["retrieval_hit"].to_list()
    rate = dict(sample.group_by("strategy").agg(pl.col("measured_hit").mean()).iter_rows())
    assert rate["dense"] > rate["bm25"] + 0.15
    assert 0.7 <= rate["dense"] <= 0.9 and 0.45 <= rate["bm25"] <= 0.65


def test_missed_retrieval_gets_worse_answers(sample: pl.DataFrame) -> None:
    good = dict(
        sample.group_by("retrieval_hit")
        .agg((pl.col("expected_quality") == "good").mean())
        .iter_rows()
    )
    assert good[True] > good[False] + 0.3


def test_generation_is_deterministic(make_sample: ModuleType, tmp_path: Path) -> None:
    first = make_sample.write_sample(tmp_path / "a.parquet")
    second = make_sample.write_sample(tmp_path / "b.parquet")
    assert_frame_equal(first, second)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_bundled_file_matches_the_script(sample: pl.DataFrame, make_sample: ModuleType) -> None:
    # Fails when the script was edited without regenerating the bundled Parquet file.
    assert_frame_equal(sample, make_sample.build_sample())


def test_each_question_has_one_reference_answer_for_context_recall(sample: pl.DataFrame) -> None:
    per_question = sample.group_by("question_id").agg(pl.col("reference").n_unique())
    assert (per_question["reference"] == 1).all()
    assert (sample["reference"].str.len_chars() > 10).all()
    # A good answer restates the reference; the others do not.
    good = sample.filter(pl.col("expected_quality") == "good")
    assert (good["answer"].str.contains(good["reference"], literal=True)).mean() > 0.9
