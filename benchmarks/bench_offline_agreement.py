"""How far the offline judge agrees with people, measured on public expert-rated data.

Usage::

    .venv/bin/python benchmarks/bench_offline_agreement.py [--data ../shared/data]

Scores, with ``judge="local"`` and through ``fk.evaluate_dataframe`` (the path users take):

* WikiQA dev (2,733 question/sentence pairs, crowd labels): ROC AUC of each relevance
  evaluator's score against the label, plus ``fk.agreement`` (accuracy, kappa of
  ``_passed`` against the label) and the ``fk.calibrate`` F1 threshold;
* SummEval dev (50 articles x 16 summaries, expert coherence 1-5): summary-level Spearman
  (within each article, averaged over articles) of the offline Coherence score, with a
  bootstrap interval over articles, and how its rows spread over the five labels, per
  case: the summary alone (mapped as ``output`` only, how users often score it) and with
  the request it answers (the summarisation instruction with the article, as ``input``);
  each names the method that read it (with the ``lm`` extra: the likelihood with a
  request, the embedding proxy without). Next to them the classic consecutive-sentence
  similarity and, with the extra, the alternative framekit issue 39 weighed for a
  response alone: its likelihood read alone, placed by the with-request cut points
  (what framekit did before: nearly every row "Not At All") or by cut points fitted to
  it.

Writes ``benchmarks/results/offline_agreement.json``. Either file absent: that part is
skipped; ``--keep-wikiqa`` keeps the last file's WikiQA figures (with their date).
``--cache DIR`` keeps the offline judge's embeddings and likelihoods between runs;
``--articles N`` scores the first N SummEval articles only, ``--request-articles N`` the
with-request case only (with the extra it takes about 30 minutes for all 50 on 2 loaded
cores, the likelihoods read alone about 15; the response-only case is then measured on
those rows too). Published LLM-judge figures for comparison are listed in the output.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy.stats import rankdata

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import framekit as fk  # noqa: E402
from benchmarks import _expert_ratings as se  # noqa: E402
from benchmarks._common import RESULTS, write_results  # noqa: E402
from framekit.evaluators import (  # noqa: E402
    AnswerRelevancy,
    Coherence,
    ContextRelevance,
    Groundedness,
    ResponseRelevance,
    RetrievalRelevance,
)
from framekit.evaluators import _offline_support as support  # noqa: E402
from framekit.judges.local.embedder import LocalEmbedder  # noqa: E402
from framekit.judges.local.likelihood import likelihood_available  # noqa: E402
from framekit.judges.local.methods import coherence_similarity, split_sentences  # noqa: E402

FIVE = ("Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes")
PUBLISHED = {
    "summeval_coherence_spearman": {
        "G-Eval (GPT-4)": 0.582,
        "UniEval": 0.575,
        "BARTScore": 0.45,
        "ROUGE-L": "0.1-0.2",
        "source": "Liu et al. 2023 (G-Eval), Table 1; summary-level, full SummEval",
    },
    "wikiqa": "no LLM-judge AUC published on WikiQA that we know of; the original paper's "
    "best model reaches MAP about 0.65 (Yang, Yih and Meek 2015)",
}


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann-Whitney AUC, ties counted half."""
    ranks = rankdata(scores)
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def wikiqa(path: Path, cache: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    df = pl.DataFrame(
        {
            "question": [r["Question"] for r in rows],
            "sentence": [r["Sentence"] for r in rows],
            "label": [r["Label"] == "1" for r in rows],
        }
    ).with_columns(docs=pl.concat_list("sentence"))
    evaluators = [ResponseRelevance(), ContextRelevance(), RetrievalRelevance(), AnswerRelevancy()]
    started = time.perf_counter()
    scored = fk.evaluate_dataframe(
        df,
        evaluators,
        {"input": "question", "output": "sentence", "context": "docs"},
        judge="local",
        cache=cache,
        progress=False,
    )
    seconds = time.perf_counter() - started
    labels = df["label"].cast(pl.Int8).to_numpy()
    agreement = fk.agreement(scored, human="label", n_resamples=300)
    out: dict[str, Any] = {
        "pairs": df.height,
        "positives": int(labels.sum()),
        "seconds": round(seconds, 1),
    }
    for ev in evaluators:
        scores = scored[f"{ev.name}_score"].to_numpy()
        row = agreement.filter(pl.col("evaluator") == ev.name).row(0, named=True)
        cal = fk.calibrate(scored, human="label", evaluator=ev.name)
        out[ev.name] = {
            "roc_auc": round(roc_auc(scores, labels), 4),
            "accuracy_of_passed": round(row["accuracy"], 4),
            "kappa_of_passed": round(row["kappa"], 4),
            "kappa_95_interval": [round(row["kappa_ci_low"], 4), round(row["kappa_ci_high"], 4)],
            "f1_threshold": cal.threshold,
            "f1_at_threshold": round(float(cal.f1 or 0.0), 4),
        }
    return out


def labels_spread(labels: pl.Series) -> dict[str, Any]:
    """Share of the scored rows in each of the five labels, and the largest share."""
    shares = {
        label: round(float((labels == label).sum()) / max(1, labels.drop_nulls().len()), 4)
        for label in FIVE
    }
    return {"label_shares": shares, "largest_label_share": max(shares.values())}


def coherence_case(
    frame: pl.DataFrame, mapping: dict[str, str], rows: list[dict[str, Any]], cache: Path
) -> dict[str, Any]:
    """Coherence scored by ``judge="local"`` with ``mapping``: its agreement with the
    experts, how its rows spread over the labels, and the method that read them."""
    started = time.perf_counter()
    scored = fk.evaluate_dataframe(
        frame, [Coherence()], mapping, judge="local", cache=cache, progress=False
    )
    seconds = time.perf_counter() - started
    scores = scored["coherence_score"].fill_null(float("nan")).to_numpy()
    record = fk.last_run().provenance or {}
    return {
        "mapping": mapping,
        "method": record["evaluators"][0].get("method"),
        "rows_read_by": {
            "likelihood": int(
                scored["coherence_explanation"].str.starts_with("Local likelihood").sum()
            ),
            "embedding proxy": int(
                scored["coherence_explanation"].str.starts_with("Local similarity proxy").sum()
            ),
        },
        "seconds": round(seconds, 1),
        "likelihoods_computed": fk.last_run().likelihoods_computed,
        "failed_rows": int(scored["coherence_error"].is_not_null().sum()),
        **se.spearman_figures(scores, se.ratings(rows, "coherence"), se.articles(rows)),
        **labels_spread(scored["coherence_label"]),
    }


def likelihood_read_alone(rows: list[dict[str, Any]], cache: Path) -> dict[str, Any]:
    """The alternative issue 39 weighed for a response without a request: its likelihood
    read alone (after a neutral line), placed by the with-request cut points (what
    framekit did before) or by five cut points fitted to it on this file (in sample)."""
    from framekit.engine.cache import Cache
    from framekit.judges.local.likelihood import LikelihoodScorer
    from framekit.judges.local.methods import label_for

    measure = se.likelihoods_alone(rows, LikelihoodScorer.default(), Cache(cache))
    truth, docs = se.ratings(rows, "coherence"), se.articles(rows)
    with_request = support.calibration()["coherence"]["likelihood"]["cuts"]
    edges = [float((truth < edge).mean()) for edge in (1.5, 2.5, 3.5, 4.5)]
    own = [float(c) for c in np.quantile(measure, edges)]

    def placed(cuts: list[float]) -> dict[str, Any]:
        labels = pl.Series([label_for(float(m), cuts, list(FIVE)) for m in measure])
        scores = np.array([FIVE.index(label) / 4 for label in labels])
        return {
            "cuts": [round(c, 4) for c in cuts],
            **se.spearman_figures(scores, truth, docs),
            **labels_spread(labels),
        }

    return {
        "request": f"none: the summary after {se.NEUTRAL_REQUEST!r}",
        "measure": se.spearman_figures(measure, truth, docs),
        "by_the_with_request_cuts_before_issue_39": placed(with_request),
        "by_cuts_fitted_to_it_in_sample": placed(own),
    }


def first_articles(rows: list[dict[str, Any]], n: int | None) -> list[dict[str, Any]]:
    """The rows of the first ``n`` articles (all when ``n`` is None)."""
    kept = set(list(dict.fromkeys(r["doc_id"] for r in rows))[:n])
    return [r for r in rows if r["doc_id"] in kept]


def summeval(
    path: Path, cache: Path, articles: int | None, request_articles: int | None
) -> dict[str, Any]:
    rows = first_articles(se.read(path), articles)
    ask = str(Groundedness().spec.extra["likelihood_instruction"])

    def frame(part: list[dict[str, Any]]) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "summary": [r["summary"] for r in part],
                "request": [f"{ask}\n\n{r['source']}" for r in part],
            }
        )

    ratings, docs = se.ratings(rows, "coherence"), se.articles(rows)
    embedder = LocalEmbedder.default()
    summaries = [r["summary"] for r in rows]
    classic = np.array(
        [coherence_similarity(embedder.embed(split_sentences(s) or [s])) for s in summaries]
    )
    alone, given = {"output": "summary"}, {"output": "summary", "input": "request"}
    # The with-request case reads each article with its summaries (about 30 minutes for
    # all 50 on 2 loaded cores): it may cover fewer articles, with the response-only
    # case measured again on the same rows beside it.
    asked = first_articles(rows, request_articles)
    out: dict[str, Any] = {
        "summaries": len(rows),
        "articles": len(set(docs)),
        "lm_extra_installed": likelihood_available(),
        # How users often score it: the summary alone, mapped as the output only.
        "response_only": coherence_case(frame(rows), alone, rows, cache),
        # With the request it answers: the summarisation instruction and the article.
        "with_request": {
            "summaries": len(asked),
            "articles": len(set(se.articles(asked))),
            **coherence_case(frame(asked), given, asked, cache),
        },
        "response_only_on_the_same_rows": coherence_case(frame(asked), alone, asked, cache),
        "classic_consecutive_similarity": se.spearman_figures(classic, ratings, docs),
        "note": "fitted on this same dev file (the held-out half is kept apart); the "
        "split-half figures in calibration.json and likelihood_calibration.json estimate "
        "the optimism",
    }
    if likelihood_available():
        out["likelihood_read_alone"] = likelihood_read_alone(rows, cache)
    return out


