"""What a per-row confidence from token logprobs costs the client, and the answers' size.

In one run against one judge simulator in its own process, at 0 ms latency (so the
client's CPU is all there is), the HTTP transport scores the same rows twice, interleaved
in ``--repeats`` rounds: asking for ``logprobs``/``top_logprobs: 10`` (the default for a
rubric request) and with ``logprobs=False``. Figures: client CPU per row, rows/s, and the
ratio of the two (with logprobs over without), plus the answer body's bytes with and
without, and the same for the litellm transport on a quarter of the rows. The machine is
shared (2 cores): read the ratios, not the absolute rates.

Run: ``.venv/bin/python benchmarks/bench_confidence.py [--rows 2000] [--repeats 3]``;
writes benchmarks/results/confidence.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import framekit as fk  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from benchmarks.bench_transports import MAPPING, MODEL, frame  # noqa: E402
from framekit.evaluators import RetrievalRelevance  # noqa: E402
from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402


def timed(sim: Any, rows: int, transport: str, logprobs: bool) -> dict[str, float]:
    extra = {} if logprobs else {"logprobs": False}
    judge = fk.Judge(MODEL, api_base=sim.api_base, api_key="sk-bench", concurrency=64,
                     transport=transport, **extra)  # fmt: skip
    fk.evaluate_dataframe(frame(64, " warm"), [RetrievalRelevance()], MAPPING, judge=judge,
                          cache=False, progress=False)  # fmt: skip
    cpu, started = time.process_time(), time.perf_counter()
    out = fk.evaluate_dataframe(
        frame(rows), [RetrievalRelevance()], MAPPING, judge=judge, cache=False, progress=False
    )
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    confident = int(out["retrieval_relevance_confidence"].is_not_null().sum())
    return {"cpu_ms_per_row": cpu / rows * 1000, "rows_per_s": rows / elapsed,
            "rows_with_confidence": confident}  # fmt: skip


def body_bytes(sim: Any, logprobs: bool) -> int:
    """Bytes of one rubric answer, asked the way the HTTP transport asks."""
    from framekit.judges.request import build_call_kwargs

    request = RetrievalRelevance().build_request(
        {"input": "What is item 1?", "context": ["Item 1 is a thing."]}
    )
    body: dict[str, Any] = {"model": "sim", **build_call_kwargs(request, request.messages,
                                                                 "json_schema")}  # fmt: skip
    if logprobs:
        body.update(logprobs=True, top_logprobs=10)
    req = urllib.request.Request(sim.api_base + "/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=10) as reply:
        return len(reply.read())


def compare(sim: Any, rows: int, repeats: int, transport: str) -> dict[str, Any]:
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(repeats):
        for logprobs in (True, False):
            runs[logprobs].append(timed(sim, rows, transport, logprobs))

    def median(logprobs: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[logprobs])

    return {
        "rows": rows,
        "repeats": repeats,
        "with_logprobs": {k: round(median(True, k), 3) for k in runs[True][0]},
        "without": {k: round(median(False, k), 3) for k in runs[False][0]},
        "cpu_ratio_with_over_without": round(
            median(True, "cpu_ms_per_row") / median(False, "cpu_ms_per_row"), 2
        ),
        "rows_per_s_ratio_with_over_without": round(
            median(True, "rows_per_s") / median(False, "rows_per_s"), 2
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with JudgeSimulator.subprocess(SimulatorConfig()) as sim:
        figures = {
            "load_average_1min": os.getloadavg()[0],
            "answer_bytes": {
                "with_logprobs": body_bytes(sim, True),
                "without": body_bytes(sim, False),
            },  # fmt: skip
            "http": compare(sim, args.rows, args.repeats, "http"),
            "litellm": compare(sim, args.rows // 4, args.repeats, "litellm"),
        }
    write_results("confidence", figures)


if __name__ == "__main__":
    main()
