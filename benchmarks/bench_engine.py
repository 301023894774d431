"""Engine throughput against the judge simulator (a subprocess, so it has its own GIL).

Figures (issue 2):
- latency-bound: 2,000 rows, 200 ms latency, concurrency 64; limit 64 / 0.2 = 320 rows/s;
  with the calls in this process and in 2, 3 and 8 worker processes
  (``Judge(processes=N)``; 8 also with sends paced at 400/s), and bare aiohttp against the
  same simulator as the ceiling; and one call at a time, bare aiohttp vs litellm, for
  litellm's share of each call's critical path.
- rate-bound: simulator capped at 3,000 RPM, judge told 3,000 RPM; limit 50 rows/s.
- cached re-run: 100,000 distinct rows answered from the cache.
- ``import framekit`` time in a fresh interpreter.

Run: ``.venv/bin/python benchmarks/bench_engine.py [--quick] [--only latency ...]``;
writes benchmarks/results/engine.json (``--only`` keeps the other figures in it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import polars as pl  # noqa: E402

import framekit as fk  # noqa: E402
from benchmarks._common import RESULTS, write_results  # noqa: E402
from framekit.evaluators import RetrievalRelevance  # noqa: E402
from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402

MAPPING = {"input": "question", "context": "docs"}


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question": [f"What is item {i}?" for i in range(n)],
            "docs": [[f"Item {i} is a thing.", "Unrelated."] for i in range(n)],
        }
    )


def timed_run(df: pl.DataFrame, judge: fk.Judge, cache: Any) -> tuple[float, pl.DataFrame]:
    started = time.perf_counter()
    out = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=cache, progress=False
    )
    return time.perf_counter() - started, out


# litellm prices a model it knows at once; for an unknown name ("openai/sim") it searches
# fallback names on every call (~0.5 ms more). Users judge with real model names.
MODEL = "openai/gpt-4o-mini"


def implied_round_trip_ms(rows: int, elapsed: float) -> float:
    """The mean round trip that explains ``elapsed``: ``rows`` calls through 64 slots take
    about rows / 64 round trips, plus one while the last calls drain. 0.95 of the limit
    (2,000 rows in 6.58 s) needs <= 204 ms."""
    return round(elapsed / (rows / 64 + 1) * 1000, 1)


def latency_bound(rows: int, processes: int, rpm: float | None = None) -> dict[str, object]:
    """``rpm`` above the limit does not cap the rate; it paces the first 64 sends instead
    of one burst, which keeps the answers from arriving in waves."""
    with JudgeSimulator.subprocess(SimulatorConfig(latency=0.2)) as sim:
        judge = fk.Judge(
            MODEL,
            api_base=sim.api_base,
            api_key="sk-bench",
            concurrency=64,
            processes=processes,
            rpm=rpm,
            transport="litellm",  # this script tracks litellm; bench_transports.py compares
        )
        # Warm litellm's import, the worker processes and connections outside the timed window.
        timed_run(frame(64).with_columns(pl.col("question") + " warm"), judge, False)
        cpu_before = time.process_time()
        elapsed, out = timed_run(frame(rows), judge, False)
        cpu = time.process_time() - cpu_before
        judge.close()
        limit = 64 / 0.2
        achieved = rows / elapsed
        return {
            "rows": rows,
            "latency_s": 0.2,
            "concurrency": 64,
            "processes": processes,
            "judge_rpm": rpm,
            "elapsed_s": round(elapsed, 2),
            "rows_per_s": round(achieved, 1),
            "limit_rows_per_s": limit,
            "ratio_of_limit": round(achieved / limit, 3),
            "caller_cpu_ms_per_row": round(cpu / rows * 1000, 2),
            "implied_round_trip_ms": implied_round_trip_ms(rows, elapsed),
            "failed": int(out["retrieval_relevance_error"].is_not_null().sum()),
        }


def one_call_at_a_time(calls: int) -> dict[str, object]:
    """Round trips one call at a time (nothing else running), bare aiohttp vs litellm as
    the judge calls it: the difference is litellm's share of every call's critical path,
    which no number of worker processes can hide."""
    import asyncio

    import aiohttp

    from framekit.judges.litellm import litellm_module
    from framekit.judges.litellm.call import call_litellm
    from framekit.judges.request import ChatRequest, build_call_kwargs

    litellm_module()
    # The shape of a judge call: messages and a JSON-schema answer format.
    schema = {
        "type": "object",
        "properties": {"explanation": {"type": "string"}, "label": {"type": "string"}},
        "required": ["explanation", "label"],
    }
    messages = [{"role": "user", "content": "Is item 1 relevant? @sim(label=relevant)"}]
    call = build_call_kwargs(ChatRequest(messages, "verdict", schema), messages, "json_schema")

    async def drive(api_base: str) -> tuple[float, float]:
        body = {"model": "sim", **call}
        bare: list[float] = []
        async with aiohttp.ClientSession() as session:
            for _ in range(calls + 5):
                sent = time.perf_counter()
                async with session.post(api_base + "/chat/completions", json=body) as reply:
                    await reply.json()
                bare.append(time.perf_counter() - sent)
        params = {"model": MODEL, "api_base": api_base, "api_key": "sk-bench", "num_retries": 0}
        through: list[float] = []
        for _ in range(calls + 5):
            sent = time.perf_counter()
            await call_litellm(params, call)
            through.append(time.perf_counter() - sent)
        # The first calls open connections and warm caches.
        return sum(bare[5:]) / calls, sum(through[5:]) / calls

    with JudgeSimulator.subprocess(SimulatorConfig(latency=0.2)) as sim:
        bare, through = asyncio.run(drive(sim.api_base))
    return {
        "calls": calls,
        "bare_aiohttp_round_trip_ms": round(bare * 1000, 2),
        "litellm_round_trip_ms": round(through * 1000, 2),
        "litellm_adds_ms": round((through - bare) * 1000, 2),
    }


def bare_client_ceiling(rows: int) -> dict[str, object]:
    """The same simulator, latency and concurrency driven by bare aiohttp (no litellm, no
    framekit): what this machine allows at all."""
    import asyncio

    import aiohttp

    round_trips: list[float] = []

    async def drive(url: str) -> float:
        async with aiohttp.ClientSession() as session:

            async def worker(ids: Iterator[int]) -> None:
                for i in ids:
                    body = {"model": "sim", "messages": [{"role": "user", "content": f"q {i}"}]}
                    sent = time.perf_counter()
                    async with session.post(url, json=body) as reply:
                        await reply.json()
                    round_trips.append(time.perf_counter() - sent)

            warm = iter(range(64))
            await asyncio.gather(*(worker(warm) for _ in range(64)))
            ids = iter(range(rows))
            round_trips.clear()
            started = time.perf_counter()
            await asyncio.gather(*(worker(ids) for _ in range(64)))
            return time.perf_counter() - started

    with JudgeSimulator.subprocess(SimulatorConfig(latency=0.2)) as sim:
        elapsed = asyncio.run(drive(sim.api_base + "/chat/completions"))
    return {
        "rows": rows,
        "rows_per_s": round(rows / elapsed, 1),
        "ratio_of_limit": round(rows / elapsed / 320, 3),
        "mean_round_trip_ms": round(sum(round_trips) / len(round_trips) * 1000, 1),
        "implied_round_trip_ms": implied_round_trip_ms(rows, elapsed),
    }


def rate_bound(rows: int) -> dict[str, object]:
    with JudgeSimulator.subprocess(SimulatorConfig(rpm=3000, latency=0.05)) as sim:
        judge = fk.Judge(
            MODEL,
            api_base=sim.api_base,
            api_key="sk-bench",
            concurrency=64,
            rpm=3000,
            transport="litellm",
        )
        # Import litellm outside the timed window, then let the server's bucket refill.
        timed_run(frame(5).with_columns(pl.col("question") + " warm"), judge, False)
        time.sleep(2.0)
        sim.reset()
        elapsed, out = timed_run(frame(rows), judge, False)
        stats = sim.stats()
        limit = 3000 / 60
        achieved = rows / elapsed
        return {
            "rows": rows,
            "server_rpm": 3000,
            "judge_rpm": 3000,
            "elapsed_s": round(elapsed, 2),
            "rows_per_s": round(achieved, 2),
            "limit_rows_per_s": limit,
            "ratio_of_limit": round(achieved / limit, 3),
            "requests": stats["total"],
            "answered_429": stats["by_status"].get(429, 0),
            "share_429": round(stats["by_status"].get(429, 0) / max(1, stats["total"]), 4),
            "failed": int(out["retrieval_relevance_error"].is_not_null().sum()),
        }


_RERUN = """
import sys, time
import framekit as fk
from benchmarks.bench_engine import MAPPING, frame
from framekit.evaluators import RetrievalRelevance
judge = fk.Judge("openai/sim", api_base=sys.argv[3], api_key="sk-bench")
df = frame(int(sys.argv[1]))
started = time.perf_counter()
out = fk.evaluate_dataframe(df, [RetrievalRelevance()], MAPPING, judge=judge, cache=sys.argv[2], progress=False)
print(time.perf_counter() - started, out["retrieval_relevance_score"].is_not_null().sum(), "litellm" in sys.modules)
"""


def cached_rerun(rows: int) -> dict[str, object]:
    """Fill the cache, then re-run in a fresh interpreter, as a user re-running a script
    would. The re-run names the same endpoint (it is part of the cache key), which has
    been stopped by then: one request would fail the run."""
    df = frame(rows)
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as cache_dir:
        with JudgeSimulator.subprocess(SimulatorConfig()) as sim:
            api_base = sim.api_base
            judge = fk.Judge("openai/sim", api_base=api_base, api_key="sk-bench", concurrency=64)
            cold, _ = timed_run(df, judge, cache_dir)
        runs = []
        for _ in range(3):
            line = subprocess.check_output(
                [sys.executable, "-c", _RERUN, str(rows), cache_dir, api_base], cwd=root, text=True
            ).split()
            runs.append(float(line[0]))
            assert int(line[1]) == rows and line[2] == "False"
        warm = min(runs)
        return {
            "rows": rows,
            "cold_elapsed_s": round(cold, 2),
            "cold_rows_per_s": round(rows / cold, 1),
            "warm_runs_s": [round(r, 2) for r in runs],
            "warm_elapsed_s": round(warm, 2),
            "warm_rows_per_s": round(rows / warm, 1),
            "litellm_imported_by_rerun": False,
        }


def import_time() -> dict[str, object]:
    code = "import time; t = time.perf_counter(); import framekit; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(5)
    ]
    return {
        "runs_s": [round(r, 3) for r in runs],
        "best_s": round(min(runs), 3),
        "median_s": round(sorted(runs)[2], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["import", "latency", "rate", "cached"],
        help="run these figures only, keeping the others already in the results file",
    )
    args = parser.parse_args()
    q = args.quick
    latency_rows = 400 if q else 2000
    sections: dict[str, Callable[[], dict[str, object]]] = {
        "import": lambda: {"import_framekit": import_time()},
        "latency": lambda: {
            "latency_bound": latency_bound(latency_rows, processes=1),
            "latency_bound_processes_2": latency_bound(latency_rows, processes=2),
            "latency_bound_processes_3": latency_bound(latency_rows, processes=3),
            "latency_bound_processes_8": latency_bound(latency_rows, processes=8),
            "latency_bound_processes_8_paced": latency_bound(latency_rows, processes=8, rpm=24_000),
            "latency_bound_bare_aiohttp": bare_client_ceiling(latency_rows),
            "one_call_at_a_time": one_call_at_a_time(100),
        },
        "rate": lambda: {"rate_bound": rate_bound(300 if q else 2000)},
        "cached": lambda: {"cached_rerun": cached_rerun(10_000 if q else 100_000)},
    }
    name = "engine" + ("-quick" if q else "")
    figures: dict[str, object] = {}
    if args.only:
        previous = RESULTS / f"{name}.json"
        if previous.exists():
            figures = {
                k: v
                for k, v in json.loads(previous.read_text()).items()
                if k not in ("benchmark", "machine")
            }
    for section in args.only or sections:
        figures.update(sections[section]())
    figures["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    write_results(name, figures)


if __name__ == "__main__":
    main()
