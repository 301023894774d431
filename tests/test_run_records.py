"""Each run's statistics stay its own: the run record of a Parquet file counts its run only.

Two runs in one process (threads, as in a notebook) must not read each other's counts:
the slice loop takes every slice's statistics from the run that scored it, never from the
process-wide ``fk.last_run()`` (issue 23, item 10).
"""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests.helpers import MAPPING, retrieval_frame, sim_judge


def _score_file(src: Path, dest: Path, judge: fk.Judge, cache: Path, slice_rows: int) -> None:
    fk.evaluate_parquet(
        src,
        dest,
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=cache,
        progress=False,
        slice_rows=slice_rows,
    )


def test_two_threads_scoring_two_parquet_files_each_record_their_own_counts(
    simulator_factory, tmp_path
):
    # Two files of different shapes (rows, slice sizes), each scored against its own
    # simulator, so every count of one run differs from the other's and each can be
    # checked against what its server received. Many small slices: many chances to mix.
    shapes = {"a": (60, 1), "b": (90, 3)}
    sims = {name: simulator_factory(latency=0.002) for name in shapes}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        rows, slice_rows = shapes[name]
        src = tmp_path / f"{name}.parquet"
        frame = retrieval_frame(rows).with_columns(pl.col("question") + f" ({name})")
        frame.write_parquet(src)
        try:
            _score_file(src, tmp_path / f"{name}-out.parquet", sim_judge(sims[name]),
                        tmp_path / "cache", slice_rows)  # fmt: skip
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(name,)) for name in shapes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name, (rows, _) in shapes.items():
        record = fk.io.read_provenance(tmp_path / f"{name}-out.parquet")
        assert record is not None
        counts = record["counts"]
        sent = sims[name].stats()["total"]
        assert sent == rows  # every row distinct, nothing retried
        assert counts["rows"] == rows, (name, counts)
        assert counts["evaluations"] == rows, (name, counts)
        assert counts["requests sent"] == sent, (name, counts)
        assert counts["cache hits"] == 0, (name, counts)
