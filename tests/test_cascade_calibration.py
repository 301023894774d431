"""Cascade thresholds with a guarantee: seeded trials with the simulator's noisy judges.

The judges are the simulator's own noise model (``noisy_verdict``, what its HTTP server
answers with), called directly so that 200 trials take seconds; one test at the end goes
through the server and the logprob reader end to end.
"""

from __future__ import annotations

import http.client
import json
from functools import cache
from typing import Any

import numpy as np
import polars as pl
import pytest

from framekit import InputError
from framekit.analysis.cascade_calibration import calibrate_thresholds, default_candidates
from framekit.judges.logprobs import label_probabilities, logprobs_content
from framekit.testing import JudgeSimulator, NoisyJudge, SimulatorConfig
from framekit.testing._sim_logprobs import noisy_verdict

LABELS = ["relevant", "irrelevant"]
WEAK, STRONG = NoisyJudge(0.75, seed=1), NoisyJudge(0.95, seed=2)
TRIALS, LABELLED, FRESH = 200, 500, 10_000
TARGET, RISK = 0.9, 0.1
STAGES = [("weak", "weak_confidence"), ("strong", "strong_confidence")]


def judged(
    prefix: str, rows: int, judge: NoisyJudge, model: str, seed: int
) -> tuple[np.ndarray, ...]:
    """(truth, label, confidence) for ``rows`` requests; the truth is a seeded coin."""
    truth = [LABELS[i] for i in np.random.default_rng(seed).integers(0, 2, rows)]
    answers = [noisy_verdict(judge, model, f"{prefix} {i}", LABELS, t) for i, t in enumerate(truth)]
    return (
        np.array(truth),
        np.array([a[0] for a in answers]),
        np.array([a[1][a[0]] for a in answers]),
    )


@cache
def fresh(weak: NoisyJudge, strong: NoisyJudge) -> tuple[np.ndarray, ...]:
    truth, weak_label, weak_conf = judged("fresh", FRESH, weak, "weak", 99)
    _, strong_label, _ = judged("fresh", FRESH, strong, "strong", 99)
    return truth, weak_label, weak_conf, strong_label


def labelled(trial: int, weak: NoisyJudge, strong: NoisyJudge) -> pl.DataFrame:
    truth, weak_label, weak_conf = judged(f"trial {trial}", LABELLED, weak, "weak", trial)
    _, strong_label, strong_conf = judged(f"trial {trial}", LABELLED, strong, "strong", trial)
    return pl.DataFrame(
        {
            "weak": weak_label,
            "weak_confidence": weak_conf,
            "strong": strong_label,
            "strong_confidence": strong_conf,
            "human": truth,
        }
    )


def trials(weak: NoisyJudge, strong: NoisyJudge) -> dict[str, Any]:
    """Calibrate on each trial's labelled rows; route the shared fresh rows by the result."""
    truth, weak_label, weak_conf, strong_label = fresh(weak, strong)
    agreement, escalated, reachable, claimed = [], [], 0, []
    for trial in range(TRIALS):
        frame = labelled(trial, weak, strong)
        claimed.append(frame["weak_confidence"].mean())
        result = calibrate_thresholds(frame, STAGES, "human", target_agreement=TARGET, risk=RISK)
        if not result.reachable:
            continue
        reachable += 1
        assert result.escalate_below is not None
        up = weak_conf < result.escalate_below[0]
        decided = np.where(up, strong_label, weak_label)
        agreement.append(float((decided == truth).mean()))
        escalated.append(float(up.mean()))
    return {
        "reachable": reachable,
        "agreement": np.array(agreement),
        "escalated": np.array(escalated),
        "claimed": float(np.mean(claimed)),
    }


def test_calibrated_judges_meet_the_target_on_fresh_rows_and_escalate_about_half():
    out = trials(WEAK, STRONG)
    assert out["reachable"] == TRIALS
    met = float((out["agreement"] >= TARGET).mean())
    assert met >= 1 - RISK, met  # measured: 0.96 (mean agreement 0.921)
    # Requests to the strong judge per row: well below one (measured: 0.554 on average,
    # 0.725 at most).
    assert out["escalated"].mean() < 0.7
    assert out["escalated"].max() < 0.9


