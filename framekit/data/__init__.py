"""framekit's bundled sample dataset: a small simulated RAG evaluation run.

200 rows: 100 questions about five everyday topics (home composting, bicycle maintenance,
bread baking, houseplants and "Acme Cloud Storage", a fictional product), each answered
once per retrieval strategy ("bm25" and "dense"). All text was written for framekit by
``scripts/make_sample.py``, which regenerates the file deterministically.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

__all__ = [
    "LABELLED_SAMPLE_PATH",
    "SAMPLE_PATH",
    "SAMPLE_TRACES_PATH",
    "load_labelled_sample",
    "load_sample",
]

SAMPLE_PATH: Path = Path(__file__).resolve().parent / "sample_rag.parquet"
"""Location of the bundled sample Parquet file, for tools that read paths (DuckDB, the CLI)."""

SAMPLE_TRACES_PATH: Path = Path(__file__).resolve().parent / "sample_traces.jsonl"
"""A small OpenInference span export (JSONL) for ``fk.traces.load``; written by
``scripts/make_sample_traces.py``."""


def load_sample() -> pl.DataFrame:
    """Load the bundled sample RAG dataset as a polars DataFrame.

    Each row is one answered question. Columns:

    - ``conversation_id`` (String): unique per row, e.g. ``"conv-001-dense"``.
    - ``question_id`` (Int64): pairs the two rows of one question, one per strategy.
    - ``strategy`` (String): the retriever, ``"bm25"`` or ``"dense"``.
    - ``question`` (String): the user's latest message.
    - ``answer`` (String): the RAG application's response.
    - ``documents`` (List[String]): the three retrieved passages.
    - ``history`` (List[Struct{role, content}]): earlier turns, null when single-turn
      (about a quarter of the questions have one; roles are "user", "assistant", "tool").
    - ``expected_quality`` (String): ground truth for the answer, one of ``"good"``,
      ``"off_topic"``, ``"noncommittal"``, ``"incoherent"``.
    - ``retrieval_hit`` (Boolean): ground truth, whether a passage that answers the
      question is among ``documents`` (dense: 80 % of questions, bm25: 55 %).
    - ``reference`` (String): the question's reference (gold) answer, what ContextRecall
      checks the documents against.

    Returns
    -------
    polars.DataFrame
        The 200-row sample, in question order, bm25 before dense.

    Examples
    --------
    >>> import polars as pl
    >>> from framekit.data import load_sample
    >>> df = load_sample()
    >>> df.shape
    (200, 10)
    >>> hit_rate = pl.col("retrieval_hit").mean()
    >>> df.group_by("strategy").agg(hit_rate).sort("strategy").rows()
    [('bm25', 0.55), ('dense', 0.8)]
    """
    return pl.read_parquet(SAMPLE_PATH)


LABELLED_SAMPLE_PATH: Path = Path(__file__).resolve().parent / "labelled_sample.parquet"
"""60 sample answers with human-style labels, for ``fk.agreement`` and ``fk.calibrate``."""


def load_labelled_sample() -> pl.DataFrame:
    """Load 60 rows of the sample with labels standing in for an annotator's.

    Columns: ``conversation_id``, ``strategy``, ``question``, ``answer``, ``documents``,
    then ``human_relevance`` (ResponseRelevance's five labels), ``human_retrieval``
    ("relevant" / "irrelevant") and ``human_coherent`` (Boolean). The labels follow a
    written rule on the sample's ground truth (``scripts/make_labelled_sample.py``).

    Examples
    --------
    >>> from framekit.data import load_labelled_sample
    >>> df = load_labelled_sample()
    >>> df.height, df["human_relevance"].n_unique()
    (60, 4)
    """
    return pl.read_parquet(LABELLED_SAMPLE_PATH)
