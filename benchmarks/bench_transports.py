"""Judge transports side by side: framekit over HTTP, framekit over litellm, bare aiohttp.

Every ratio is measured in one run against one judge simulator in its own process:
- latency-bound: 2,000 rows, 200 ms latency, concurrency 64 (limit 320 rows/s): the HTTP
  transport, the litellm transport and a bare aiohttp loop (semaphore + ``session.post`` +
  ``json.loads``, nothing else); and 5,000 rows at 1 s latency, concurrency 256.
- client CPU per call at 0 ms latency: HTTP transport, litellm transport, bare aiohttp.
- rate windows: the simulator enforces 3,000 RPM in 1-second windows and sends OpenAI's
  rate-limit headers; 1,000 rows at 100 ms, concurrency 64, with ``rpm=3000`` given and
  with ``rpm=None`` (headers only): share of 50 rows/s and of requests answered 429.
- 100,000 rows on the HTTP transport in a fresh interpreter: peak RSS, and whether
  litellm was imported.

The machine is shared (2 cores, other jobs running): the 1-minute load average is
recorded with the figures; read ratios, not absolute rates.

Run: ``.venv/bin/python benchmarks/bench_transports.py [--quick] [--only latency ...]``;
writes benchmarks/results/transports.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
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
MODEL = "openai/gpt-4o-mini"


def frame(n: int, tag: str = "") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question": [f"What is item {i}?{tag}" for i in range(n)],
            "docs": [[f"Item {i} is a thing.", "Unrelated."] for i in range(n)],
        }
    )


def framekit_run(
    sim: Any, rows: int, transport: str, concurrency: int, rpm: float | None = None
) -> dict[str, Any]:
    """One timed run (after an untimed warm-up that imports and connects)."""
    judge = fk.Judge(
        MODEL,
        api_base=sim.api_base,
        api_key="sk-bench",
        concurrency=concurrency,
        rpm=rpm,
        transport=transport,
    )
    fk.evaluate_dataframe(frame(min(rows, concurrency), " warm"), [RetrievalRelevance()], MAPPING,
                          judge=judge, cache=False, progress=False)  # fmt: skip
    time.sleep(1.5)  # let a rate-limited simulator's window pass
    sim.reset()
    cpu, started = time.process_time(), time.perf_counter()
    out = fk.evaluate_dataframe(
        frame(rows), [RetrievalRelevance()], MAPPING, judge=judge, cache=False, progress=False
    )
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = sim.stats()
    sent = stats["total"]
    return {
        "transport": transport,
        "rows": rows,
        "concurrency": concurrency,
        "judge_rpm": rpm,
        "elapsed_s": round(elapsed, 2),
        "rows_per_s": round(rows / elapsed, 1),
        "client_cpu_ms_per_row": round(cpu / rows * 1000, 3),
        "requests": sent,
        "answered_429": stats["by_status"].get(429, 0),
        "share_429": round(stats["by_status"].get(429, 0) / max(1, sent), 4),
        "failed": int(out["retrieval_relevance_error"].is_not_null().sum()),
    }


def bare_run(sim: Any, rows: int, concurrency: int) -> dict[str, Any]:
    """A semaphore, ``session.post`` and ``json.loads``: nothing else."""
    import aiohttp

    url = sim.api_base + "/chat/completions"

    async def drive(n: int) -> float:
        semaphore = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(i: int) -> None:
                body = {"model": "sim", "messages": [{"role": "user", "content": f"q {i}"}]}
                async with semaphore, session.post(url, json=body) as reply:
                    json.loads(await reply.read())

            await asyncio.gather(*(one(i) for i in range(concurrency)))  # connect, warm
            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            return time.perf_counter() - started

    cpu = time.process_time()
    elapsed = asyncio.run(drive(rows))
    cpu = time.process_time() - cpu
    return {
        "rows": rows,
        "concurrency": concurrency,
        "elapsed_s": round(elapsed, 2),
        "rows_per_s": round(rows / elapsed, 1),
        "client_cpu_ms_per_row": round(cpu / rows * 1000, 3),
    }


def latency_bound(rows: int, latency: float, concurrency: int, litellm: bool) -> dict[str, Any]:
    limit = concurrency / latency
    with JudgeSimulator.subprocess(SimulatorConfig(latency=latency)) as sim:
        runs = {"http": framekit_run(sim, rows, "http", concurrency)}
        if litellm:
            runs["litellm"] = framekit_run(sim, rows, "litellm", concurrency)
        runs["bare_aiohttp"] = bare_run(sim, rows, concurrency)
    bare = runs["bare_aiohttp"]["rows_per_s"]
    for run in runs.values():
        run["ratio_of_limit"] = round(run["rows_per_s"] / limit, 3)
        run["ratio_of_bare_aiohttp"] = round(run["rows_per_s"] / bare, 3)
    return {"latency_s": latency, "limit_rows_per_s": limit, **runs}


def cpu_per_call(rows: int) -> dict[str, Any]:
    """An instant judge: the client's CPU is all there is."""
    with JudgeSimulator.subprocess(SimulatorConfig()) as sim:
        runs = {
            "http": framekit_run(sim, rows, "http", 64),
            "litellm": framekit_run(sim, rows // 4, "litellm", 64),
            "bare_aiohttp": bare_run(sim, rows, 64),
        }
    bare = runs["bare_aiohttp"]["client_cpu_ms_per_row"]
    return {
        **runs,
        "http_cpu_over_bare": round(runs["http"]["client_cpu_ms_per_row"] / bare, 2),
        "litellm_cpu_over_http": round(
            runs["litellm"]["client_cpu_ms_per_row"] / runs["http"]["client_cpu_ms_per_row"], 2
        ),
    }


def rate_windows(rows: int) -> dict[str, Any]:
    config = SimulatorConfig(latency=0.1, rpm=3000, rpm_window=1.0, rate_limit_headers=True)
    runs: dict[str, Any] = {}
    with JudgeSimulator.subprocess(config) as sim:
        for transport, rpm in (
            ("http", 3000),
            ("http", None),
            ("litellm", 3000),
            ("litellm", None),
        ):
            run = framekit_run(sim, rows, transport, 64, rpm=rpm)
            run["ratio_of_limit"] = round(run["rows_per_s"] / 50.0, 3)
            runs[f"{transport}_rpm_{rpm}"] = run
    return {"server": "3,000 RPM in 1-second windows (50 per window), headers sent", **runs}


# The frame is built columnar, as a Parquet reader hands it over: pl.DataFrame over
# 100,000 Python lists of documents alone peaks at ~530 MB (polars' nested-list inference),
# which the first version of this benchmark counted against the run.
_BIG_RUN = """
import resource, sys, tempfile, time
import polars as pl
import framekit as fk
from framekit.evaluators import RetrievalRelevance
def rss_mb(field):
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith(field + ":")) / 1024
n, api_base = int(sys.argv[1]), sys.argv[2]
i = pl.int_range(n, eager=True).cast(pl.Utf8)
df = pl.DataFrame({"question": "What is item " + i + "?"}).with_columns(
    docs=pl.concat_list(pl.lit("Item ") + i + pl.lit(" is a thing."), pl.lit("Unrelated.")))
before = rss_mb("VmRSS")
judge = fk.Judge("openai/gpt-4o-mini", api_base=api_base, api_key="sk-bench", concurrency=64)
with tempfile.TemporaryDirectory() as cache:
    started = time.perf_counter()
    out = fk.evaluate_dataframe(df, [RetrievalRelevance()], {"input": "question", "context": "docs"},
                                judge=judge, cache=cache, progress=False)
    elapsed = time.perf_counter() - started
    anon, file = rss_mb("RssAnon"), rss_mb("RssFile")
print(elapsed, int(out["retrieval_relevance_score"].is_not_null().sum()),
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "litellm" in sys.modules, judge.transport,
      before, anon, file)
"""


def big_run(rows: int) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]
    with JudgeSimulator.subprocess(SimulatorConfig()) as sim:
        fields = subprocess.check_output(
            [sys.executable, "-c", _BIG_RUN, str(rows), sim.api_base], cwd=root, text=True
        ).split()
    return {
        "rows": rows,
        "transport": fields[4],
        "elapsed_s": round(float(fields[0]), 1),
        "rows_per_s": round(rows / float(fields[0]), 1),
        "scored": int(fields[1]),
        "peak_rss_mb": round(int(fields[2]) / 1024, 1),
        "rss_before_run_mb": round(float(fields[5]), 1),
        # At the end of the run: Python objects (anonymous) and mapped files (shared
        # libraries, and the SQLite cache file diskcache memory-maps).
        "rss_anon_after_run_mb": round(float(fields[6]), 1),
        "rss_file_after_run_mb": round(float(fields[7]), 1),
        "litellm_imported": fields[3] == "True",
    }


