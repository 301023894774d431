"""SummEval dev half as the offline "is it supported?" methods read it.

Shared by ``scripts/calibrate_offline_support.py`` (which fits the cut points) and
``benchmarks/bench_groundedness.py`` (which measures them), so both score exactly what
the evaluators' own hooks produce: each summary is a response (``output``), its article
the one retrieved document (``context``) and, for Coherence, the summarisation request
holding the article (``input``). Only numbers leave this module, never SummEval text.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from framekit.evaluators import Coherence, Groundedness

ROOT = Path(__file__).resolve().parents[1]
#: ``../shared/data`` beside the repository, or beside the directory holding a worktree.
DEFAULT_DATA = next(
    (
        p / "shared" / "data" / "summeval-dev.jsonl"
        for p in (ROOT.parent, ROOT.parent.parent)
        if (p / "shared" / "data" / "summeval-dev.jsonl").is_file()
    ),
    ROOT.parent / "shared" / "data" / "summeval-dev.jsonl",
)
SEED = 0


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def ratings(rows: list[dict[str, Any]], aspect: str) -> np.ndarray:
    return np.array([r["expert_avg"][aspect] for r in rows], dtype=np.float64)


def articles(rows: list[dict[str, Any]]) -> np.ndarray:
    return np.array([r["doc_id"] for r in rows])


def groundedness_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ev = Groundedness()
    return [ev.prepare({"output": r["summary"], "context": [r["source"]]}) for r in rows]


def coherence_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request a summariser answered: the instruction Groundedness's likelihood
    prompt uses, then the article, so both evaluators read one prompt (one pass)."""
    ask = str(Groundedness().spec.extra["likelihood_instruction"])
    ev = Coherence()
    return [ev.prepare({"output": r["summary"], "input": f"{ask}\n\n{r['source']}"}) for r in rows]


#: The user's turn Coherence's likelihood read for a response without a request before
#: framekit issue 39 (such a response is now read by the embedding proxy).
NEUTRAL_REQUEST = "Write a short, clear response."


def likelihoods_alone(rows: list[dict[str, Any]], scorer: Any, cache: Any = None) -> np.ndarray:
    """The mean token log-probability of every summary read alone, after
    :data:`NEUTRAL_REQUEST`: the measure a response without a request got before issue 39.

    ``cache`` (a :class:`framekit.Cache`) holds the results under the engine's own keys
    (those runs of that time wrote), so a second script reuses the first one's (about 15
    minutes for all 800 on two loaded cores).
    """
    from framekit.judges.local.likelihood import (
        LikelihoodInput,
        likelihood_from_cache,
        likelihood_key,
        likelihood_to_cache,
    )

    inputs = [LikelihoodInput(NEUTRAL_REQUEST, (), r["summary"]) for r in rows]
    keys = [likelihood_key(item) for item in inputs]
    found = (
        {k: likelihood_from_cache(v) for k, v in cache.get_many(set(keys)).items()}
        if cache is not None
        else {}
    )
    missing = sorted({k: i for i, k in enumerate(keys) if k not in found}.values())
    # In chunks, each cached as it ends: a stopped script resumes where it was.
    for start in range(0, len(missing), 32):
        chunk = missing[start : start + 32]
        results = scorer.score([inputs[i] for i in chunk])
        found.update({keys[i]: r for i, r in zip(chunk, results)})
        if cache is not None:
            cache.set_many((keys[i], likelihood_to_cache(r)) for i, r in zip(chunk, results))
    return np.array([found[k].mean_logprob for k in keys])


def similarity_measures(rows: list[dict[str, Any]], embedder: Any) -> np.ndarray:
    """Groundedness's similarity proxy measure per summary (sentences embedded once)."""
    from framekit.evaluators import _offline_support as support

    ev = Groundedness()
    records = groundedness_records(rows)
    texts = [support.similarity_texts(ev, rec) for rec in records]
    unique = sorted({t for group in texts for t in group})
    vectors = dict(zip(unique, embedder.embed(unique)))
    return np.array(
        [
            support.similarity_measure(ev, rec, [vectors[t] for t in group])[0]
            for rec, group in zip(records, texts)
        ]
    )


def likelihoods(rows: list[dict[str, Any]], scorer: Any) -> tuple[list[Any], dict[str, Any]]:
    """Groundedness's likelihood of every summary (all in one call, grouped by article
    by the scorer), and the timing: summaries/s and tokens evaluated/s."""
    ev = Groundedness()
    inputs = [ev.local_likelihood_inputs(rec) for rec in groundedness_records(rows)]
    started = time.perf_counter()
    results = scorer.score(inputs)
    elapsed = time.perf_counter() - started
    prompts = {item.prompt_text(): r.prompt_tokens for item, r in zip(inputs, results)}
    prompt_tokens = sum(prompts.values())
    answer_tokens = sum(r.tokens for r in results)
    timing = {
        "summaries": len(results),
        "seconds": round(elapsed, 1),
        "summaries_per_s": round(len(results) / elapsed, 3),
        "seconds_per_summary": round(elapsed / len(results), 3),
        "tokens_evaluated_per_s": round((prompt_tokens + answer_tokens) / elapsed, 1),
        "tokens_scored_per_s": round(answer_tokens / elapsed, 1),
        "threads": scorer.threads,
    }
    return results, timing


def per_article(scores: np.ndarray, truth: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Spearman within each article (0 when a side is constant), one value per article."""
    out = []
    for doc in sorted(set(docs)):
        idx = docs == doc
        if np.ptp(scores[idx]) == 0 or np.ptp(truth[idx]) == 0:
            out.append(0.0)
        else:
            out.append(float(spearmanr(scores[idx], truth[idx]).statistic))
    return np.array(out)


def spearman_figures(scores: np.ndarray, truth: np.ndarray, docs: np.ndarray) -> dict[str, Any]:
    """Pooled Spearman over all summaries, and the per-article mean with a bootstrap
    95 % interval over articles (the summary-level figure the literature reports)."""
    within = per_article(scores, truth, docs)
    rng = np.random.default_rng(SEED)
    means = within[rng.integers(0, len(within), (2000, len(within)))].mean(1)
    return {
        "per_article_mean": round(float(within.mean()), 4),
        "interval_95_over_articles": [
            round(float(v), 4) for v in np.quantile(means, [0.025, 0.975])
        ],
        "pooled": round(float(spearmanr(scores, truth).statistic), 4),
    }
