"""Pairwise judging on the simulator: a run end to end, and how many questions it needs.

Usage::

    .venv/bin/python benchmarks/bench_pairwise.py [--trials 100] [--questions 150]

**End to end** (over HTTP, the judge simulator's position-biased pairwise judge, zero
latency): three strategies of hidden quality 0.3, 0.5 and 0.7 over ``--questions``
questions, ``fk.evaluate_pairwise`` with ``Preference()`` at simulated position biases 0
to 0.6. Counted: pair rows, requests at the simulator (first run and re-run), seconds,
whether ``fk.rank`` names the true order, and the reported position bias next to the
share the simulator's law gives for these qualities.

**Sensitivity**: two strategies whose qualities differ by 0.1, for ``n`` questions, in
``--trials`` seeded trials per ``n``: how often each method names the better one at the
95 % level.

- *Pairwise*: the simulator's judge law (:class:`~framekit.testing.PairwiseJudge`,
  slope 4: the better answer wins one order with probability ``logistic(4 x 0.1) = 0.60``;
  with bias ``b`` a share ``b`` of answers is "A" whatever the answers), both orders drawn
  in-process from the simulator's own probabilities (the end-to-end part checks them
  against its HTTP answers), read into a pairs frame as ``evaluate_pairwise`` reads them
  (disagreeing orders a tie) and ranked by ``fk.rank`` (the better is named when its
  ``rank`` is 1 and the other's 2: the bootstrap interval of the difference excludes 0).
- *Pointwise*: the same judge reading one answer at a time. Its perception of an answer
  is its quality plus Gumbel noise of scale ``1 / slope`` (a difference of two such noises
  is logistic, so two perceptions compared give the pairwise law exactly, without a
  position), then placed on the five-level rubric (0, 0.25, ... 1: the nearest level,
  clipped); ``fk.compare`` with the key (paired bootstrap, 95 %) names the better one when
  its ``winner`` is it. Also the unrounded perception, the best any pointwise scale could
  do with this judge.

Two pairs of qualities: 0.45 vs 0.55 (mid-scale) and 0.80 vs 0.90 (two decent strategies:
most answers reach the top label, as the issue describes). The pairwise law depends on
the difference only.

Writes ``benchmarks/results/pairwise.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import framekit as fk  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from framekit.evaluators import Preference  # noqa: E402
from framekit.testing import JudgeSimulator, PairwiseJudge, SimulatorConfig  # noqa: E402

SLOPE = 4.0
QUALITY = {"bm25": 0.3, "dense": 0.5, "hybrid": 0.7}
BIASES = (0.0, 0.15, 0.3, 0.45, 0.6)
SIZES = (25, 50, 100, 150, 200, 300, 400, 800)
LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


def expected_same_position(judge: PairwiseJudge, first: float, second: float) -> float:
    """P(the same position in both orders) for one pair, by the simulator's law."""
    ab = judge.probabilities(first, second, allow_tie=True)
    ba = judge.probabilities(second, first, allow_tie=True)
    return ab["A"] * ba["A"] + ab["B"] * ba["B"]


def end_to_end(questions: int) -> dict[str, Any]:
    rows = [
        {
            "question_id": q,
            "strategy": s,
            "question": f"Question {q}: how do I keep a compost pile warm?",
            "answer": f"Answer {q} by {s}. @sim(quality={quality})",
        }
        for q in range(questions)
        for s, quality in QUALITY.items()
    ]
    df = pl.DataFrame(rows)
    judges = {f"bias{int(round(b * 100))}": PairwiseJudge(bias=b) for b in BIASES}
    out = []
    with JudgeSimulator(SimulatorConfig(pairwise_judges=judges)) as sim:
        for model, judge in judges.items():
            with tempfile.TemporaryDirectory() as cache:
                j = fk.Judge(f"openai/{model}", api_base=sim.api_base, api_key="sk-bench")
                sim.reset()
                started = time.perf_counter()
                pairs = fk.evaluate_pairwise(
                    df, [Preference()], {"input": "question", "output": "answer"},
                    by="strategy", on="question_id", judge=j, cache=cache, progress=False,
                )  # fmt: skip
                seconds = time.perf_counter() - started
                first = sim.stats()["chat"]
                reported = fk.last_run().position_bias["preference"]  # type: ignore[union-attr]
                fk.evaluate_pairwise(
                    df, [Preference()], {"input": "question", "output": "answer"},
                    by="strategy", on="question_id", judge=j, cache=cache, progress=False,
                )  # fmt: skip
                rerun = sim.stats()["chat"] - first
            ranked = fk.rank(pairs, by="strategy")
            faced = [("bm25", "dense"), ("bm25", "hybrid"), ("dense", "hybrid")]
            law = float(
                np.mean([expected_same_position(judge, QUALITY[a], QUALITY[b]) for a, b in faced])
            )
            inconsistent = pairs.filter(~pl.col("preference_consistent"))
            out.append(
                {
                    "simulated_bias": judge.bias,
                    "pair_rows": pairs.height,
                    "requests": first,
                    "rerun_requests": rerun,
                    "seconds": round(seconds, 2),
                    "reported_position_bias": reported,
                    "law_position_bias": law,
                    "inconsistent_pairs": inconsistent.height,
                    "inconsistent_all_ties": bool(
                        (inconsistent["preference_winner"] == "tie").all()
                    ),
                    "rank_order": ranked["strategy"].to_list(),
                    "rank_column": ranked["rank"].to_list(),
                }
            )
    return {"questions": questions, "qualities": QUALITY, "runs": out}


