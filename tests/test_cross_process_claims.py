"""Two processes scoring the same rows into one cache pay for each row once.

Before cross-process claims (``framekit/engine/claims.py``), a second run of the same 400
rows started 1.5 s after the first paid for most of them again (759 requests; 655 when 4 s
later): each process found the other's calls still in flight and sent its own. Now a
request in flight is claimed, the other process waits for its answer, and a killed
process's claims lapse (a lease) so that nothing is waited for forever.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import diskcache

import framekit as fk
from framekit.engine.claims import LEASE_S, Claims
from framekit.evaluators import RetrievalRelevance
from tests.helpers import MAPPING, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]
ROWS = 400
CONCURRENCY = 8

# Each worker imports and builds everything first, says "ready", and starts scoring when
# told, so that the test decides when each run starts (not the interpreters' start-up).
WORKER = textwrap.dedent(
    """
    import json, sys
    import framekit as fk
    from framekit.evaluators import RetrievalRelevance
    from tests.helpers import MAPPING, retrieval_frame

    api_base, cache, rows, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    frame = retrieval_frame(rows, label="relevant")
    judge = fk.Judge("openai/sim-judge", api_base=api_base, api_key="sk-x", concurrency=concurrency)
    print("ready", flush=True)
    sys.stdin.readline()
    out = fk.evaluate_dataframe(frame, [RetrievalRelevance()], MAPPING, judge=judge,
                                cache=cache, progress=False)
    stats = fk.last_run()
    print(json.dumps({
        "rows": out.height,
        "scored": int(out["retrieval_relevance_score"].is_not_null().sum()),
        "sent": stats.requests_sent,
        "hits": stats.cache_hits,
    }), flush=True)
    """
)


def _worker(api_base: str, cache: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, api_base, str(cache), str(ROWS), str(CONCURRENCY)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _report(proc: subprocess.Popen[str]) -> dict[str, int]:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


def _all_in_the_cache(sim, cache: Path) -> None:
    """Nothing lost: a third run is answered entirely from the cache."""
    sim.reset()
    out = fk.evaluate_dataframe(
        retrieval_frame(ROWS, label="relevant"), [RetrievalRelevance()], MAPPING,
        judge=sim_judge(sim), cache=cache, progress=False,
    )  # fmt: skip
    assert sim.stats()["total"] == 0
    assert out["retrieval_relevance_score"].to_list() == [1.0] * ROWS


def test_a_second_process_started_later_waits_for_the_first_ones_calls(simulator_factory, tmp_path):
    # 100 ms a call at concurrency 8: the first run takes about 5 s, so the second, 1.5 s
    # later, meets many of its rows in flight in the first.
    sim = simulator_factory(latency=0.1)
    cache = tmp_path / "shared"
    first, second = _worker(sim.api_base, cache), _worker(sim.api_base, cache)
    _go(first)
    while sim.stats()["chat"] == 0:  # (a loaded machine can take a while to send at all)
        time.sleep(0.01)
    time.sleep(1.5)
    assert sim.stats()["chat"] < ROWS, "the runs overlap"
    _go(second)
    reports = [_report(first), _report(second)]
    assert all(r["rows"] == r["scored"] == ROWS for r in reports)
    paid = Counter(r["messages"][-1]["content"] for r in sim.requests)
    requests = sim.stats()["chat"]
    print(f"requests at the simulator: {requests} for {ROWS} rows; reports {reports}")
    assert len(paid) == ROWS
    assert requests <= ROWS + CONCURRENCY
    # The second run took the answers the first paid for (and the first, the second's).
    assert sum(r["sent"] for r in reports) == requests
    assert sum(r["hits"] for r in reports) >= ROWS - CONCURRENCY
    _all_in_the_cache(sim, cache)


def test_a_process_killed_mid_run_loses_nothing_and_the_other_finishes(simulator_factory, tmp_path):
    sim = simulator_factory(latency=0.1)
    cache = tmp_path / "shared"
    doomed, survivor = _worker(sim.api_base, cache), _worker(sim.api_base, cache)
    _go(doomed)
    time.sleep(1.0)
    _go(survivor)
    while sim.stats()["chat"] < ROWS // 2:  # both running, the doomed one holding claims
        time.sleep(0.01)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    killed_at = time.monotonic()
    report = _report(survivor)
    waited = time.monotonic() - killed_at
    assert report["rows"] == report["scored"] == ROWS
    # The killed process's claims lapse within a lease: the survivor asks those rows
    # itself (not forever waiting, and not at once either).
    assert waited < LEASE_S + 30.0
    print(f"survivor: {report}; finished {waited:.1f} s after the kill")
    # Paid at most twice: the killed process's calls in flight and its unwritten answers.
    paid = Counter(r["messages"][-1]["content"] for r in sim.requests)
    assert len(paid) == ROWS and max(paid.values()) <= 2
    assert sim.stats()["chat"] <= ROWS + 2 * CONCURRENCY
    _all_in_the_cache(sim, cache)


# -- the rule, one process at a time: claims planted as another process leaves them ------


def _keys_and_answers(sim, tmp_path: Path, rows: int) -> dict[str, object]:
    """The cache entries a run of ``rows`` rows writes (so their keys can be claimed)."""
    filled = fk.Cache(tmp_path / "filled")
    fk.evaluate_dataframe(
        retrieval_frame(rows, label="relevant"), [RetrievalRelevance()], MAPPING,
        judge=sim_judge(sim), cache=filled, progress=False,
    )  # fmt: skip
    with diskcache.Cache(str(tmp_path / "filled")) as store:
        keys = [k for k in store if isinstance(k, str) and k.startswith("chat:")]
    found = filled.get_many(keys)
    assert len(found) == rows
    sim.reset()
    return found


def _plant(cache: Path, keys, expires_in: float) -> None:
    """Claims of another process (not this one's owner) on ``keys``."""
    Claims(cache / "claims.db").close()  # the file and its table
    with sqlite3.connect(cache / "claims.db") as con:
        con.executemany(
            "INSERT INTO claims(key, owner, expires) VALUES (?, ?, ?)",
            [(key, "elsewhere:1:dead", time.time() + expires_in) for key in keys],
        )


def _score(sim, cache: Path):
    return fk.evaluate_dataframe(
        retrieval_frame(20, label="relevant"), [RetrievalRelevance()], MAPPING,
        judge=sim_judge(sim, concurrency=4), cache=cache, progress=False,
    )  # fmt: skip


def test_claims_another_process_holds_are_waited_for_and_their_answers_taken(
    simulator_factory, tmp_path
):
    sim = simulator_factory()
    answers = _keys_and_answers(sim, tmp_path, 20)
    cache = tmp_path / "shared"
    cache.mkdir()
    _plant(cache, answers, expires_in=60.0)

    def the_other_process_answers() -> None:
        time.sleep(1.0)
        fk.Cache(cache).set_many(answers.items())

    other = threading.Thread(target=the_other_process_answers)
    other.start()
    started = time.monotonic()
    out = _score(sim, cache)
    other.join()
    assert out["retrieval_relevance_score"].to_list() == [1.0] * 20
    assert sim.stats()["total"] == 0  # not one paid again: all waited for
    assert fk.last_run().cache_hits == 20
    assert 0.9 < time.monotonic() - started < 30.0


def test_a_lapsed_claim_is_taken_over_and_a_live_one_once_it_lapses(simulator_factory, tmp_path):
    sim = simulator_factory()
    answers = _keys_and_answers(sim, tmp_path, 20)
    lapsed, live = tmp_path / "lapsed", tmp_path / "live"
    for cache, expires_in in ((lapsed, -1.0), (live, 2.0)):
        cache.mkdir()
        _plant(cache, answers, expires_in)
        started = time.monotonic()
        out = _score(sim, cache)
        took = time.monotonic() - started
        assert out["retrieval_relevance_score"].to_list() == [1.0] * 20
        assert sim.stats()["total"] == 20  # asked by this run, once each
        sim.reset()
        if cache is lapsed:
            assert took < 1.5, "a lapsed claim is not waited for"
        else:  # a claim nobody renews is waited for until it lapses, then taken over
            assert 1.8 < took < 30.0
