"""OpenTelemetry GenAI semantic conventions (``gen_ai.*``) translated to OpenInference keys.

A span written with the GenAI conventions (OpenLLMetry, Strands Agents, MLflow, the OTel
instrumentations for OpenAI, Anthropic, Bedrock, Vertex) is rewritten, once, into the
OpenInference dotted keys the rest of :mod:`framekit.traces` reads, so that both
conventions give the same columns. A span that already names its OpenInference kind is
left alone: OpenInference wins when a span carries both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from framekit._errors import GenAIFormatError
from framekit.traces._text import _content_text, _role

# gen_ai.operation.name (and OpenLLMetry's traceloop.span.kind) -> OpenInference span kind
_KIND_OF_OPERATION = {
    "chat": "LLM", "text_completion": "LLM", "generate_content": "LLM", "completion": "LLM",
    "execute_tool": "TOOL", "tool": "TOOL",
    "invoke_agent": "AGENT", "create_agent": "AGENT", "agent": "AGENT",
    "retrieval": "RETRIEVER", "retrieve": "RETRIEVER",
    "embeddings": "EMBEDDING",
    "workflow": "CHAIN", "task": "CHAIN",
}  # fmt: skip
#: Attributes whose structured value stays JSON text (like ``input.value``).
GENAI_JSON_LEAVES = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.retrieval.documents",
        "traceloop.entity.input",
        "traceloop.entity.output",
    }
)


def has_genai(attrs: Mapping[str, Any]) -> bool:
    """Whether a span carries GenAI-convention (or OpenLLMetry) attributes."""
    return any(k.startswith(("gen_ai.", "traceloop.")) for k in attrs)


def merge_genai(attrs: dict[str, Any]) -> None:
    """Add what the ``gen_ai.*`` attributes say to the OpenInference keys (in place).

    A span may carry both (Phoenix converts GenAI spans on ingestion, keeping the
    ``gen_ai.*`` originals): each OpenInference field it already has wins, the others are
    filled in from the GenAI attributes.
    """
    derived = {k: v for k, v in attrs.items() if k.startswith(("gen_ai.", "traceloop."))}
    if "openinference.span.kind" in attrs:
        derived["openinference.span.kind"] = attrs["openinference.span.kind"]
    translate(derived)
    present = {_field(k) for k in attrs}
    for key, value in derived.items():
        if _field(key) not in present:
            attrs[key] = value


def _field(key: str) -> str:
    """The OpenInference field a key belongs to: ``llm.input_messages``, ``input.value`` ..."""
    parts = key.split(".")
    if parts[0] == "llm" or key.startswith(("retrieval.documents.", "reranker.")):
        return ".".join(parts[:2])
    return key


def translate(attrs: dict[str, Any]) -> None:
    """Add the OpenInference keys a GenAI span's attributes stand for (in place).

    Raises :class:`GenAIFormatError` naming the attribute when a message or document list
    is not the JSON the conventions define.
    """
    operation = str(attrs.get("gen_ai.operation.name") or "").lower()
    kind = _KIND_OF_OPERATION.get(operation) or _KIND_OF_OPERATION.get(
        str(attrs.get("traceloop.span.kind") or "").lower()
    )
    inputs = _current_messages(attrs, "gen_ai.input.messages") or _indexed_messages(
        attrs, "gen_ai.prompt"
    )
    outputs = _current_messages(attrs, "gen_ai.output.messages") or _indexed_messages(
        attrs, "gen_ai.completion"
    )
    if inputs and "gen_ai.system_instructions" in attrs:
        inputs = [*_system(attrs["gen_ai.system_instructions"]), *inputs]
    if kind is None and (inputs or outputs or attrs.get("gen_ai.request.model")):
        kind = "LLM" if operation != "embeddings" else "EMBEDDING"
    kind = str(attrs.get("openinference.span.kind") or kind or "UNKNOWN").upper()
    attrs["openinference.span.kind"] = kind
    if attrs.get("gen_ai.conversation.id") is not None:
        attrs.setdefault("session.id", str(attrs["gen_ai.conversation.id"]))
    if kind == "AGENT" or kind == "CHAIN":
        _agent_values(attrs, inputs, outputs)
    else:
        _write_messages(attrs, "llm.input_messages", inputs)
        _write_messages(attrs, "llm.output_messages", outputs)
    if "gen_ai.tool.definitions" in attrs:
        for i, tool in enumerate(_json(attrs, "gen_ai.tool.definitions", list)):
            attrs[f"llm.tools.{i}.tool.json_schema"] = json.dumps(tool)
    if kind == "TOOL":
        _tool(attrs)
    elif kind == "RETRIEVER":
        _retrieval(attrs)
    for source, target in (
        ("traceloop.entity.input", "input"),
        ("traceloop.entity.output", "output"),
    ):
        if source in attrs and f"{target}.value" not in attrs:
            attrs[f"{target}.value"] = _text(attrs[source])
            attrs[f"{target}.mime_type"] = "application/json"


Message = tuple[str | None, str, list[str]]  # role, text, names of the tools it calls


def _json(attrs: Mapping[str, Any], key: str, kind: type) -> Any:
    value = attrs[key]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise GenAIFormatError(f"{key} is not valid JSON ({exc.msg})") from None
    if not isinstance(value, kind):
        raise GenAIFormatError(
            f"{key} must be a JSON {kind.__name__}, found {type(value).__name__}"
        )
    return value


def _current_messages(attrs: Mapping[str, Any], key: str) -> list[Message]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: ``[{role, parts: [...]}]``."""
    if key not in attrs:
        return []
    messages: list[Message] = []
    for i, item in enumerate(_json(attrs, key, list)):
        if not isinstance(item, Mapping):
            raise GenAIFormatError(f"{key}[{i}] is not a message object")
        parts = item.get("parts")
        if parts is None:  # a few emitters write OpenAI's {"role", "content"} instead
            messages.append((_role(item.get("role")), _content_text(item.get("content")), []))
            continue
        if not isinstance(parts, list):
            raise GenAIFormatError(f"{key}[{i}].parts must be a list")
        messages.append((_role(item.get("role")), *_parts(parts)))
    return messages


