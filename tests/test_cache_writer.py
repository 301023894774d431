"""Answers reach the cache through a writer thread, in groups (group commit).

The event loop hands each answer to :class:`~framekit.engine.cache.GroupWriter` and goes
on; the thread writes whatever has queued in one transaction. These tests hold the
cache's write lock from another connection (as another process writing would) to prove
that the calls do not wait for sqlite, that an answer waiting for the disk is shared
with another run rather than paid again, and that a run returns only once every answer
is written.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.engine.cache import Cache, GroupWriter
from tests.helpers import retrieval_frame, score_retrieval, sim_judge

ENTRY = {"answer": {"label": "relevant", "explanation": "names it"}, "tokens": 3}


@contextmanager
def write_lock(cache: Cache) -> Iterator[None]:
    """Hold the cache database's write lock, as a process in the middle of a write does."""
    con = sqlite3.connect(cache.path / "cache.db", isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()


def _wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.usefixtures("transport")
def test_calls_go_on_while_the_cache_is_locked_and_a_waiting_answer_is_shared(
    simulator_factory, tmp_path: Path
) -> None:
    sim = simulator_factory(latency=0.0)
    cache = Cache(tmp_path / "cache")
    frame = retrieval_frame(60)
    outs: dict[str, pl.DataFrame] = {}

    def first_run() -> None:
        outs["first"] = score_retrieval(frame, sim_judge(sim, concurrency=8), cache)

    with write_lock(cache):
        runner = threading.Thread(target=first_run)
        runner.start()
        # Every call is answered although not one answer can be written yet.
        _wait_until(lambda: sim.stats()["chat"] == 60)
        assert len(cache) == 0 and runner.is_alive()  # it returns only once they are written
        # A second run of this process meanwhile takes the waiting answers: no call.
        outs["second"] = score_retrieval(frame, sim_judge(sim, concurrency=8), cache)
        assert sim.stats()["chat"] == 60
    runner.join(60)
    assert not runner.is_alive()
    assert outs["first"]["retrieval_relevance_error"].null_count() == 60
    assert outs["second"].drop("docs").equals(outs["first"].drop("docs"))
    assert len(cache) == 60
    again = score_retrieval(frame, sim_judge(sim), tmp_path / "cache", details=True)
    assert again["retrieval_relevance_cached"].all() and sim.stats()["chat"] == 60


def test_groups_grow_with_the_queue_and_never_pass_the_cap(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    groups: list[int] = []
    writer = GroupWriter(cache, lambda keys: groups.append(len(keys)), limit=100)
    with write_lock(cache):
        writer.put("chat:0", ENTRY)  # the thread takes it alone and waits for the lock
        _wait_until(lambda: not writer._queue)
        for i in range(1, 1000):
            writer.put(f"chat:{i}", ENTRY)
        assert groups == []
    writer.close()
    assert groups[0] == 1 and max(groups) == 100 and sum(groups) == 1000
    assert len(groups) == 11  # 1, then the 999 queued meanwhile in groups of at most 100
    assert len(cache.get_many([f"chat:{i}" for i in range(1000)])) == 1000


@pytest.mark.usefixtures("transport")
def test_a_run_stopped_by_an_error_returns_only_once_its_answers_are_written(
    simulator_factory, tmp_path: Path
) -> None:
    sim = simulator_factory(latency=0.0)
    cache = Cache(tmp_path / "cache")
    # The last row's call is rejected (401) after the others are answered: the run stops.
    frame = pl.concat(
        [
            retrieval_frame(40),
            retrieval_frame(1).with_columns(
                question=pl.lit("A rejected call @sim(fault=401, latency=0.5)")
            ),
        ]
    )
    unlocked = threading.Event()

    def hold_then_release() -> None:
        with write_lock(cache):
            _wait_until(lambda: sim.stats()["total"] == 41)
            time.sleep(0.6)  # past the 401: the run has its error and must still write
            unlocked.set()

    holder = threading.Thread(target=hold_then_release)
    holder.start()
    with pytest.raises(fk.JudgeAuthenticationError):
        score_retrieval(frame, sim_judge(sim, concurrency=4), cache)
    holder.join()
    assert unlocked.is_set()  # the error waited for the lock...
    assert len(cache) == 40  # ...and every answer received is in the cache


def test_every_way_of_answering_gives_the_same_frame_confidence_included(
    simulator_factory, tmp_path: Path
) -> None:
    # The writer thread, the orjson reply reader and the logprob fast paths change how
    # answers travel, never what they say: an uncached run, a run writing the cache, its
    # cached re-run and the litellm transport's run give one frame (bar the columns that
    # say how an answer came: cached, latency).
    from framekit.evaluators import (
        Coherence,
        ContextRelevance,
        ResponseRelevance,
        RetrievalRelevance,
    )

    sim = simulator_factory(latency=0.0)
    frame = pl.DataFrame(
        {
            "question": [f"What does item {i} weigh?" for i in range(40)],
            "answer": [f"Item {i} weighs {i % 7} kg, by the label." for i in range(40)],
            "docs": [[f"Item {i} weighs {i % 7} kg.", "Unrelated text."] for i in range(40)],
        }
    )
    evaluators = [RetrievalRelevance(), ResponseRelevance(), ContextRelevance(), Coherence()]
    mapping = {"input": "question", "output": "answer", "context": "docs"}

    def run(cache: object, transport: str = "http") -> pl.DataFrame:
        out = fk.evaluate_dataframe(
            frame,
            evaluators,
            mapping,
            judge=sim_judge(sim, transport=transport, concurrency=8),
            cache=cache,
            progress=False,
            details=True,
        )
        assert isinstance(out, pl.DataFrame)
        return out.drop(pl.selectors.ends_with("_cached", "_latency_s"))

    uncached = run(False)
    confidence = [c for c in uncached.columns if c.endswith("_confidence")]
    assert len(confidence) == 4 and uncached[confidence].null_count().sum_horizontal()[0] == 0
    assert run(tmp_path / "cache").equals(uncached)
    calls = sim.stats()["chat"]
    assert run(tmp_path / "cache").equals(uncached) and sim.stats()["chat"] == calls
    assert run(False, "litellm").equals(uncached)


def test_a_lone_answer_is_written_soon_and_answers_arriving_together_share_a_group(
    tmp_path: Path,
) -> None:
    # A small group waits a moment (WRITE_LINGER_S) for more answers before it is
    # written: a lone answer still reaches the disk without the run ending, and answers
    # arriving within that moment go in one transaction.
    cache = Cache(tmp_path / "cache")
    groups: list[int] = []
    writer = GroupWriter(cache, lambda keys: groups.append(len(keys)), linger=0.5)
    writer.put("chat:alone", ENTRY)
    _wait_until(lambda: cache.get("chat:alone") is not None, seconds=5)
    for i in range(20):
        writer.put(f"chat:{i}", ENTRY)
    _wait_until(lambda: sum(groups) == 21, seconds=5)
    assert groups == [1, 20]
    writer.close()
    assert len(cache) == 21
