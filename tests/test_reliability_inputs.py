"""Messy tables through evaluate_dataframe: what reaches the judge, and what comes back.

Policies proven here (and listed in docs/fault-matrix.md):
- a null or empty required field fails that row only, naming the field; no call is made;
- numbers, structs and lists of non-strings are rendered as text (JSON for non-strings);
- text over the judge's budget is cut to fit, with a note in the explanation;
- invalid Unicode is repaired with U+FFFD, control characters become spaces in the prompt,
  emoji pass through untouched; the user's own columns are returned as given.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.judges.judge import (
    CHARS_PER_TOKEN,
    DEFAULT_CONTEXT_TOKENS,
    PROMPT_RESERVE_TOKENS,
)
from tests.helpers import MAPPING, retrieval_frame, sim_judge

EV = "retrieval_relevance"


def _score(df, sim, mapping=MAPPING, judge=None, **options):
    options.setdefault("cache", False)
    return fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        mapping,
        judge=judge or sim_judge(sim),
        progress=False,
        **options,
    )


def _prompts(sim) -> list[str]:
    return [r["messages"][1]["content"] for r in sim.requests]


def _prompt_with(sim, needle: str) -> str:
    """The one prompt containing ``needle`` (requests go out concurrently, in any order)."""
    found = [p for p in _prompts(sim) if needle in p]
    assert len(found) == 1, found
    return found[0]


def _data(prompt: str, field: str) -> str:
    return prompt.split(f"[BEGIN DATA: {field}]\n")[1].split(f"\n[END DATA: {field}]")[0]


def _exactly_one_outcome(out) -> bool:
    scored = out[f"{EV}_score"].is_not_null()
    failed = out[f"{EV}_error"].is_not_null()
    return bool((scored ^ failed).all())


# -- nulls and empty values -----------------------------------------------------------


def test_null_fields_fail_only_their_row_and_name_the_field(judge_simulator):
    df = pl.DataFrame(
        {
            "question": ["What is A?", None, "What is C?", "What is D?"],
            "docs": [["A is a letter."], ["B."], None, [None, "D is a letter."]],
        }
    )
    out = _score(df, judge_simulator)
    assert out[f"{EV}_error"].to_list() == [None, "field 'input' is null", None, None]
    assert out[f"{EV}_score"].is_not_null().to_list() == [True, False, True, True]
    # A null context is a retrieval that returned nothing: irrelevant 0, no call.
    assert (out[f"{EV}_score"][2], out[f"{EV}_explanation"][2]) == (
        0.0,
        "no documents were retrieved",
    )
    assert judge_simulator.stats()["chat"] == 2
    # A null inside a list of documents is skipped, not sent as "null".
    assert (
        _data(_prompt_with(judge_simulator, "What is D?"), "context")
        == "Document 1:\nD is a letter."
    )


def test_empty_strings_fail_their_row_and_empty_retrievals_score_zero_without_a_call(
    judge_simulator,
):
    df = pl.DataFrame(
        {
            "question": ["", "   ", "What is C?", "What is D?"],
            "docs": [["a"], ["b"], ["", "  "], []],
        }
    )
    out = _score(df, judge_simulator)
    assert out[f"{EV}_error"].to_list() == [
        "field 'input' is empty",
        "field 'input' is empty",
        None,
        None,
    ]
    # Only blank documents, or none: nothing was retrieved (Phoenix's rule), not an error.
    assert out[f"{EV}_score"].to_list() == [None, None, 0.0, 0.0]
    assert out[f"{EV}_label"].to_list()[2:] == ["irrelevant", "irrelevant"]
    assert judge_simulator.stats()["total"] == 0


# -- values that are not text ---------------------------------------------------------


def test_numbers_and_structs_are_sent_as_text(judge_simulator):
    df = pl.DataFrame(
        {
            "ticket": [1042, 7],
            "query": [{"text": "reset password", "lang": "en"}, {"text": "refund", "lang": "fr"}],
            "docs": [["Settings > Security."], ["Refunds take 5 days."]],
        }
    )
    out = _score(df, judge_simulator, {"input": "query", "context": "docs"})
    assert _exactly_one_outcome(out) and out[f"{EV}_error"].null_count() == 2
    prompt = _prompt_with(judge_simulator, "Settings > Security.")
    assert _data(prompt, "input") == '{"text": "reset password", "lang": "en"}'
    judge_simulator.reset()
    numbers = _score(df, judge_simulator, {"input": "ticket", "context": "docs"})
    assert numbers[f"{EV}_error"].null_count() == 2
    assert _data(_prompt_with(judge_simulator, "Settings > Security."), "input") == "1042"


def test_lists_of_non_strings_as_context_become_numbered_documents(judge_simulator):
    df = pl.DataFrame(
        {
            "question": ["Which years?", "Which products?"],
            "years": [[1999, 2004], [2011]],
            "products": [[{"sku": "A1", "price": 3.5}], [{"sku": "B2", "price": None}]],
        }
    )
    out = _score(df, judge_simulator, {"input": "question", "context": "years"})
    assert out[f"{EV}_error"].null_count() == 2
    prompt = _prompt_with(judge_simulator, "Which years?")
    assert _data(prompt, "context") == "Document 1:\n1999\n\nDocument 2:\n2004"
    judge_simulator.reset()
    out = _score(df, judge_simulator, {"input": "question", "context": "products"})
    assert out[f"{EV}_error"].null_count() == 2
    prompt = _prompt_with(judge_simulator, "Which years?")
    assert _data(prompt, "context") == 'Document 1:\n{"sku": "A1", "price": 3.5}'


def test_mixed_type_pandas_column_is_scored_row_by_row(judge_simulator):
    pdf = pd.DataFrame(
        {
            "question": ["What is A?", 42, None, float("nan"), {"q": "nested"}],
            "docs": ["A is a letter."] * 5,
        }
    )
    out = _score(pdf, judge_simulator)
    assert isinstance(out, pd.DataFrame)
    errors = out[f"{EV}_error"].tolist()
    assert errors[2] == errors[3] == "field 'input' is null"  # None and NaN are missing
    assert pd.isna(errors[0]) and pd.isna(errors[1]) and pd.isna(errors[4])
    inputs = sorted(_data(p, "input") for p in _prompts(judge_simulator))
    assert inputs == ["42", "What is A?", '{"q": "nested"}']
    assert out["question"].tolist()[:2] == ["What is A?", 42]  # the user's column as given


# -- very long texts ------------------------------------------------------------------


def test_one_megabyte_text_is_cut_to_the_judge_budget_with_a_note(judge_simulator):
    huge = "All work and no play makes Jack a dull boy. " * 23_832  # about 1 MB
    df = pl.DataFrame(
        {"question": ["What does Jack do?", "Short one?"], "docs": [[huge], ["Jack works."]]}
    )
    out = _score(df, judge_simulator)
    assert out[f"{EV}_score"].null_count() == 0
    budget = (DEFAULT_CONTEXT_TOKENS - 1024 - PROMPT_RESERVE_TOKENS) * CHARS_PER_TOKEN
    note = out[f"{EV}_explanation"][0]
    assert note.endswith(
        f"[framekit: cut to fit the judge's context window: context "
        f"{len(huge):,} -> {budget - len('What does Jack do?'):,} characters]"
    )
    assert "framekit" not in out[f"{EV}_explanation"][1]
    long_prompt = _prompt_with(judge_simulator, "What does Jack do?")
    assert len(long_prompt) < budget + 2_000 and "cut by framekit" in long_prompt
    assert "cut by framekit" not in _prompt_with(judge_simulator, "Short one?")
    assert out["docs"][0].to_list() == [huge]  # the user's data is untouched


def test_the_budget_follows_the_judge_context_window(judge_simulator):
    judge = sim_judge(judge_simulator, max_tokens=500)
    judge.context_window = 4_000  # e.g. a small self-hosted model
    df = pl.DataFrame({"question": ["q " * 20_000], "docs": [["d " * 20_000]]})
    out = _score(df, judge_simulator, judge=judge)
    assert out[f"{EV}_score"].null_count() == 0
    budget = (4_000 - 500 - PROMPT_RESERVE_TOKENS) * CHARS_PER_TOKEN
    assert "input 40,000 -> 3,750; context 40,000 -> 3,750" in out[f"{EV}_explanation"][0]
    assert len(_prompts(judge_simulator)[0]) < budget + 2_000


# -- text that is not clean -----------------------------------------------------------


def test_invalid_unicode_is_repaired_not_fatal(judge_simulator):
    # e.g. text decoded with errors="surrogatepass", or JSON with a stray "\ud800".
    pdf = pd.DataFrame(
        {
            "question": ["lone \ud800 surrogate", "pair \ud83d\ude00 joined"],
            "docs": ["doc one", "doc two"],
        },
        dtype=object,
    )
    out = _score(pdf, judge_simulator)
    assert out[f"{EV}_error"].isna().all()
    inputs = sorted(_data(p, "input") for p in _prompts(judge_simulator))
    assert inputs == ["lone \ufffd surrogate", "pair 😀 joined"]


def test_invalid_utf8_in_arrow_and_binary_columns_is_repaired(judge_simulator):
    data = b"bad \xff\xfe bytes"
    offsets = pa.array([0, len(data)], type=pa.int32()).buffers()[1]
    invalid = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])
    table = pa.table({"question": invalid, "docs": pa.array(["doc"])})
    out = _score(table, judge_simulator)
    assert out[f"{EV}_error"].null_count() == 1
    assert out["question"][0] == "bad \ufffd\ufffd bytes"
    binary = pl.DataFrame({"question": [data], "docs": ["doc"]})
    out = _score(binary, judge_simulator)
    assert out[f"{EV}_error"].null_count() == 1
    assert [_data(p, "input") for p in _prompts(judge_simulator)] == ["bad \ufffd\ufffd bytes"] * 2


def test_callable_returning_broken_unicode_is_repaired(judge_simulator):
    df = pl.DataFrame({"q": ["x"], "docs": ["doc"]})
    out = _score(df, judge_simulator, {"input": lambda row: "half \udc80 char", "context": "docs"})
    assert out[f"{EV}_error"].null_count() == 1
    assert _data(_prompts(judge_simulator)[0], "input") == "half \ufffd char"


def test_control_characters_never_reach_the_judge(judge_simulator):
    nasty = "colour \x1b[31mred\x1b[0m\x00 bell\x07 tab\tnew\nline"
    df = pl.DataFrame({"question": [nasty], "docs": [["vertical\x0btab \x7f"]]})
    out = _score(df, judge_simulator)
    assert out[f"{EV}_error"].null_count() == 1
    prompt = _prompts(judge_simulator)[0]
    assert not any(c in prompt for c in "\x1b\x00\x07\x0b\x7f")
    assert "tab\tnew\nline" in prompt  # tabs and newlines are text, kept
    assert out["question"][0] == nasty


def test_emoji_and_other_scripts_pass_through_and_cache(judge_simulator, tmp_path):
    text = "Is 👨‍👩‍👧 ok? 家族 🇫🇷 naïve ✨"
    df = pl.DataFrame({"question": [text], "docs": [["Ja, 👍🏽"]]})
    first = _score(df, judge_simulator, cache=tmp_path)
    assert _data(_prompts(judge_simulator)[0], "input") == text
    again = _score(df, judge_simulator, cache=tmp_path)
    assert judge_simulator.stats()["chat"] == 1
    assert again.equals(first) and again["question"][0] == text


# -- frame shapes ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pandas", "arrow", "duckdb"])
def test_duplicate_column_names_are_refused_before_any_call(kind, judge_simulator):
    if kind == "pandas":
        data = pd.DataFrame([["q", "d", "x"]], columns=["question", "docs", "docs"])
    elif kind == "arrow":
        data = pa.Table.from_arrays(
            [pa.array(["q"]), pa.array(["d"]), pa.array(["x"])], names=["question", "docs", "docs"]
        )
    else:
        data = duckdb.sql("select 'q' as question, 'd' as docs, 'x' as docs")
    with pytest.raises(fk.InputError, match="duplicate column names: docs"):
        _score(data, judge_simulator)
    assert judge_simulator.stats()["total"] == 0


def test_existing_result_columns_need_overwrite_in_pandas_too(judge_simulator):
    pdf = retrieval_frame(3, label="relevant").to_pandas()
    pdf[f"{EV}_score"] = 0.0
    pdf["after"] = "kept"
    with pytest.raises(fk.InputError, match=f"'{EV}_score' already exists"):
        _score(pdf, judge_simulator)
    assert judge_simulator.stats()["total"] == 0
    out = _score(pdf, judge_simulator, overwrite=True)
    assert list(out.columns[:4]) == ["row_id", "question", "docs", "after"]
    assert out[f"{EV}_score"].tolist() == [1.0] * 3
    assert list(out.columns).count(f"{EV}_score") == 1


@pytest.mark.parametrize("kind", ["pandas", "lazy"])
def test_empty_frames_give_typed_columns_and_no_calls(kind, judge_simulator):
    df = retrieval_frame(0)
    data = df.to_pandas().set_index("row_id") if kind == "pandas" else df.lazy()
    out = _score(data, judge_simulator)
    assert len(out) == 0 and judge_simulator.stats()["total"] == 0
    if kind == "pandas":
        assert str(out[f"{EV}_score"].dtype) == "Float64"
        assert str(out[f"{EV}_passed"].dtype) == "boolean"
    else:
        assert out.schema[f"{EV}_score"] == pl.Float64 and out.schema[f"{EV}_error"] == pl.String


def test_lazyframe_with_a_plan_is_collected_once_and_mapped_by_expression(judge_simulator):
    lazy = (
        retrieval_frame(10)
        .lazy()
        .filter(pl.col("row_id") % 2 == 0)
        .with_columns(pl.col("question").str.to_uppercase().alias("loud"))
    )
    out = _score(lazy, judge_simulator, {"input": pl.col("loud"), "context": "docs"})
    assert isinstance(out, pl.DataFrame)
    assert out["row_id"].to_list() == [0, 2, 4, 6, 8]
    assert out[f"{EV}_error"].null_count() == 5
    assert all("WHAT IS ITEM" in p for p in _prompts(judge_simulator))


@pytest.mark.parametrize("index", ["multi", "duplicate", "datetime", "named"])
def test_pandas_index_is_kept_and_never_scored(index, judge_simulator):
    pdf = retrieval_frame(4).to_pandas()
    if index == "multi":
        pdf.index = pd.MultiIndex.from_tuples(
            [("b", 2), ("a", 1), ("b", 1), ("a", 2)], names=["group", "n"]
        )
    elif index == "duplicate":
        pdf.index = [7, 7, 3, 3]
    elif index == "datetime":
        pdf.index = pd.date_range("2024-01-01", periods=4, freq="D")[::-1]
    else:
        pdf.index = pd.Index(
            ["SECRET-IDX-0", "SECRET-IDX-1", "SECRET-IDX-2", "SECRET-IDX-3"], name="question"
        )  # named like a column, on purpose
    out = _score(pdf, judge_simulator)
    assert out.index.equals(pdf.index)
    assert out["row_id"].tolist() == [0, 1, 2, 3]
    assert out[f"{EV}_score"].notna().all()
    assert not any("SECRET-IDX" in p or "2024-01" in p for p in _prompts(judge_simulator))


# -- the same messy table through evaluate_parquet and the command line ----------------


def _messy_parquet(tmp_path):
    frame = pl.DataFrame(
        {
            "row_id": list(range(6)),
            "question": [
                "What is A?",
                None,
                "",
                "Is 👨‍👩‍👧 ok? 家族",
                "bell\x07 esc\x1b[0m",
                "Long?",
            ],
            "docs": [["A."], ["B."], ["C."], ["👍🏽"], [None, "ctrl\x00"], ["x" * 1_000_000]],
        }
    )
    path = tmp_path / "messy.parquet"
    frame.write_parquet(path)
    return path, frame


def _check_messy(scored: pl.DataFrame, frame: pl.DataFrame) -> None:
    assert scored.select(frame.columns).equals(frame)
    assert _exactly_one_outcome(scored)
    errors = scored[f"{EV}_error"].to_list()
    assert errors[1] == "field 'input' is null" and errors[2] == "field 'input' is empty"
    assert [e is None for e in errors] == [True, False, False, True, True, True]
    assert "cut to fit the judge's context window" in scored[f"{EV}_explanation"][5]


def test_messy_parquet_through_evaluate_parquet(judge_simulator, tmp_path):
    source, frame = _messy_parquet(tmp_path)
    destination = tmp_path / "scored.parquet"
    fk.evaluate_parquet(
        source,
        destination,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path / "cache",
        progress=False,
    )
    _check_messy(pl.read_parquet(destination), frame)
    assert judge_simulator.stats()["chat"] == 4


def test_messy_parquet_through_the_command_line(judge_simulator, tmp_path, monkeypatch, capsys):
    from framekit import cli
    from tests.helpers import API_KEY

    source, frame = _messy_parquet(tmp_path)
    destination = tmp_path / "scored.parquet"
    monkeypatch.setenv("FRAMEKIT_API_KEY", API_KEY)
    code = cli.main(
        [
            "evaluate", str(source), "-o", str(destination), "-e", "retrieval_relevance",
            "--map", "input=question", "--map", "context=docs", "--judge", "openai/sim-judge",
            "--api-base", judge_simulator.api_base, "--cache", str(tmp_path / "cache"), "-q",
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    _check_messy(pl.read_parquet(destination), frame)
    assert API_KEY not in capsys.readouterr().err
