"""Benchmark the offline judge's speed: the embedder before and after, and a whole run.

Usage::

    .venv/bin/python benchmarks/bench_offline_judge.py [--data /work/shared/data]
        [--rounds 5] [--e2e-rounds 3] [--skip settings,budgets,busy,e2e]
        [--before-commit 89ec818]

Prints its figures and writes them to ``benchmarks/results/offline_judge.json``. The
machine is shared, so every comparison alternates its sides round by round (A B B A ...)
in the same run and reports the median and the min-max of each side, with the load
average (``os.getloadavg()``, what ``uptime`` prints) at each measurement. Texts per
CPU-second are reported beside texts per second: other processes move them far less.

* ``embedding``: texts per second of the embedder before this work
  (``benchmarks/_embedder_before.py``: one onnxruntime session over every core, batches
  of 32 texts) and now (length budgets, one single-threaded call per core), on the WikiQA
  dev sentences and on 2,000 short generated ones; ``identical`` compares the vectors,
  the WikiQA pair cosines and the labels those cosines get;
* ``embedding_beside_a_busy_process``: the same while another process spins on one core;
* ``settings``: what each onnxruntime choice is worth (graph optimisation level, intra-op
  threads over the cores versus one call per core, spinning), quiet and beside a busy
  process, on 800 WikiQA sentences;
* ``batch_tokens``: the token budget per batch, per CPU-second (one thread), on WikiQA
  sentences and SummEval summaries;
* ``end_to_end``: ``fk.evaluate_dataframe`` of 6,116 WikiQA pairs with three offline
  evaluators and a fresh cache, in a fresh interpreter each time: the ``framekit`` tree of
  ``--before-commit`` (``git archive``; default: main before this work) against this
  tree, and their output columns compared.

Without the WikiQA file only the generated sentences are timed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import calibrate_local_judge as calibration_script  # noqa: E402

from benchmarks._common import before_tree, write_results  # noqa: E402
from benchmarks._embedder_before import BeforeEmbedder  # noqa: E402
from framekit.judges.local.embedder import LocalEmbedder, _cores  # noqa: E402
from framekit.judges.local.methods import load_calibration  # noqa: E402

DATA_CANDIDATES = (Path("/work/shared/data"), ROOT.parent / "shared" / "data")
# The bar: texts per second at least 2.5 times the code before, in the same run.
TARGET_RATIO = 2.5
# main just before this work (its embedder is the one _embedder_before.py keeps): the
# "before" side of the end-to-end run. A fixed commit, so the figure still means the same
# once this branch is merged.
BEFORE_COMMIT = "0ec707582e7fe3ca2519f0354f2a2ff96fe0d805"
# One run of the end-to-end measurement, in a fresh interpreter that imports framekit
# from the tree on its sys.path (the before commit's or this one): the frame is built
# here, the same for both.
_E2E_WORKER = r"""
import csv, json, os, sys, time
tree, data, cache, out, pairs = sys.argv[1:6]
sys.path.insert(0, tree)
import polars as pl
import framekit as fk
from framekit.evaluators import ContextRelevance, ResponseRelevance, RetrievalRelevance
with open(data, encoding="utf-8", newline="") as fh:
    rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
n, total = len(rows), int(pairs)
# The dev file's pairs, then each question again with another question's candidate
# sentence (a hard negative): distinct rows, the same distinct texts.
picks = list(range(n)) + [(i * 7919 + 13) % n for i in range(total - n)]
df = pl.DataFrame({
    "question": [rows[i % n]["Question"] for i in range(total)],
    "sentence": [rows[p]["Sentence"] for p in picks],
}).with_columns(docs=pl.concat_list("sentence"))
evaluators = [ResponseRelevance(), ContextRelevance(), RetrievalRelevance()]
load = os.getloadavg()
started, cpu = time.perf_counter(), time.process_time()
scored = fk.evaluate_dataframe(
    df, evaluators, {"input": "question", "output": "sentence", "context": "docs"},
    judge="local", cache=cache, progress=False,
)
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
stats = fk.last_run()
keep = [f"{e.name}_{c}" for e in evaluators for c in ("score", "label", "explanation", "error")]
scored.select(keep).write_parquet(out)
print(json.dumps({
    "seconds": seconds, "cpu_seconds": cpu, "rows": df.height,
    "distinct_texts": len(set(df["question"]) | set(df["sentence"])),
    "embeddings_computed": stats.embeddings_computed, "failures": stats.failures,
    "load_average": [round(x, 2) for x in load],
    "load_average_after": [round(x, 2) for x in os.getloadavg()],
}))
"""


# ------------------------------------------------------------------------- helpers


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return [round(x, 2) for x in os.getloadavg()]


def spread(values: Sequence[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "all": [round(v, 1) for v in values],
    }


@contextlib.contextmanager
def busy_process() -> Iterator[None]:
    """Another process spinning on one core for as long as the block runs."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let the scheduler see it
        yield
    finally:
        spinner.terminate()
        spinner.wait(timeout=10)


