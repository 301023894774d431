"""Loading a large span export: spans/s and peak memory, in memory vs spilled by trace.

    python benchmarks/bench_traces.py [--spans 1000000]

Writes an OTLP/JSON-lines export (the Collector file exporter's format: one request of
1,000 spans per line; half the traces in OpenInference attributes, half in the current
GenAI conventions; five spans per trace: agent root, retrieval of three documents, tool,
chat call with messages, side-effect tool), then loads it with ``fk.traces.load`` in a
fresh process per case and reports that process's peak RSS and spans per second:

- ``small`` (1/10 of the spans) grouped in memory (the spill threshold raised above it);
- ``full`` with the default threshold.

Bounded memory shows as ``full`` peak RSS close to ``small`` peak RSS although it reads
10x the spans; what still grows is the result table (one row per trace).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import write_results  # noqa: E402

SPANS_PER_TRACE = 5
SPANS_PER_LINE = 1000


def _attr(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _trace_spans(t: int) -> list[dict[str, Any]]:
    trace_id = f"{t:032x}"
    start = 1_740_830_400_000_000_000 + t * 1_000_000_000
    question = f"What is the warranty of product {t}?"
    answer = f"Product {t} has a {t % 5 + 1}-year warranty."
    docs = [f"Product {t} document {d}: warranty terms, returns and care." for d in range(3)]
    genai = t % 2 == 1

    def span(n: int, name: str, attrs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "traceId": trace_id,
            "spanId": f"{t * 8 + n:016x}",
            "parentSpanId": "" if n == 0 else f"{t * 8:016x}",
            "name": name,
            "startTimeUnixNano": str(start + n * 1000),
            "endTimeUnixNano": str(start + n * 1000 + 500),
            "attributes": attrs,
        }

    if genai:
        messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}])
        output = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])
        return [
            span(0, "invoke_agent support", [_attr("gen_ai.operation.name", "invoke_agent"),
                 _attr("gen_ai.input.messages", messages), _attr("gen_ai.output.messages", output)]),
            span(1, "retrieval", [_attr("gen_ai.operation.name", "retrieval"),
                 _attr("gen_ai.retrieval.query.text", question),
                 _attr("gen_ai.retrieval.documents", json.dumps([{"id": str(i), "content": d}
                                                                for i, d in enumerate(docs)]))]),
            span(2, "execute_tool lookup", [_attr("gen_ai.operation.name", "execute_tool"),
                 _attr("gen_ai.tool.name", "lookup"), _attr("gen_ai.tool.call.result", docs[0])]),
            span(3, "chat", [_attr("gen_ai.operation.name", "chat"),
                 _attr("gen_ai.input.messages", messages), _attr("gen_ai.output.messages", output)]),
            span(4, "execute_tool send_email", [_attr("gen_ai.operation.name", "execute_tool"),
                 _attr("gen_ai.tool.name", "send_email"), _attr("gen_ai.tool.call.result", "ok")]),
        ]  # fmt: skip
    retrieval = [_attr("openinference.span.kind", "RETRIEVER"), _attr("input.value", question)]
    retrieval += [_attr(f"retrieval.documents.{i}.document.content", d) for i, d in enumerate(docs)]
    return [
        span(0, "agent", [_attr("openinference.span.kind", "AGENT"), _attr("input.value", question),
             _attr("output.value", answer)]),
        span(1, "retrieve", retrieval),
        span(2, "lookup", [_attr("openinference.span.kind", "TOOL"), _attr("output.value", docs[0])]),
        span(3, "llm", [_attr("openinference.span.kind", "LLM"),
             _attr("llm.input_messages.0.message.role", "user"),
             _attr("llm.input_messages.0.message.content", question),
             _attr("llm.output_messages.0.message.role", "assistant"),
             _attr("llm.output_messages.0.message.content", answer)]),
        span(4, "send_email", [_attr("openinference.span.kind", "TOOL"), _attr("output.value", "ok")]),
    ]  # fmt: skip


def write_export(path: Path, spans: int) -> None:
    traces = spans // SPANS_PER_TRACE
    with path.open("w", encoding="utf-8") as out:
        batch: list[dict[str, Any]] = []
        for t in range(traces):
            batch += _trace_spans(t)
            if len(batch) >= SPANS_PER_LINE:
                request = {"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}
                out.write(json.dumps(request) + "\n")
                batch = []
        if batch:
            out.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")


_CHILD = """
import json, resource, sys, time
import framekit.traces as traces
import framekit.traces._spill as spill
path, in_memory = sys.argv[1], int(sys.argv[2])
if in_memory:
    spill._IN_MEMORY = 10**9
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
frame = traces.load(path)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": frame.height, "seconds": seconds, "peak_rss_mb": peak / 1024,
                  "rss_at_start_mb": before / 1024, "result_mb": frame.estimated_size() / 2**20}))
"""


def measure(path: Path, spans: int, in_memory: bool) -> dict[str, Any]:
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(int(in_memory))],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["spans"] = spans
    figures["spans_per_s"] = round(spans / figures["seconds"])
    figures["file_mb"] = round(path.stat().st_size / 2**20, 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument(
        "--exports", metavar="DIR", help="keep the exports here and reuse them if present"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="framekit-bench-traces-") as tmp:
        where = Path(args.exports or tmp)
        where.mkdir(parents=True, exist_ok=True)
        small, full = where / "small.jsonl", where / "full.jsonl"
        started = time.perf_counter()
        for path, spans in ((small, args.spans // 10), (full, args.spans)):
            if not path.exists():
                write_export(path, spans)
        print(f"exports ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        cases = {
            "small_in_memory": measure(small, args.spans // 10, in_memory=True),
            "full_spilled": measure(full, args.spans, in_memory=False),
        }
    full_case, small_case = cases["full_spilled"], cases["small_in_memory"]
    write_results(
        "traces",
        {
            "format": "OTLP/JSON lines, 1000 spans per request, half OpenInference half GenAI",
            "cases": cases,
            "peak_rss_ratio_full_over_small": round(
                full_case["peak_rss_mb"] / small_case["peak_rss_mb"], 2
            ),
            "span_ratio_full_over_small": 10,
            "spans_per_s_ratio_full_over_small": round(
                full_case["spans_per_s"] / small_case["spans_per_s"], 2
            ),
        },
    )


if __name__ == "__main__":
    main()
