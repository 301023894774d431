"""Measure the offline judge on WikiQA and write its cut points to calibration.json.

Usage::

    .venv/bin/python scripts/calibrate_local_judge.py [--data ../shared/data/wikiqa-dev.tsv]
        [--output framekit/judges/local/calibration.json] [--dry-run]

What it does, and why:

* Relevance. Every (Question, Sentence) pair of the WikiQA dev split is embedded and
  scored by cosine similarity; ROC AUC against ``Label`` and MAP/MRR over the questions
  with at least one answer say how well the similarity ranks answers. WikiQA's negatives
  are sentences from the *same* Wikipedia article as the answer, so "relevant" here means
  "answers the question", not merely "on topic": the cut points are deliberately strict.
* Combination. Random lists of 5 candidate sentences per question, labelled by whether
  they hold an answer, are scored with every rule in ``RELEVANCE_RULES``; the AUCs are
  recorded so the default rule of ``relevance_similarity`` is a measured choice.
* Cut points. Binary: the threshold maximising Youden's J (TPR - FPR), i.e. the best
  balanced accuracy, which does not depend on WikiQA's 5 % positive rate. Three and five
  levels: a class-balanced logistic fit p(s) turns a similarity into the probability that
  the pair is relevant (as if relevant and irrelevant pairs were equally common); each
  label is given where p is nearest to the label's score (low 0, medium 0.5, high 1:
  cuts at p = 0.25, 0.75; the five-level rubric 0, .25, .5, .75, 1: cuts at p = 0.125,
  0.375, 0.625, 0.875). A label therefore means the same thing as the score it maps to.
* Coherence cannot be calibrated on WikiQA's labels. It uses the WikiQA *sentences*
  instead: a window of 2 to 5 consecutive sentences of one article is a coherent text,
  the same number of sentences drawn from different articles an incoherent one; the
  logistic rule above then places the five coherence labels. Windows with one sentence
  swapped for another article's are reported as a check (they should land mid-scale).
  This is kept as ``coherence_sentence_order`` for reference only: it separates article
  order from random sentences, yet agrees with SummEval experts at Spearman 0.04. The
  shipped ``coherence`` section is fitted by ``scripts/calibrate_offline_coherence.py``
  and carried over unchanged.

Only numbers (and the rules that produced them) are written: no WikiQA rows, whose
licence forbids redistribution.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from framekit.judges.local.embedder import LocalEmbedder  # noqa: E402
from framekit.judges.local.methods import (  # noqa: E402
    RELEVANCE_RULES,
    coherence_similarity,
    relevance_similarity,
)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "wikiqa-dev.tsv"
DEFAULT_OUTPUT = ROOT / "framekit" / "judges" / "local" / "calibration.json"
RELEVANCE_LABELS = {
    "binary": ["irrelevant", "relevant"],
    "three": ["low", "medium", "high"],
    "five": ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"],
}
LIST_SIZE, LISTS_PER_QUESTION, SEED = 5, 20, 20150917


# ------------------------------------------------------------------------- measures


def roc_auc(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    """ROC AUC by the Mann-Whitney statistic, tied scores sharing their average rank."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    first_rank = np.cumsum(counts) - counts + 1
    ranks = (first_rank + (counts - 1) / 2)[inverse]
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def bootstrap_by_question(
    questions: np.ndarray, statistic: Any, rounds: int = 300
) -> tuple[float, float]:
    """95 % interval of ``statistic(rows)`` resampling whole questions (rows are not independent)."""
    rng = np.random.default_rng(SEED)
    unique = np.unique(questions)
    members = {q: np.flatnonzero(questions == q) for q in unique}
    values = [
        statistic(np.concatenate([members[q] for q in rng.choice(unique, len(unique))]))
        for _ in range(rounds)
    ]
    low, high = np.percentile(values, [2.5, 97.5])
    return round(float(low), 4), round(float(high), 4)