def _parts(parts: list[Any]) -> tuple[str, list[str]]:
    texts: list[str] = []
    calls: list[str] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" or (kind is None and "content" in part):
            texts.append(_text(part.get("content")))
        elif kind == "tool_call_response":
            texts.append(_text(part.get("response") or part.get("result")))
        elif kind in ("tool_call", "server_tool_call") and part.get("name"):
            calls.append(str(part["name"]))
    return "\n".join(t for t in texts if t), calls


def _indexed_messages(attrs: Mapping[str, Any], prefix: str) -> list[Message]:
    """The older ``gen_ai.prompt.N.role`` / ``.content`` (and ``gen_ai.completion.N.*``)."""
    fields: dict[int, dict[str, Any]] = {}
    start = len(prefix) + 1
    for key, value in attrs.items():
        if key.startswith(prefix + "."):
            index, _, rest = key[start:].partition(".")
            if index.isdigit():
                fields.setdefault(int(index), {})[rest] = value
    messages: list[Message] = []
    for _, item in sorted(fields.items()):
        content = item.get("content")
        if isinstance(content, str) and content.lstrip().startswith("[{"):
            with contextlib.suppress(json.JSONDecodeError):  # multimodal: a JSON list of parts
                content = _content_text(json.loads(content))
        calls = [
            str(v)
            for k, v in sorted(item.items())
            if k.startswith("tool_calls.") and k.endswith(".name")
        ]
        messages.append((_role(item.get("role")), _text(content), calls))
    return messages


def _system(value: Any) -> list[Message]:
    if isinstance(value, str) and not value.lstrip().startswith("["):
        return [("system", value, [])]
    parts = _json({"gen_ai.system_instructions": value}, "gen_ai.system_instructions", list)
    return [("system", _parts(parts)[0], [])]


def _write_messages(attrs: dict[str, Any], prefix: str, messages: list[Message]) -> None:
    for i, (role, content, calls) in enumerate(messages):
        if role is not None:
            attrs[f"{prefix}.{i}.message.role"] = role
        attrs[f"{prefix}.{i}.message.content"] = content
        for j, name in enumerate(calls):
            attrs[f"{prefix}.{i}.message.tool_calls.{j}.tool_call.function.name"] = name


def _agent_values(attrs: dict[str, Any], inputs: list[Message], outputs: list[Message]) -> None:
    """An agent or workflow span's request and answer, as its ``input.value`` / ``output.value``."""
    user = [text for role, text, _ in inputs if role == "user" and text.strip()]
    said = [text for role, text, _ in outputs if role in (None, "assistant") and text.strip()]
    if user and "input.value" not in attrs:
        attrs["input.value"] = user[-1]
    if said and "output.value" not in attrs:
        attrs["output.value"] = said[-1]


def _tool(attrs: dict[str, Any]) -> None:
    name = attrs.get("gen_ai.tool.name") or attrs.get("traceloop.entity.name")
    if name is not None:
        attrs.setdefault("tool.name", str(name))
    if "gen_ai.tool.call.arguments" in attrs:
        attrs.setdefault("input.value", _text(attrs["gen_ai.tool.call.arguments"]))
    if "gen_ai.tool.call.result" in attrs:
        attrs.setdefault("output.value", _text(attrs["gen_ai.tool.call.result"]))


def _retrieval(attrs: dict[str, Any]) -> None:
    query = attrs.get("gen_ai.retrieval.query.text") or attrs.get("gen_ai.retrieval.query")
    if query is not None:
        attrs.setdefault("input.value", str(query))
    if "gen_ai.retrieval.documents" not in attrs:
        return
    for i, doc in enumerate(_json(attrs, "gen_ai.retrieval.documents", list)):
        if isinstance(doc, Mapping):
            content = doc.get("content", doc.get("text"))
            if doc.get("id") is not None:
                attrs[f"retrieval.documents.{i}.document.id"] = str(doc["id"])
        else:
            content = doc
        if content is not None:
            attrs[f"retrieval.documents.{i}.document.content"] = _text(content)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
