"""Cross-process claims (issue 39): what they save two processes, what they cost one.

Two figures, each measured before the change (the framekit package of ``--before-commit``,
unpacked by :func:`~benchmarks._common.before_tree`) and today, in this one session:

(a) two processes, the same rows, one cache directory, the second started ``--delays``
    seconds after the first (each imported and ready first, so the delay is the runs'
    own), the simulator answering in 100 ms at concurrency 8: requests at the simulator
    (before: about 1.8x the rows at 1.5 s; the target is at most rows + concurrency);
(b) one process alone, a cold fill at 0 ms latency (concurrency 64, writing the cache):
    the client's CPU per row, best of ``--runs`` runs of each side, the sides alternating,
    and today's CPU over before's (the claims' cost on the single-process path: one
    claims transaction per 32 keys sent, one per write group released);
(c) the claims alone, as a run uses them: 32,000 keys taken 32 at a time and given up a
    chunk later (the table stays small, as in a run), CPU and wall microseconds a key,
    best of 3: what (b)'s ratio cannot resolve on a loaded machine.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_claims.py [--rows 400] [--cold-rows 5000]

Writes benchmarks/results/claims.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, before_tree, write_results  # noqa: E402
from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402

BEFORE_COMMIT = "fc956f2"
CONCURRENCY = 8

# A run that imports and builds first, says "ready", and scores when told.
TWO_WORKER = textwrap.dedent(
    """
    import json, sys
    import polars as pl
    import framekit as fk
    from framekit.evaluators import RetrievalRelevance

    api_base, cache, rows, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    frame = pl.DataFrame({"question": [f"What is item {i}?" for i in range(rows)],
                          "docs": [[f"Item {i} is a thing.", "Unrelated."] for i in range(rows)]})
    judge = fk.Judge("openai/sim", api_base=api_base, api_key="sk-bench", concurrency=concurrency)
    print("ready", flush=True)
    sys.stdin.readline()
    out = fk.evaluate_dataframe(frame, [RetrievalRelevance()],
                                {"input": "question", "context": "docs"}, judge=judge,
                                cache=cache, progress=False)
    assert out["retrieval_relevance_error"].null_count() == rows
    print(json.dumps({"sent": fk.last_run().requests_sent}), flush=True)
    """
)

# One cold fill alone: this process's CPU seconds for ``rows`` rows (after a warm-up).
COLD_WORKER = textwrap.dedent(
    """
    import json, sys, time
    import polars as pl
    import framekit as fk
    from framekit.evaluators import RetrievalRelevance

    api_base, cache, rows, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    def frame(n, salt):
        return pl.DataFrame({"question": [f"What is item {i}? {salt}" for i in range(n)],
                             "docs": [[f"Item {i} is a thing.", "Unrelated."] for i in range(n)]})
    judge = fk.Judge("openai/sim", api_base=api_base, api_key="sk-bench", concurrency=64)
    score = lambda df: fk.evaluate_dataframe(df, [RetrievalRelevance()],
        {"input": "question", "context": "docs"}, judge=judge, cache=cache, progress=False)
    score(frame(200, "warm " + tag))
    df = frame(rows, "cold " + tag)
    cpu, wall = time.process_time(), time.perf_counter()
    out = score(df)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert out["retrieval_relevance_error"].null_count() == rows
    print(json.dumps({"cpu_s": cpu, "wall_s": wall}), flush=True)
    """
)


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "LITELLM_OFFLINE_MODE": "true"}


def two_processes(tree: Path, rows: int, delay: float, workdir: Path) -> dict[str, Any]:
    """Requests at the simulator for two runs of ``rows`` rows, ``delay`` s apart."""
    cache = workdir / f"two-{tree.name}-{delay}"
    with JudgeSimulator.subprocess(SimulatorConfig(latency=0.1)) as sim:
        procs = []
        for _ in range(2):
            proc = subprocess.Popen(
                [sys.executable, "-c", TWO_WORKER, sim.api_base, str(cache), str(rows),
                 str(CONCURRENCY)],
                env=_env(tree), cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            procs.append(proc)
        started = time.perf_counter()
        for index, proc in enumerate(procs):
            if index:
                time.sleep(delay)
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        sent = [json.loads(p.communicate(timeout=600)[0].splitlines()[-1])["sent"] for p in procs]
        wall = time.perf_counter() - started
        requests = sim.stats()["chat"]
    return {"requests": requests, "sent_by_each": sent, "wall_s": round(wall, 2)}


def cold_cpu(tree: Path, rows: int, api_base: str, workdir: Path, run: int) -> dict[str, float]:
    cache = workdir / f"cold-{tree.name}-{run}"
    out = subprocess.run(
        [sys.executable, "-c", COLD_WORKER, api_base, str(cache), str(rows), f"{tree.name}{run}"],
        env=_env(tree), cwd=workdir, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return json.loads(out.splitlines()[-1])


def claims_alone(workdir: Path, keys: int = 32_000, chunk: int = 32) -> dict[str, float]:
    """CPU and wall microseconds a key of taking and giving up claims, best of 3."""
    import hashlib

    from framekit.engine.claims import Claims

    names = [f"chat:{hashlib.sha256(str(i).encode()).hexdigest()}" for i in range(keys)]
    best: dict[str, float] = {}
    for attempt in range(3):
        claims = Claims(workdir / f"claims-{attempt}.db")
        spent = {"take_cpu": 0.0, "take_wall": 0.0, "release_cpu": 0.0, "release_wall": 0.0}
        for start in range(0, keys + chunk, chunk):
            if start < keys:
                cpu, wall = time.process_time(), time.perf_counter()
                claims.take(names[start : start + chunk])
                spent["take_cpu"] += time.process_time() - cpu
                spent["take_wall"] += time.perf_counter() - wall
            if start >= chunk:
                cpu, wall = time.process_time(), time.perf_counter()
                claims.release(names[start - chunk : start])
                spent["release_cpu"] += time.process_time() - cpu
                spent["release_wall"] += time.perf_counter() - wall
        claims.close()
        for name, seconds in spent.items():
            per_key = round(seconds / keys * 1e6, 2)
            best[f"{name}_us_per_key"] = min(best.get(f"{name}_us_per_key", per_key), per_key)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400, help="rows of (a)")
    parser.add_argument("--delays", type=float, nargs="+", default=[1.5, 4.0])
    parser.add_argument("--cold-rows", type=int, default=5000, help="rows of (b)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each side in (b)")
    parser.add_argument("--before-commit", default=BEFORE_COMMIT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fk-bench-claims-") as tmp:
        workdir = Path(tmp)
        before = workdir / "before"
        before.mkdir()
        commits = before_tree(args.before_commit, before)
        trees = {"before": before, "today": ROOT}
        figures: dict[str, Any] = {**commits, "load_average_1m_at_start": os.getloadavg()[0]}
        two: dict[str, Any] = {}
        for delay in args.delays:
            for side, tree in trees.items():
                two[f"{side}_{delay:g}s"] = two_processes(tree, args.rows, delay, workdir)
                print(f"(a) {side}, {delay:g} s:", two[f"{side}_{delay:g}s"], file=sys.stderr)
        figures["two_processes"] = {
            "rows": args.rows,
            "concurrency": CONCURRENCY,
            "latency_s": 0.1,
            "target": f"requests <= {args.rows + CONCURRENCY}",
            **two,
        }
        cpu: dict[str, list[float]] = {side: [] for side in trees}
        with JudgeSimulator.subprocess(SimulatorConfig(latency=0.0)) as sim:
            for run in range(args.runs):
                for side, tree in trees.items():
                    one = cold_cpu(tree, args.cold_rows, sim.api_base, workdir, run)
                    cpu[side].append(one["cpu_s"])
                    print(f"(b) {side} run {run + 1}:", one, file=sys.stderr)
        best = {side: min(values) for side, values in cpu.items()}
        figures["one_process_cold_fill"] = {
            "rows": args.cold_rows,
            "concurrency": 64,
            "runs": args.runs,
            "before_cpu_ms_per_row": round(best["before"] / args.cold_rows * 1000, 4),
            "today_cpu_ms_per_row": round(best["today"] / args.cold_rows * 1000, 4),
            "today_over_before_cpu": round(best["today"] / best["before"], 3),
            "today_over_before_cpu_medians": round(
                statistics.median(cpu["today"]) / statistics.median(cpu["before"]), 3
            ),
            "each_run_cpu_s": {side: [round(v, 3) for v in values] for side, values in cpu.items()},
        }
        figures["claims_alone"] = claims_alone(workdir)
        print("(c)", figures["claims_alone"], file=sys.stderr)
        figures["load_average_1m_at_end"] = os.getloadavg()[0]
    write_results("claims", figures)


if __name__ == "__main__":
    main()