def map_mrr(groups: dict[str, list[tuple[float, int]]]) -> tuple[float, float, int]:
    """MAP and MRR over groups with at least one positive, and how many such groups."""
    aps, rrs = [], []
    for pairs in groups.values():
        ranked = [label for _, label in sorted(pairs, key=lambda p: -p[0])]
        if not any(ranked):
            continue
        hits, precisions = 0, []
        for rank, label in enumerate(ranked, 1):
            if label:
                hits += 1
                precisions.append(hits / rank)
        aps.append(sum(precisions) / hits)
        rrs.append(1.0 / (ranked.index(1) + 1))
    return float(np.mean(aps)), float(np.mean(rrs)), len(aps)


def youden_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The cut maximising TPR - FPR, placed midway between neighbouring scores."""
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order]
    tpr = np.cumsum(y) / y.sum()
    fpr = np.cumsum(1 - y) / (1 - y).sum()
    j = tpr - fpr
    # Only positions where the next score differs are real thresholds.
    valid = np.append(s[:-1] != s[1:], True)
    best = int(np.argmax(np.where(valid, j, -np.inf)))
    cut = (s[best] + s[best + 1]) / 2 if best + 1 < len(s) else s[best]
    return float(cut), float(j[best])


def balanced_logistic(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Fit p(s) = sigmoid(a*s + b) with both classes weighted equally (Newton's method)."""
    x = np.column_stack([scores, np.ones_like(scores)])
    w = np.where(labels == 1, 0.5 / labels.sum(), 0.5 / (1 - labels).sum())
    beta = np.zeros(2)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        grad = x.T @ (w * (labels - p))
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + 1e-9 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.abs(step).max() < 1e-10:
            break
    return float(beta[0]), float(beta[1])


def logistic_cuts(slope: float, intercept: float, probabilities: Sequence[float]) -> list[float]:
    return [round((math.log(p / (1 - p)) - intercept) / slope, 4) for p in probabilities]


def nearest_score_probabilities(levels: int) -> list[float]:
    """Midpoints between evenly spaced label scores 0 .. 1 (0.25, 0.75 for three)."""
    return [(2 * i + 1) / (2 * (levels - 1)) for i in range(levels - 1)]


def summary(values: np.ndarray) -> dict[str, float]:
    q = np.quantile(values, [0.1, 0.5, 0.9])
    return {
        "n": int(len(values)),
        "mean": round(float(values.mean()), 4),
        "p10": round(float(q[0]), 4),
        "median": round(float(q[1]), 4),
        "p90": round(float(q[2]), 4),
    }


# ------------------------------------------------------------------------- data


