"""Benchmark the offline judge: agreement on WikiQA, cut points, embedding speed.

Usage::

    .venv/bin/python benchmarks/bench_local_judge.py [--data ../shared/data/wikiqa-dev.tsv]
        [--texts 2000] [--output benchmarks/results/local_judge.json]

Prints its figures and writes them to ``benchmarks/results/local_judge.json``.

* model load: a fresh interpreter imports the embedder and builds it (sha256 check of
  the 23 MB model, tokenizer, onnxruntime session), i.e. what a user's first local
  evaluation pays;
* throughput: texts per second, cold (the first ``embed`` call of a new session, which
  includes onnxruntime's first-run allocations) and warm (best of three repeats), on
  2,000 WikiQA sentences (29 tokens on average, [CLS] and [SEP] included) and 2,000 short
  generated ones (16 tokens); plus texts per CPU-second, which other processes on a
  shared machine do not distort;
* agreement: ROC AUC, MAP and MRR on WikiQA and the cut points in ``calibration.json``.

Without the WikiQA file, only the generated sentences are timed and the agreement part
is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import calibrate_local_judge as calibration_script  # noqa: E402

from framekit.judges.local.embedder import LocalEmbedder  # noqa: E402
from framekit.judges.local.methods import load_calibration  # noqa: E402

DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "local_judge.json"
_LOAD_SNIPPET = (
    "import time; t = time.perf_counter(); "
    "from framekit.judges.local.embedder import LocalEmbedder; LocalEmbedder(); "
    "print(time.perf_counter() - t)"
)


def model_load_seconds(repeats: int = 3) -> float:
    """Best time to import and build the embedder in a fresh interpreter."""
    times = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", _LOAD_SNIPPET],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return min(times)


def short_sentences(count: int) -> list[str]:
    """Generated sentences of 7 to 12 words (16 tokens on average), all different."""
    subjects = [
        "The committee",
        "A small river",
        "Her latest novel",
        "The old bridge",
        "This protein",
        "The city council",
        "An early engine",
        "The museum",
    ]
    verbs = [
        "was founded in",
        "flows through",
        "is set in",
        "was rebuilt after",
        "binds to",
        "voted on",
        "was designed by",
        "opened in",
    ]
    objects = [
        "the spring of 1887.",
        "a narrow valley in the north.",
        "a coastal town.",
        "the great flood of the century.",
        "receptors in the liver.",
        "a plan to widen the main road.",
        "two brothers from Ohio.",
        "a former bank.",
    ]
    texts = [
        f"{subjects[i % 8]} {verbs[(i // 8) % 8]} {objects[(i // 64) % 8]}" for i in range(count)
    ]
    return [f"{text} ({i})" for i, text in enumerate(texts)]


def throughput(texts: list[str]) -> dict[str, Any]:
    """Texts per second of wall time, and per second of this process's CPU time.

    On a shared machine the wall-clock figure moves with everyone else's load; CPU time
    spent per text does not, so ``cpu_texts_per_s * cores`` estimates an idle machine.
    """
    embedder = LocalEmbedder()
    started = time.perf_counter()
    embedder.embed(texts)
    cold = len(texts) / (time.perf_counter() - started)
    warm, cpu = [], []
    for _ in range(3):
        started, cpu_started = time.perf_counter(), time.process_time()
        embedder.embed(texts)
        warm.append(len(texts) / (time.perf_counter() - started))
        cpu.append(len(texts) / (time.process_time() - cpu_started))
    return {
        "cold_texts_per_s": round(cold, 1),
        "warm_texts_per_s": round(max(warm), 1),
        "warm_texts_per_s_all": [round(w, 1) for w in warm],
        "cpu_texts_per_s": round(max(cpu), 1),
        "batch_tokens": embedder.batch_tokens,
        "threads": embedder.threads,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=calibration_script.DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    samples = {"short_generated_sentences": short_sentences(args.texts)}
    if args.data.is_file():
        rows = calibration_script.read_wikiqa(args.data)
        samples["wikiqa_sentences"] = [r["Sentence"] for r in rows[: args.texts]]
    shipped = load_calibration()
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        },
        "model_id": LocalEmbedder.default().model_id,
        "model_load_s": round(model_load_seconds(), 3),
        "throughput": {
            name: {"texts": len(texts), **throughput(texts)} for name, texts in samples.items()
        },
        "cut_points": {
            "relevance_binary": list(shipped.relevance_binary.cuts),
            "relevance_three": list(shipped.relevance_three.cuts),
            "relevance_five": list(shipped.relevance_five.cuts),
            "coherence_five": list(shipped.coherence_five.cuts),
        },
    }
    if args.data.is_file():
        measured = calibration_script.calibrate(args.data)
        relevance = measured["relevance"]
        result["wikiqa"] = {
            "roc_auc": relevance["roc_auc"],
            "map": relevance["map"],
            "mrr": relevance["mrr"],
            "combination_auc": relevance["combination"]["roc_auc_by_rule"],
            "sentence_order_coherence_auc": measured["coherence_sentence_order"]["roc_auc"],
            "measured_cut_points_match_shipped": measured["relevance"]["scales"]
            == shipped.source["relevance"]["scales"],
        }
    else:
        result["wikiqa"] = f"skipped: {args.data} not found"

    result["machine"]["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