def timed(embed: Callable[[list[str]], Any], texts: list[str]) -> dict[str, Any]:
    load = load_average()
    started, cpu = time.perf_counter(), time.process_time()
    embed(texts)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "texts_per_s": len(texts) / wall,
        "texts_per_cpu_s": len(texts) / cpu,
        "load_average": load,
    }


def alternate(
    sides: Mapping[str, Callable[[list[str]], Any]], texts: list[str], rounds: int
) -> dict[str, Any]:
    """Time each side ``rounds`` times, alternating the order every round (ABBA...)."""
    for embed in sides.values():
        embed(texts[:64])  # first-call allocations of each session stay out of the figures
    names = list(sides)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            runs[name].append(timed(sides[name], texts))
    out: dict[str, Any] = {"texts": len(texts), "rounds": rounds}
    for name in names:
        out[name] = {
            "texts_per_s": spread([m["texts_per_s"] for m in runs[name]]),
            "texts_per_cpu_s": spread([m["texts_per_cpu_s"] for m in runs[name]]),
            "load_average_per_round": [m["load_average"] for m in runs[name]],
        }
    if len(names) == 2:
        first, second = names
        paired = [b["texts_per_s"] / a["texts_per_s"] for a, b in zip(runs[first], runs[second])]
        out[f"{second}_over_{first}"] = {
            "per_round": [round(p, 2) for p in paired],
            "median": round(statistics.median(paired), 2),
            "min": round(min(paired), 2),
            "max": round(max(paired), 2),
        }
    return out


def shared_data(option: Path | None) -> Path | None:
    for candidate in (option,) if option is not None else DATA_CANDIDATES:
        if candidate.is_dir():
            return candidate
    return None


def short_sentences(count: int) -> list[str]:
    """Generated sentences of 7 to 12 words (16 tokens on average), all different."""
    subjects = ["The committee", "A small river", "Her latest novel", "The old bridge",
                "This protein", "The city council", "An early engine", "The museum"]  # fmt: skip
    verbs = ["was founded in", "flows through", "is set in", "was rebuilt after", "binds to",
             "voted on", "was designed by", "opened in"]  # fmt: skip
    objects = ["the spring of 1887.", "a narrow valley in the north.", "a coastal town.",
               "the great flood of the century.", "receptors in the liver.",
               "a plan to widen the main road.", "two brothers from Ohio.", "a former bank."]  # fmt: skip
    texts = [
        f"{subjects[i % 8]} {verbs[(i // 8) % 8]} {objects[(i // 64) % 8]}" for i in range(count)
    ]
    return [f"{text} ({i})" for i, text in enumerate(texts)]


# ------------------------------------------------------------------------- sections


