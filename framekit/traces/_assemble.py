"""Assembling spans into traces, and traces into the rows of ``load``'s two levels."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from framekit.traces._read import _Span
from framekit.traces._text import _json_messages, _role, _value_text

_NOT_HISTORY = frozenset({"system", "developer"})
_NAMED = re.compile(r'"(?:type|name)"\s*:\s*"([^"]+)"')

#: Tools whose output is a side effect's receipt, not retrieved information: left out of
#: ``load(..., level="span")`` (Phoenix's Retrieval Relevance scores retrieval, not actions).
#: Shell-style patterns, matched case-insensitively against the tool's name.
SIDE_EFFECT_TOOLS: tuple[str, ...] = (
    "send_*", "*_send", "write_*", "*_write", "delete_*", "remove_*", "update_*", "create_*",
    "post_*", "publish_*", "schedule_*", "book_*", "cancel_*", "pay_*", "*_payment",
    "place_order", "submit_*", "upload_*", "move_file", "rename_*", "append_*", "notify*",
    "email", "send", "run_command", "shell",
)  # fmt: skip
#: Tool names (patterns) that search the web: an LLM span declaring or calling one of these
#: is a retrieval step at span level (its answer is the retrieved information).
WEB_SEARCH_TOOLS: tuple[str, ...] = (
    "web_search*", "*_web_search*", "websearch*", "search_web*", "google_search*",
    "bing_search*", "brave_search*", "tavily_search*", "browser_search*",
)  # fmt: skip


@dataclass(frozen=True)
class StepRules:
    """Which spans are retrieval steps at span level."""

    skip_tools: tuple[str, ...] = SIDE_EFFECT_TOOLS
    web_search: bool = True

    def skips(self, tool: str) -> bool:
        return _matches(tool, self.skip_tools)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    lowered = name.strip().lower()
    return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)


def _searches_web(attrs: Mapping[str, Any]) -> bool:
    """An LLM span that declares a web-search tool or calls one."""
    for key, value in attrs.items():
        if key.endswith(".tool_call.function.name") and key.startswith("llm.output_messages."):
            names: Iterable[str] = [str(value)]
        elif (key.startswith("llm.tools.") and key.endswith(".tool.json_schema")) or (
            key == "llm.invocation_parameters"
        ):
            names = _NAMED.findall(value if isinstance(value, str) else json.dumps(value))
        else:
            continue
        if any(_matches(n, WEB_SEARCH_TOOLS) for n in names):
            return True
    return False


def _group(spans: list[_Span]) -> list[list[_Span]]:
    """Spans per trace (duplicates dropped), traces ordered by their root's start."""
    by_trace: dict[str, dict[str, _Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, {}).setdefault(span.span_id, span)
    traces = [sorted(group.values(), key=lambda s: s.sort_key) for group in by_trace.values()]
    return sorted(traces, key=lambda t: _root(t).sort_key)


def _root(spans: list[_Span]) -> _Span:
    ids = {s.span_id for s in spans}
    # A partial export can lose the root: then the earliest span whose parent is absent.
    return next(
        (s for s in spans if s.parent_id is None),
        next((s for s in spans if s.parent_id not in ids), spans[0]),
    )


def _trace_row(spans: list[_Span]) -> tuple[Any, ...]:
    root = _root(spans)
    question, history = _question_and_history(spans, root)
    session = root.attrs.get("session.id") or _pick_attr(spans, "session.id")
    return (
        root.trace_id,
        root.span_id,
        None if session is None else str(session),
        root.start,
        question,
        _answer(spans, root),
        history,
        _trace_context(spans),
        root.status,
    )


def _span_rows(spans: list[_Span], rules: StepRules) -> Iterator[tuple[_Span, tuple[Any, ...]]]:
    question: str | None = None
    for span in spans:
        query = None
        if span.kind == "RETRIEVER":
            context = _documents(span.attrs, "retrieval.documents")
        elif span.kind == "RERANKER":
            context = _documents(span.attrs, "reranker.output_documents")
        elif span.kind == "TOOL" and str(span.attrs.get("output.value") or "").strip():
            if rules.skips(str(span.attrs.get("tool.name") or span.name or "")):
                continue
            context = [str(span.attrs["output.value"])]
        elif span.kind == "LLM" and rules.web_search and _searches_web(span.attrs):
            said = _messages(span.attrs, "output")
            replies = [c for role, c in said if role in (None, "assistant") and c.strip()]
            answer = replies[-1] if replies else _value_text(span.attrs, "output")
            if not answer:
                continue
            context = [answer]
            asked = [
                c for role, c in _messages(span.attrs, "input") if role == "user" and c.strip()
            ]
            query = asked[-1] if asked else None
        else:
            continue
        if question is None:  # computed once per trace, only for traces with a step
            question = _question_and_history(spans, _root(spans))[0] or ""
        query = query or _value_text(span.attrs, "input")
        if query is None and span.kind == "RERANKER":
            query = span.attrs.get("reranker.query")
        row = (span.trace_id, span.span_id, span.kind, span.name, question or None, query)
        yield span, (*row, context, span.start)


def _pick_attr(spans: list[_Span], key: str) -> Any:
    return next((s.attrs[key] for s in spans if s.attrs.get(key) is not None), None)


def _last_llm(spans: list[_Span], direction: str) -> list[tuple[str | None, str]] | None:
    for span in reversed(spans):
        if span.kind == "LLM" and (messages := _messages(span.attrs, direction)):
            return messages
    return None


def _question_and_history(
    spans: list[_Span], root: _Span
) -> tuple[str | None, list[dict[str, str | None]]]:
    messages = _last_llm(spans, "input")
    if messages is None:
        messages = _json_messages(root.attrs.get("input.value"))
    last_user = max((i for i, (role, _) in enumerate(messages) if role == "user"), default=None)
    question = _value_text(root.attrs, "input")
    if not (question and question.strip()) and last_user is not None:
        question = messages[last_user][1]
    earlier = messages[:last_user] if last_user is not None else []
    history = [
        {"role": role, "content": content}
        for role, content in earlier
        if role not in _NOT_HISTORY and content.strip()
    ]
    return question, history


def _answer(spans: list[_Span], root: _Span) -> str | None:
    answer = _value_text(root.attrs, "output")
    if answer and answer.strip():
        return answer
    outputs = _last_llm(spans, "output")
    if outputs:
        replies = [c for role, c in outputs if role in (None, "assistant") and c.strip()]
        return replies[-1] if replies else outputs[-1][1]
    llm = next((s for s in reversed(spans) if s.kind == "LLM"), None)
    return None if llm is None else _value_text(llm.attrs, "output")


def _trace_context(spans: list[_Span]) -> list[str]:
    # The reranker's output is what the generator saw; without one, all retrieved documents.
    kind, key = ("RERANKER", "reranker.output_documents")
    if not any(s.kind == kind for s in spans):
        kind, key = ("RETRIEVER", "retrieval.documents")
    docs = (doc for s in spans if s.kind == kind for doc in _documents(s.attrs, key))
    return list(dict.fromkeys(docs))


def _indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``{prefix}.N.rest`` keys as {N: {rest: value}}."""
    items: dict[int, dict[str, Any]] = {}
    start = len(prefix) + 1
    for key, value in attrs.items():
        if key.startswith(prefix) and key[len(prefix) : start] == ".":
            index, _, rest = key[start:].partition(".")
            if index.isdigit():
                items.setdefault(int(index), {})[rest] = value
    return dict(sorted(items.items()))


def _documents(attrs: Mapping[str, Any], prefix: str) -> list[str]:
    docs = (item.get("document.content") for item in _indexed(attrs, prefix).values())
    return [str(doc) for doc in docs if doc is not None and str(doc).strip()]


def _messages(attrs: Mapping[str, Any], direction: str) -> list[tuple[str | None, str]]:
    messages = []
    for fields in _indexed(attrs, f"llm.{direction}_messages").values():
        content = fields.get("message.content")
        if content is None:  # multimodal form: message.contents.M.message_content.text
            parts = _indexed(fields, "message.contents").values()
            content = "\n".join(
                str(p["message_content.text"]) for p in parts if p.get("message_content.text")
            )
        messages.append((_role(fields.get("message.role")), str(content)))
    return messages
