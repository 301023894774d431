"""Every verdict's confidence: from token logprobs (both transports, batch lines), from the
offline judge's calibration, from self-consistency samples; cached with the answer, and
the probability-weighted score of ``scoring="expected"``. Requests are counted at the
simulator."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import diskcache
import polars as pl
import pytest

import framekit as fk
from framekit._errors import InputError
from framekit.engine.cache_values import loaded
from framekit.engine.dryrun import plan_requests
from framekit.engine.executor import Outcome
from framekit.engine.sampling import vote
from framekit.evaluators import ResponseRelevance, RetrievalRelevance
from framekit.judges.litellm.call import takes_logprobs
from framekit.judges.local.confidence import verdict_confidence
from framekit.judges.request import ChatRequest
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import API_KEY, MAPPING, batch_judge, sim_judge

CLAUDE = "anthropic/claude-3-5-haiku-20241022"


def marked(confidences: list[float], label: str = "relevant") -> pl.DataFrame:
    """Rows whose judge answers ``label`` with the given probability (the simulator's
    ``@sim(confidence=...)``, reported through its token logprobs)."""
    return pl.DataFrame(
        {
            "question": [
                f"What is item {i}? @sim(label={label}, confidence={c})"
                for i, c in enumerate(confidences)
            ],
            "docs": [[f"Item {i} is a thing."] for i in range(len(confidences))],
        }
    )


def scored(df, judge, cache, evaluator=None, **kw) -> tuple[pl.DataFrame, fk.RunStats]:
    out = fk.evaluate_dataframe(
        df, [evaluator or RetrievalRelevance()], MAPPING, judge=judge, cache=cache,
        progress=False, **kw,
    )  # fmt: skip
    stats = fk.last_run()
    assert isinstance(out, pl.DataFrame) and stats is not None
    return out, stats


def test_confidence_is_the_answered_labels_probability_over_both_transports(
    judge_simulator, transport, tmp_path
):
    out, stats = scored(marked([0.9, 0.8, 0.65]), sim_judge(judge_simulator), tmp_path)
    confidence = out["retrieval_relevance_confidence"]
    assert confidence.dtype == pl.Float64
    assert confidence.to_list() == pytest.approx([0.9, 0.8, 0.65], abs=1e-6)
    assert out["retrieval_relevance_label"].to_list() == ["relevant"] * 3
    bodies = judge_simulator.requests
    assert len(bodies) == 3
    assert all(b.get("logprobs") is True and b.get("top_logprobs") == 10 for b in bodies)
    entry = stats.confidence["retrieval_relevance"]
    assert entry == {
        "method": "logprobs",
        "scored_rows": 3,
        "rows_with_confidence": 3,
        "scoring": "label",
    }
    described = stats.provenance["evaluators"][0]["confidence"]
    assert described["method"] == "logprobs"
    assert "confidence: retrieval_relevance by logprobs (3 of 3 rows)" in stats.summary()


def test_a_cached_rerun_returns_the_same_confidence_without_a_request(
    judge_simulator, transport, tmp_path
):
    df = marked([0.9, 0.7, 0.55, 0.95])
    first, _ = scored(df, sim_judge(judge_simulator), tmp_path)
    sent = judge_simulator.stats()["chat"]
    assert sent == 4
    second, stats = scored(df, sim_judge(judge_simulator), tmp_path)
    assert judge_simulator.stats()["chat"] == sent  # nothing asked again
    assert stats.cache_hits == 4
    assert second["retrieval_relevance_confidence"].equals(first["retrieval_relevance_confidence"])
    assert second["retrieval_relevance_confidence"].null_count() == 0
    # Only the labels' probabilities are kept with the answer, never the tokens.
    with diskcache.Cache(str(tmp_path)) as store:
        entries = [loaded(store[k]) for k in store if str(k).startswith("chat:")]
    kept = [e for e in entries if isinstance(e, dict) and "answer" in e]
    assert len(kept) == 4
    assert all(set(e["probabilities"]) == {"relevant", "irrelevant"} for e in kept)
    assert not any("logprobs" in str(e) or "top_logprobs" in str(e) for e in kept)


def test_an_endpoint_refusing_logprobs_is_asked_again_without_and_gives_no_confidence(
    simulator_factory, transport, tmp_path
):
    sim = simulator_factory(reject_logprobs=True)
    out, stats = scored(marked([0.9] * 6), sim_judge(sim, concurrency=1), tmp_path)
    assert out["retrieval_relevance_error"].null_count() == 6
    assert out["retrieval_relevance_confidence"].null_count() == 6  # none invented
    assert sim.stats()["faults"]["logprobs"] == 1  # refused once, then never asked again
    assert sim.stats()["chat"] == 7
    assert stats.confidence["retrieval_relevance"]["method"] is None


def test_litellm_asks_for_logprobs_only_where_the_provider_takes_them():
    # litellm's own table of supported parameters decides: Anthropic's models have no
    # logprobs (asking would raise), OpenAI-compatible ones do.
    assert takes_logprobs("openai/gpt-4o-mini")
    assert takes_logprobs("hosted_vllm/my-model")
    assert not takes_logprobs(CLAUDE)
    assert not takes_logprobs("not-a-provider/x")


def test_expected_scoring_weighs_every_labels_score_by_its_probability(
    judge_simulator, transport, tmp_path
):
    df = pl.DataFrame(
        {
            "question": ["How do I reset it? @sim(label=Generally Yes, confidence=0.6)"],
            "answer": ["Open the settings."],
        }
    )
    mapping = {"input": "question", "output": "answer"}
    by_label = fk.evaluate_dataframe(df, [ResponseRelevance()], mapping, progress=False,
                                     judge=sim_judge(judge_simulator), cache=tmp_path)  # fmt: skip
    expected = fk.evaluate_dataframe(df, [ResponseRelevance(scoring="expected")], mapping,
                                     judge=sim_judge(judge_simulator), cache=tmp_path,
                                     progress=False)  # fmt: skip
    assert judge_simulator.stats()["chat"] == 1  # the same answer, read two ways
    assert by_label["response_relevance_score"][0] == 0.75
    # 0.6 x 0.75 + 0.1 x (0 + 0.25 + 0.5 + 1.0): the other four labels share 0.4.
    assert expected["response_relevance_score"][0] == pytest.approx(0.625, abs=1e-6)
    assert expected["response_relevance_confidence"][0] == pytest.approx(0.6, abs=1e-6)
    assert expected["response_relevance_label"][0] == "Generally Yes"
    entry = fk.last_run().confidence["response_relevance"]
    assert entry["scoring"] == "expected" and entry["rows_scored_by_label"] == 0


def test_expected_scoring_without_probabilities_keeps_the_label_score_and_says_how_often(
    simulator_factory, tmp_path
):
    sim = simulator_factory(reject_logprobs=True)
    out, stats = scored(
        marked([0.9, 0.9]), sim_judge(sim), tmp_path, RetrievalRelevance(scoring="expected")
    )
    assert out["retrieval_relevance_score"].to_list() == [1.0, 1.0]
    assert out["retrieval_relevance_confidence"].null_count() == 2
    entry = stats.confidence["retrieval_relevance"]
    assert entry["rows_scored_by_label"] == 2 and entry["method"] is None
    assert stats.provenance["evaluators"][0]["scoring"] == "expected"
    assert "2 rows scored by label for want of probabilities" in stats.summary()


def offline_pair() -> pl.DataFrame:
    """A relevant and an irrelevant retrieval for the offline judge (skips without it)."""
    embedder = pytest.importorskip("framekit.judges.local.embedder")
    if not embedder.local_model_available():
        pytest.skip("offline model not installed")
    return pl.DataFrame(
        {
            "question": ["What is the capital of France?"] * 2,
            "docs": [["Paris is the capital of France."], ["Bananas grow in the tropics."]],
        }
    )


def test_offline_judge_confidence_is_its_calibrated_probability(tmp_path):
    df = offline_pair()
    out, stats = scored(df, "local", tmp_path)
    for row in out.iter_rows(named=True):
        cosine = float(re.search(r"cosine (-?\d\.\d+)", row["retrieval_relevance_explanation"])[1])
        wanted = verdict_confidence(cosine, passed=row["retrieval_relevance_passed"])
        assert row["retrieval_relevance_confidence"] == pytest.approx(wanted, abs=0.01)
    assert out["retrieval_relevance_confidence"].is_between(0.0, 1.0).all()
    assert stats.confidence["retrieval_relevance"]["method"] == "calibrated offline"
    # One record, the same way (Evaluator.score).
    one = RetrievalRelevance().score(
        input="What is the capital of France?",
        context=["Paris is the capital of France."],
        judge="local",
        cache=tmp_path,
    )
    assert one.confidence == pytest.approx(out["retrieval_relevance_confidence"][0])


def test_the_offline_confidence_moves_to_the_relevant_share_the_user_expects(tmp_path):
    df = offline_pair()
    wikiqa, _ = scored(df, "local", tmp_path)
    shared, stats = scored(df, fk.LocalJudge(relevant_share=0.5), tmp_path)
    for row in shared.iter_rows(named=True):
        cosine = float(re.search(r"cosine (-?\d\.\d+)", row["retrieval_relevance_explanation"])[1])
        passed = row["retrieval_relevance_passed"]
        wanted = verdict_confidence(cosine, passed=passed, prior=0.5)
        assert row["retrieval_relevance_confidence"] == pytest.approx(wanted, abs=0.01)
    # Relevant pairs ten times commoner than in WikiQA: a pass is surer, a fail less so.
    before, after = (
        wikiqa["retrieval_relevance_confidence"],
        shared["retrieval_relevance_confidence"],
    )
    passed = shared["retrieval_relevance_passed"].to_list()
    assert passed == [True, False]
    assert after[0] > before[0] and after[1] < before[1]
    for column in ("score", "label", "explanation"):  # only the confidence moves
        assert shared[f"retrieval_relevance_{column}"].equals(
            wikiqa[f"retrieval_relevance_{column}"]
        )
    method = stats.confidence["retrieval_relevance"]["method"]
    assert method == "calibrated offline (relevant share 0.5)"
    one = RetrievalRelevance().score(
        input="What is the capital of France?", context=["Paris is the capital of France."],
        judge=fk.LocalJudge(relevant_share=0.5), cache=tmp_path,
    )  # fmt: skip
    assert one.confidence == pytest.approx(after[0])
    with pytest.raises(InputError, match="relevant_share must be a share between 0 and 1"):
        fk.LocalJudge(relevant_share=5)


def test_samples_ask_k_times_per_record_vote_and_a_rerun_is_fully_cached(
    judge_simulator, transport, tmp_path
):
    df = marked([0.9, 0.8, 0.7]).vstack(marked([0.9]))  # the last row repeats the first
    judge = sim_judge(judge_simulator, samples=3, temperature=0.7)
    first, stats = scored(df, judge, tmp_path)
    assert judge_simulator.stats()["chat"] == 3 * 3  # k requests per distinct record
    assert first["retrieval_relevance_error"].null_count() == 4
    # The simulator's judge answers alike each time: full agreement, the vote's share.
    assert first["retrieval_relevance_confidence"].to_list() == [1.0] * 4
    assert stats.confidence["retrieval_relevance"]["method"] == "self-consistency k=3"
    assert stats.provenance["judges"][0]["samples"] == 3
    assert {b["temperature"] for b in judge_simulator.requests} == {0.7}
    assert not any("logprobs" in b for b in judge_simulator.requests)  # never both
    again, _ = scored(df, sim_judge(judge_simulator, samples=3, temperature=0.7), tmp_path)
    assert judge_simulator.stats()["chat"] == 9  # every sample came from the cache
    assert again.equals(first)
    # A judge asked once has its own answers: nothing is shared with the sampled judge.
    scored(df, sim_judge(judge_simulator, temperature=0.7), tmp_path)
    assert judge_simulator.stats()["chat"] == 12


def test_the_vote_takes_the_majority_and_its_share_as_the_probability():
    request = ChatRequest([], "r", {}, choices=("yes", "no", "maybe"))

    def answered(label):
        return Outcome({"label": label, "explanation": label}, None, tokens=10, cost_usd=0.1)

    out = vote(request, [answered("no"), answered("yes"), answered("yes"), Outcome(None, "x")])
    assert out.answer == {"label": "yes", "explanation": "yes"}
    assert out.probabilities == {"yes": 2 / 3, "no": 1 / 3, "maybe": 0.0}
    assert out.tokens == 30 and out.cost_usd == pytest.approx(0.3)
    tie = vote(request, [answered("no"), answered("yes")])
    assert tie.answer["label"] == "no"  # a tie goes to the label answered first
    failed = vote(request, [Outcome(None, "HTTP 500"), Outcome(None, "timeout")])
    assert failed.answer is None and failed.error == "HTTP 500 (all 2 samples failed)"


def test_samples_need_a_temperature_and_scoring_a_known_name():
    with pytest.raises(InputError, match="temperature"):
        fk.Judge("openai/gpt-4o-mini", samples=3)
    with pytest.raises(InputError, match="batch"):
        fk.Judge("openai/gpt-4o-mini", samples=3, temperature=0.7, batch=True)
    with pytest.raises(InputError, match="samples must be an integer"):
        fk.Judge("openai/gpt-4o-mini", samples=0)
    with pytest.raises(InputError, match="scoring must be 'label' or 'expected'"):
        RetrievalRelevance(scoring="weighted")


def test_batch_lines_ask_for_logprobs_where_the_api_gives_them(tmp_path):
    with JudgeSimulator(SimulatorConfig(batch_seconds=0.1)) as sim:
        df = marked([0.9, 0.7])
        out, _ = scored(df, batch_judge(sim), tmp_path / "openai")
        assert out["retrieval_relevance_confidence"].to_list() == pytest.approx([0.9, 0.7])
        claude, stats = scored(df, batch_judge(sim, CLAUDE), tmp_path / "anthropic")
        # Anthropic's message batches have no logprobs: no confidence, none invented.
        assert claude["retrieval_relevance_error"].null_count() == 2
        assert claude["retrieval_relevance_confidence"].null_count() == 2
        assert stats.confidence["retrieval_relevance"]["method"] is None
        assert sim.stats()["batch"]["lines"] == 4


def test_key_scan_of_a_run_with_logprobs_finds_nothing(
    judge_simulator, transport, tmp_path, caplog, capfd
):
    for name in ("framekit", "LiteLLM", "httpx", "openai", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    judge = sim_judge(judge_simulator)
    out_file = tmp_path / "scored.parquet"
    source = tmp_path / "in.parquet"
    marked([0.9, 0.6, 0.8]).write_parquet(source)
    fk.evaluate_parquet(source, out_file, [RetrievalRelevance(scoring="expected")], MAPPING,
                        judge=judge, cache=tmp_path / "cache", details=True)  # fmt: skip
    scored_frame = pl.read_parquet(out_file)
    assert scored_frame["retrieval_relevance_confidence"].null_count() == 0
    captured = capfd.readouterr()
    seen = [captured.out, captured.err, caplog.text, repr(judge), str(scored_frame.to_dicts())]
    seen += [fk.last_run().summary(), repr(fk.last_run())]
    for path in Path(tmp_path).rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes()
            if path.suffix != ".parquet":
                seen.append(path.read_bytes().decode("latin-1"))
    for text in seen:
        assert API_KEY not in text and API_KEY[-8:] not in text


def test_samples_that_disagree_are_put_to_a_vote_whose_share_is_the_confidence(
    simulator_factory, tmp_path
):
    # At temperature > 0 this simulator draws each answer's label from its distribution
    # (relevant 0.55, irrelevant 0.45), as a sampling model would.
    sim = simulator_factory(sample_at_temperature=True)
    judge = sim_judge(sim, samples=7, temperature=1.0, concurrency=1)
    plan = plan_requests([marked([0.55])], [RetrievalRelevance()], MAPPING, judge=judge,
                            cache=tmp_path)  # fmt: skip
    assert plan.requests == 7  # the dry run counts every sample
    out, _ = scored(marked([0.55]), judge, tmp_path)
    assert sim.stats()["chat"] == 7
    with diskcache.Cache(str(tmp_path)) as store:
        samples = [loaded(store[k])["answer"]["label"] for k in store if ":sample" in str(k)]
    assert len(samples) == 7 and len(set(samples)) == 2  # it did disagree with itself
    majority = max(set(samples), key=samples.count)
    assert out["retrieval_relevance_label"][0] == majority
    assert out["retrieval_relevance_confidence"][0] == pytest.approx(samples.count(majority) / 7)
    assert plan_requests([marked([0.55])], [RetrievalRelevance()], MAPPING, judge=judge,
                            cache=tmp_path).requests == 0  # fmt: skip
