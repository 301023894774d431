"""Where the offline judge's time goes, operator by operator (issue 25's offline target).

The offline judge embeds with all-MiniLM-L6-v2 on onnxruntime. This script runs the
shipped model over the WikiQA dev sentences (generated sentences without the shared
data) with onnxruntime's own profiler on, in the batches the embedder makes
(``length_batches``, one thread, the embedder's session settings), and sums the kernels'
time by operator type. The share of the float32 matrix products bounds what any change
that keeps their arithmetic (and so the scores) can gain: ``1 / share`` if everything
else took no time.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_offline_ops.py [--texts 800]

Writes benchmarks/results/offline_ops.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import write_results  # noqa: E402
from benchmarks.bench_offline_judge import (  # noqa: E402
    calibration_script,
    shared_data,
    short_sentences,
)
from framekit.judges.local.embedder import LocalEmbedder, length_batches  # noqa: E402


def sentences(limit: int) -> tuple[str, list[str]]:
    data = shared_data(None)
    wikiqa = data / "wikiqa-dev.tsv" if data else None
    if wikiqa is not None and wikiqa.is_file():
        rows = calibration_script.read_wikiqa(wikiqa)
        return "wikiqa_dev_sentences", [r["Sentence"] for r in rows][:limit]
    return "short_generated_sentences", short_sentences(limit)


def profile(texts: list[str], workdir: Path) -> dict[str, float]:
    """Microseconds per operator type over every batch of ``texts``."""
    import onnxruntime as ort

    embedder = LocalEmbedder(threads=1)
    ids = embedder.token_ids(texts)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = str(workdir / "ort")
    session = ort.InferenceSession(str(embedder.model_path), options, ["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}
    for rows in length_batches(lengths, embedder.batch_tokens):
        width = int(lengths[rows].max())
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        for row, r in enumerate(rows):
            input_ids[row, : lengths[r]] = ids[r]
        mask = (np.arange(width)[None, :] < lengths[rows][:, None]).astype(np.int64)
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    by_op: dict[str, float] = defaultdict(float)
    for event in events:
        args = event.get("args") or {}
        if (
            event.get("cat") == "Node"
            and "op_name" in args
            and event["name"].endswith("_kernel_time")
        ):
            by_op[args["op_name"]] += float(event.get("dur", 0))
    return dict(by_op)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=800)
    args = parser.parse_args()
    name, texts = sentences(args.texts)
    with tempfile.TemporaryDirectory(prefix="fk-ops-") as tmp:
        by_op = profile(texts, Path(tmp))
    total = sum(by_op.values())
    shares = {op: round(us / total, 4) for op, us in sorted(by_op.items(), key=lambda i: -i[1])}
    products = sum(us for op, us in by_op.items() if "MatMul" in op) / total
    figures: dict[str, Any] = {
        "texts": {"source": name, "count": len(texts)},
        "kernel_time_s": round(total / 1e6, 3),
        "share_by_operator": shares,
        # Every float32 matrix product (MatMul, FusedMatMul): what identical scores keep.
        "matrix_products_share": round(products, 4),
        "at_most_faster_keeping_the_products": round(1 / products, 2),
    }
    print(json.dumps(figures, indent=2))
    write_results("offline_ops", figures)


if __name__ == "__main__":
    main()
