"""Write framekit/data/sample_traces.jsonl: a small, project-written span export.

Twenty traces of a travel-guide RAG assistant, one OpenInference span per line in the
shape Phoenix exports (``context``, ``parent_id``, ``span_kind``, dotted ``attributes``).
They are written to exercise the evaluators: most answers are good, a few are wrong
(#4), off-topic (#11) or incoherent (#19), one retrieval misses (#5), one trace failed
(#13). There are two multi-turn sessions, two rerankers, two tools and a trace without
retrieval. The output is deterministic: rerunning the script rewrites the same bytes.

Usage: python scripts/make_sample_traces.py [destination]
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

DESTINATION = Path(__file__).resolve().parent.parent / "framekit" / "data" / "sample_traces.jsonl"
START = datetime(2025, 1, 15, 9, 0, tzinfo=timezone.utc)
SYSTEM = "You are a travel guide. Answer from the context; say so when it is missing."

LOUVRE = "The Mona Lisa is displayed in the Louvre Museum in Paris."
ORSAY = "The Musee d'Orsay holds impressionist paintings by Monet and Renoir."
POMPIDOU = "The Centre Pompidou houses the National Museum of Modern Art."
SAGRADA = "The Sagrada Familia is a basilica in Barcelona designed by Antoni Gaudi."
GAUDI = "Antoni Gaudi also designed Park Guell and Casa Batllo."
SEVILLE = "Seville Cathedral is the largest Gothic cathedral in the world."

# question, retriever query, documents, answer, and per-trace extras
TRACES: list[dict[str, Any]] = [
    {"q": "When was the Eiffel Tower built?", "query": "When was the Eiffel Tower built?",
     "docs": ["The Eiffel Tower was built from 1887 to 1889 as the entrance to the 1889 World's Fair.",
              "Gustave Eiffel's engineering company designed and built the tower."],
     "a": "It was built between 1887 and 1889 for the 1889 World's Fair.", "session": "paris"},
    {"q": "How tall is it?", "query": "Eiffel Tower height",
     "docs": ["The Eiffel Tower is 330 metres tall including its antennas.",
              "The tower has three levels open to visitors."],
     "a": "It is about 330 metres tall, antennas included.", "session": "paris"},
    {"q": "Can I walk up the stairs?", "query": "Eiffel Tower stairs",
     "docs": ["Visitors can climb 674 steps from the ground to the second floor.",
              "The top floor can only be reached by lift."],
     "a": "Yes: 674 steps take you to the second floor; the top is reached by lift.",
     "session": "paris"},
    {"q": "What is the capital of Australia?", "query": "capital of Australia",
     "docs": ["Canberra is the capital city of Australia.",
              "Sydney is the largest city in Australia."],
     "a": "The capital of Australia is Sydney."},
    {"q": "How long is the Great Wall of China?", "query": "Great Wall of China length",
     "docs": ["The Great Barrier Reef is the largest coral reef system in the world.",
              "Tickets to the Forbidden City must be booked online in advance."],
     "a": "My sources do not give the length of the Great Wall."},
    {"q": "Hi! What can you help me with?", "docs": None,
     "a": "I can answer questions about landmarks, travel rules and the local weather."},
    {"q": "What's the weather in Rome today?", "docs": None,
     "tool": ("get_weather", {"city": "Rome"}, {"city": "Rome", "forecast": "sunny", "high_c": 24}),
     "a": "It is sunny in Rome today, with a high of 24 C."},
    {"q": "Which museum in Paris has the Mona Lisa?", "query": "Mona Lisa museum Paris",
     "docs": [ORSAY, LOUVRE, POMPIDOU], "rerank": [LOUVRE, ORSAY],
     "a": "The Mona Lisa hangs in the Louvre."},
    {"q": "How old is Machu Picchu?", "query": "Machu Picchu age",
     "docs": ["Machu Picchu was built in the 15th century for the Inca emperor Pachacuti.",
              "Machu Picchu was abandoned during the Spanish conquest."],
     "a": "It dates from the 15th century, so it is almost 600 years old."},
    {"q": "Do Canadians need a visa to visit Japan?", "query": "Japan visa Canadian citizens",
     "docs": ["Canadian citizens can visit Japan without a visa for up to 90 days as tourists."],
     "a": "No: Canadians can stay up to 90 days as tourists without a visa."},
    {"q": "What currency is used in Switzerland?", "query": "Switzerland currency",
     "docs": ["Switzerland uses the Swiss franc (CHF)."],
     "a": "Switzerland is famous for its chocolate and its watches."},
    {"q": "How much is 100 euros in yen?", "docs": None,
     "tool": ("convert_currency", {"amount": 100, "from": "EUR", "to": "JPY"},
              {"result": 16250, "rate": 162.5}),
     "a": "100 euros is about 16,250 yen at today's rate."},
    {"q": "When is the best time to visit Iceland?", "query": "best time to visit Iceland",
     "docs": ["Northern lights are visible in Iceland from September to March."],
     "a": None},
    {"q": "How tall is the Statue of Liberty?", "query": "Statue of Liberty height",
     "docs": ["The Statue of Liberty is 93 metres tall from the ground to the torch."],
     "a": "It is 93 metres from the ground to the tip of the torch.", "session": "nyc"},
    {"q": "Who gave it to the United States?", "query": "Statue of Liberty gift",
     "docs": ["The statue was a gift from the people of France, dedicated in 1886."],
     "a": "It was a gift from the people of France, dedicated in 1886.", "session": "nyc"},
    {"q": "What language is spoken in Brazil?", "query": "Brazil language", "json": True,
     "docs": ["Portuguese is the official language of Brazil."],
     "a": "Portuguese is the official language of Brazil."},
    {"q": "Where is the Sagrada Familia?", "query": "Sagrada Familia location",
     "docs": [GAUDI, SEVILLE, SAGRADA], "rerank": [SAGRADA],
     "a": "It is in Barcelona, Spain."},
    {"q": "How many steps lead to the top of Big Ben?", "query": "Big Ben steps",
     "docs": ["The Elizabeth Tower, which houses Big Ben, has 334 steps up to the belfry."],
     "a": "There are 334 steps up to the belfry of the Elizabeth Tower."},
    {"q": "What is the tallest mountain in Africa?", "query": "tallest mountain Africa",
     "docs": ["Mount Kilimanjaro in Tanzania is the highest mountain in Africa at 5,895 metres."],
     "a": "Kilimanjaro yes but the tallest, no, is metres 5,895 the Tanzania of mountain."},
    {"q": "Is the Colosseum open on Mondays?", "query": "Colosseum opening days",
     "docs": ["The Colosseum is open every day except 25 December and 1 January."],
     "a": "Yes, it opens every day except Christmas Day and New Year's Day."},
]  # fmt: skip


def _hex(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Trace:
    """Appends the spans of one trace, each starting 5 ms after the previous one ended."""

    def __init__(self, n: int, spans: list[dict[str, Any]]) -> None:
        self.n, self.spans = n, spans
        self.trace_id = _hex(f"trace-{n}", 32)
        self.clock = START + timedelta(minutes=7 * n)

    def add(self, kind: str, name: str, parent: str | None, ms: int, attrs: dict[str, Any],
            status: str = "OK") -> str:  # fmt: skip
        span_id = _hex(f"span-{self.n}-{name}", 16)
        begin = self.clock + timedelta(milliseconds=5)
        self.clock = begin + timedelta(milliseconds=ms)
        self.spans.append({
            "name": name, "context": {"trace_id": self.trace_id, "span_id": span_id},
            "parent_id": parent, "span_kind": kind, "start_time": _time(begin),
            "end_time": _time(self.clock), "status_code": status,
            "attributes": {"openinference.span.kind": kind, **attrs},
        })  # fmt: skip
        return span_id


def build_spans() -> list[dict[str, Any]]:
    """Every span of the twenty traces, in the order they are written."""
    spans: list[dict[str, Any]] = []
    history: dict[str, list[tuple[str, str]]] = {}
    for n, trace in enumerate(TRACES, start=1):
        out = _Trace(n, spans)
        session = trace.get("session")
        root_attrs: dict[str, Any] = {"session.id": f"session-{session}"} if session else {}
        if trace.get("json"):
            root_attrs["input.value"] = json.dumps({"question": trace["q"]})
            root_attrs["input.mime_type"] = "application/json"
        else:
            root_attrs["input.value"] = trace["q"]
        if trace["a"] is not None:
            answer = trace["a"]
            root_attrs["output.value"] = (
                json.dumps({"answer": answer}) if trace.get("json") else answer
            )
        status = "OK" if trace["a"] is not None else "ERROR"
        root = out.add("CHAIN", "travel_guide", None, 0, root_attrs, status)
        root_span = spans[-1]
        prompt = trace["q"]
        if trace["docs"] is not None:
            docs = trace["docs"]
            out.add("RETRIEVER", "retrieve", root, 40,
                    {"input.value": trace["query"], **_documents("retrieval.documents", docs)})  # fmt: skip
            if "rerank" in trace:
                docs = trace["rerank"]
                out.add("RERANKER", "rerank", root, 25,
                        {"reranker.query": trace["query"], "reranker.top_k": len(docs),
                         **_documents("reranker.output_documents", docs)})  # fmt: skip
            prompt = "Context:\n" + "\n".join(docs) + f"\n\nQuestion: {trace['q']}"
        if "tool" in trace:
            tool, arguments, result = trace["tool"]
            out.add("TOOL", tool, root, 120, {"tool.name": tool, "input.value": json.dumps(arguments),
                    "output.value": json.dumps(result)})  # fmt: skip
            prompt = f"Tool {tool} returned {json.dumps(result)}\n\nQuestion: {trace['q']}"
        earlier = history.setdefault(session, []) if session else []
        llm_attrs: dict[str, Any] = {
            "llm.model_name": "gpt-4o-mini",
            **_messages("input", [("system", SYSTEM), *earlier, ("user", prompt)]),
        }
        if trace["a"] is not None:
            llm_attrs.update(_messages("output", [("assistant", trace["a"])]))
            llm_attrs["output.value"] = trace["a"]
        out.add("LLM", "chat_completion", root, 800, llm_attrs, status)
        earlier += [("user", trace["q"]), ("assistant", trace["a"] or "")]
        root_span["end_time"] = _time(out.clock + timedelta(milliseconds=5))  # ends last
    return spans


def _documents(prefix: str, docs: list[str]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        attrs[f"{prefix}.{i}.document.id"] = _hex(doc, 8)
        attrs[f"{prefix}.{i}.document.content"] = doc
        attrs[f"{prefix}.{i}.document.score"] = round(0.91 - 0.07 * i, 2)
    return attrs


def _messages(direction: str, messages: list[tuple[str, str]]) -> dict[str, str]:
    attrs = {}
    for i, (role, content) in enumerate(messages):
        attrs[f"llm.{direction}_messages.{i}.message.role"] = role
        attrs[f"llm.{direction}_messages.{i}.message.content"] = content
    return attrs


def render() -> str:
    """The file's text: one compact JSON span per line."""
    lines = (json.dumps(span, separators=(",", ":"), ensure_ascii=False) for span in build_spans())
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    destination = Path(argv[1]) if len(argv) > 1 else DESTINATION
    text = render()
    destination.write_text(text, encoding="utf-8")
    print(f"wrote {destination} ({len(TRACES)} traces, {len(text.encode()) / 1024:.1f} KB)")


if __name__ == "__main__":
    main(sys.argv)
