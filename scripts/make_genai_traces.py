"""Write one set of traces three ways with the OpenTelemetry SDK: OpenInference attributes,
the current GenAI conventions (``gen_ai.input.messages`` ...) and the older ones
(``gen_ai.prompt.N.*``, OpenLLMetry's ``traceloop.*``), so tests can check that all three
load to the same table.

    python scripts/make_genai_traces.py OUT_DIR     # writes *.otlp.jsonl and *.console.json

Each convention is written as OTLP/JSON lines (the Collector file exporter's format,
``resourceSpans`` with hex ids) and as ``ConsoleSpanExporter`` dumps. Ids come from a
seeded generator and times are fixed, so the files are the same on every run.

Traces:
- ``rag``: a session's second turn: an agent root with the question and answer, a
  retrieval of two documents, a chat call with a system prompt and an earlier turn.
- ``hello``: a root with no input or output: both come from its chat call.
- ``agent``: a tool that looks a price up and a side-effect tool (``send_email``).
- ``search``: a chat call that uses a web-search tool.
"""

from __future__ import annotations

import base64
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

CONVENTIONS = ("openinference", "genai", "genai_older")
T0 = 1_740_830_400 * 10**9  # 2025-03-01T12:00:00Z in ns

DOC_WARRANTY = "The X200 comes with a two-year limited warranty covering parts and labour."
DOC_RETURNS = "Returns are accepted within 30 days of delivery."
SEARCH_ANSWER = "The X300 was released in March 2024, according to the maker's site."

Messages = Sequence[tuple[str, str]]


class _SeededIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64)

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128)


# --- attributes of each kind of span, per convention -------------------------------------


def _root(
    conv: str, question: str | None, answer: str | None, session: str | None
) -> dict[str, Any]:
    if conv == "openinference":
        attrs: dict[str, Any] = {"openinference.span.kind": "AGENT"}
        if question is not None:
            attrs |= {"input.value": question, "output.value": answer or ""}
        if session:
            attrs["session.id"] = session
        return attrs
    if conv == "genai":
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
        if question is not None:
            attrs["gen_ai.input.messages"] = _current([("user", question)])
            attrs["gen_ai.output.messages"] = _current([("assistant", answer or "")])
        if session:
            attrs["gen_ai.conversation.id"] = session
        return attrs
    attrs = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "support"}
    if question is not None:
        attrs["traceloop.entity.input"] = json.dumps({"question": question})
        attrs["traceloop.entity.output"] = json.dumps({"answer": answer})
    if session:
        attrs["gen_ai.conversation.id"] = session
    return attrs


def _current(messages: Messages, calls: Sequence[str] = ()) -> str:
    items: list[dict[str, Any]] = [
        {"role": role, "parts": [{"type": "text", "content": text}]} for role, text in messages
    ]
    for name in calls:
        items[-1]["parts"].append(
            {"type": "tool_call", "id": f"call-{name}", "name": name, "arguments": {}}
        )
    return json.dumps(items)


