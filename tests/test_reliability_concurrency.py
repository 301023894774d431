"""Two processes scoring overlapping frames into one cache directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections import Counter
from pathlib import Path

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests.helpers import MAPPING, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]

# Each worker imports and builds everything first, reports "ready", and starts scoring
# when told to, so that the two runs really overlap in time rather than in turn. (The judge
# speaks HTTP: an openai/ model with an api_base; litellm is never imported.)
WORKER = textwrap.dedent(
    """
    import json, sys
    import framekit as fk
    from framekit.evaluators import RetrievalRelevance
    from tests.helpers import MAPPING, retrieval_frame

    api_base, cache, start, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    frame = retrieval_frame(stop, label="relevant").slice(start)
    judge = fk.Judge("openai/sim-judge", api_base=api_base, api_key="sk-x", concurrency=8)
    print("ready", flush=True)
    sys.stdin.readline()
    out = fk.evaluate_dataframe(frame, [RetrievalRelevance()], MAPPING, judge=judge,
                                cache=cache, progress=False)
    stats = fk.last_run()
    print(json.dumps({
        "rows": out.height,
        "scored": out["retrieval_relevance_score"].is_not_null().sum(),
        "first_id": out["row_id"][0],
        "sent": stats.requests_sent,
        "hits": stats.cache_hits,
    }), flush=True)
    """
)


def test_two_processes_share_one_cache_without_loss_or_corruption(simulator_factory, tmp_path):
    sim = simulator_factory(latency=0.01)
    cache = tmp_path / "shared-cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # A scores rows 0-239, B rows 120-359: 120 prompts in common, met in opposite halves.
    ranges = [(0, 240), (120, 360)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, sim.api_base, str(cache), str(a), str(b)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for a, b in ranges
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = [
        json.loads(proc.communicate(timeout=60)[0].strip().splitlines()[-1]) for proc in procs
    ]
    assert all(proc.returncode == 0 for proc in procs)

    for report, (a, b) in zip(reports, ranges):
        assert report["rows"] == report["scored"] == b - a and report["first_id"] == a
    # Each prompt paid once, counted at the server: a prompt the other process is asking
    # is claimed by it (framekit/engine/claims.py), and this one waits for its answer.
    # (At most the 8 of one concurrency's worth twice: was up to all 120 shared.)
    paid = Counter(r["messages"][1]["content"] for r in sim.requests)
    assert len(paid) == 360 and max(paid.values()) <= 2
    duplicates = sum(n - 1 for n in paid.values())
    assert duplicates <= 8
    print(f"prompts paid twice: {duplicates} of 120 shared")

    # Nothing lost, nothing corrupt: the union is served entirely from the cache.
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a corrupt cache would warn
        shared = fk.Cache(cache)
        assert len(shared) == 360
        sim.reset()
        out = fk.evaluate_dataframe(
            retrieval_frame(360, label="relevant"),
            [RetrievalRelevance()],
            MAPPING,
            judge=sim_judge(sim),
            cache=shared,
            progress=False,
        )
    assert sim.stats()["total"] == 0
    assert out["retrieval_relevance_score"].to_list() == [1.0] * 360
