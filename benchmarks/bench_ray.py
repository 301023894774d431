"""framekit on Ray Data: one shared rate limit, and the offline judge on 1 vs 2 workers.

1. The limiter actor's cost: one ``acquire`` round trip, asked in sequence and 2,000 at
   once (to decide whether permits must be leased in batches: they need not).
2. Rate limit: the judge simulator enforcing 3,000 RPM over fixed 1-second windows
   (at most 50 requests per wall-clock second; more are answered 429 with Retry-After),
   answering in 0.2-0.6 s. ``--rows`` distinct rows, one evaluator, are scored by 2 Ray
   workers x concurrency 32 with ``fk.Judge(rpm=3000)``: once through the cluster's
   shared limiter actor, once with each worker pacing alone (``shared_limit=False``).
   Rows/s is counted at the simulator, from the first to the last accepted request
   (the steady state; actor start-up is reported apart, as the wall time). The control:
   the same rows through the local engine in one process, against the same simulator, in
   the same run (on a loaded machine, how much of a shortfall is the machine's).
3. CPU starvation (``--cpu-hog``): the same windowed simulator at ``--hog-limit-rpm``,
   2 Ray workers x concurrency 32 through the shared limiter, with a busy loop on each of
   the machine's two cores from the first request to the last, and once without them;
   each case with the framekit of ``--before`` (a commit, default ``main``) and of this
   checkout, in child processes back to back (each its own Ray instance). Reported: the
   share of the limit reached, the share of 429s, and the limiter's expired grants, lead
   and tolerance.
4. The offline judge: a ``--parquet-rows`` Parquet file (``--distinct`` distinct
   (question, docs) pairs, slices of ``--slice-rows``) scored by
   ``fk.evaluate_parquet(engine="ray")`` on 1 worker and on 2 (each worker 1 CPU), and by
   the local engine; the three files must be identical.

Prints the figures and writes ``benchmarks/results/ray.json``.

    python benchmarks/bench_ray.py [--rows 1500] [--limit-rpm 3000] [--judge-rpm R]
        [--parquet-rows 200000] [--skip-rate] [--skip-offline]
        [--cpu-hog [--hog-rows 600] [--hog-limit-rpm 1200] [--before main]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where this process's framekit comes from: this checkout, or the ``--before`` tree a
#: parent run of the CPU-hog comparison unpacked.
FRAMEKIT_ROOT = os.environ.get("BENCH_FRAMEKIT_ROOT", str(ROOT))
sys.path[:0] = [FRAMEKIT_ROOT, str(ROOT)]
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
# Ray's workers import that framekit, not another one in the venv.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (FRAMEKIT_ROOT, str(ROOT), os.environ.get("PYTHONPATH")) if p
)

import polars as pl  # noqa: E402
import ray  # noqa: E402
import ray.data  # noqa: E402

import framekit as fk  # noqa: E402
import framekit.ray as fkray  # noqa: E402
from benchmarks._common import RESULTS, before_tree, write_results  # noqa: E402
from framekit.evaluators import RetrievalRelevance  # noqa: E402
from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402
from framekit.testing._sim_http import Reply, SimApp, error_body  # noqa: E402

MAPPING = {"input": "question", "context": "docs"}
WINDOW_S = 1.0


def windowed_limit(app: SimApp, limit: int, window: float, accepted: list[float]) -> None:
    """Make the simulator enforce ``limit`` requests per fixed ``window`` seconds.

    The simulator's own ``rpm`` is a token bucket holding one second of budget; a fixed
    window is what many gateways count. (Issue 11 adds a windowed option to
    framekit.testing; this small stand-in keeps the benchmark independent of it.)
    """
    gateway = app._gateway
    state = {"window": -1, "count": 0}

    def windowed(headers: dict[str, str]) -> Reply | None:
        reply = gateway(headers)
        if reply is not None:
            return reply
        now = time.monotonic()
        current = int(now // window)
        if current != state["window"]:
            state["window"], state["count"] = current, 0
        if state["count"] >= limit:
            app._fault("rpm")
            return Reply(429, error_body(429), app._retry_after(window - now % window))
        state["count"] += 1
        accepted.append(now)
        return None

    app._gateway = windowed  # type: ignore[method-assign]


def frame(n: int, distinct: int | None = None) -> pl.DataFrame:
    distinct = distinct or n
    return pl.DataFrame(
        {
            "row_id": range(n),
            "question": [f"What is item {i % distinct}?" for i in range(n)],
            "docs": [[f"Item {i % distinct} is a thing.", "Unrelated text."] for i in range(n)],
        }
    )


def limiter_cost() -> dict[str, Any]:
    actor = fkray.shared_limiter("bench/rtt", None, None, None)

    async def measure() -> tuple[float, float]:
        await actor.acquire.remote(0, 0, 0)
        # The limiter holds later requests until the first answer has been seen (its
        # rate-limit headers may set the pace): stand in for that answer.
        await actor.observe.remote({})
        started = time.perf_counter()
        for _ in range(300):
            await actor.acquire.remote(0, 0, 0)
        sequential = (time.perf_counter() - started) / 300
        started = time.perf_counter()
        await asyncio.gather(*[actor.acquire.remote(0, 0, 0) for _ in range(2000)])
        return sequential, (time.perf_counter() - started) / 2000

    sequential, pipelined = asyncio.run(measure())
    return {
        "acquire_round_trip_ms": round(sequential * 1000, 2),
        "acquire_pipelined_ms_per_call": round(pipelined * 1000, 3),
        "acquires_per_s_pipelined": round(1 / pipelined),
    }


def rate_run(
    sim: JudgeSimulator,
    accepted: list[float],
    rows: int,
    shared: bool,
    judge_rpm: float,
    limit_rpm: float,
) -> dict[str, Any]:
    sim.reset()
    accepted.clear()
    judge = fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-bench", rpm=judge_rpm,
                     concurrency=32)  # fmt: skip
    # A distinct text per run: nothing comes from another run's answers.
    data = frame(rows).with_columns(pl.col("question") + (" (shared)" if shared else " (alone)"))
    started = time.perf_counter()
    # Blocks of 250 rows: Ray hands whole blocks to the workers (one block would keep
    # one worker busy and the other idle).
    blocks = [data.slice(i, 250).to_arrow() for i in range(0, rows, 250)]
    ds = fkray.evaluate_dataset(
        ray.data.from_arrow(blocks), [RetrievalRelevance()], MAPPING, judge=judge,
        cache=False, workers=2, batch_rows=250, shared_limit=shared,
    )  # fmt: skip
    out = pl.concat(
        [pl.from_arrow(b) for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)]
    )  # type: ignore[misc]
    wall = time.perf_counter() - started
    stats = sim.stats()
    total = stats["chat"]
    limited = stats["by_status"].get(429, 0)
    span = accepted[-1] - accepted[0] if len(accepted) > 1 else float("nan")
    rows_per_s = (len(accepted) - 1) / span
    return {
        "shared_limiter": shared,
        "judge_rpm": judge_rpm,
        "rows": rows,
        "rows_scored": int(out["retrieval_relevance_error"].null_count()),
        "requests": total,
        "answered_429": limited,
        "share_429": round(limited / total, 4),
        "rows_per_s_steady": round(rows_per_s, 1),
        "fraction_of_limit": round(rows_per_s / (limit_rpm / 60), 3),
        "wall_s_including_actor_start": round(wall, 1),
    }


# The control: the same rows through the local engine in one process (a child, so that
# it does not share the simulator's interpreter), against the same simulator.
LOCAL = """
import sys, time
import polars as pl
import framekit as fk
from framekit.evaluators import RetrievalRelevance
rows, api_base, rpm = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
n = range(rows)
data = pl.DataFrame({"question": [f"What is item {i}? (one process)" for i in n],
                     "docs": [[f"Item {i} is a thing.", "Unrelated text."] for i in n]})