def _chat(
    conv: str, inputs: Messages, output: str, tools: Sequence[str] = (), calls: Sequence[str] = ()
) -> dict[str, Any]:
    if conv == "openinference":
        attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini"}
        for i, (role, text) in enumerate(inputs):
            attrs |= {f"llm.input_messages.{i}.message.role": role,
                      f"llm.input_messages.{i}.message.content": text}  # fmt: skip
        attrs |= {"llm.output_messages.0.message.role": "assistant",
                  "llm.output_messages.0.message.content": output}  # fmt: skip
        for i, name in enumerate(calls):
            attrs[f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function.name"] = name
        for i, name in enumerate(tools):
            attrs[f"llm.tools.{i}.tool.json_schema"] = json.dumps({"type": name})
        return attrs
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
    system = [text for role, text in inputs if role == "system"]
    rest = [(role, text) for role, text in inputs if role != "system"]
    if conv == "genai":
        if system:
            attrs["gen_ai.system_instructions"] = json.dumps(
                [{"type": "text", "content": system[0]}]
            )
        attrs["gen_ai.input.messages"] = _current(rest)
        attrs["gen_ai.output.messages"] = _current([("assistant", output)], calls)
        if tools:
            attrs["gen_ai.tool.definitions"] = json.dumps([{"type": name} for name in tools])
        return attrs
    for i, (role, text) in enumerate(inputs):
        attrs |= {f"gen_ai.prompt.{i}.role": role, f"gen_ai.prompt.{i}.content": text}
    attrs |= {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": output}
    for i, name in enumerate(calls):
        attrs[f"gen_ai.completion.0.tool_calls.{i}.name"] = name
    return attrs


def _retrieval(conv: str, query: str, docs: Sequence[str]) -> dict[str, Any]:
    if conv == "openinference":
        attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": query}
        for i, doc in enumerate(docs):
            attrs[f"retrieval.documents.{i}.document.content"] = doc
        return attrs
    documents = [{"id": f"doc-{i}", "content": doc} for i, doc in enumerate(docs)]
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.query.text": query,
        "gen_ai.retrieval.documents": json.dumps(documents),
    }


def _tool(conv: str, name: str, arguments: dict[str, Any], result: Any) -> dict[str, Any]:
    args, out = json.dumps(arguments), json.dumps(result)
    if conv == "openinference":
        return {"openinference.span.kind": "TOOL", "tool.name": name, "input.value": args,
                "output.value": out}  # fmt: skip
    if conv == "genai":
        return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": out}  # fmt: skip
    return {"traceloop.span.kind": "tool", "traceloop.entity.name": name,
            "traceloop.entity.input": args, "traceloop.entity.output": out}  # fmt: skip


# --- the traces --------------------------------------------------------------------------

Step = tuple[str, Callable[[str], dict[str, Any]]]  # span name, attributes per convention

TRACES: list[tuple[Step, list[Step]]] = [
    (
        ("rag", lambda c: _root(c, "How long is the X200 warranty?", "Two years.", "s-1")),
        [
            ("retrieve", lambda c: _retrieval(c, "X200 warranty length", [DOC_WARRANTY, DOC_RETURNS])),
            ("chat gpt-4o-mini", lambda c: _chat(c, [
                ("system", "Answer from the context."),
                ("user", "Do you ship to Canada?"),
                ("assistant", "Yes, we ship to Canada."),
                ("user", f"Context: {DOC_WARRANTY}\nQuestion: How long is the X200 warranty?"),
            ], "Two years.")),
        ],
    ),
    (
        ("hello", lambda c: _root(c, None, None, None)),
        [("chat gpt-4o-mini", lambda c: _chat(c, [("system", "Be brief."), ("user", "Hi there")],
                                            "Hello! How can I help?"))],
    ),
    (
        ("agent", lambda c: _root(c, "Email me the X300 price", "Sent: the X300 costs $349.", None)),
        [
            ("price_lookup", lambda c: _tool(c, "price_lookup", {"sku": "X300"}, {"price": 349})),
            ("send_email", lambda c: _tool(c, "send_email", {"to": "me@example.com"}, "queued")),
            ("chat gpt-4o-mini", lambda c: _chat(c, [("user", "Email me the X300 price")],
                                                "Sent: the X300 costs $349.")),
        ],
    ),
    (
        ("search", lambda c: _root(c, "When did the X300 come out?", SEARCH_ANSWER, None)),
        [("chat gpt-4o-mini", lambda c: _chat(c, [("user", "When did the X300 come out?")],
                                            SEARCH_ANSWER, tools=["web_search"], calls=["web_search"]))],
    ),
]  # fmt: skip


def record(convention: str, seed: int = 17) -> list[ReadableSpan]:
    """The traces as finished SDK spans, attributes in one convention."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}")
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-bot"}), id_generator=_SeededIds(seed)
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("framekit.fixtures")
    for t, ((root_name, root_attrs), steps) in enumerate(TRACES):
        start = T0 + t * 60 * 10**9
        root = tracer.start_span(root_name, attributes=root_attrs(convention), start_time=start)
        parent = trace.set_span_in_context(root)
        for s, (name, attrs) in enumerate(steps, start=1):
            began = start + s * 10**9
            span = tracer.start_span(name, parent, attributes=attrs(convention), start_time=began)
            span.end(end_time=began + 5 * 10**8)
        root.end(end_time=start + 30 * 10**9)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest``: protobuf's JSON, ids as hex (the spec's)."""
    request = MessageToDict(encode_spans(spans))

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in node:
                    node[key] = base64.b64decode(node[key]).hex()
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(request)
    return request


def write(directory: Path, convention: str, seed: int = 17) -> tuple[Path, Path]:
    """``{convention}.otlp.jsonl`` (one request per line) and ``{convention}.console.json``."""
    spans = record(convention, seed)
    directory.mkdir(parents=True, exist_ok=True)
    otlp = directory / f"{convention}.otlp.jsonl"
    # Two requests, as a Collector flushing twice writes them: a trace may straddle them.
    halves = (spans[: len(spans) // 2], spans[len(spans) // 2 :])
    otlp.write_text("".join(json.dumps(otlp_json(h)) + "\n" for h in halves), encoding="utf-8")
    console = directory / f"{convention}.console.json"
    console.write_text("".join(s.to_json() + "\n" for s in spans), encoding="utf-8")
    return otlp, console


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "genai-traces")
    for convention in CONVENTIONS:
        for path in write(out, convention):
            print(f"wrote {path}")
