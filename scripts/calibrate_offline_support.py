"""Fit the offline judge's cut points for Groundedness and Coherence-with-the-extra.

Usage::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/calibrate_offline_support.py
        [--data ../shared/data/summeval-dev.jsonl] [--dry-run] [--threads N]

Reads the SummEval dev half (50 articles x 16 summaries with expert consistency and
coherence ratings, 1-5) and, through the evaluators' own hooks (``benchmarks/_expert_ratings.py``):

* Groundedness, similarity proxy (no extra): mean best cosine of the summary's sentences
  to the article's (all-MiniLM-L6-v2);
* Groundedness, likelihood (``framekit[lm]``): mean token log-probability of the summary
  given the article under SmolLM2-135M-Instruct; Coherence with the extra reads the
  same pass (its request is the summarisation instruction with the article).

For each, cut points are placed so that each label is as common on the file as the
experts' ratings in its band: Groundedness's three bands (consistency below 3, 3 to 4.5,
4.5 and up: ungrounded, partially grounded, grounded); Coherence's five labels (the
rounded coherence rating). Groundedness's knots (1st percentile, the two cuts, 99th
percentile) map onto 0, 0.5, 0.875, 1 (see ``framekit/evaluators/_offline_support.py``).
Figures: summary-level Spearman (per article, averaged; bootstrap interval over
articles), pooled Spearman, and a split-half check (cuts fitted on every other article,
measured on the others). Writes ``framekit/judges/local/likelihood_calibration.json``
(numbers only). Skips (exit 2) without the file; the likelihood part is skipped (and kept
from the existing file) without the extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _expert_ratings as se  # noqa: E402
from framekit.evaluators import Groundedness  # noqa: E402
from framekit.evaluators import _offline_support as support  # noqa: E402
from framekit.judges.local.embedder import MODEL_ID as EMBEDDER_ID  # noqa: E402
from framekit.judges.local.embedder import LocalEmbedder  # noqa: E402
from framekit.judges.local.likelihood import MODEL_ID as LM_ID  # noqa: E402
from framekit.judges.local.likelihood import likelihood_available  # noqa: E402

CALIBRATION = ROOT / "framekit" / "judges" / "local" / support.CALIBRATION_FILE
#: Below this summary-level Spearman a method refuses to label its rows.
FLOOR = 0.2
SOURCE = (
    "SummEval dev half (Fabbri et al. 2021): 50 articles x 16 summaries, expert ratings "
    "(mean of three, 1-5); each summary a response, its article the one document"
)


def band_shares(truth: np.ndarray, edges: Sequence[float]) -> list[float]:
    """Share of ratings below each edge."""
    return [float((truth < edge).mean()) for edge in edges]


def increasing(values: Sequence[float]) -> list[float]:
    """``values`` made strictly increasing (ties nudged up by 1e-4), rounded."""
    out: list[float] = []
    for v in values:
        v = round(float(v), 4)
        out.append(v if not out or v > out[-1] else round(out[-1] + 1e-4, 4))
    return out


def support_knots(measure: np.ndarray, truth: np.ndarray) -> list[float]:
    low, middle = np.quantile(measure, band_shares(truth, (3.0, 4.5)))
    lo, hi = np.quantile(measure, [0.01, 0.99])
    return increasing([lo, low, middle, hi])


def labelled(measure: np.ndarray, knots: Sequence[float]) -> np.ndarray:
    return np.array([support.fitted_value(float(m), {"knots": knots}) for m in measure])


def split_half(measure: np.ndarray, truth: np.ndarray, docs: np.ndarray, fit: Any) -> list[float]:
    """Cuts fitted on every other article, Spearman of the scores on the others."""
    names = np.array(sorted(set(docs)))
    out = []
    for half in (0, 1):
        train = np.isin(docs, names[half::2])
        scores = fit(measure[train], truth[train], measure[~train])
        out.append(round(float(se.per_article(scores, truth[~train], docs[~train]).mean()), 4))
    return out


def measured(
    measure: np.ndarray, truth: np.ndarray, docs: np.ndarray, fit: Any, score: Any, key: str
) -> tuple[Any, dict[str, Any]]:
    """The fitted cut points (``fit(measure, truth)``) and how the scores they give
    (``score(measure, cuts)``, reported under ``key``) agree with the ratings."""
    cuts = fit(measure, truth)
    figures = {
        "measure": se.spearman_figures(measure, truth, docs),
        key: se.spearman_figures(score(measure, cuts), truth, docs),
    }
    figure = figures[key]["per_article_mean"]
    return cuts, {
        "spearman": figures,
        "split_half_spearman": split_half(
            measure, truth, docs, lambda m, t, held: score(held, fit(m, t))
        ),
        "figure": figure,
        "floor": FLOOR,
        "usable": bool(figure >= FLOOR),
    }


def groundedness_section(
    measure: np.ndarray, truth: np.ndarray, docs: np.ndarray, **meta: Any
) -> dict[str, Any]:
    knots, figures = measured(measure, truth, docs, support_knots, labelled, "score")
    return {
        **meta,
        "source": SOURCE,
        "ratings": "expert consistency",
        "knots": knots,
        "knot_values": list(support.KNOT_VALUES),
        "rule": "cuts at the shares of consistency < 3 and < 4.5 on the file; 1st and 99th "
        "percentiles at the ends",
        "label_shares": band_shares(truth, (3.0, 4.5)),
        **figures,
    }


def five_cuts(measure: np.ndarray, truth: np.ndarray) -> list[float]:
    return increasing(np.quantile(measure, band_shares(truth, (1.5, 2.5, 3.5, 4.5))))


def five_scores(measure: np.ndarray, cuts: Sequence[float]) -> np.ndarray:
    return np.searchsorted(cuts, measure, side="right") / 4.0


def coherence_section(measure: np.ndarray, truth: np.ndarray, docs: np.ndarray) -> dict[str, Any]:
    cuts, figures = measured(measure, truth, docs, five_cuts, five_scores, "labelled_score")
    return {
        "model_id": LM_ID,
        "source": SOURCE,
        "ratings": "expert coherence",
        "request": "the summarisation instruction, then the article (the request a summary answers)",
        "cuts": cuts,
        "rule": "each of the five labels as common on the file as the rounded coherence rating",
        **figures,
    }


def calibrate(rows: list[dict[str, Any]], threads: int | None) -> dict[str, Any]:
    docs = se.articles(rows)
    consistency, coherence = se.ratings(rows, "consistency"), se.ratings(rows, "coherence")
    print("similarity proxy: embedding sentences...", file=sys.stderr)
    similarity = se.similarity_measures(rows, LocalEmbedder.default())
    out: dict[str, Any] = {
        "note": "Written by scripts/calibrate_offline_support.py; numbers only, no SummEval text.",
        "groundedness": {
            "similarity": groundedness_section(
                similarity,
                consistency,
                docs,
                model_id=EMBEDDER_ID,
                method="mean over the text's sentences of the best cosine to a document sentence",
            )
        },
    }
    if not likelihood_available():
        print("framekit[lm] not installed: likelihood sections left as they are", file=sys.stderr)
        return out
    from framekit.judges.local.likelihood import LikelihoodScorer

    print("likelihood: scoring every summary (minutes)...", file=sys.stderr)
    results, timing = se.likelihoods(rows, LikelihoodScorer(threads=threads))
    print(json.dumps(timing), file=sys.stderr)
    lp = np.array([r.mean_logprob for r in results])
    out["groundedness"]["likelihood"] = groundedness_section(
        lp,
        consistency,
        docs,
        model_id=LM_ID,
        method="mean token log-probability of the text given the instruction and documents",
        instruction=str(Groundedness().spec.extra["likelihood_instruction"]),
    )
    out["coherence"] = {"likelihood": coherence_section(lp, coherence, docs)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=se.DEFAULT_DATA)
    parser.add_argument("--calibration", type=Path, default=CALIBRATION)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"SummEval not found at {args.data}; nothing to calibrate.", file=sys.stderr)
        return 2
    fresh = calibrate(se.read(args.data), args.threads)
    old = json.loads(args.calibration.read_text("utf-8")) if args.calibration.is_file() else {}
    merged = {**old, **fresh}
    merged["groundedness"] = {**old.get("groundedness", {}), **fresh["groundedness"]}
    print(json.dumps(merged, indent=2))
    if not args.dry_run:
        args.calibration.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.calibration}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
