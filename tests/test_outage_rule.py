"""An outage is many distinct requests failing alike; a row failing every retry is its own.

Three rows whose every answer is unreadable (a 200 whose body is not UTF-8, a 200 carrying
an error object, a 500 quoting the key) used to pass for an outage once the good rows were
done: retries stopped counting against them, and after 67 s the whole run stopped, exit 1,
no output, the same at every re-run. The rule is in
:class:`framekit.engine.limiter.EndpointHealth`; a real outage is still told (the storm
tests of ``test_reliability_faults.py``, and the one below).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests.helpers import API_KEY, MAPPING, RETRIEVAL_CLI_ARGS, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]
BAD = ("badutf8", "error200", "echo500")


def _good_and_bad(good: int = 40) -> pl.DataFrame:
    """``good`` ordinary rows and one row per unreadable answer, spread through the frame
    (the first of them early, the last at the very end)."""
    frame = retrieval_frame(good + len(BAD), label="relevant")
    bad_rows = {5: BAD[0], 22: BAD[1], good + len(BAD) - 1: BAD[2]}
    return frame.with_columns(
        pl.struct("row_id", "question")
        .map_elements(
            lambda r: (
                r["question"]
                + (f" @sim(fault={bad_rows[r['row_id']]})" if r["row_id"] in bad_rows else "")
            ),
            return_dtype=pl.String,
        )
        .alias("question")
    )


def test_three_always_unreadable_rows_are_row_errors_not_an_outage(simulator_factory, transport):
    sim = simulator_factory(latency=0.02)
    started = time.monotonic()
    out = fk.evaluate_dataframe(
        _good_and_bad(), [RetrievalRelevance()], MAPPING,
        judge=sim_judge(sim, concurrency=8, max_retries=2), cache=False, progress=False,
    )  # fmt: skip
    errors = out.filter(pl.col("retrieval_relevance_error").is_not_null())
    assert out["retrieval_relevance_score"].is_not_null().sum() == 40
    assert sorted(errors["row_id"].to_list()) == [5, 22, 42]
    # Each bad row spent at most its own retries (3 attempts), never an outage's free ones
    # (litellm gives up at once on some of these answers: not retryable there).
    attempts = Counter(
        fault
        for request in sim.requests
        for fault in BAD
        if f"fault={fault}" in request["messages"][-1]["content"]
    )
    assert set(attempts) == set(BAD) and max(attempts.values()) <= 3
    assert sim.stats()["total"] == 40 + sum(attempts.values())
    if transport == "http":
        assert all("after 2 retries" in e for e in errors["retrieval_relevance_error"])
    assert API_KEY not in str(errors.to_dicts())
    assert time.monotonic() - started < 30.0


def _cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(PYTHONPATH=str(ROOT), LITELLM_OFFLINE_MODE="true", FRAMEKIT_API_KEY=API_KEY)
    environ.pop("FRAMEKIT_JUDGE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "framekit.cli", *args],
        cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_cli_writes_40_scored_and_3_errors_and_exits_per_max_failures(simulator_factory, tmp_path):
    # Default settings (max_retries=6: each bad row's back-offs add up to at most 31.5 s).
    # The two runs go side by side, each with its own cache: they spend their time waiting.
    sim = simulator_factory(latency=0.02)
    _good_and_bad().write_parquet(tmp_path / "in.parquet")
    runs = {
        allowed: _cli(
            "evaluate",
            "in.parquet",
            *RETRIEVAL_CLI_ARGS,
            "--judge",
            "openai/sim",
            "--api-base",
            sim.api_base,
            "-o",
            f"out-{allowed}.parquet",
            "-q",
            "--cache",
            f"cache-{allowed}",
            "--max-failures",
            str(allowed),
            cwd=tmp_path,
        )  # fmt: skip
        for allowed in (3, 2)
    }
    for allowed, proc in runs.items():
        _, err = proc.communicate(timeout=240)
        assert "outage" not in err and "failed every call" not in err and "Traceback" not in err
        assert proc.returncode == (0 if allowed == 3 else 1), err
        if allowed == 2:
            assert "3 rows failed, more than --max-failures 2" in err
        scored = pl.read_parquet(tmp_path / f"out-{allowed}.parquet")
        assert scored.height == 43
        assert scored["retrieval_relevance_score"].is_not_null().sum() == 40
        failed = scored.filter(pl.col("retrieval_relevance_error").is_not_null())
        assert sorted(failed["row_id"].to_list()) == [5, 22, 42]
        assert API_KEY not in str(failed.to_dicts()) and API_KEY not in err


def test_an_outage_after_bad_rows_is_still_told_and_stops_the_run(simulator_factory, tmp_path):
    # Bad rows early, then the endpoint goes down for good: the rows that fail from then
    # on are many and fail alike, so the run stops with one error, as before.
    sim = simulator_factory(retry_after=None, latency=0.02)
    frame = _good_and_bad(200)

    def storm_after_thirty() -> None:
        while sim.stats()["by_status"].get(200, 0) < 30:
            time.sleep(0.005)
        sim.storm(503, 60)

    thread = threading.Thread(target=storm_after_thirty)
    thread.start()
    started = time.monotonic()
    with pytest.raises(fk.JudgeError, match="failed every call") as info:
        fk.evaluate_dataframe(
            frame, [RetrievalRelevance()], MAPPING,
            judge=sim_judge(sim, concurrency=8, max_retries=2), cache=tmp_path / "c",
            progress=False,
        )  # fmt: skip
    thread.join()
    assert "overloaded" in str(info.value)
    assert time.monotonic() - started < 30.0
