"""Fit the offline judge's confidence on WikiQA and write it to confidence.json.

Usage::

    .venv/bin/python scripts/calibrate_offline_confidence.py [--data ../shared/data/wikiqa-dev.tsv]
        [--output framekit/judges/local/confidence.json] [--dry-run]

What it fits, and why this way:

* The offline relevance judge reads one signal per pair, the cosine of the request and
  the (best) document (``framekit.judges.local.methods``), and passes a pair when the
  cosine reaches its evaluator's cut. Whether its verdict is right is therefore a
  function of the cosine with a turn at the cut: above it, the chance that the pair is
  relevant; below it, the chance that it is not. One increasing map, p(relevant | cosine),
  gives every relevance evaluator its confidence through its own cut
  (:func:`framekit.judges.local.confidence.verdict_confidence`); fitting it once, with
  monotonicity across the cut, uses the data better than two half-fits per evaluator.
* Two maps are fitted and measured out of fold (5 folds of whole questions; WikiQA's rows
  are not independent within a question): isotonic regression (``scipy.optimize``) and
  Platt scaling (a logistic fit of the label on the cosine). The one with the lower
  out-of-fold Brier score of "the verdict is right", averaged over the evaluators, is
  shipped, fitted on every pair.
* "Before" is the confidence the shipped cut points already imply: the class-balanced
  logistic of ``calibration.json`` (fitted as if relevant and irrelevant pairs were
  equally common), read as p(relevant). On WikiQA (5 % relevant) it is far too sure of
  "relevant" verdicts, which is what the fit corrects.
* Expected calibration error (ECE): 10 equal-width bins of confidence on [0, 1], the
  row-weighted mean of |share right - mean confidence|.

The fitted map carries WikiQA's base rate (5 % of pairs answer the question): the prior
is stored so that ``verdict_confidence(..., prior=p)`` can move it to another data set.
Only numbers are written: no WikiQA rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from calibrate_local_judge import embed_unique, read_wikiqa  # noqa: E402

from framekit.evaluators import ContextRelevance, ResponseRelevance, RetrievalRelevance  # noqa: E402
from framekit.judges.local.embedder import LocalEmbedder  # noqa: E402
from framekit.judges.local.methods import load_calibration  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "wikiqa-dev.tsv"
DEFAULT_OUTPUT = ROOT / "framekit" / "judges" / "local" / "confidence.json"
FOLDS, SEED, BINS = 5, 20150917, 10


# ------------------------------------------------------------------------- measures


def ece(confidence: np.ndarray, right: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error over equal-width bins of ``confidence`` on [0, 1]."""
    edges = np.minimum((confidence * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = edges == b
        if inside.any():
            total += inside.mean() * abs(right[inside].mean() - confidence[inside].mean())
    return float(total)


def brier(confidence: np.ndarray, right: np.ndarray) -> float:
    return float(np.mean((confidence - right) ** 2))


def verdict_right(p_relevant: np.ndarray, passed: np.ndarray) -> np.ndarray:
    """p(the verdict is right): p(relevant) for a pass, 1 - p(relevant) for a fail."""
    return np.where(passed, p_relevant, 1.0 - p_relevant)


# ------------------------------------------------------------------------- maps


def fit_isotonic(signal: np.ndarray, label: np.ndarray) -> dict[str, list[float]]:
    """Increasing p(relevant | signal) as knots (x, y) to interpolate between: each block
    of pooled values becomes its first and last signal at the block's mean."""
    order = np.argsort(signal, kind="mergesort")
    x, y = signal[order], label[order].astype(float)
    fitted = isotonic_regression(y, increasing=True).x
    knots_x: list[float] = []
    knots_y: list[float] = []
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or fitted[end] != fitted[start]:
            knots_x += [float(x[start]), float(x[end - 1])]
            knots_y += [float(fitted[start])] * 2
            start = end
    return {"x": [round(v, 6) for v in knots_x], "y": [round(v, 6) for v in knots_y]}


def apply_isotonic(knots: dict[str, list[float]], signal: np.ndarray) -> np.ndarray:
    return np.interp(signal, knots["x"], knots["y"])


def fit_platt(signal: np.ndarray, label: np.ndarray) -> dict[str, float]:
    """p(relevant | signal) = sigmoid(slope * signal + intercept), maximum likelihood."""
    x = np.column_stack([signal, np.ones_like(signal)])
    beta = np.zeros(2)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        step = np.linalg.solve(
            (x * (p * (1 - p))[:, None]).T @ x + 1e-9 * np.eye(2), x.T @ (label - p)
        )
        beta += step
        if np.abs(step).max() < 1e-10:
            break
    return {"slope": round(float(beta[0]), 6), "intercept": round(float(beta[1]), 6)}


def apply_platt(fit: dict[str, float], signal: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(fit["slope"] * signal + fit["intercept"])))


METHODS: dict[str, tuple[Callable[..., Any], Callable[..., np.ndarray]]] = {
    "isotonic": (fit_isotonic, apply_isotonic),
    "platt": (fit_platt, apply_platt),
}


def out_of_fold(
    method: str, signal: np.ndarray, label: np.ndarray, questions: np.ndarray
) -> np.ndarray:
    """p(relevant) for each pair from a map fitted without the pair's question."""
    fit, apply = METHODS[method]
    rng = np.random.default_rng(SEED)
    unique = rng.permutation(np.unique(questions))
    fold_of = {q: i % FOLDS for i, q in enumerate(unique)}
    folds = np.array([fold_of[q] for q in questions])
    out = np.empty(len(signal))
    for k in range(FOLDS):
        held = folds == k
        out[held] = apply(fit(signal[~held], label[~held]), signal[held])
    return out


# ------------------------------------------------------------------------- data


def pass_cuts() -> dict[str, float]:
    """Each relevance evaluator's pass cut on the cosine, from the shipped cut points: a
    pair passes from the first band whose label scores at least the threshold."""
    calibration = load_calibration()
    scales = {
        "binary": calibration.relevance_binary,
        "three": calibration.relevance_three,
    }
    cuts = {}
    for ev in (RetrievalRelevance(), ContextRelevance(), ResponseRelevance()):
        scale = scales[ev.local_levels] if hasattr(ev, "local_levels") else None
        scale = scale or calibration.relevance_five
        scores = sorted(ev.choices.values())
        below = sum(score < ev.threshold for score in scores)
        cuts[ev.name] = float(scale.cuts[below - 1])
    return cuts


def wikiqa_signals(
    path: Path, embedder: LocalEmbedder | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, str]]]:
    """(cosine, label, question id, rows) for every WikiQA pair, as the offline judge sees it."""
    embedder = embedder or LocalEmbedder.default()
    rows = read_wikiqa(path)
    vec = embed_unique(embedder, [r["Question"] for r in rows] + [r["Sentence"] for r in rows])
    signal = np.array([float(vec[r["Question"]] @ vec[r["Sentence"]]) for r in rows])
    label = np.array([int(r["Label"]) for r in rows])
    questions = np.array([r["QuestionID"] for r in rows])
    return signal, label, questions, rows


