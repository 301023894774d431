"""Prompts laid out for the provider's prompt cache (issue 42): cached prompt tokens,
throughput and $ per 1,000 rows, this tree against main, on the same rows.

Workload (labelled ``rag-4-context-evaluators``): 120 rows, each a request and three
retrieved documents of 4,000 characters (about 3,000 tokens together, at the
simulator's 4 characters a token), a response and a reference answer; scored by the four
evaluators that read the documents (ContextRelevance, RetrievalRelevance, Groundedness,
ContextRecall) at the judge simulator, which caches prompt prefixes by OpenAI's rule
(1,024 tokens and more, in 128-token steps, once a request holding the prefix has been
answered) and answers after ``--latency`` seconds; concurrency 16, no response cache.

Three configurations, each a fresh process, run in turn (main, layout, v1, then layout,
v1, main ...: each round in another order) so that a machine that drifts slows all alike:
- ``main``: main's code (its default templates: the rubric first);
- ``layout``: this tree's defaults (v2: the row's documents first, sends staggered);
- ``v1``: this tree with ``version="v1"`` (nothing shared: the stagger's cost alone).
The simulator runs in this process and is reset between runs; its counts are the
figures. $ per 1,000 rows is priced at a stated list price (OpenAI gpt-4.1, USD per
million tokens: input 2.00, cached input 0.50, output 8.00) from the simulator's counts.

Run: ``.venv/bin/python benchmarks/bench_prefix_cache.py [--runs 3] [--main main]``;
writes benchmarks/results/prefix_cache.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# After PYTHONPATH, so that a child run imports the framekit of the tree it was given.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, before_tree, write_results  # noqa: E402

WORKLOAD = "rag-4-context-evaluators"
ROWS = 120
DOC_CHARS = 4_000
DOCS_PER_ROW = 3
CONCURRENCY = 16
#: The stated list price: OpenAI gpt-4.1, USD per million tokens.
PRICE = {"input": 2.0, "cached_input": 0.5, "output": 8.0}
PRICE_NAME = (
    "OpenAI gpt-4.1 list price: input $2.00, cached input $0.50, output $8.00 per 1M tokens"
)
CONFIGS = ("main", "layout", "v1")


def frame() -> Any:
    import polars as pl

    def doc(i: int, j: int) -> str:
        sentence = f"Row {i}, document {j}: the fact numbered {i * 7 + j} holds for part {j}. "
        return (sentence * (DOC_CHARS // len(sentence) + 1))[:DOC_CHARS]

    return pl.DataFrame({
        "question": [f"Which fact holds for row {i}?" for i in range(ROWS)],
        "docs": [[doc(i, j) for j in range(DOCS_PER_ROW)] for i in range(ROWS)],
        "answer": [f"The fact numbered {i * 7} holds." for i in range(ROWS)],
        "reference": [f"The fact numbered {i * 7 + 1} holds." for i in range(ROWS)],
    })  # fmt: skip


def child(api_base: str, version: str | None) -> dict[str, Any]:
    """One run, in this process (the tree on ``PYTHONPATH`` first): the four evaluators
    over the rows; the seconds the run took and what ``fk.last_run()`` says."""
    import framekit as fk
    from framekit.evaluators import (
        ContextRecall,
        ContextRelevance,
        Groundedness,
        RetrievalRelevance,
    )
    from framekit.judges.providers import PROVIDERS

    # The simulator stands in for OpenAI's own API (no api_base), whose cache it imitates:
    # there a structured-output schema is part of the cached prefix.
    PROVIDERS["openai"] = dataclasses.replace(PROVIDERS["openai"], public_base=api_base)
    for name in ("FRAMEKIT_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        os.environ.pop(name, None)
    options = {} if version is None else {"version": version}
    evaluators = [
        kind(**options)
        for kind in (ContextRelevance, RetrievalRelevance, Groundedness, ContextRecall)
    ]
    judge = fk.Judge("openai/gpt-4.1", api_key="sk-bench", concurrency=CONCURRENCY, price=PRICE)
    mapping = {"input": "question", "context": "docs", "output": "answer", "reference": "reference"}
    rows = frame()
    started = time.perf_counter()
    out = fk.evaluate_dataframe(rows, evaluators, mapping, judge=judge, cache=False, progress=False)
    seconds = time.perf_counter() - started
    errors = sum(out[c].drop_nulls().len() for c in out.columns if c.endswith("_error"))
    run = fk.last_run()
    return {
        "seconds": seconds,
        "rows_per_s": ROWS / seconds,
        "errors": errors,
        "framekit": fk.__file__,
        "versions": [ev.version for ev in evaluators],
        "cost_usd": None if run is None else run.cost_usd,
        "run_cached_tokens": None if run is None else run.cached_tokens,
        "run_prompt_tokens": None if run is None else run.prompt_tokens,
    }


def cost_per_1000_rows(counts: dict[str, Any]) -> float:
    """USD per 1,000 rows at :data:`PRICE`, from the simulator's token counts."""
    fresh = counts["prompt_tokens"] - counts["cached_tokens"]
    usd = (
        fresh * PRICE["input"]
        + counts["cached_tokens"] * PRICE["cached_input"]
        + counts["completion_tokens"] * PRICE["output"]
    ) / 1e6
    return usd / ROWS * 1000


