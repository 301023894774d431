"""How far to trust the offline judge row by row, measured on WikiQA dev.

Usage::

    .venv/bin/python benchmarks/bench_trust_offline.py [--data ../shared/data/wikiqa-dev.tsv]

For each relevance evaluator, scored with ``judge="local"`` through ``fk.evaluate_dataframe``:

* reliability of the calibrated confidence (``framekit.judges.local.confidence``): the
  expected calibration error and Brier score of "the verdict agrees with the crowd label",
  with the shipped map (fitted on this same file) and out of fold (each question's pairs
  scored by a map fitted on the other four fifths of the questions: the honest figure),
  and before calibration (the class-balanced logistic the cut points rest on);
* escalation: the agreement reached when the least confident 10, 20 and 30 % of pairs
  (chosen by ``fk.sample_for_review(strategy="uncertain")`` on the out-of-fold
  confidence) are sent to a reference, the human label standing in for a stronger judge;
  next to sending the pairs whose cosine is nearest the cut, and a random share (expected
  value);
* estimation: ``fk.estimate`` of the share of relevant pairs from 200 random labelled
  pairs plus the judge's verdicts on all of them, over 200 draws: coverage of the truth
  and median interval width, PPI next to the labels alone.

Writes ``benchmarks/results/trust_offline.json``. Without the WikiQA file it prints why and
exits 0 without writing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import calibrate_offline_confidence as fitting  # noqa: E402

import framekit as fk  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from framekit.evaluators import ContextRelevance, ResponseRelevance, RetrievalRelevance  # noqa: E402
from framekit.judges.local.confidence import load_confidence, verdict_confidence  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "wikiqa-dev.tsv"
SHARES = (0.1, 0.2, 0.3)
LABELLED, DRAWS = 200, 200


def reliability(confidence: np.ndarray, right: np.ndarray) -> dict[str, Any]:
    edges = np.minimum((confidence * fitting.BINS).astype(int), fitting.BINS - 1)
    table = [
        {
            "bin": f"[{b / fitting.BINS:.1f}, {(b + 1) / fitting.BINS:.1f})",
            "n": int((edges == b).sum()),
            "mean_confidence": round(float(confidence[edges == b].mean()), 4),
            "share_right": round(float(right[edges == b].mean()), 4),
        }
        for b in range(fitting.BINS)
        if (edges == b).any()
    ]
    return {
        "ece": round(fitting.ece(confidence, right), 4),
        "brier": round(fitting.brier(confidence, right), 4),
        "bins": table,
    }


def escalation(
    scored: pl.DataFrame, name: str, right: np.ndarray, signal: np.ndarray, cut: float
) -> dict[str, Any]:
    rows = scored.height
    base = float(right.mean())
    out: dict[str, Any] = {"no_escalation": round(base, 4)}
    for share in SHARES:
        n = round(share * rows)
        chosen = fk.sample_for_review(scored, n, evaluator=name, strategy="uncertain", seed=0)
        by_confidence = right.copy()
        by_confidence[chosen["row"].to_numpy()] = True
        nearest = right.copy()
        nearest[np.argsort(np.abs(signal - cut), kind="mergesort")[:n]] = True
        out[f"{share:.0%}"] = {
            "least_confident": round(float(by_confidence.mean()), 4),
            "nearest_the_cut": round(float(nearest.mean()), 4),
            "random_expected": round(base + share * (1.0 - base), 4),
        }
    return out


def estimation(scored: pl.DataFrame, name: str, truth: float) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    covered = {"ppi": 0, "classical": 0}
    widths: dict[str, list[float]] = {"ppi": [], "classical": []}
    judge_only = None
    for _ in range(DRAWS):
        keep = np.zeros(scored.height, dtype=bool)
        keep[rng.choice(scored.height, LABELLED, replace=False)] = True
        frame = scored.with_columns(
            human=pl.when(pl.Series(keep)).then(pl.col("label")).otherwise(None)
        )
        result = fk.estimate(frame, human="human", evaluator=name)
        for row in result.iter_rows(named=True):
            method = row["method"]
            if method == "judge_only":
                judge_only = row
                continue
            covered[method] += row["ci_low"] <= truth <= row["ci_high"]
            widths[method].append(row["ci_high"] - row["ci_low"])
    assert judge_only is not None
    return {
        "true_share_relevant": round(truth, 4),
        "judge_only_pass_rate": round(judge_only["estimate"], 4),
        "judge_only_covers_truth": judge_only["ci_low"] <= truth <= judge_only["ci_high"],
        "labelled_per_draw": LABELLED,
        "draws": DRAWS,
        **{
            method: {
                "coverage": round(covered[method] / DRAWS, 3),
                "median_width": round(float(np.median(widths[method])), 4),
            }
            for method in covered
        },
        "median_width_ratio_ppi_to_classical": round(
            float(np.median(widths["ppi"]) / np.median(widths["classical"])), 3
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"WikiQA not found at {args.data}: nothing to measure (pass --data).")
        return 0
    started = time.perf_counter()
    signal, label, questions, rows = fitting.wikiqa_signals(args.data)
    frame = pl.DataFrame(
        {
            "row": np.arange(len(rows)),
            "question": [r["Question"] for r in rows],
            "sentence": [r["Sentence"] for r in rows],
            "label": label.astype(bool),
        }
    ).with_columns(docs=pl.concat_list("sentence"))
    evaluators = [RetrievalRelevance(), ContextRelevance(), ResponseRelevance()]
    with tempfile.TemporaryDirectory() as cache:
        scored = fk.evaluate_dataframe(
            frame,
            evaluators,
            {"input": "question", "output": "sentence", "context": "docs"},
            judge="local",
            cache=cache,
            progress=False,
        )
    fit = load_confidence()
    cuts = fitting.pass_cuts()
    oof = fitting.out_of_fold(fit["method"], signal, label, questions)
    before = fitting.before_map()(signal)
    figures: dict[str, Any] = {}
    for ev in evaluators:
        name = ev.name
        passed = scored[f"{name}_passed"].to_numpy()
        right = passed == label.astype(bool)
        shipped = np.array([verdict_confidence(s, p) for s, p in zip(signal, passed)])
        out_of_fold = fitting.verdict_right(oof, passed)
        with_confidence = scored.with_columns(pl.Series(f"{name}_confidence", out_of_fold))
        figures[name] = {
            "pairs": len(rows),
            "verdicts_right": round(float(right.mean()), 4),
            # The signal reproduces the judge's own verdicts (a check on this script).
            "signal_reproduces_verdicts": round(
                float(((signal >= cuts[name]) == passed).mean()), 4
            ),
            "reliability_before": reliability(fitting.verdict_right(before, passed), right),
            "reliability_shipped_in_sample": reliability(shipped, right),
            "reliability_out_of_fold": reliability(out_of_fold, right),
            "agreement_after_escalating": escalation(
                with_confidence, name, right, signal, cuts[name]
            ),
            "estimate_share_relevant": estimation(scored, name, float(label.mean())),
        }
    write_results(
        "trust_offline",
        {
            "data": "WikiQA dev (2,733 question/sentence pairs, crowd labels)",
            "confidence_map": fit["method"],
            "seconds": round(time.perf_counter() - started, 1),
            "evaluators": figures,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
