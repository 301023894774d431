"""Fit the offline judge's coherence to SummEval expert ratings; write calibration.json.

Usage::

    .venv/bin/python scripts/calibrate_offline_coherence.py [--data ../shared/data/summeval-dev.jsonl]
        [--dry-run]

Reads the dev half of SummEval (50 articles x 16 summaries, expert coherence 1-5), embeds
each summary's sentences with the offline model, and measures, as the literature reports
it (Spearman within each article over its 16 summaries, averaged over articles):

* the classic method: mean cosine of consecutive sentences (``coherence_similarity``);
* focus (mean cosine of sentences to their centroid) and repetition (repeated trigrams);
* a least-squares fit of the expert rating on focus and repetition, before and after the
  five labels' cut points (placed so each label is as common as the rounded expert rating),
  with a bootstrap interval over articles and a split-half check (fit on one half of the
  articles, measure on the other).

The fit and its figures replace the ``coherence`` section of ``calibration.json``. Only
numbers are written, never SummEval text. Skips (exit 2) when the file is absent.
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

from benchmarks._expert_ratings import DEFAULT_DATA  # noqa: E402
from benchmarks._expert_ratings import per_article as summary_level_spearman  # noqa: E402
from benchmarks._expert_ratings import read as read_summeval  # noqa: E402
from framekit.judges.local import coherence as lc  # noqa: E402
from framekit.judges.local.embedder import LocalEmbedder  # noqa: E402
from framekit.judges.local.methods import (  # noqa: E402
    CALIBRATION_PATH,
    coherence_similarity,
    split_sentences,
)

LABELS = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
SEED = 0
#: Below this summary-level Spearman the offline judge refuses to rate coherence.
FLOOR = 0.2


def article_interval(per_article: np.ndarray, resamples: int = 2000) -> list[float]:
    rng = np.random.default_rng(SEED)
    means = per_article[rng.integers(0, len(per_article), (resamples, len(per_article)))].mean(1)
    return [round(float(v), 4) for v in np.quantile(means, [0.025, 0.975])]


def features(rows: list[dict[str, Any]], embedder: LocalEmbedder) -> dict[str, np.ndarray]:
    sentences = [split_sentences(r["summary"]) or [r["summary"]] for r in rows]
    unique = sorted({s for group in sentences for s in group})
    vec = dict(zip(unique, embedder.embed(unique)))
    return {
        "consecutive": np.array(
            [coherence_similarity(np.stack([vec[s] for s in g])) for g in sentences]
        ),
        "focus": np.array([lc.focus(np.stack([vec[s] for s in g])) for g in sentences]),
        "repetition": np.array([lc.repetition(r["summary"]) for r in rows]),
    }


def fit(feats: dict[str, np.ndarray], ratings: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    design = np.column_stack([np.ones(mask.sum()), feats["focus"][mask], feats["repetition"][mask]])
    coef, *_ = np.linalg.lstsq(design, ratings[mask], rcond=None)
    return {"intercept": float(coef[0]), "focus": float(coef[1]), "repetition": float(coef[2])}


def expected(feats: dict[str, np.ndarray], model: dict[str, float]) -> np.ndarray:
    return np.array(
        [lc.expected_rating(f, r, model) for f, r in zip(feats["focus"], feats["repetition"])]
    )


def calibrate(rows: list[dict[str, Any]], embedder: LocalEmbedder) -> dict[str, Any]:
    ratings = np.array([r["expert_avg"]["coherence"] for r in rows], dtype=np.float64)
    docs = np.array([r["doc_id"] for r in rows])
    feats = features(rows, embedder)
    everything = np.ones(len(rows), dtype=bool)
    model = fit(feats, ratings, everything)
    predicted = expected(feats, model)
    # Cut points: each label as common as the experts' rating rounded to 1..5.
    shares = [float((ratings < level + 0.5).mean()) for level in (1, 2, 3, 4)]
    cuts = [round(float(c), 4) for c in np.quantile(predicted, shares)]
    cuts = [float(c) for c in np.maximum.accumulate(cuts)]
    scores = np.searchsorted(cuts, predicted, side="right") / 4.0

    measured: dict[str, Any] = {}
    for name, values in (
        ("consecutive_similarity", feats["consecutive"]),
        ("focus", feats["focus"]),
        ("repetition_negated", -feats["repetition"]),
        ("fit_expected_rating", predicted),
        ("fit_labelled_score", scores),
    ):
        per_article = summary_level_spearman(values, ratings, docs)
        measured[name] = {
            "spearman": round(float(per_article.mean()), 4),
            "interval_95_over_articles": article_interval(per_article),
        }
    articles = np.array(sorted(set(docs)))
    split = []
    for half in (0, 1):
        train = np.isin(docs, articles[half::2])
        held = expected(feats, fit(feats, ratings, train))
        split.append(
            round(
                float(summary_level_spearman(held[~train], ratings[~train], docs[~train]).mean()), 4
            )
        )
    figure = measured["fit_labelled_score"]["spearman"]
    return {
        "source": "SummEval dev half (Fabbri et al. 2021): 50 articles x 16 summaries, "
        "expert coherence ratings (mean of three, 1-5)",
        "summaries": len(rows),
        "articles": len(articles),
        "method": "least-squares fit of the expert rating on focus (mean cosine of sentences to "
        "their centroid) and repetition (share of repeated word trigrams), rescaled to [0, 1]",
        "fit": {k: round(v, 4) for k, v in model.items()},
        "summary_level_spearman": measured,
        "split_half_spearman": split,
        "split_half_how": "fit on every other article, Spearman on the others, both ways",
        "offline_figure": figure,
        "floor": FLOOR,
        "usable": bool(figure >= FLOOR),
        "scales": {
            "five": {
                "labels": LABELS,
                "cuts": cuts,
                "rule": "on the expected rating rescaled to [0, 1]: each label as common on "
                "the dev file as the experts' rating rounded to 1-5",
            }
        },
        "previous_turn": "not used: only the response's own sentences",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--calibration", type=Path, default=CALIBRATION_PATH)
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"SummEval not found at {args.data}; nothing to calibrate.", file=sys.stderr)
        return 2
    section = calibrate(read_summeval(args.data), LocalEmbedder.default())
    print(json.dumps(section, indent=2))
    if not args.dry_run:
        data = json.loads(args.calibration.read_text(encoding="utf-8"))
        data["coherence"] = section
        args.calibration.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"wrote the coherence section of {args.calibration}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
