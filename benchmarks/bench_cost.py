"""Dollars per 1,000 rows: framekit's modes on a labelled workload, at stated list prices.

Each mode scores the same rows against the judge simulator (through the real HTTP
transport), and what framekit reports (``fk.last_run()``: cost, cost per 1,000 rows and
the savings, see ``framekit/engine/savings.py``) is checked against the simulator's own
token counts at the price:

- ``direct``: a cold cache, one request per distinct prompt;
- ``batch``: a cold cache, the same requests through the batch API (its discount);
- ``cache_warm``: the ``direct`` run again: every answer from framekit's cache.

Workloads: the bundled labelled sample (``framekit/data/labelled_sample.parquet``: 60 RAG
rows with human labels, scored by ResponseRelevance, ContextRelevance and
RetrievalRelevance), and WikiQA dev (``../shared/data/wikiqa-dev.tsv``: 2,733 labelled
question-sentence pairs, RetrievalRelevance), skipped when that file is absent.

Prices: the list prices in litellm's bundled cost map (``model_prices_and_context_window``
of the litellm in this venv, read offline through :func:`framekit.judges.pricing.list_price`)
for ``openai/gpt-4o-mini`` (the runs' price, given to the judge as ``price=``, since a
simulator is no provider's endpoint) and, from the same token counts, ``openai/gpt-4o`` and
``anthropic/claude-haiku-4-5``. The simulator counts 4 characters a token and
answers in about 20 tokens; a real judge's explanation is longer, so real output costs
are higher than these.

The rows of issue 42's prompt layouts (:func:`layout_rows`): the same workload with the
template versions from before the layouts (v1 of the context evaluators), the default
ones (the ``direct`` run), and what the simulator's prompt cache gave the default layout.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cost.py [--wikiqa-rows N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, write_results  # noqa: E402

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

MODEL = "openai/gpt-4o-mini"
ALSO_PRICED = ("openai/gpt-4o", "anthropic/claude-haiku-4-5")
#: ``../shared/data`` of the checkout, or of the main checkout beside a worktree.
WIKIQA_CANDIDATES = (
    ROOT.parent / "shared" / "data" / "wikiqa-dev.tsv",
    ROOT.parents[1] / "shared" / "data" / "wikiqa-dev.tsv",
)
API_KEY = "sk-framekit-bench-0000"


def list_prices() -> dict[str, dict[str, float]]:
    """USD per million tokens of each model, from litellm's bundled cost map."""
    from framekit.judges.pricing import list_price, per_million

    prices = {}
    for model in (MODEL, *ALSO_PRICED):
        price = list_price(model)
        if price is None:
            raise SystemExit(f"litellm's cost map has no price for {model}")
        prices[model] = per_million(price)
    return prices


def cost_at(counts: dict[str, Any], price: dict[str, float], factor: float = 1.0) -> float:
    """What the simulator's token counts cost at ``price`` (USD per million tokens)."""
    cached = counts.get("cached_tokens", 0)
    fresh = counts["prompt_tokens"] - cached
    dollars = (
        fresh * price["input"]
        + cached * price.get("cached_input", price["input"])
        + counts["completion_tokens"] * price["output"]
    )
    return dollars * factor / 1e6


def sample_workload() -> tuple[pl.DataFrame, list[Any], dict[str, str]]:
    from framekit.evaluators import ContextRelevance, ResponseRelevance, RetrievalRelevance

    df = pl.read_parquet(ROOT / "framekit" / "data" / "labelled_sample.parquet")
    mapping = {"input": "question", "output": "answer", "context": "documents"}
    return df, [ResponseRelevance(), ContextRelevance(), RetrievalRelevance()], mapping


def wikiqa_workload(rows: int | None) -> tuple[pl.DataFrame, list[Any], dict[str, str]] | None:
    from framekit.evaluators import RetrievalRelevance

    found = next((p for p in WIKIQA_CANDIDATES if p.exists()), None)
    if found is None:
        print(f"skipping WikiQA: {WIKIQA_CANDIDATES[0]} is absent", file=sys.stderr)
        return None
    df = pl.read_csv(found, separator="\t", quote_char=None)
    if rows is not None:
        df = df.head(rows)
    return df, [RetrievalRelevance()], {"input": "Question", "context": "Sentence"}


