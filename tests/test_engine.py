"""The core promises of evaluate_dataframe, proven against the loopback judge simulator."""

from __future__ import annotations

import asyncio

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.testing import SimulatorConfig
from tests.helpers import MAPPING, retrieval_frame, sim_judge

# Every test here runs on both judge transports (see the ``transport`` fixture).
pytestmark = pytest.mark.usefixtures("transport")

RESULT_DTYPES = {
    "retrieval_relevance_score": pl.Float64,
    "retrieval_relevance_label": pl.String,
    "retrieval_relevance_explanation": pl.String,
    "retrieval_relevance_passed": pl.Boolean,
    "retrieval_relevance_confidence": pl.Float64,
    "retrieval_relevance_error": pl.String,
}


def test_duplicate_rows_are_sent_once(judge_simulator, tmp_path):
    df = retrieval_frame(1000, distinct=10)
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert judge_simulator.stats()["chat"] == 10
    assert out.height == 1000
    assert out["retrieval_relevance_score"].null_count() == 0
    # Rows with the same record get the same verdict.
    per_record = out.group_by(pl.col("question")).agg(
        pl.col("retrieval_relevance_label").n_unique()
    )
    assert per_record["retrieval_relevance_label"].max() == 1


def test_rerun_sends_no_requests_and_gives_identical_scores(judge_simulator, tmp_path):
    df = retrieval_frame(50)
    judge = sim_judge(judge_simulator)
    first = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=tmp_path, progress=False
    )
    sent = judge_simulator.stats()["chat"]
    assert sent == 50
    second = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=tmp_path, progress=False
    )
    assert judge_simulator.stats()["chat"] == sent
    assert second.equals(first)
    assert fk.last_run().cache_hits == 50 and fk.last_run().requests_sent == 0


def test_labels_follow_the_judge_and_map_to_scores(judge_simulator, tmp_path):
    df = pl.concat([retrieval_frame(3, label="relevant"), retrieval_frame(2, label="irrelevant")])
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert out["retrieval_relevance_label"].to_list() == ["relevant"] * 3 + ["irrelevant"] * 2
    assert out["retrieval_relevance_score"].to_list() == [1.0] * 3 + [0.0] * 2
    assert out["retrieval_relevance_passed"].to_list() == [True] * 3 + [False] * 2
    assert out["retrieval_relevance_explanation"].null_count() == 0


def test_output_keeps_columns_order_and_dtypes(judge_simulator, tmp_path):
    df = retrieval_frame(20).sample(fraction=1.0, shuffle=True, seed=3)
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert out.columns == [*df.columns, *RESULT_DTYPES]
    assert out["row_id"].to_list() == df["row_id"].to_list()
    assert {c: out.schema[c] for c in RESULT_DTYPES} == RESULT_DTYPES


def test_details_columns(judge_simulator, tmp_path):
    df = retrieval_frame(4)
    judge = sim_judge(judge_simulator)
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=tmp_path,
        progress=False,
        details=True,
    )
    assert out.schema["retrieval_relevance_tokens"] == pl.Int64
    assert out.schema["retrieval_relevance_cost_usd"] == pl.Float64
    assert out["retrieval_relevance_cached"].to_list() == [False] * 4
    assert (out["retrieval_relevance_tokens"] > 0).all()
    again = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=tmp_path,
        progress=False,
        details=True,
    )
    assert again["retrieval_relevance_cached"].to_list() == [True] * 4


