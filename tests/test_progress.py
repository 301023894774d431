"""Progress that tells the truth, seen as a user sees it: a run's stderr through a
pseudo-terminal (a bar: whole rows, cached / failed / sending live, an ETA that holds on a
resumed run) and through a pipe (plain lines, at most one per 10 s)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from framekit import _progress
from framekit.testing import JudgeSimulator
from tests.helpers import API_KEY

ROOT = Path(__file__).resolve().parents[1]

# n rows; every 25th asks the simulator for a 400 (a failure that is not retried); the
# first `cached` rows are scored once, quietly, before the run that is watched.
CHILD = """
import sys, time
import polars as pl
import framekit as fk
from framekit.evaluators import RetrievalRelevance
api_base, key, cache, n, cached = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
df = pl.DataFrame({
    "question": [f"What is item {i}?" + (" @sim(fault=400)" if i % 25 == 24 else "")
                 for i in range(n)],
    "docs": [[f"Item {i} is a thing."] for i in range(n)],
})
judge = fk.Judge("openai/sim-judge", api_base=api_base, api_key=key, concurrency=4)
mapping = {"input": "question", "context": "docs"}
if cached:
    fk.evaluate_dataframe(df.head(cached), [RetrievalRelevance()], mapping, judge=judge,
                          cache=cache, progress=False)
fk.evaluate_dataframe(df, [RetrievalRelevance()], mapping, judge=judge, cache=cache)
"""


def child(sim: JudgeSimulator, tmp: Path, n: int, cached: int) -> list[str]:
    args = [sys.executable, "-c", CHILD, sim.api_base, API_KEY, str(tmp / "cache"), str(n)]
    return [*args, str(cached)]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true", "COLUMNS": "160"}


def through_a_terminal(command: list[str]) -> list[tuple[float, str]]:
    """(arrival time, text) of every redraw the command writes to its terminal."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env())
    os.close(follower)
    chunks: list[tuple[float, bytes]] = []
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the child closed its end
                    break
                if not data:
                    break
                chunks.append((time.monotonic(), data))
            elif proc.poll() is not None:
                break
    finally:
        os.close(leader)
        proc.wait(timeout=30)
    assert proc.returncode == 0, b"".join(c for _, c in chunks).decode(errors="replace")
    frames = []
    for at, data in chunks:
        for part in re.split(r"[\r\n]+", data.decode(errors="replace")):
            part = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", part).strip()
            if part:
                frames.append((at, part))
    return frames


def test_the_terminal_bar_counts_whole_rows_and_shows_cached_and_failed_live(
    judge_simulator: JudgeSimulator, tmp_path: Path
) -> None:
    judge_simulator.configure(latency=0.1)
    frames = through_a_terminal(child(judge_simulator, tmp_path, 200, cached=60))
    bars = [(at, text) for at, text in frames if re.search(r"/200 rows", text)]
    assert len(bars) >= 5, frames
    assert not any(re.search(r"\d+\.\d+/200", text) for _, text in bars)  # no 9.4/300
    end = next(at for at, text in frames if text.startswith("framekit: 200 rows x"))
    live = [text for at, text in bars if at < end - 0.5]
    # The 60 cached rows are counted at once, and the failures as they happen.
    assert any("58 cached" in text for text in live), live  # 2 of the 60 failed (400)
    assert any(re.search(r"\b[1-7] failed", text) for text in live), live
    assert any(re.search(r"\b[1-4] sending", text) for text in live), live


def test_the_eta_of_a_resumed_run_is_within_2x_of_the_time_it_really_took(
    judge_simulator: JudgeSimulator, tmp_path: Path
) -> None:
    # 100 of 300 rows cached: a rate that counted them would promise a third too early.
    # Latency, not CPU, sets the pace (4 at a time, 0.3 s each): the ETA is about the
    # run, not about how busy the machine's other processes keep its cores.
    judge_simulator.configure(latency=0.3)
    frames = through_a_terminal(child(judge_simulator, tmp_path, 300, cached=100))
    # The last row is in when the bar first shows 300/300 (building the frame and the
    # summary after it is not what the ETA promises).
    end = next(at for at, text in frames if "300/300 rows" in text)
    etas = []
    for at, text in frames:
        found = re.search(r"ETA (?:(\d+) min )?(\d+) s", text)
        if found and end - at > 2.0:  # while there is something left to estimate
            etas.append((int(found[1] or 0) * 60 + int(found[2]), end - at))
    assert len(etas) >= 3, frames
    for promised, took in etas[len(etas) // 3 :]:  # once the rate has settled
        assert took / 2 <= promised <= took * 2, (promised, took)


def test_through_a_pipe_plain_lines_at_most_one_per_10_s(
    judge_simulator: JudgeSimulator, tmp_path: Path
) -> None:
    judge_simulator.configure(latency=0.25)
    started = time.monotonic()
    result = subprocess.run(
        child(judge_simulator, tmp_path, 240, cached=0),
        env=env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "|" not in result.stderr  # no bar in a log file
    lines = [line for line in result.stderr.splitlines() if re.search(r"/240 rows", line)]
    assert lines and len(lines) <= took / _progress.LINE_EVERY_S + 1, (took, lines)
    assert all(re.match(r"framekit: \d+/240 rows; \d+ cached, \d+ failed", line) for line in lines)


def test_rate_and_eta_leave_out_what_settled_before_the_first_answer() -> None:
    now = [0.0]

    class Stats:
        requests_sent, sending = 0, 0

    stats = Stats()
    run = _progress.RunProgress(100, 1, stats=stats, clock=lambda: now[0])
    try:
        run.report(50, "cached")  # all at once, before any request
        stats.requests_sent = 4
        now[0] = 1.0
        run.report(1, "done")  # the first answer starts the clock
        for _ in range(10):
            now[0] += 0.5
            run.report(1, "done")
        assert run.done_rows == 61
        assert run.rate() == 2.0  # 10 answers in 5 s, not (50 + 11) / 6
        assert run.eta() == 39 / 2.0
    finally:
        run.close()
