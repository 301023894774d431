"""Write framekit/data/labelled_sample.parquet: 60 sample answers with human-style labels.

The rows are taken from the bundled sample (``sample_rag.parquet``, all text written for
framekit), balanced over its answer kinds: 21 good, 12 off-topic, 12 noncommittal and the
15 incoherent ones. The labels stand in for an annotator's and follow a written rule on
the sample's ground truth, the way a labelling guide would:

* ``human_relevance`` (ResponseRelevance's rubric): a good answer "Completely Yes"; one
  that mixes the answer with unrelated material "Neutral/Mixed"; a noncommittal reply
  that does not engage with the question "Not Generally"; an off-topic one "Not At All";
* ``human_retrieval`` (RetrievalRelevance's rubric): "relevant" when a retrieved passage
  answers the question, else "irrelevant";
* ``human_coherent`` (bool): False for the answers written to be incoherent.

Regenerate with ``python scripts/make_labelled_sample.py`` (deterministic).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "framekit" / "data" / "sample_rag.parquet"
TARGET = ROOT / "framekit" / "data" / "labelled_sample.parquet"
TAKE = {"good": 21, "off_topic": 12, "noncommittal": 12, "incoherent": 15}
RELEVANCE = {
    "good": "Completely Yes",
    "incoherent": "Neutral/Mixed",
    "noncommittal": "Not Generally",
    "off_topic": "Not At All",
}


def build() -> pl.DataFrame:
    sample = pl.read_parquet(SOURCE).sort("conversation_id")
    parts = [sample.filter(pl.col("expected_quality") == kind).head(n) for kind, n in TAKE.items()]
    rows = pl.concat(parts).sort("conversation_id")
    return rows.select(
        "conversation_id",
        "strategy",
        "question",
        "answer",
        "documents",
        pl.col("expected_quality").replace_strict(RELEVANCE).alias("human_relevance"),
        pl.when(pl.col("retrieval_hit"))
        .then(pl.lit("relevant"))
        .otherwise(pl.lit("irrelevant"))
        .alias("human_retrieval"),
        (pl.col("expected_quality") != "incoherent").alias("human_coherent"),
    )


def main() -> None:
    frame = build()
    frame.write_parquet(TARGET)
    print(f"wrote {TARGET} ({frame.height} rows)")


if __name__ == "__main__":
    main()