def run_once(sim: Any, config: str, main_tree: Path) -> dict[str, Any]:
    sim.reset()
    path = str(main_tree) if config == "main" else str(ROOT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, str(ROOT)])}
    args = [sys.executable, __file__, "--child", sim.api_base]
    if config == "v1":
        args += ["--version", "v1"]
    done = subprocess.run(args, env=env, check=True, capture_output=True, text=True, cwd=ROOT)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["framekit"].startswith(path), (figures["framekit"], path)
    counts = sim.stats()
    figures.update(
        requests=counts["chat"],
        prompt_tokens=counts["prompt_tokens"],
        cached_tokens=counts["cached_tokens"],
        completion_tokens=counts["completion_tokens"],
        cached_share=counts["cached_tokens"] / max(1, counts["prompt_tokens"]),
        usd_per_1000_rows=cost_per_1000_rows(counts),
        max_in_flight=counts["max_in_flight"],
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each configuration")
    parser.add_argument("--main", default="main", help="the commit to compare with")
    parser.add_argument("--latency", type=float, default=0.3, help="the judge's seconds per answer")
    parser.add_argument("--child", metavar="API_BASE", help=argparse.SUPPRESS)
    parser.add_argument("--version", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.version)))
        return

    from framekit.testing import JudgeSimulator, SimulatorConfig

    results: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    with (
        tempfile.TemporaryDirectory() as tmp,
        JudgeSimulator(SimulatorConfig(latency=args.latency, prompt_cache="openai")) as sim,
    ):
        commits = before_tree(args.main, Path(tmp))
        for round_ in range(args.runs):
            # Each round in another order, so that no configuration always runs first.
            shift = round_ % len(CONFIGS)
            for config in CONFIGS[shift:] + CONFIGS[:shift]:
                figures = run_once(sim, config, Path(tmp))
                results[config].append(figures)
                print(config, json.dumps({k: figures[k] for k in ("rows_per_s", "cached_share")}))

    def median(config: str, key: str) -> float:
        return statistics.median(r[key] for r in results[config])

    # Throughput as same-round ratios (each round ran the three in turn).
    per_round = {
        config: [results[config][i]["rows_per_s"] / results["main"][i]["rows_per_s"]
                 for i in range(args.runs)]
        for config in ("layout", "v1")
    }  # fmt: skip
    ratios = {
        config: statistics.median(
            r[config]["rows_per_s"] / r["main"]["rows_per_s"]
            for r in ({c: results[c][i] for c in CONFIGS} for i in range(args.runs))
        )
        for config in ("layout", "v1")
    }
    summary = {
        config: {
            "rows_per_s_median": median(config, "rows_per_s"),
            "seconds_median": median(config, "seconds"),
            "requests": results[config][0]["requests"],
            "prompt_tokens": results[config][0]["prompt_tokens"],
            "cached_tokens": results[config][0]["cached_tokens"],
            "cached_share": median(config, "cached_share"),
            "completion_tokens": results[config][0]["completion_tokens"],
            "usd_per_1000_rows": median(config, "usd_per_1000_rows"),
            "run_cost_usd_per_1000_rows": (
                None if results[config][0]["cost_usd"] is None
                else results[config][0]["cost_usd"] / ROWS * 1000
            ),
            "errors": sum(r["errors"] for r in results[config]),
            "versions": results[config][0]["versions"],
        }
        for config in CONFIGS
    }  # fmt: skip
    write_results(
        "prefix_cache",
        {
            "workload": WORKLOAD,
            "rows": ROWS,
            "evaluators": 4,
            "document_tokens_per_row": DOCS_PER_ROW * DOC_CHARS // 4,
            "concurrency": CONCURRENCY,
            "judge_latency_s": args.latency,
            "runs": args.runs,
            "price": PRICE_NAME,
            "commits": commits,
            "summary": summary,
            "throughput_ratio_vs_main": ratios,
            "throughput_ratio_vs_main_by_round": per_round,
            "load_average": os.getloadavg(),
            # The "layouts before/after" row of $ per 1,000 rows (direct path).
            "cost_per_1000_rows_layouts": {
                "before": summary["main"]["usd_per_1000_rows"],
                "after": summary["layout"]["usd_per_1000_rows"],
            },
            "runs_detail": results,
        },
    )


if __name__ == "__main__":
    main()