def test_pandas_in_pandas_out_with_index_kept(judge_simulator, tmp_path):
    pdf = retrieval_frame(6).to_pandas()
    pdf.index = [f"r{i}" for i in range(5, -1, -1)]
    out = fk.evaluate_dataframe(
        pdf,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert isinstance(out, pd.DataFrame)
    assert list(out.index) == list(pdf.index)
    assert list(out.columns) == [*pdf.columns, *RESULT_DTYPES]
    assert out["row_id"].tolist() == pdf["row_id"].tolist()
    assert out["retrieval_relevance_score"].notna().all()


@pytest.mark.parametrize("kind", ["lazy", "arrow", "duckdb"])
def test_other_inputs_give_polars(kind, judge_simulator, tmp_path):
    df = retrieval_frame(5)
    if kind == "lazy":
        data = df.lazy()
    elif kind == "arrow":
        data = df.to_arrow()
        assert isinstance(data, pa.Table)
    else:
        import duckdb

        con = duckdb.connect()
        data = con.sql("select * from df order by row_id")
    out = fk.evaluate_dataframe(
        data,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert isinstance(out, pl.DataFrame)
    assert out["row_id"].to_list() == list(range(5))
    assert out["retrieval_relevance_score"].null_count() == 0


def test_mapping_by_expression_and_callable(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {"q": ["What is item 1?", "What is item 2?"], "d": ["Item 1 is a thing.", "Item 2."]}
    )
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        {"input": pl.col("q").str.to_uppercase(), "context": lambda row: [row["d"], "extra"]},
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert out["retrieval_relevance_error"].null_count() == 2
    user = judge_simulator.requests[0]["messages"][1]["content"]
    assert "WHAT IS ITEM" in user and "Document 2:\nextra" in user


def test_missing_column_fails_before_any_request(judge_simulator, tmp_path):
    df = retrieval_frame(3)
    with pytest.raises(fk.MappingError) as info:
        fk.evaluate_dataframe(
            df,
            [RetrievalRelevance()],
            {"input": "question", "context": "documents"},
            judge=sim_judge(judge_simulator),
            cache=tmp_path,
            progress=False,
        )
    message = str(info.value)
    assert "'documents'" in message and "'docs'" in message and "'question'" in message
    assert judge_simulator.stats()["total"] == 0


def test_unmapped_required_field_names_field_and_evaluator(judge_simulator, tmp_path):
    df = retrieval_frame(3)
    with pytest.raises(fk.MappingError, match=r"retrieval_relevance.*'context'"):
        fk.evaluate_dataframe(
            df,
            [RetrievalRelevance()],
            {"input": "question"},
            judge=sim_judge(judge_simulator),
            cache=tmp_path,
            progress=False,
        )
    assert judge_simulator.stats()["total"] == 0


def test_null_field_fails_only_that_row(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {"question": ["What is item 1?", None, "What is item 3?"], "docs": [["a"], ["b"], []]}
    )
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert out["retrieval_relevance_error"].to_list() == [None, "field 'input' is null", None]
    assert out["retrieval_relevance_score"][0] is not None
    # An empty retrieval is not a failure: irrelevant 0, without a call.
    assert (out["retrieval_relevance_score"][2], out["retrieval_relevance_label"][2]) == (
        0.0,
        "irrelevant",
    )
    assert (
        out["retrieval_relevance_score"][1] is None and out["retrieval_relevance_passed"][1] is None
    )
    assert judge_simulator.stats()["chat"] == 1


def test_empty_frame_returns_typed_columns_without_requests(judge_simulator, tmp_path):
    df = retrieval_frame(0)
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert out.height == 0
    assert {c: out.schema[c] for c in RESULT_DTYPES} == RESULT_DTYPES
    assert judge_simulator.stats()["total"] == 0


def test_existing_result_columns_need_overwrite(judge_simulator, tmp_path):
    df = retrieval_frame(2).with_columns(retrieval_relevance_score=pl.lit(0.3))
    with pytest.raises(fk.InputError, match="overwrite=True"):
        fk.evaluate_dataframe(
            df,
            [RetrievalRelevance()],
            MAPPING,
            judge=sim_judge(judge_simulator),
            cache=tmp_path,
            progress=False,
        )
    out = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
        overwrite=True,
    )
    assert out.columns.count("retrieval_relevance_score") == 1
    assert out["retrieval_relevance_score"].null_count() == 0


def test_two_evaluators_with_one_name_is_an_error():
    with pytest.raises(fk.InputError, match="named 'retrieval_relevance'"):
        fk.evaluate_dataframe(
            retrieval_frame(1), [RetrievalRelevance(), RetrievalRelevance()], MAPPING, cache=False
        )


def test_works_inside_a_running_event_loop(judge_simulator, tmp_path):
    async def notebook_cell() -> pl.DataFrame:
        # As in Jupyter: a loop is already running when the sync API is called.
        return fk.evaluate_dataframe(
            retrieval_frame(3),
            [RetrievalRelevance()],
            MAPPING,
            judge=sim_judge(judge_simulator),
            cache=tmp_path,
            progress=False,
        )

    out = asyncio.run(notebook_cell())
    assert out["retrieval_relevance_score"].null_count() == 0


def test_async_api(judge_simulator, tmp_path):
    out = asyncio.run(
        fk.aevaluate_dataframe(
            retrieval_frame(3),
            [RetrievalRelevance()],
            MAPPING,
            judge=sim_judge(judge_simulator),
            cache=tmp_path,
            progress=False,
        )
    )
    assert out["retrieval_relevance_score"].null_count() == 0


def test_on_error_raise_names_row_and_keeps_results(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {"question": ["ok @sim(label=relevant)", "bad @sim(fault=refusal)"], "docs": ["a", "b"]}
    )
    with pytest.raises(
        fk.EvaluationFailed, match=r"row 1, retrieval_relevance: judge refused"
    ) as info:
        fk.evaluate_dataframe(
            df,
            [RetrievalRelevance()],
            MAPPING,
            judge=sim_judge(judge_simulator),
            cache=tmp_path,
            progress=False,
            on_error="raise",
        )
    assert info.value.frame["retrieval_relevance_score"][0] == 1.0


def test_progress_bar_and_summary_line(judge_simulator, tmp_path, capsys, monkeypatch):
    from framekit import _progress

    monkeypatch.setattr(_progress, "display_kind", lambda: "bar")  # as in a terminal
    fk.evaluate_dataframe(
        retrieval_frame(30, distinct=3),
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=True,
    )
    err = capsys.readouterr().err
    assert "30/30 rows" in err and "0 cached, 0 failed" in err
    assert "3 requests sent, 0 cache hits, 0 failed" in err
    assert fk.last_run().unique_requests == 3


def test_without_a_terminal_a_short_run_prints_its_summary_and_no_bar(
    judge_simulator, tmp_path, capsys
):
    fk.evaluate_dataframe(
        retrieval_frame(30, distinct=3),
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
    )
    err = capsys.readouterr().err
    # Progress lines come at most every 10 s: a run of a second has only its summary.
    assert err.splitlines() == fk.last_run().summary().splitlines() and "\r" not in err


def test_score_one_record(judge_simulator, tmp_path):
    ev = RetrievalRelevance()
    score = ev.score(
        input="What is item 1? @sim(label=relevant)",
        context=["Item 1."],
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
    )
    assert (score.value, score.label, score.passed) == (1.0, "relevant", True)
    assert score.metadata["judge"] == "openai/sim-judge"
    empty = ev.score(input="q", context=[], judge=sim_judge(judge_simulator), cache=tmp_path)
    assert (empty.value, empty.label, empty.explanation) == (
        0.0,
        "irrelevant",
        "no documents were retrieved",
    )
    assert judge_simulator.stats()["chat"] == 1


def test_config_override_judge_concurrency_is_respected(simulator_factory, tmp_path):
    sim = simulator_factory(SimulatorConfig(latency=0.05))
    fk.evaluate_dataframe(
        retrieval_frame(24),
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(sim, concurrency=3),
        cache=tmp_path,
        progress=False,
    )
    assert sim.stats()["max_in_flight"] <= 3


def test_progress_callable_is_told_of_every_evaluation_and_nothing_is_printed(
    judge_simulator, tmp_path, capsys
):
    events: list[tuple[int, str]] = []
    df = pl.concat(
        [
            retrieval_frame(4, distinct=2, label="relevant"),
            pl.DataFrame({"row_id": [9], "question": ["q @sim(fault=refusal)"], "docs": [["d"]]}),
        ]
    )
    fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=lambda n, kind: events.append((n, kind)),
    )
    assert sum(n for n, _ in events) == 5
    assert {kind for _, kind in events} == {"done", "failed"}
    assert capsys.readouterr().err == ""


