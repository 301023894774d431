"""``fk.evaluate_pairwise`` on the simulator's position-biased pairwise judge, over HTTP:
requests counted at the simulator, verdicts read back as pairs, ranked by ``fk.rank``."""

from __future__ import annotations

import warnings

import pandas as pd
import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import Preference, RetrievalRelevance
from framekit.testing import PairwiseJudge
from tests.helpers import sim_judge

#: Three strategies of known quality (the simulator's hidden quality of their answers).
QUALITY = {"bm25": 0.3, "dense": 0.5, "hybrid": 0.7}
MAPPING = {"input": "question", "output": "answer"}


def strategies(questions: int, quality: dict[str, float] = QUALITY) -> pl.DataFrame:
    """One row per (question, strategy); each answer carries its strategy's quality."""
    rows = [
        {
            "question_id": q,
            "strategy": s,
            "question": f"Question {q}: how do I keep a compost pile warm in winter?",
            "answer": f"Answer {q} from {s}. @sim(quality={quality[s]})",
        }
        for q in range(questions)
        for s in quality
    ]
    return pl.DataFrame(rows)


def run(df, judge, cache, **kw):
    return fk.evaluate_pairwise(
        df, [Preference()], MAPPING, by="strategy", on="question_id", judge=judge,
        cache=cache, progress=False, **kw,
    )  # fmt: skip


def test_three_strategies_150_questions_450_pairs_from_900_requests_and_a_rerun_sends_none(
    judge_simulator, tmp_path
):
    df = strategies(150)
    judge = sim_judge(judge_simulator)
    pairs = run(df, judge, tmp_path / "cache")
    assert pairs.height == 450
    assert judge_simulator.stats()["chat"] == 900
    assert pairs.columns == [
        "question_id", "a", "b", "question",
        "preference_winner", "preference_ab", "preference_ba", "preference_consistent",
        "preference_confidence", "preference_explanation", "preference_error",
    ]  # fmt: skip
    assert pairs["preference_error"].null_count() == 450
    # Every inconsistent pair is a tie, and every consistent one names what both said.
    inconsistent = pairs.filter(~pl.col("preference_consistent"))
    assert inconsistent.height > 0
    assert set(inconsistent["preference_winner"]) == {"tie"}
    for a, b, ab, ba, winner in (
        pairs.filter(pl.col("preference_consistent"))
        .select("a", "b", "preference_ab", "preference_ba", "preference_winner")
        .rows()
    ):
        assert winner == {"A": a, "B": b}[ab] and winner == {"A": b, "B": a}[ba]
    # The confidence is the judge's (logprobs): the lower of the two orders'.
    assert pairs["preference_confidence"].null_count() == 0
    assert pairs["preference_confidence"].is_between(0, 1).all()
    ranked = fk.rank(pairs, by="strategy", n_boot=300)
    assert ranked["strategy"].to_list() == ["hybrid", "dense", "bm25"]
    assert ranked["rank"].to_list() == [1, 2, 3]
    assert fk.last_run().position_bias["preference"] is not None

    again = run(df, judge, tmp_path / "cache")
    assert judge_simulator.stats()["chat"] == 900  # the re-run sent nothing
    assert again.equals(pairs)


def expected_bias(bias: float, gap: float, slope: float = 4.0) -> float:
    """P(the same position in both orders) for candidates whose qualities differ by gap."""
    p = 1.0 / (1.0 + pow(2.718281828459045, -slope * gap))  # P(the better wins on quality)
    first_ab = bias + (1 - bias) * p  # better shown first: says A
    first_ba = bias + (1 - bias) * (1 - p)  # worse shown first: says A
    return first_ab * first_ba + (1 - first_ab) * (1 - first_ba)


def test_the_reported_position_bias_moves_with_the_simulated_one(simulator_factory, tmp_path):
    judges = {f"bias{int(b * 10)}": PairwiseJudge(bias=b) for b in (0.0, 0.3, 0.6)}
    sim = simulator_factory(pairwise_judges=judges)
    df = strategies(200, {"bm25": 0.2, "dense": 0.8})
    reported = {}
    for model, config in judges.items():
        judge = fk.Judge(f"openai/{model}", api_base=sim.api_base, api_key="sk-test")
        pairs = run(df, judge, tmp_path / model)
        reported[config.bias] = fk.last_run().position_bias["preference"]
        same = pairs.filter(pl.col("preference_ab") == pl.col("preference_ba")).height
        assert reported[config.bias] == same / pairs.height
        # 200 pairs: within 4 standard errors (0.035 each) of the simulator's law: 0.15,
        # 0.37 and 0.62 for a bias of 0, 0.3 and 0.6.
        assert reported[config.bias] == pytest.approx(expected_bias(config.bias, 0.6), abs=0.14)
    assert reported[0.0] < reported[0.3] < reported[0.6]
    assert sim.stats()["chat"] == 3 * 400
    # The run record and the summary carry it too.
    stats = fk.last_run()
    assert stats.provenance["pairwise"]["position_bias"]["preference"] == reported[0.6]
    assert "position bias" in stats.summary()