def kept_wikiqa() -> Any:
    """The WikiQA figures of the last results file, with the date they were measured."""
    path = RESULTS / "offline_agreement.json"
    if not path.is_file():
        return "skipped: --keep-wikiqa and no earlier results"
    last = json.loads(path.read_text(encoding="utf-8"))
    kept = last.get("wikiqa_dev")
    if isinstance(kept, dict):
        kept.setdefault("measured_on", last.get("machine", {}).get("date"))
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=se.DEFAULT_DATA.parent)
    parser.add_argument("--cache", type=Path, default=None, help="a framekit cache directory")
    parser.add_argument("--articles", type=int, default=None, help="SummEval: first N only")
    parser.add_argument(
        "--request-articles",
        type=int,
        default=None,
        help="SummEval: the with-request case on the first N articles only",
    )
    parser.add_argument(
        "--keep-wikiqa",
        action="store_true",
        help="keep the WikiQA figures of the last results file instead of measuring them",
    )
    args = parser.parse_args()
    figures: dict[str, Any] = {"published": PUBLISHED}
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp)
        wiki, summ = args.data / "wikiqa-dev.tsv", args.data / "summeval-dev.jsonl"
        if args.keep_wikiqa:
            figures["wikiqa_dev"] = kept_wikiqa()
        else:
            figures["wikiqa_dev"] = (
                wikiqa(wiki, cache) if wiki.is_file() else f"skipped: {wiki} not found"
            )
        figures["summeval_dev"] = (
            summeval(summ, cache, args.articles, args.request_articles)
            if summ.is_file()
            else f"skipped: {summ} not found"
        )
    write_results("offline_agreement", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