class _Picky(RetrievalRelevance):
    """Cannot build the prompt of one record, nor read the verdict of another."""

    def build_request(self, record):
        if "unbuildable" in record["input"]:
            raise fk.RecordError("this prompt cannot be built")
        return super().build_request(record)

    def verdict(self, record, answer, vectors=None):
        if "unreadable" in record["input"]:
            raise fk.RecordError("this verdict cannot be read")
        return super().verdict(record, answer, vectors)


def test_progress_counts_each_row_once_as_what_it_came_to(judge_simulator, tmp_path):
    # Rows failing at each stage: preparing (a null question), building the prompt, and
    # reading the answer (two identical rows); the bar must add up to the error column.
    questions = ["a", "b", "a", None, "unbuildable", "unreadable", "unreadable"]
    df = pl.DataFrame({"question": questions, "docs": [["d"]] * len(questions)})
    events: list[tuple[int, str]] = []
    out = fk.evaluate_dataframe(
        df,
        [_Picky(name="picky")],
        MAPPING,
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=lambda n, kind: events.append((n, kind)),
    )
    failed = out["picky_error"].is_not_null()
    assert failed.to_list() == [False, False, False, True, True, True, True]
    assert sum(n for n, kind in events if kind == "failed") == 4
    assert sum(n for n, kind in events if kind == "done") == 3
    assert sum(n for n, _ in events) == len(questions)  # each row once
    assert out["picky_error"][5] == "this verdict cannot be read"
    assert judge_simulator.stats()["chat"] == 3  # a, b, unreadable