def test_the_same_two_answers_under_two_keys_are_asked_once(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {
            "question_id": [1, 1, 2, 2],
            "strategy": ["bm25", "dense"] * 2,
            "question": ["Same question?"] * 4,
            "answer": ["x @sim(quality=0.2)", "y @sim(quality=0.8)"] * 2,
        }
    )
    pairs = run(df, sim_judge(judge_simulator), tmp_path)
    assert pairs.height == 2
    assert judge_simulator.stats()["chat"] == 2  # two orders, once for both keys
    assert pairs["preference_ab"][0] == pairs["preference_ab"][1]


def test_a_key_missing_a_group_errs_on_its_pairs_and_asks_nothing_about_them(
    judge_simulator, tmp_path
):
    df = strategies(3).filter(~((pl.col("question_id") == 1) & (pl.col("strategy") == "dense")))
    pairs = run(df, sim_judge(judge_simulator), tmp_path)
    assert pairs.height == 9
    missing = pairs.filter(pl.col("preference_error").is_not_null())
    assert missing.select("question_id", "a", "b").rows() == [
        (1, "bm25", "dense"),
        (1, "dense", "hybrid"),
    ]
    assert set(missing["preference_error"]) == {"no row of group 'dense' for this key"}
    assert missing["preference_winner"].null_count() == 2
    assert judge_simulator.stats()["chat"] == 2 * 7
    ranked = fk.rank(pairs, by="strategy", n_boot=100)
    assert ranked.filter(pl.col("strategy") == "dense")["errors"].item() == 2


def test_a_key_repeated_within_a_group_is_refused_before_any_call(judge_simulator, tmp_path):
    df = pl.concat([strategies(2), strategies(2).head(1)])
    with pytest.raises(fk.InputError, match="appears more than once in group 'bm25'"):
        run(df, sim_judge(judge_simulator), tmp_path)
    assert judge_simulator.stats()["chat"] == 0


def test_against_compares_every_group_with_that_one_only(judge_simulator, tmp_path):
    pairs = run(strategies(4), sim_judge(judge_simulator), tmp_path, against="bm25")
    assert pairs.height == 8
    assert set(pairs["a"]) == {"bm25"} and set(pairs["b"]) == {"dense", "hybrid"}
    assert judge_simulator.stats()["chat"] == 16
    with pytest.raises(fk.InputError, match="against='tfidf' is not a group"):
        run(strategies(1), sim_judge(judge_simulator), tmp_path, against="tfidf")


def test_pandas_in_pandas_out(judge_simulator, tmp_path):
    pairs = run(strategies(3).to_pandas(), sim_judge(judge_simulator), tmp_path)
    assert isinstance(pairs, pd.DataFrame)
    assert len(pairs) == 9 and "preference_winner" in pairs.columns
    assert isinstance(fk.rank(pairs, by="strategy", n_boot=100), pd.DataFrame)


def test_prompt_errors_are_refused_before_any_call(judge_simulator, tmp_path):
    judge = sim_judge(judge_simulator)
    with pytest.raises(fk.InputError, match="scores one answer at a time"):
        fk.evaluate_pairwise(
            strategies(2), [RetrievalRelevance()], MAPPING, by="strategy", on="question_id",
            judge=judge, cache=tmp_path, progress=False,
        )  # fmt: skip
    with pytest.raises(fk.MappingError, match="nothing to compare"):
        fk.evaluate_pairwise(
            strategies(2), [Preference()], {"input": "question"}, by="strategy",
            on="question_id", judge=judge, cache=tmp_path, progress=False,
        )  # fmt: skip
    with pytest.raises(fk.InputError, match="at least two groups"):
        run(strategies(2).filter(pl.col("strategy") == "bm25"), judge, tmp_path)
    assert judge_simulator.stats()["chat"] == 0