def test_an_overconfident_weak_judge_is_escalated_and_the_guarantee_still_holds():
    out = trials(NoisyJudge(0.75, calibrated=False, seed=1), STRONG)
    assert out["claimed"] > 0.9  # what the weak judge says about itself
    met = float((out["agreement"] >= TARGET).mean())
    assert met >= 1 - RISK, met
    # Its confidence does not tell right from wrong, so little can be left to it
    # (measured: 0.886 of rows escalated, against 0.554 with a calibrated weak judge;
    # target met in 0.985 of trials).
    assert out["escalated"].mean() > 0.8


def test_overconfident_judges_below_the_target_are_reported_unreachable():
    weak = NoisyJudge(0.75, calibrated=False, seed=1)
    strong = NoisyJudge(0.85, calibrated=False, seed=2)
    out = trials(weak, strong)
    # Both judges claim better than 0.9; against the labels no threshold gets there.
    assert out["claimed"] > 0.9
    assert out["reachable"] <= RISK * TRIALS  # measured: 0
    frame = labelled(0, weak, strong)
    result = calibrate_thresholds(frame, STAGES, "human", target_agreement=TARGET, risk=RISK)
    assert not result.reachable and result.escalate_below is None
    assert result.reason.startswith(
        "not reachable: the first candidate (every row decided by the last judge)"
    )
    assert result.agreement == pytest.approx((frame["strong"] == frame["human"]).mean())


def test_testing_stops_at_the_first_candidate_that_fails():
    # 300 rows in three bands of the cheap judge's confidence. At 0.95 it is right; at
    # 0.75 it is wrong where the expensive judge is right; at 0.55 it is right where the
    # expensive judge is wrong 15 times in 90.
    conf = [0.95] * 180 + [0.75] * 30 + [0.55] * 90
    cheap = ["yes"] * 180 + ["no"] * 30 + ["yes"] * 90
    expensive = ["yes"] * 210 + ["yes"] * 75 + ["no"] * 15
    frame = pl.DataFrame(
        {"a": cheap, "ac": conf, "b": expensive, "bc": [1.0] * 300, "h": ["yes"] * 300}
    )
    result = calibrate_thresholds(
        frame, [("a", "ac"), ("b", "bc")], "h", target_agreement=0.85, candidates=[0.9, 0.7, 0.5]
    )
    # Agreement 0.95 at 0.9 (passes), 0.85 at 0.7 (fails), 0.90 at 0.5 (would pass, and is
    # cheaper, but comes after a failure: testing it would spend the risk twice).
    table = result.table
    assert table["agreement"].to_list() == pytest.approx([0.95, 0.85, 0.90])
    assert table["tested"].to_list() == [True, True, False]
    assert table["passed"].to_list() == [True, False, False]
    assert table["p_value"][2] <= RISK
    assert result.escalate_below == (0.9,)
    assert result.decided_share == (0.6, 0.4)


def test_cost_per_1000_rows_pays_every_stage_a_row_reaches():
    # The first judge is sure and right on 200 rows, unsure and wrong on 100; the second
    # is sure and right on 50 of those, unsure and wrong on the other 50; the third is right.
    frame = pl.DataFrame(
        {
            "a": ["x"] * 200 + ["y"] * 100,
            "ac": [0.99] * 200 + [0.2] * 100,
            "b": ["x"] * 250 + ["y"] * 50,
            "bc": [0.99] * 250 + [0.2] * 50,
            "c": ["x"] * 300,
            "cc": [0.5] * 300,
            "h": ["x"] * 300,
        }
    )
    stages = [("a", "ac"), ("b", "bc"), ("c", "cc")]
    result = calibrate_thresholds(frame, stages, "h", prices=[0.0001, 0.001, 0.01])
    assert result.escalate_below == (0.21, 0.21)
    assert result.decided_share == pytest.approx((2 / 3, 1 / 6, 1 / 6))
    # Every row pays the first stage, a third of them the second, a sixth the third.
    assert result.cost_per_1000 == pytest.approx(1000 * (0.0001 + 0.001 / 3 + 0.01 / 6))
    assert result.table["cost_per_1000"][0] == pytest.approx(1000 * (0.0001 + 0.001 + 0.01))