def pairwise_named(
    rng: np.random.Generator, n: int, worse: float, better: float, bias: float
) -> bool:
    """One trial: both orders of ``n`` pairs drawn by the simulator's law, ranked."""
    judge = PairwiseJudge(bias=bias, slope=SLOPE)
    p_ab = judge.probabilities(worse, better, allow_tie=True)["A"]  # "worse" shown first
    p_ba = judge.probabilities(better, worse, allow_tie=True)["A"]  # "better" shown first
    ab = np.where(rng.random(n) < p_ab, "A", "B")
    ba = np.where(rng.random(n) < p_ba, "A", "B")
    said_ab = np.where(ab == "A", "worse", "better")
    said_ba = np.where(ba == "A", "better", "worse")
    winner = np.where(said_ab == said_ba, said_ab, "tie")
    pairs = pl.DataFrame(
        {
            "question_id": np.arange(n),
            "a": ["worse"] * n,
            "b": ["better"] * n,
            "preference_winner": winner,
            "preference_error": [None] * n,
        },
        schema_overrides={"preference_error": pl.String},
    )
    ranked = fk.rank(pairs, n_boot=500, seed=int(rng.integers(1 << 31)))
    return ranked.filter(pl.col("group") == "better")["rank"].item() == 1 and (
        ranked.filter(pl.col("group") == "worse")["rank"].item() == 2
    )


def pointwise_named(
    rng: np.random.Generator, n: int, worse: float, better: float, rounded: bool
) -> bool:
    """One trial: each answer perceived with Gumbel noise, scored, compared paired."""
    scale = 1.0 / SLOPE
    perceived = {
        "worse": worse + rng.gumbel(0.0, scale, n),
        "better": better + rng.gumbel(0.0, scale, n),
    }
    rows = []
    for group, values in perceived.items():
        scores = np.clip(values, 0, 1)
        if rounded:
            scores = LEVELS[np.abs(scores[:, None] - LEVELS[None, :]).argmin(1)]
        rows.append(pl.DataFrame({"question_id": np.arange(n), "strategy": group,
                                  "judge_score": scores, "judge_error": [None] * n},
                                 schema_overrides={"judge_error": pl.String}))  # fmt: skip
    compared = fk.compare(
        pl.concat(rows), by="strategy", on="question_id", n_resamples=500,
        seed=int(rng.integers(1 << 31)),
    )  # fmt: skip
    return compared["winner"].item() == "better"


def sensitivity(trials: int) -> dict[str, Any]:
    settings = {
        "pairwise, no position bias": lambda r, n, w, b: pairwise_named(r, n, w, b, 0.0),
        "pairwise, position bias 0.3": lambda r, n, w, b: pairwise_named(r, n, w, b, 0.3),
        "pointwise five levels + fk.compare": lambda r, n, w, b: pointwise_named(r, n, w, b, True),
        "pointwise unrounded + fk.compare": lambda r, n, w, b: pointwise_named(r, n, w, b, False),
    }
    out: dict[str, Any] = {}
    for worse, better in ((0.45, 0.55), (0.80, 0.90)):
        case: dict[str, Any] = {}
        for name, trial in settings.items():
            power = {}
            for n in SIZES:
                rng = np.random.default_rng([int(worse * 100), n, len(name)])
                power[n] = sum(trial(rng, n, worse, better) for _ in range(trials)) / trials
            needed = next((n for n in SIZES if power[n] >= 0.8), None)
            case[name] = {"named_better_share_by_questions": power, "questions_for_80pct": needed}
            print(f"{worse}/{better} {name}: {power} -> {needed}", flush=True)
        worse_first = PairwiseJudge(slope=SLOPE).probabilities(worse, better, allow_tie=False)
        case["p_better_wins_one_order"] = worse_first["B"]
        top = 1 - math.exp(-math.exp(-(0.875 - better) * SLOPE))
        case["share_of_better_answers_at_top_label"] = top
        out[f"{worse} vs {better}"] = case
    return {"trials": trials, "questions": list(SIZES), "slope": SLOPE, "cases": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--skip-sensitivity", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    figures: dict[str, Any] = {"end_to_end": end_to_end(args.questions)}
    if not args.skip_sensitivity:
        figures["sensitivity"] = sensitivity(args.trials)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    write_results("pairwise", figures)


if __name__ == "__main__":
    main()