_LITELLM_RUN = """
import os, sys, time
import polars as pl
import framekit as fk
from framekit.evaluators import RetrievalRelevance
rows, api_base = int(sys.argv[1]), sys.argv[2]
def frame(n, tag=""):
    return pl.DataFrame({"question": [f"What is item {i}?{tag}" for i in range(n)],
                         "docs": [[f"Item {i} is a thing.", "Unrelated."] for i in range(n)]})
options = dict(api_base=api_base, api_key="sk-bench", concurrency=64)
try:
    judge = fk.Judge("openai/gpt-4o-mini", transport="litellm", **options)
except TypeError:  # a tree from before transports existed: litellm was the only path
    judge = fk.Judge("openai/gpt-4o-mini", **options)
mapping = {"input": "question", "context": "docs"}
fk.evaluate_dataframe(frame(64, " warm"), [RetrievalRelevance()], mapping, judge=judge,
                      cache=False, progress=False)
cpu, started = time.process_time(), time.perf_counter()
fk.evaluate_dataframe(frame(rows), [RetrievalRelevance()], mapping, judge=judge, cache=False,
                      progress=False)
print(rows / (time.perf_counter() - started), (time.process_time() - cpu) / rows * 1000)
"""


def litellm_before_after(rows: int, before: Path, repeats: int = 2) -> dict[str, Any]:
    """The litellm transport in this tree and in ``before`` (e.g. main before this change),
    alternating runs against one simulator (200 ms, concurrency 64) so load drifts evenly."""
    here = Path(__file__).resolve().parents[1]
    results: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    with JudgeSimulator.subprocess(SimulatorConfig(latency=0.2)) as sim:
        for _ in range(repeats):
            for label, tree in (("before", before), ("after", here)):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                line = subprocess.check_output(
                    [sys.executable, "-c", _LITELLM_RUN, str(rows), sim.api_base],
                    cwd=tree,
                    env=env,
                    text=True,
                ).split()
                results[label].append((float(line[0]), float(line[1])))
    best = {k: max(r for r, _ in v) for k, v in results.items()}
    return {
        "rows": rows,
        "before_tree": str(before),
        "runs_rows_per_s": {k: [round(r, 1) for r, _ in v] for k, v in results.items()},
        "runs_cpu_ms_per_row": {k: [round(c, 2) for _, c in v] for k, v in results.items()},
        "after_over_before_best_rows_per_s": round(best["after"] / best["before"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--only", nargs="+", choices=["latency", "latency_1s", "cpu", "rate", "big", "litellm"]
    )
    parser.add_argument(
        "--before", type=Path, help="a framekit tree to compare the litellm transport with"
    )
    args = parser.parse_args()
    q = args.quick
    sections: dict[str, Callable[[], dict[str, Any]]] = {
        "latency": lambda: {
            "latency_200ms_conc_64": latency_bound(400 if q else 2000, 0.2, 64, litellm=True)
        },
        "latency_1s": lambda: {
            "latency_1s_conc_256": latency_bound(1000 if q else 5000, 1.0, 256, litellm=False)
        },
        "cpu": lambda: {"cpu_per_call_0ms": cpu_per_call(800 if q else 4000)},
        "rate": lambda: {"rate_windows_1s": rate_windows(300 if q else 1000)},
        "big": lambda: {"http_100k_rows": big_run(10_000 if q else 100_000)},
    }
    if args.before:
        before = args.before
        sections["litellm"] = lambda: {
            "litellm_before_after": litellm_before_after(200 if q else 1000, before)
        }
    name = "transports" + ("-quick" if q else "")
    figures: dict[str, Any] = {}
    previous = RESULTS / f"{name}.json"
    if args.only and previous.exists():
        figures = {
            k: v
            for k, v in json.loads(previous.read_text()).items()
            if k not in ("benchmark", "machine")
        }
    for section in args.only or sections:
        load = round(os.getloadavg()[0], 2)
        result = sections[section]()
        for value in result.values():
            value["load_average_1m_before"] = load
            value["load_average_1m_after"] = round(os.getloadavg()[0], 2)
        figures.update(result)
    figures["note"] = (
        "2-core machine, possibly shared with other jobs: see each section's load averages; "
        "ratios within a section are measured in the same run"
    )
    write_results(name, figures)


if __name__ == "__main__":
    main()