def identical(
    before: BeforeEmbedder, after: LocalEmbedder, rows: list[dict[str, str]]
) -> dict[str, Any]:
    """Vectors, pair cosines and labels of the two embedders on every WikiQA pair."""
    texts = list(dict.fromkeys([r["Question"] for r in rows] + [r["Sentence"] for r in rows]))
    old, new = before.embed(texts), after.embed(texts)
    index = {t: i for i, t in enumerate(texts)}
    q = np.array([index[r["Question"]] for r in rows])
    s = np.array([index[r["Sentence"]] for r in rows])
    cos_old = np.einsum("ij,ij->i", old[q].astype(np.float64), old[s])
    cos_new = np.einsum("ij,ij->i", new[q].astype(np.float64), new[s])
    shipped = load_calibration()
    flips = {
        name: int(
            sum(
                scale.label(a) != scale.label(b) for a, b in zip(cos_old.tolist(), cos_new.tolist())
            )
        )
        for name, scale in (
            ("relevance_binary", shipped.relevance_binary),
            ("relevance_three", shipped.relevance_three),
            ("relevance_five", shipped.relevance_five),
        )
    }
    return {
        "texts": len(texts),
        "pairs": len(rows),
        "max_abs_vector_difference": float(np.abs(old - new).max()),
        "rows_bitwise_equal": int((old == new).all(axis=1).sum()),
        "max_abs_pair_cosine_difference": float(np.abs(cos_old - cos_new).max()),
        "label_flips": flips,
    }


def settings(texts: list[str], rounds: int) -> dict[str, Any]:
    """What each onnxruntime choice is worth, on the new batching."""
    import onnxruntime as ort

    cores = _cores()

    def with_session(threads: int, **options: Any) -> LocalEmbedder:
        embedder = LocalEmbedder(threads=threads)
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = options.get(
            "level", ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        session_options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        session_options.intra_op_num_threads = options.get("intra", 1)
        session_options.inter_op_num_threads = 1
        spin = "1" if options.get("spin") else "0"
        session_options.add_session_config_entry("session.intra_op.allow_spinning", spin)
        embedder._session = ort.InferenceSession(
            str(embedder.model_path), session_options, providers=["CPUExecutionProvider"]
        )
        return embedder

    variants: dict[str, Callable[[], Any]] = {
        "default: one call per core, level ALL": lambda: LocalEmbedder(),
        "one call per core, level EXTENDED": lambda: with_session(
            cores, level=ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        ),
        "one call per core, level BASIC": lambda: with_session(
            cores, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        ),
        f"one call at a time, {cores} intra-op threads, no spinning": lambda: with_session(
            1, intra=cores
        ),
        f"one call at a time, {cores} intra-op threads, spinning": lambda: with_session(
            1, intra=cores, spin=True
        ),
        "before (batches of 32, intra-op threads, no spinning)": lambda: BeforeEmbedder(),
    }
    embedders = {name: make() for name, make in variants.items()}
    sides = {name: e.embed for name, e in embedders.items()}
    out: dict[str, Any] = {"texts": len(texts)}
    for condition in ("quiet", "beside_a_busy_process"):
        with busy_process() if condition != "quiet" else contextlib.nullcontext():
            measured = alternate(sides, texts, rounds)
        out[condition] = {
            name: {
                "texts_per_s": measured[name]["texts_per_s"],
                "texts_per_cpu_s_median": measured[name]["texts_per_cpu_s"]["median"],
                "load_average_per_round": measured[name]["load_average_per_round"],
            }
            for name in sides
        }
    return out


def batch_tokens_sweep(samples: dict[str, list[str]], rounds: int) -> dict[str, Any]:
    """Texts per CPU-second on one thread for each token budget (CPU time: the load of
    other processes moves it far less than the wall clock)."""
    budgets = (64, 128, 256, 512, 1024, 2048)
    out: dict[str, Any] = {}
    for name, texts in samples.items():
        sides = {str(b): LocalEmbedder(batch_tokens=b, threads=1).embed for b in budgets}
        sides["before: 32 texts"] = BeforeEmbedder(threads=1).embed
        measured = alternate(sides, texts, rounds)
        out[name] = {
            "texts": len(texts),
            "texts_per_cpu_s_median": {b: measured[b]["texts_per_cpu_s"]["median"] for b in sides},
        }
    return out


def end_to_end(data: Path, rounds: int, commit: str, pairs: int = 6116) -> dict[str, Any]:
    """A whole offline run, before and after, each in a fresh interpreter and cache."""
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        commits = before_tree(commit, before)
        trees = {"before": before, "after": ROOT}
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        outputs: dict[str, Path] = {}
        for r in range(rounds):
            for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
                cache = Path(tmp) / f"cache-{side}-{r}"
                outputs[side] = Path(tmp) / f"{side}.parquet"
                done = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        _E2E_WORKER,
                        str(trees[side]),
                        str(data),
                        str(cache),
                        str(outputs[side]),
                        str(pairs),
                    ],  # fmt: skip
                    check=True,
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PYTHONPATH": ""},
                )
                runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
        import polars as pl

        old, new = pl.read_parquet(outputs["before"]), pl.read_parquet(outputs["after"])
        same = {column: old[column].equals(new[column]) for column in old.columns}
    first = runs["after"][0]
    paired = [a["seconds"] / b["seconds"] for a, b in zip(runs["before"], runs["after"])]
    return {
        **commits,
        "pairs": first["rows"],
        "evaluators": ["response_relevance", "context_relevance", "retrieval_relevance"],
        "distinct_texts": first["distinct_texts"],
        "embeddings_computed": {side: runs[side][0]["embeddings_computed"] for side in runs},
        "failures": {side: runs[side][0]["failures"] for side in runs},
        "rounds": rounds,
        **{
            side: {
                "seconds": spread([run["seconds"] for run in runs[side]]),
                "cpu_seconds": spread([run["cpu_seconds"] for run in runs[side]]),
                "load_average_per_round": [run["load_average"] for run in runs[side]],
            }
            for side in runs
        },
        "speed_up": {
            "per_round": [round(p, 2) for p in paired],
            "median": round(statistics.median(paired), 2),
        },
        "output_columns_identical": all(same.values()),
        "columns_differing": [column for column, equal in same.items() if not equal],
    }


