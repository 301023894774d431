"""How often ``fk.rank`` gets the order right and its intervals cover the truth.

Usage::

    .venv/bin/python benchmarks/bench_rank.py [--trials 200] [--keys 150]

Each trial draws a pairs frame from a known Bradley-Terry model (three strategies of
strength -0.5, 0, 0.5 on the log scale, every key pitting each against each other: 150
keys, 450 pairs; ``benchmarks/_pairs_model.py``) with its own seed and ranks it with
``fk.rank`` (2,000 bootstrap resamples of the keys, seeded per trial). Counted over the
trials: the point order right, the ``rank`` column saying 1, 2, 3 (the order declared
clear), each group's 95 % strength and win-rate intervals covering the true values, and
all three strength intervals at once.

Then the same with a judge that agrees with the truth on 80 % of pairs (otherwise answers
at random) and 60 human verdicts (the truth) on random pairs: coverage of the true win
rate and interval widths of the PPI, classical and judge-only figures.

Writes ``benchmarks/results/rank.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import framekit as fk  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from benchmarks._pairs_model import (  # noqa: E402
    STRENGTHS,
    bradley_terry_pairs,
    centred,
    true_win_rates,
)


def _inside(frame: pl.DataFrame, low: str, high: str, truth: dict[str, float]) -> dict[str, bool]:
    return {g: lo <= truth[g] <= hi for g, lo, hi in frame.select("group", low, high).rows()}


def judge_trials(trials: int, keys: int) -> dict[str, Any]:
    strengths, rates = centred(STRENGTHS), true_win_rates(STRENGTHS)
    order = sorted(STRENGTHS, key=lambda g: -STRENGTHS[g])
    right_order = clear_order = all_covered = 0
    covered = {g: 0 for g in STRENGTHS}
    rate_covered = {g: 0 for g in STRENGTHS}
    seconds = []
    for trial in range(trials):
        pairs = bradley_terry_pairs(STRENGTHS, keys, seed=10_000 + trial)
        start = time.perf_counter()
        ranked = fk.rank(pairs, seed=trial)
        seconds.append(time.perf_counter() - start)
        right_order += ranked["group"].to_list() == order
        clear_order += ranked["rank"].to_list() == [1, 2, 3]
        inside = _inside(ranked, "strength_ci_low", "strength_ci_high", strengths)
        all_covered += all(inside.values())
        for g, ok in inside.items():
            covered[g] += ok
        for g, ok in _inside(ranked, "win_rate_ci_low", "win_rate_ci_high", rates).items():
            rate_covered[g] += ok
    return {
        "trials": trials,
        "keys": keys,
        "pairs_per_trial": 3 * keys,
        "true_strengths_centred": strengths,
        "true_win_rates": rates,
        "point_order_right": right_order,
        "rank_column_clear_order_1_2_3": clear_order,
        "strength_interval_covers_truth": covered,
        "all_three_strength_intervals_cover": all_covered,
        "win_rate_interval_covers_truth": rate_covered,
        "seconds_per_rank_call_median": float(np.median(seconds)),
    }


def human_trials(trials: int, keys: int, n_human: int, agreement: float) -> dict[str, Any]:
    rates = true_win_rates(STRENGTHS)
    covered = {m: 0 for m in ("ppi", "classical", "judge_only")}
    widths: dict[str, list[float]] = {m: [] for m in covered}
    narrower = 0
    groups = 0
    for trial in range(trials):
        pairs = bradley_terry_pairs(
            STRENGTHS, keys, seed=20_000 + trial, agreement=agreement, n_human=n_human
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a group with < 10 labels: counted as missing
            ranked = fk.rank(pairs, human="human", seed=trial)
        for g in STRENGTHS:
            rows = {
                r["method"]: r for r in ranked.filter(pl.col("group") == g).iter_rows(named=True)
            }
            if rows["ppi"]["win_rate"] is None:
                continue
            groups += 1
            for method, row in rows.items():
                widths[method].append(row["win_rate_ci_high"] - row["win_rate_ci_low"])
                covered[method] += row["win_rate_ci_low"] <= rates[g] <= row["win_rate_ci_high"]
            narrower += widths["ppi"][-1] < widths["classical"][-1]
    return {
        "trials": trials,
        "human_verdicts": n_human,
        "judge_agreement_with_truth": agreement,
        "group_estimates": groups,
        "win_rate_interval_covers_human_truth": covered,
        "median_interval_width": {m: float(np.median(w)) for m, w in widths.items()},
        "ppi_narrower_than_classical": narrower,
        "note": "judge_only is precise but aims at the judge's win rate, not people's: its "
        "intervals miss the true rate whenever the judge's noise pulls rates towards 0.5",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--keys", type=int, default=150)
    args = parser.parse_args()
    started = time.perf_counter()
    figures = {
        "judge_only": judge_trials(args.trials, args.keys),
        "with_human_verdicts": human_trials(args.trials, args.keys, 60, 0.8),
    }
    figures["seconds"] = round(time.perf_counter() - started, 1)
    write_results("rank", figures)


if __name__ == "__main__":
    main()