def test_a_failed_order_fails_its_pair_and_no_other(judge_simulator, tmp_path):
    df = strategies(3).with_columns(
        answer=pl.when((pl.col("question_id") == 2) & (pl.col("strategy") == "hybrid"))
        .then(pl.lit("broken @sim(quality=0.7) @sim(fault=400)"))
        .otherwise(pl.col("answer"))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairs = run(df, sim_judge(judge_simulator), tmp_path)
    failed = pairs.filter(pl.col("preference_error").is_not_null())
    assert failed.select("question_id", "a", "b").rows() == [
        (2, "bm25", "hybrid"),
        (2, "dense", "hybrid"),
    ]
    assert all("a first:" in e and "b first:" in e for e in failed["preference_error"])
    assert failed["preference_winner"].null_count() == 2
    assert pairs.filter(pl.col("preference_error").is_null())["preference_winner"].null_count() == 0


def test_the_offline_judge_compares_relevance_and_calls_near_equal_a_tie(tmp_path):
    df = pl.DataFrame(
        {
            "question_id": [1, 1, 1, 2, 2, 2],
            "strategy": ["bm25", "dense", "hybrid"] * 2,
            "question": ["How do I reset my password?"] * 3 + ["When does the shop open?"] * 3,
            "answer": [
                "Open Settings, then Security, and choose Reset password.",
                "Bananas are rich in potassium.",
                "Open Settings, then Security, and choose Reset password.",
                "The shop opens at nine in the morning.",
                "The shop opens at nine in the morning.",
                "Penguins live in the southern hemisphere.",
            ],
        }
    )
    pairs = fk.evaluate_pairwise(
        df, [Preference()], MAPPING, by="strategy", on="question_id", judge="local",
        cache=tmp_path, progress=False,
    )  # fmt: skip
    winners = {(q, a, b): w for q, a, b, w in pairs.select(
        "question_id", "a", "b", "preference_winner").rows()}  # fmt: skip
    assert winners[(1, "bm25", "dense")] == "bm25"
    assert winners[(1, "bm25", "hybrid")] == "tie"  # the same answer: equal relevance
    assert winners[(1, "dense", "hybrid")] == "hybrid"
    assert winners[(2, "bm25", "dense")] == "tie"
    assert winners[(2, "dense", "hybrid")] == "dense"
    assert pairs["preference_consistent"].all()  # the offline judge has no position
    assert fk.last_run().position_bias["preference"] == 0.0


def test_with_only_context_mapped_the_retrievals_are_compared(judge_simulator, tmp_path):
    df = pl.DataFrame(
        {
            "question_id": [1, 1],
            "strategy": ["bm25", "dense"],
            "question": ["Capital of France?"] * 2,
            "docs": [
                ["Paris is the capital. @sim(quality=0.9)"],
                ["Lyon has silk. @sim(quality=0.1)"],
            ],
        }
    )
    pairs = fk.evaluate_pairwise(
        df, [Preference()], {"input": "question", "context": "docs"}, by="strategy",
        on="question_id", judge=sim_judge(judge_simulator), cache=tmp_path, progress=False,
    )  # fmt: skip
    assert pairs.height == 1 and pairs["preference_error"][0] is None
    sent = [m["content"] for r in judge_simulator.requests for m in r["messages"]]
    user = next(t for t in sent if "[BEGIN DATA: candidate_a]" in t)
    assert "retrieved documents hold more of the information" in user
    assert "Document 1:\nParis is the capital." in user


def test_the_awaitable_form_runs_inside_an_event_loop(judge_simulator, tmp_path):
    import asyncio

    async def main() -> pl.DataFrame:
        return await fk.aevaluate_pairwise(
            strategies(2), [Preference()], MAPPING, by="strategy", on="question_id",
            judge=sim_judge(judge_simulator), cache=tmp_path, progress=False,
        )  # fmt: skip

    pairs = asyncio.run(main())
    assert pairs.height == 6 and pairs["preference_error"].null_count() == 6
    assert judge_simulator.stats()["chat"] == 12


def test_batch_mode_sends_both_orders_as_batch_lines(simulator_factory, tmp_path):
    from tests.helpers import batch_judge

    sim = simulator_factory(batch_seconds=0.05)
    pairs = run(strategies(5), batch_judge(sim, "openai/sim"), tmp_path)
    stats = sim.stats()
    assert stats["chat"] == 0 and stats["batch"]["lines"] == 2 * 15
    assert pairs["preference_error"].null_count() == 15
    ranked = fk.rank(pairs, by="strategy", n_boot=100)
    assert ranked["strategy"][0] == "hybrid"


def test_a_mapping_that_raises_fails_the_pairs_of_its_row_only(judge_simulator, tmp_path):
    def answer(row: dict) -> str:
        if row["question_id"] == 1 and row["strategy"] == "dense":
            raise ValueError("no answer logged")
        return row["answer"]

    df = strategies(3).with_columns(
        pl.col("strategy").replace({"bm25": "1", "dense": "2", "hybrid": "3"})
    )
    df = df.with_columns(strategy=pl.col("strategy").cast(pl.Int64))

    def by_number(row: dict) -> str:
        return answer({**row, "strategy": {1: "bm25", 2: "dense", 3: "hybrid"}[row["strategy"]]})

    pairs = fk.evaluate_pairwise(
        df, [Preference()], {"input": "question", "output": by_number}, by="strategy",
        on="question_id", judge=sim_judge(judge_simulator), cache=tmp_path, progress=False,
    )  # fmt: skip
    assert pairs.schema["a"] == pl.Int64
    failed = pairs.filter(pl.col("preference_error").is_not_null())
    assert failed.select("question_id", "a", "b").rows() == [(1, 1, 2), (1, 2, 3)]
    assert all("no answer logged" in e for e in failed["preference_error"])
    assert judge_simulator.stats()["chat"] == 2 * 7
    winners = pairs.filter(pl.col("preference_error").is_null())["preference_winner"]
    assert set(winners) <= {"1", "2", "3", "tie"}
    assert fk.rank(pairs, by="strategy", n_boot=100).height == 3