# ------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=None, help="folder with wikiqa-dev.tsv")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--e2e-rounds", type=int, default=3)
    parser.add_argument("--before-commit", default=BEFORE_COMMIT)
    parser.add_argument("--skip", default="", help="comma-separated sections to leave out")
    parser.add_argument("--name", default="offline_judge", help="results/<name>.json")
    args = parser.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    data = shared_data(args.data)
    wikiqa_file = data / "wikiqa-dev.tsv" if data else None
    rows = (
        calibration_script.read_wikiqa(wikiqa_file)
        if wikiqa_file and wikiqa_file.is_file()
        else None
    )
    samples = {"short_generated_sentences": short_sentences(2000)}
    if rows:
        samples = {"wikiqa_dev_sentences": [r["Sentence"] for r in rows], **samples}

    figures: dict[str, Any] = {
        "load_average_at_start": load_average(),
        "cores_available": _cores(),
    }
    before, after = BeforeEmbedder(), LocalEmbedder()
    figures["after"] = repr(after)
    sides = {"before": before.embed, "after": after.embed}
    figures["embedding"] = {name: alternate(sides, t, args.rounds) for name, t in samples.items()}
    if rows:
        wiki = figures["embedding"]["wikiqa_dev_sentences"]["after_over_before"]
        figures["embedding"]["target"] = {
            "after_over_before_at_least": TARGET_RATIO,
            "met": wiki["median"] >= TARGET_RATIO,
        }
        figures["identical"] = identical(before, after, rows)
        if "busy" not in skip:
            with busy_process():
                figures["embedding_beside_a_busy_process"] = alternate(
                    sides, samples["wikiqa_dev_sentences"], max(3, args.rounds // 2)
                )
    if "settings" not in skip and rows:
        figures["settings"] = settings(samples["wikiqa_dev_sentences"][:800], 3)
    if "budgets" not in skip and rows:
        sweep = {"wikiqa_dev_sentences": samples["wikiqa_dev_sentences"][:800]}
        summeval = data / "summeval-dev.jsonl" if data else None
        if summeval and summeval.is_file():
            with summeval.open(encoding="utf-8") as fh:
                summaries = [json.loads(line)["summary"] for line in fh]
            sweep["summeval_summaries"] = list(dict.fromkeys(summaries))[:300]
        figures["batch_tokens"] = batch_tokens_sweep(sweep, 2)
    if "e2e" not in skip and wikiqa_file and rows:
        figures["end_to_end"] = end_to_end(wikiqa_file, args.e2e_rounds, args.before_commit)
    figures["load_average_at_end"] = load_average()
    write_results(args.name, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