def test_null_confidence_or_label_escalates_and_a_null_last_label_disagrees():
    frame = pl.DataFrame(
        {
            "a": ["x", None, "x", "x"] * 50,
            "ac": [0.99, 0.99, None, 0.99] * 50,
            "b": ["x", "x", "x", None] * 50,
            "bc": [0.9] * 200,
            "h": ["x"] * 200,
        }
    )
    result = calibrate_thresholds(frame, [("a", "ac"), ("b", "bc")], "h", target_agreement=0.5)
    assert result.decided_share == (0.5, 0.5)
    inf_row = result.table.row(0, named=True)
    assert inf_row["agreement"] == 0.75  # the last judge's null label is a disagreement


def test_own_candidates_are_tested_in_the_order_given():
    frame = labelled(0, WEAK, STRONG)
    result = calibrate_thresholds(frame, STAGES, "human", candidates=[1.0, 0.9, 0.8, 0.1])
    assert result.table["escalate_below"].to_list() == [[1.0], [0.9], [0.8], [0.1]]
    assert result.escalate_below in {(1.0,), (0.9,), (0.8,)}
    assert default_candidates(2).shape == (102, 1)


def test_bad_inputs_name_the_problem():
    frame = labelled(0, WEAK, STRONG)
    with pytest.raises(InputError, match="at least one stage"):
        calibrate_thresholds(frame, [], "human")
    with pytest.raises(InputError, match="'nope' is not in the frame"):
        calibrate_thresholds(frame, [("weak", "nope"), ("strong", "strong_confidence")], "human")
    with pytest.raises(InputError, match="risk must be between 0 and 1"):
        calibrate_thresholds(frame, STAGES, "human", risk=1.5)
    with pytest.raises(InputError, match="prices: one per stage"):
        calibrate_thresholds(frame, STAGES, "human", prices=[1.0])
    with pytest.raises(InputError, match="holds String, not numbers"):
        calibrate_thresholds(frame, [("weak", "human"), ("strong", "strong")], "human")
    with pytest.raises(InputError, match="no row of 'human'"):
        calibrate_thresholds(frame.with_columns(human=pl.lit(None, pl.String)), STAGES, "human")


def ask(
    connection: http.client.HTTPConnection, model: str, row: int, truth: str
) -> tuple[str, float]:
    """One judge request with logprobs, read back through the logprob reader."""
    payload = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": f"[BEGIN DATA: input]\nrow {row} @sim(truth={truth})\n[END DATA: input]",
            }
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "j",
                "schema": {
                    "type": "object",
                    "properties": {"label": {"type": "string", "enum": LABELS}},
                },
            },
        },
        "logprobs": True,
        "top_logprobs": 5,
    }
    connection.request(
        "POST", "/v1/chat/completions", json.dumps(payload), {"content-type": "application/json"}
    )
    got = label_probabilities(logprobs_content(json.loads(connection.getresponse().read())), LABELS)
    assert got is not None
    return got.label, got.confidence


def test_end_to_end_through_the_simulator_the_strong_judge_sees_few_fresh_rows():
    rng = np.random.default_rng(5)
    truth = [LABELS[i] for i in rng.integers(0, 2, 1600)]
    config = SimulatorConfig(noisy_judges={"weak": WEAK, "strong": STRONG})
    with JudgeSimulator(config) as sim:
        connection = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
        calibration = [
            (*ask(connection, "weak", i, t), *ask(connection, "strong", i, t))
            for i, t in enumerate(truth[:800])
        ]
        frame = pl.DataFrame(
            calibration,
            schema=["weak", "weak_confidence", "strong", "strong_confidence"],
            orient="row",
        )
        result = calibrate_thresholds(
            frame.with_columns(human=pl.Series(truth[:800])), STAGES, "human"
        )
        assert result.reachable and result.escalate_below is not None
        sim.reset()
        decided = []
        for i, t in enumerate(truth[800:], start=800):
            label, confidence = ask(connection, "weak", i, t)
            if confidence < result.escalate_below[0]:
                label, _ = ask(connection, "strong", i, t)
            decided.append(label == t)
        connection.close()
        by_model = sim.stats()["by_model"]
    assert by_model["weak"] == 800
    assert by_model["strong"] < 0.75 * 800  # measured: 400 (0.5 per row), agreement 0.901
    assert np.mean(decided) >= TARGET - 0.02  # one trial of 800 rows: sampling noise allowed