def read_wikiqa(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def embed_unique(embedder: LocalEmbedder, texts: Sequence[str]) -> dict[str, np.ndarray]:
    unique = sorted(set(texts))
    return dict(zip(unique, embedder.embed(unique)))


# ------------------------------------------------------------------------- relevance


def measure_relevance(rows: list[dict[str, str]], vec: dict[str, np.ndarray]) -> dict[str, Any]:
    scores = np.array([float(vec[r["Question"]] @ vec[r["Sentence"]]) for r in rows])
    labels = np.array([int(r["Label"]) for r in rows])
    groups: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for row, score, label in zip(rows, scores, labels):
        groups[row["QuestionID"]].append((float(score), int(label)))
    mean_ap, mrr, answered = map_mrr(groups)
    binary_cut, j = youden_threshold(scores, labels)
    questions = np.array([r["QuestionID"] for r in rows])
    cut_interval = bootstrap_by_question(
        questions, lambda i: youden_threshold(scores[i], labels[i])[0]
    )
    slope, intercept = balanced_logistic(scores, labels)
    tpr = float((scores[labels == 1] >= binary_cut).mean())
    fpr = float((scores[labels == 0] >= binary_cut).mean())
    scales = {
        "binary": {
            "labels": RELEVANCE_LABELS["binary"],
            "cuts": [round(binary_cut, 4)],
            "rule": "Youden's J maximum (best balanced accuracy), midway between "
            "neighbouring pair scores",
            "youden_j": round(j, 4),
            "tpr": round(tpr, 4),
            "fpr": round(fpr, 4),
            "cut_95_interval": list(cut_interval),
            "cut_95_interval_how": "bootstrap over questions",
        },
    }
    for name in ("three", "five"):
        probs = nearest_score_probabilities(len(RELEVANCE_LABELS[name]))
        scales[name] = {
            "labels": RELEVANCE_LABELS[name],
            "cuts": logistic_cuts(slope, intercept, probs),
            "rule": "label whose score is nearest the class-balanced logistic probability "
            f"of relevance: cuts at p = {', '.join(f'{p:g}' for p in probs)}",
        }
    return {
        "source": "WikiQA dev split (Yang, Yih and Meek 2015): cosine(question, sentence)",
        "pairs": len(rows),
        "positives": int(labels.sum()),
        "questions": len(groups),
        "questions_with_answer": answered,
        "roc_auc": round(roc_auc(scores, labels), 4),
        "map": round(mean_ap, 4),
        "mrr": round(mrr, 4),
        "positive_similarity": summary(scores[labels == 1]),
        "negative_similarity": summary(scores[labels == 0]),
        "logistic": {
            "slope": round(slope, 4),
            "intercept": round(intercept, 4),
            "meaning": "p(relevant | similarity) with equal class weights",
        },
        "combination": measure_combination(groups_by_question(rows), vec),
        "scales": scales,
    }


def groups_by_question(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        groups[row["QuestionID"]].append(row)
    return groups


def measure_combination(
    groups: dict[str, list[dict[str, str]]], vec: dict[str, np.ndarray]
) -> dict[str, Any]:
    """AUC of each rule at telling lists that hold an answer from lists that do not.

    "max" is kept unless another rule beats it beyond sampling noise (the 95 % bootstrap
    interval of the AUC difference, resampling questions, lies above zero): it is the
    simplest rule and keeps a list's similarity on the scale of a single pair's.
    """
    rng = np.random.default_rng(SEED)
    lists: list[tuple[str, np.ndarray, np.ndarray, int]] = []
    for qid, candidates in groups.items():
        if len(candidates) < LIST_SIZE:
            continue
        query = vec[candidates[0]["Question"]]
        for _ in range(LISTS_PER_QUESTION):
            picked = [candidates[i] for i in rng.choice(len(candidates), LIST_SIZE, replace=False)]
            docs = np.stack([vec[r["Sentence"]] for r in picked])
            lists.append((qid, query, docs, int(any(r["Label"] == "1" for r in picked))))
    labels = np.array([item[3] for item in lists])
    questions = np.array([item[0] for item in lists])
    scores = {
        rule: np.array([relevance_similarity(q, d, rule=rule) for _, q, d, _ in lists])
        for rule in RELEVANCE_RULES
    }
    auc = {rule: round(roc_auc(values, labels), 4) for rule, values in scores.items()}
    best = max(auc, key=lambda rule: auc[rule])
    interval = bootstrap_by_question(
        questions,
        lambda i: roc_auc(scores[best][i], labels[i]) - roc_auc(scores["max"][i], labels[i]),
        rounds=200,
    )
    chosen = best if interval[0] > 0 else "max"
    return {
        "rule": chosen,
        "roc_auc_by_rule": auc,
        "best_measured": best,
        "best_minus_max_auc_95_interval": list(interval),
        "choice": "max unless another rule beats it beyond the bootstrap interval",
        "how": f"{LISTS_PER_QUESTION} random lists of {LIST_SIZE} candidate sentences per "
        "question with at least that many; a list is positive when it holds an "
        "answer",
        "lists": len(lists),
        "positive_lists": int(labels.sum()),
    }


# ------------------------------------------------------------------------- coherence


def measure_coherence(rows: list[dict[str, str]], vec: dict[str, np.ndarray]) -> dict[str, Any]:
    documents: dict[str, dict[int, str]] = defaultdict(dict)
    for row in rows:
        index = int(row["SentenceID"].rsplit("-", 1)[1])
        documents[row["DocumentID"]][index] = row["Sentence"]
    articles = [[text for _, text in sorted(sents.items())] for sents in documents.values()]
    articles = [a for a in articles if len(a) >= 2]
    rng = np.random.default_rng(SEED)
    coherent, unrelated, swapped = [], [], []
    for number, article in enumerate(articles):
        for length in range(2, min(5, len(article)) + 1):
            start = int(rng.integers(0, len(article) - length + 1))
            window = [vec[s] for s in article[start : start + length]]
            coherent.append(coherence_similarity(np.stack(window)))
            others = rng.choice(
                [i for i in range(len(articles)) if i != number], length, replace=False
            )
            unrelated.append(
                coherence_similarity(
                    np.stack(
                        [vec[articles[i][int(rng.integers(len(articles[i])))]] for i in others]
                    )
                )
            )
            if length >= 3:
                mixed = list(window)
                mixed[int(rng.integers(1, length))] = vec[articles[others[0]][0]]
                swapped.append(coherence_similarity(np.stack(mixed)))
    scores = np.array(coherent + unrelated)
    labels = np.array([1] * len(coherent) + [0] * len(unrelated))
    slope, intercept = balanced_logistic(scores, labels)
    probs = nearest_score_probabilities(5)
    return {
        "source": "WikiQA sentences in article order: windows of 2-5 consecutive sentences "
        "(coherent) vs as many sentences from different articles (unrelated)",
        "articles": len(articles),
        "roc_auc": round(roc_auc(scores, labels), 4),
        "coherent_similarity": summary(np.array(coherent)),
        "unrelated_similarity": summary(np.array(unrelated)),
        "one_sentence_swapped_similarity": summary(np.array(swapped)),
        "logistic": {
            "slope": round(slope, 4),
            "intercept": round(intercept, 4),
            "meaning": "p(coherent | mean consecutive similarity), equal weights",
        },
        "scales": {
            "five": {
                "labels": RELEVANCE_LABELS["five"],
                "cuts": logistic_cuts(slope, intercept, probs),
                "rule": "label whose score is nearest the class-balanced logistic probability of "
                f"coherence: cuts at p = {', '.join(f'{p:g}' for p in probs)}",
            }
        },
        "history": "not calibrated: the last earlier turn is one more link of the chain",
    }


# ------------------------------------------------------------------------- main


def shipped_coherence() -> dict[str, Any]:
    """The coherence section of the shipped calibration.json, carried over unchanged."""
    path = Path(__file__).resolve().parents[1] / "framekit" / "judges" / "calibration.json"
    section: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["coherence"]
    return section


def calibrate(data: Path, embedder: LocalEmbedder | None = None) -> dict[str, Any]:
    """Everything calibration.json holds, measured from the WikiQA file at ``data``."""
    embedder = embedder or LocalEmbedder.default()
    rows = read_wikiqa(data)
    started = time.perf_counter()
    vec = embed_unique(embedder, [r["Question"] for r in rows] + [r["Sentence"] for r in rows])
    print(f"embedded {len(vec)} texts in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return {
        "model_id": embedder.model_id,
        "note": "Measured by scripts/calibrate_local_judge.py; numbers only, no WikiQA rows.",
        "similarity": "cosine of L2-normalised all-MiniLM-L6-v2 mean-pooled embeddings",
        "relevance": measure_relevance(rows, vec),
        # The classic measure, kept for reference: it separates Wikipedia sentence order
        # from shuffled text but not good summaries from bad ones (SummEval Spearman 0.04).
        "coherence_sentence_order": measure_coherence(rows, vec),
        # The shipped method is fitted by scripts/calibrate_offline_coherence.py.
        "coherence": shipped_coherence(),
        "texts_embedded": len(vec),
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
    text = json.dumps(result, indent=2) + "\n"
    print(text)
    rel = result["relevance"]
    print(
        f"relevance AUC {rel['roc_auc']}  MAP {rel['map']}  MRR {rel['mrr']}  "
        f"best combination {rel['combination']['rule']}  "
        f"sentence-order coherence AUC {result['coherence_sentence_order']['roc_auc']}",
        file=sys.stderr,
    )
    default_rule = inspect.signature(relevance_similarity).parameters["rule"].default
    if rel["combination"]["rule"] != default_rule:
        print(
            f"NOTE: relevance_similarity defaults to {default_rule!r} but the measured "
            f"choice is {rel['combination']['rule']!r}: update local_methods.",
            file=sys.stderr,
        )
    if not args.dry_run:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
