"""What a cascade buys: agreement with the truth against requests to the strong judge.

Usage::

    .venv/bin/python benchmarks/bench_cascade.py [--rows 1000]

The judges are the simulator's calibrated noisy judges (``weak`` right ~75 % of the time,
``strong`` ~95 %), reached over HTTP through ``fk.evaluate_dataframe``; requests are
counted at the simulator. Measured, each with no cache so every figure is paid for:

* the weak judge alone, the strong judge alone, and ``fk.Cascade([weak, strong])`` at
  fixed thresholds 0.7 / 0.8 / 0.9: agreement with the truth and strong requests per row;
* ``fk.calibrate_cascade`` on 500 labelled rows (target 0.9, risk 0.1), then the chosen
  cascade on fresh rows: agreement and strong requests per row.

The judges err independently here; real judges' errors correlate, so the escalated
share is optimistic. Writes ``benchmarks/results/cascade.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import framekit as fk  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from framekit.evaluators import RetrievalRelevance  # noqa: E402
from framekit.testing import JudgeSimulator, NoisyJudge, SimulatorConfig  # noqa: E402

MAPPING = {"input": "question", "context": "docs"}
LABELS = ("relevant", "irrelevant")
NAME = "retrieval_relevance"


def rows(n: int, seed: int, tag: str) -> pl.DataFrame:
    truth = [LABELS[i] for i in np.random.default_rng(seed).integers(0, 2, n)]
    return pl.DataFrame(
        {
            "question": [f"What is {tag} {i}? @sim(truth={t})" for i, t in enumerate(truth)],
            "docs": [[f"{tag} {i} is a thing."] for i in range(n)],
            "truth": truth,
        }
    )


def measure(sim: JudgeSimulator, frame: pl.DataFrame, judge: Any) -> dict[str, float]:
    sim.reset()
    out = fk.evaluate_dataframe(
        frame, [RetrievalRelevance()], MAPPING, judge=judge, cache=False, progress=False
    )
    strong = sim.stats()["by_model"].get("strong", 0)
    agreement = float((out[f"{NAME}_label"] == out["truth"]).mean())  # type: ignore[arg-type]
    return {"agreement": round(agreement, 4), "strong_requests_per_row": strong / frame.height}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    noisy = {"weak": NoisyJudge(0.75, seed=1), "strong": NoisyJudge(0.95, seed=2)}
    figures: dict[str, Any] = {"rows": args.rows}
    with JudgeSimulator(SimulatorConfig(noisy_judges=noisy)) as sim:

        def judge(model: str) -> fk.Judge:
            return fk.Judge(f"openai/{model}", api_base=sim.api_base, api_key="sk-bench")

        fresh = rows(args.rows, 3, "fresh")
        figures["weak_alone"] = measure(sim, fresh, judge("weak"))
        figures["strong_alone"] = measure(sim, fresh, judge("strong"))
        figures["fixed"] = {
            str(t): measure(sim, fresh, fk.Cascade([judge("weak"), judge("strong")], [t]))
            for t in (0.7, 0.8, 0.9)
        }
        found = fk.calibrate_cascade(
            rows(500, 11, "labelled"),
            fk.Cascade([judge("weak"), judge("strong")], [0.0]),
            RetrievalRelevance(),
            MAPPING,
            reference="truth",
            cache=False,
        )
        figures["calibration"] = found.calibration.reason
        if found.cascade is not None:
            figures["calibrated"] = {
                "escalate_below": list(found.cascade.escalate_below),
                **measure(sim, fresh, found.cascade),
            }
    figures["elapsed_s"] = round(time.perf_counter() - started, 1)
    write_results("cascade", figures)


if __name__ == "__main__":
    main()