judge = fk.Judge("openai/sim", api_base=api_base, api_key="sk-bench", rpm=rpm, concurrency=64)
fk.evaluate_dataframe(data, [RetrievalRelevance()], {"input": "question", "context": "docs"},
                      judge=judge, cache=False, progress=False)
"""


def local_run(
    sim: JudgeSimulator, accepted: list[float], rows: int, judge_rpm: float, limit_rpm: float
) -> dict[str, Any]:
    sim.reset()
    accepted.clear()
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", LOCAL, str(rows), sim.api_base, str(judge_rpm)], check=True
    )
    wall = time.perf_counter() - started
    stats = sim.stats()
    limited = stats["by_status"].get(429, 0)
    rows_per_s = (len(accepted) - 1) / (accepted[-1] - accepted[0])
    return {
        "engine": "local, one process, concurrency 64",
        "judge_rpm": judge_rpm,
        "requests": stats["chat"],
        "answered_429": limited,
        "share_429": round(limited / stats["chat"], 4),
        "rows_per_s_steady": round(rows_per_s, 1),
        "fraction_of_limit": round(rows_per_s / (limit_rpm / 60), 3),
        "wall_s": round(wall, 1),
    }


def offline_runs(rows: int, distinct: int, slice_rows: int) -> dict[str, Any]:
    evs = [RetrievalRelevance()]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.parquet"
        frame(rows, distinct).write_parquet(src, row_group_size=slice_rows)
        figures: dict[str, Any] = {"rows": rows, "distinct_pairs": distinct,
                                   "slices": -(-rows // slice_rows)}  # fmt: skip
        timings = {}
        for label, options in (
            ("local_engine", {}),
            ("ray_1_worker", {"engine": "ray", "workers": 1, "num_cpus": 1}),
            ("ray_2_workers", {"engine": "ray", "workers": 2, "num_cpus": 1}),
        ):
            started = time.perf_counter()
            run = fk.evaluate_parquet(src, Path(tmp) / f"{label}.parquet", evs, MAPPING,
                                      judge="local", cache=False, progress=False,
                                      slice_rows=slice_rows, **options)  # fmt: skip
            timings[label] = time.perf_counter() - started
            figures[f"{label}_s"] = round(timings[label], 1)
            figures[f"{label}_embeddings"] = run.stats.embeddings_computed
        reference = pl.read_parquet(Path(tmp) / "local_engine.parquet")
        figures["identical_to_local_engine"] = all(
            pl.read_parquet(Path(tmp) / f"{label}.parquet").equals(reference)
            for label in ("ray_1_worker", "ray_2_workers")
        )
        figures["speedup_2_vs_1_worker"] = round(
            timings["ray_1_worker"] / timings["ray_2_workers"], 2
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--parquet-rows", type=int, default=200_000)
    parser.add_argument("--distinct", type=int, default=300)
    parser.add_argument("--slice-rows", type=int, default=20_000)
    parser.add_argument("--limit-rpm", type=float, default=3000, help="the simulator's")
    parser.add_argument("--judge-rpm", type=float, default=None, help="default: the limit")
    parser.add_argument("--skip-offline", action="store_true")
    parser.add_argument("--skip-rate", action="store_true")
    parser.add_argument("--cpu-hog", action="store_true", help="the CPU-starvation comparison")
    parser.add_argument("--hog-rows", type=int, default=600)
    parser.add_argument("--hog-limit-rpm", type=float, default=1200)
    parser.add_argument("--before", default="main", help="the commit to compare with")
    parser.add_argument("--hog-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hog_child is not None:
        print(json.dumps(hog_child(args.hog_rows, args.hog_limit_rpm, args.hog_child)))
        return

    # A part skipped in this run keeps its figures from the previous one (each part's
    # ratios come from one run; each part records the load it ran under).
    previous = RESULTS / "ray.json"
    results: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    kept = ("limiter_actor", "offline_judge", "cpu_hog")
    results = {k: v for k, v in results.items() if k in kept or k.startswith("rate_limit_")}
    if args.cpu_hog:  # first, and in child processes with Ray instances of their own
        results["cpu_hog"] = hog_part(args)
    if args.skip_rate and args.skip_offline:
        write_results("ray", results)
        return
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    if not args.skip_rate:
        results["limiter_actor"] = limiter_cost()
        print(results["limiter_actor"], file=sys.stderr)
        results[f"rate_limit_{args.limit_rpm:g}_rpm"] = rate_part(args)
    if not args.skip_offline:
        load = round(os.getloadavg()[0], 1)
        results["offline_judge"] = offline_runs(args.parquet_rows, args.distinct, args.slice_rows)
        results["offline_judge"]["load_average_1m"] = [load, round(os.getloadavg()[0], 1)]
    ray.shutdown()
    write_results("ray", results)


def rate_part(args: argparse.Namespace) -> dict[str, Any]:
    accepted: list[float] = []
    config = SimulatorConfig(latency=0.2, latency_max=0.6, retry_after="seconds")
    limit = args.limit_rpm
    judge_rpm = args.judge_rpm or limit
    part: dict[str, Any] = {
        "simulator": f"{limit:g} RPM as {limit / 60:g} requests per fixed 1-second window; "
        "0.2-0.6 s answers",
        "workers": 2,
        "concurrency_per_worker": 32,
        "load_average_1m": [round(os.getloadavg()[0], 1)],
    }
    with JudgeSimulator(config) as sim:
        windowed_limit(sim._app, int(limit / 60), WINDOW_S, accepted)
        for name, run in (
            ("shared", lambda: rate_run(sim, accepted, args.rows, True, judge_rpm, limit)),
            ("alone", lambda: rate_run(sim, accepted, args.rows, False, judge_rpm, limit)),
            ("control_one_process", lambda: local_run(sim, accepted, args.rows, judge_rpm, limit)),
        ):
            part[name] = run()
            print(name, part[name], file=sys.stderr)
    part["load_average_1m"].append(round(os.getloadavg()[0], 1))
    return part


#: A process keeping one core busy until it is killed (or for at most ten minutes).
CPU_HOG = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


def hog_child(rows: int, limit_rpm: float, hogs: int) -> dict[str, Any]:
    """One run of part 3 (in a child process, with the framekit it was started with)."""
    import threading

    from framekit.ray._limiter import NAMESPACE, limiter_name

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    accepted: list[float] = []
    started: list[subprocess.Popen[bytes]] = []
    done = threading.Event()
    config = SimulatorConfig(latency=0.2, latency_max=0.6, retry_after="seconds")
    with JudgeSimulator(config) as sim:
        windowed_limit(sim._app, int(limit_rpm / 60), WINDOW_S, accepted)

        def starve() -> None:  # from the first request on (not the workers' start-up)
            while not accepted and not done.wait(0.02):
                pass
            if not done.is_set():
                started.extend(
                    subprocess.Popen([sys.executable, "-c", CPU_HOG]) for _ in range(hogs)
                )

        threading.Thread(target=starve, daemon=True).start()
        load = [round(os.getloadavg()[0], 1)]
        try:
            run = rate_run(sim, accepted, rows, True, limit_rpm, limit_rpm)
        finally:
            done.set()
            for hog in started:
                hog.kill()
                hog.wait()
        load.append(round(os.getloadavg()[0], 1))
        judge = ("openai/sim", sim.api_base, limit_rpm, None)
        counts = ray.get(ray.get_actor(limiter_name(*judge), NAMESPACE).counts.remote())
    ray.shutdown()
    framekit_dir = str(Path(fk.__file__).resolve().parents[1])
    return {**run, "limiter": counts, "load_average_1m": load, "framekit_from": framekit_dir}


def hog_part(args: argparse.Namespace) -> dict[str, Any]:
    """Part 3: before and after, with and without the hogs, back to back."""
    part: dict[str, Any] = {
        "simulator": f"{args.hog_limit_rpm:g} RPM as {args.hog_limit_rpm / 60:g} requests per "
        "fixed 1-second window; 0.2-0.6 s answers",
        "rows": args.hog_rows,
        "workers": 2,
        "concurrency_per_worker": 32,
    }
    with tempfile.TemporaryDirectory() as before:
        part.update(before_tree(args.before, Path(before)))
        for hogs in (2, 0):
            case = part.setdefault("two_cpu_hogs" if hogs else "no_hog", {})
            for label, root in (("before", before), ("after", str(ROOT))):
                command = [sys.executable, str(Path(__file__).resolve()), "--hog-child", str(hogs),
                           "--hog-rows", str(args.hog_rows),
                           "--hog-limit-rpm", str(args.hog_limit_rpm)]  # fmt: skip
                # Run from that tree: Ray's workers put the driver's directory first on
                # their path, ahead of PYTHONPATH.
                out = subprocess.run(command, env={**os.environ, "BENCH_FRAMEKIT_ROOT": root},
                                     cwd=root, check=True, capture_output=True, text=True)  # fmt: skip
                case[label] = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{hogs} hogs, {label}:", case[label], file=sys.stderr)
    return part


if __name__ == "__main__":
    main()
