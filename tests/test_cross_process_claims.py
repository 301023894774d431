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
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import framekit as fk
from framekit.engine.claims import LEASE_S
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
    time.sleep(1.5)
    assert 0 < sim.stats()["chat"] < ROWS, "the runs overlap"
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