def run_mode(
    sim: Any, workload: tuple[pl.DataFrame, list[Any], dict[str, str]], cache: Path,
    price: dict[str, float], *, batch: bool,
) -> dict[str, Any]:  # fmt: skip
    import framekit as fk

    df, evaluators, mapping = workload
    options: dict[str, Any] = {"batch": True, "batch_poll": 0.02} if batch else {}
    judge = fk.Judge(MODEL, api_base=sim.api_base, api_key=API_KEY, price=price, **options)
    sim.reset()
    started = time.perf_counter()
    fk.evaluate_dataframe(
        df, evaluators, mapping, judge=judge, cache=cache, progress=False, details=True
    )
    elapsed = time.perf_counter() - started
    run = fk.last_run()
    assert run is not None
    counts = sim.stats()["batch"] if batch else sim.stats()
    figures = run.cost_figures()
    simulated = cost_at(counts, price, 0.5 if batch else 1.0)
    reported = run.cost_usd or 0.0
    return {
        "rows": run.rows,
        "evaluations": run.evaluations,
        "requests_sent": run.requests_sent,
        "batch_lines": run.batch_requests,
        "cache_hits": run.cache_hits,
        "prompt_tokens": counts["prompt_tokens"],
        "completion_tokens": counts["completion_tokens"],
        "cached_prompt_tokens": counts.get("cached_tokens", 0),
        "cost_usd": reported,
        "cost_from_simulator_counts_usd": simulated,
        "reported_over_counted": reported / simulated if simulated else None,
        "cost_per_1000_rows_usd": figures["cost_per_1000_rows_usd"],
        "saved_usd": figures["saved_usd"],
        "elapsed_s": round(elapsed, 3),
        "counts": counts,
    }


def also_priced(mode: dict[str, Any], prices: dict[str, dict[str, float]], batch: bool) -> dict:
    """The mode's cost per 1,000 rows at the other models' list prices (same tokens)."""
    out = {}
    for model in ALSO_PRICED:
        dollars = cost_at(mode["counts"], prices[model], 0.5 if batch else 1.0)
        out[model] = round(dollars / mode["rows"] * 1000, 6) if mode["rows"] else None
    return out


def before_layouts(evaluators: list[Any]) -> list[Any]:
    """The same evaluators with the template versions from before the prompt layouts: v1
    for each evaluator whose default is the layout laid out for the provider's cache."""
    return [type(ev)(version="v1") if ev.version == "v2" else ev for ev in evaluators]


def layout_rows(
    sim: Any, workload: Any, cache: Path, price: dict[str, float], after: dict[str, Any]
) -> dict[str, Any]:
    """The rows of issue 42's prompt layouts: the workload scored with the template
    versions from before (``layouts_before``, a cold cache), the default ones
    (``layouts_after``: the ``direct`` run), and what the simulator's prompt cache (by
    OpenAI's rule) gave the default layout (``cached_prefix``)."""
    df, evaluators, mapping = workload
    before = run_mode(sim, (df, before_layouts(evaluators), mapping), cache, price, batch=False)
    before.pop("counts")
    prompt = after["prompt_tokens"]
    return {
        "layouts_before": before,
        "layouts_after": {"same_as": "direct"},
        "cached_prefix": {
            "cached_prompt_tokens": after["cached_prompt_tokens"],
            "share_of_prompt_tokens": after["cached_prompt_tokens"] / prompt if prompt else None,
            "saved_usd": after["saved_usd"].get("prompt_cache"),
            "note": "a prefix is cached from 1,024 tokens: rows whose documents are shorter "
            "share none (see prefix_cache.json for ~3,000-token documents)",
        },
    }


def measure(name: str, workload: Any, prices: dict[str, dict[str, float]]) -> dict[str, Any]:
    from framekit.testing import JudgeSimulator, SimulatorConfig

    price = prices[MODEL]
    with (
        tempfile.TemporaryDirectory() as tmp,
        JudgeSimulator(SimulatorConfig(batch_seconds=0.05)) as sim,
    ):
        direct = run_mode(sim, workload, Path(tmp) / "direct", price, batch=False)
        batch = run_mode(sim, workload, Path(tmp) / "batch", price, batch=True)
        warm = run_mode(sim, workload, Path(tmp) / "direct", price, batch=False)
        layouts = layout_rows(sim, workload, Path(tmp) / "before", price, direct)
    modes = {"direct": direct, "batch": batch, "cache_warm": warm}
    for mode_name, mode in modes.items():
        mode["cost_per_1000_rows_at_other_list_prices_usd"] = also_priced(
            mode, prices, mode_name == "batch"
        )
        mode.pop("counts")
    per_1000 = {k: m["cost_per_1000_rows_usd"] for k, m in modes.items()}
    base = per_1000["direct"] or 0.0
    return {
        "workload": name,
        "rows": direct["rows"],
        "evaluators": [ev.name for ev in workload[1]],
        "modes": modes,
        **layouts,
        "cost_per_1000_rows_usd": per_1000,
        "ratio_to_direct": {k: (v / base if base else None) for k, v in per_1000.items()},
    }


def main() -> None:
    from importlib.metadata import version

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wikiqa-rows", type=int, default=None, help="first N pairs only")
    args = parser.parse_args()
    prices = list_prices()
    workloads = {"labelled_sample": measure("labelled_sample", sample_workload(), prices)}
    wikiqa = wikiqa_workload(args.wikiqa_rows)
    if wikiqa is not None:
        workloads["wikiqa_dev"] = measure("wikiqa_dev", wikiqa, prices)
    write_results(
        "cost",
        {
            "model": MODEL,
            "prices_usd_per_million_tokens": prices,
            "price_source": f"litellm {version('litellm')} bundled cost map "
            "(model_prices_and_context_window), read offline",
            "batch_discount": 0.5,
            "token_rule": "the simulator counts 4 characters a token; answers ~20 tokens",
            "workloads": workloads,
        },
    )


if __name__ == "__main__":
    main()