def before_map() -> Callable[[np.ndarray], np.ndarray]:
    """p(relevant) as the shipped cut points read it: the class-balanced logistic."""
    fit = load_calibration().source["relevance"]["logistic"]
    return lambda s: apply_platt({"slope": fit["slope"], "intercept": fit["intercept"]}, s)


def figures(p_relevant: np.ndarray, label: np.ndarray, passed: np.ndarray) -> dict[str, float]:
    right = (passed == (label == 1)).astype(float)
    confidence = verdict_right(p_relevant, passed)
    return {"brier": round(brier(confidence, right), 4), "ece": round(ece(confidence, right), 4)}


def calibrate(data: Path) -> dict[str, Any]:
    signal, label, questions, _ = wikiqa_signals(data)
    cuts = pass_cuts()
    oof = {m: out_of_fold(m, signal, label, questions) for m in METHODS}
    before = before_map()(signal)
    comparison = {
        m: {name: figures(oof[m], label, signal >= cut) for name, cut in cuts.items()}
        for m in METHODS
    }
    mean_brier = {
        m: round(float(np.mean([f["brier"] for f in comparison[m].values()])), 4) for m in METHODS
    }
    chosen = min(mean_brier, key=lambda m: mean_brier[m])
    fitted = {m: METHODS[m][0](signal, label) for m in METHODS}
    shipped = METHODS[chosen][1](fitted[chosen], signal)
    evaluators = {}
    for name, cut in cuts.items():
        passed = signal >= cut
        b, a, cv = (
            figures(before, label, passed),
            figures(shipped, label, passed),
            comparison[chosen][name],
        )
        evaluators[name] = {
            "pass_cut": round(cut, 4),
            "n": int(len(signal)),
            "verdicts_right": round(float((passed == (label == 1)).mean()), 4),
            "brier_before": b["brier"],
            "brier_after": a["brier"],
            "brier_after_out_of_fold": cv["brier"],
            "ece_before": b["ece"],
            "ece_after": a["ece"],
            "ece_after_out_of_fold": cv["ece"],
        }
    return {
        "model_id": LocalEmbedder.default().model_id,
        "note": "Measured by scripts/calibrate_offline_confidence.py; numbers only, no WikiQA rows.",
        "source": "WikiQA dev split (Yang, Yih and Meek 2015): cosine(question, sentence) "
        "against the crowd label",
        "signal": "the offline relevance judge's cosine: request vs response, or request vs "
        "the best document",
        "meaning": "p(relevant | signal); a verdict's confidence is p for a pass, 1 - p for a "
        "fail (verdict_confidence)",
        "pairs": int(len(signal)),
        "positive_rate": round(float(label.mean()), 6),
        "method": chosen,
        "choice": {
            "rule": "lower out-of-fold Brier score of 'the verdict is right', mean over the "
            "relevance evaluators",
            "folds": f"{FOLDS} folds of whole questions",
            "mean_brier_out_of_fold": mean_brier,
            "out_of_fold": comparison,
            "before": "class-balanced logistic of calibration.json, read as p(relevant)",
        },
        "isotonic": fitted["isotonic"],
        "platt": fitted["platt"],
        "ece_bins": BINS,
        "evaluators": evaluators,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"WikiQA not found at {args.data}; nothing to calibrate.", file=sys.stderr)
        return 2
    result = calibrate(args.data)
    text = json.dumps(result, indent=1) + "\n"
    print(json.dumps({k: v for k, v in result.items() if k not in ("isotonic",)}, indent=1))
    if not args.dry_run:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
