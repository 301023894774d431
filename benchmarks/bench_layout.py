"""The layout redesign's cost: the transports and engine benchmarks, this tree against an
older one, in the same run.

Each benchmark is run as a whole process, the two trees in turn (old, new, old, new ...),
with the same interpreter and packages (this venv; each tree's own sources first on the
path), so a machine that drifts slows both alike. Per benchmark it records the median
wall and CPU seconds of each tree and the figures the benchmark itself prints, and the
ratio new/old of each (below 1: the new tree is faster):
- ``bench_transports.py --quick --only cpu``: client CPU per call against an instant
  judge (800 calls on the HTTP transport, 200 on litellm's, a bare aiohttp loop);
- ``bench_engine.py --quick --only cached``: 10,000 rows scored, then re-read from the
  cache three times (the planner, the cache and the columns, no judge call).

Run: ``.venv/bin/python benchmarks/bench_layout.py --before ../pre-layout [--runs 3]``
(``git worktree add --detach ../pre-layout b645bfd`` makes the older tree); writes
benchmarks/results/layout.json. The benchmarks' own result files of the older tree are
written in that tree; this tree's ``*-quick.json`` are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS, write_results  # noqa: E402

HERE = Path(__file__).resolve().parents[1]

#: name -> (script arguments, the printed figures to compare: path in its JSON).
BENCHMARKS: dict[str, tuple[list[str], dict[str, tuple[str, ...]]]] = {
    "transports_cpu": (
        ["benchmarks/bench_transports.py", "--quick", "--only", "cpu"],
        {
            "http_cpu_ms_per_row": ("cpu_per_call_0ms", "http", "client_cpu_ms_per_row"),
            "litellm_cpu_ms_per_row": ("cpu_per_call_0ms", "litellm", "client_cpu_ms_per_row"),
            "bare_aiohttp_cpu_ms_per_row": (
                "cpu_per_call_0ms",
                "bare_aiohttp",
                "client_cpu_ms_per_row",
            ),
        },
    ),
    "engine_cached": (
        ["benchmarks/bench_engine.py", "--quick", "--only", "cached"],
        {
            "cold_elapsed_s": ("cached_rerun", "cold_elapsed_s"),
            "warm_elapsed_s": ("cached_rerun", "warm_elapsed_s"),
        },
    ),
}


def run_once(tree: Path, args: list[str]) -> dict[str, Any]:
    """One whole-process run of a benchmark in ``tree``: wall and CPU seconds (its own and
    its children's: the simulator runs in a process of its own) and its printed figures."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    printed = done.stdout[done.stdout.rindex('{\n  "benchmark"') :]  # write_results' print
    return {"wall_s": wall, "cpu_s": cpu, "figures": json.loads(printed)}


def dig(data: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = data
    for key in path:
        value = value[key]
    return float(value)


def compare(name: str, before: Path, runs: int) -> dict[str, Any]:
    args, wanted = BENCHMARKS[name]
    seen: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _ in range(runs):
        for side, tree in (("old", before), ("new", HERE)):
            seen[side].append(run_once(tree, args))
            print(f"{name} {side}: {seen[side][-1]['wall_s']:.1f} s", file=sys.stderr)
    result: dict[str, Any] = {"command": " ".join(args), "runs_each": runs}
    measures = {"wall_s": ("wall_s",), "cpu_s": ("cpu_s",)}
    for measure, path in {**measures, **{k: ("figures", *v) for k, v in wanted.items()}}.items():
        old = statistics.median(dig(r, path) for r in seen["old"])
        new = statistics.median(dig(r, path) for r in seen["new"])
        result[measure] = {
            "old_median": round(old, 3),
            "new_median": round(new, 3),
            "new_over_old": round(new / old, 3) if old else None,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the older framekit tree")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tree (default 3)")
    args = parser.parse_args()
    before = args.before.resolve()
    figures: dict[str, Any] = {"before_tree": str(before), "before_commit": _commit(before)}
    figures["after_commit"] = _commit(HERE)
    for name in BENCHMARKS:
        figures[name] = compare(name, before, args.runs)
    figures["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    for quick in ("transports-quick.json", "engine-quick.json"):
        (RESULTS / quick).unlink(missing_ok=True)
    write_results("layout", figures)


def _commit(tree: Path) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