@pytest.mark.parametrize(
    ("requests", "busy", "processes", "transport", "expected"),
    [
        (1000, 0.95, 1, "litellm", "processes=2"),  # a busy litellm client: workers help
        (1000, 0.95, 1, "http", "busy while sending"),  # no workers to suggest on http
        (1000, 0.52, 1, "litellm", None),  # a slow judge: the client mostly waited
        (100, 0.99, 1, "litellm", None),  # too short a run to judge from
        (1000, 0.95, 2, "litellm", None),  # workers already share the work
    ],
)
def test_summary_says_when_this_process_cpu_and_not_the_judge_set_the_pace(
    requests, busy, processes, transport, expected
):
    # The decision is a function of measured numbers; measuring them is the benchmarks' job.
    from framekit.engine.executor import cpu_hint
    from framekit.engine.stats import RunStats

    hint = cpu_hint(requests, busy, processes, transport)
    if expected is None:
        assert hint is None
        return
    assert hint is not None and expected in hint and f"{busy:.0%} busy" in hint
    assert (transport == "litellm") == ("processes=2" in hint)
    summary = RunStats(hints=[hint]).summary().splitlines()
    assert summary[1] == f"framekit: hint: {hint}"


def test_summary_names_the_transport_the_calls_went_through(judge_simulator):
    df = retrieval_frame(3)
    for transport in ("http", "litellm"):
        judge = sim_judge(judge_simulator, transport=transport)
        assert judge.transport == transport
        fk.evaluate_dataframe(
            df, [RetrievalRelevance()], MAPPING, judge=judge, cache=False, progress=False
        )
        assert fk.last_run().transports == [transport]
        assert fk.last_run().summary().splitlines()[0].endswith(f"(via {transport})")
