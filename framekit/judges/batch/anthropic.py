"""Anthropic Message Batches: ``/v1/messages/batches`` (requests inline, results as JSONL)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from framekit._errors import one_line
from framekit.judges.batch.base import BatchClient, BatchStatus, LineResult
from framekit.judges.faults import Fault
from framekit.judges.request import dump_json, load_json
from framekit.judges.transport import RawReply
from framekit.judges.usage import read_usage

VERSION = "2023-06-01"
_STATES = {"in_progress": "in_progress", "canceling": "cancelling", "ended": "ended"}


class AnthropicBatchClient(BatchClient):
    """The spool is the create request's JSON body, one request per line:
    ``{"requests": [`` / ``{...},`` per request / ``]}``."""

    provider = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024
    header = b'{"requests":[\n'
    footer = b"]}\n"

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    def encode(self, custom_id: str, messages: list[dict[str, Any]], call: dict[str, Any]) -> bytes:
        params = {**self.params, "model": self.model, **to_anthropic(messages, call)}
        line = {"custom_id": custom_id, "params": params}
        return dump_json(line) + b",\n"

    def decode(self, line: bytes) -> tuple[str, list[dict[str, Any]]] | None:
        text = line.strip().rstrip(b",")
        if not text.startswith(b'{"custom_id"'):
            return None
        data = load_json(text)
        params = data["params"]
        system = params.get("system")
        head = [{"role": "system", "content": system}] if system else []
        return str(data["custom_id"]), head + list(params["messages"])

    def finish_spool(self, path: Path, size: int) -> None:
        # The last request line ends in ",\n" before the footer: JSON wants no comma.
        with path.open("r+b") as handle:
            cut = size - len(self.footer) - 2
            handle.seek(cut)
            if handle.read(2) == b",\n":
                handle.seek(cut)
                handle.write(b"\n" + b" " + self.footer)

    async def submit(self, spool: Path, count: int, metadata: dict[str, str]) -> tuple[str, str]:
        with spool.open("rb") as handle:
            payload = aiohttp.BufferedReaderPayload(handle, content_type="application/json")
            created = await self.request("POST", "/messages/batches", data=payload)
        return str(created["id"]), ""

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return _status(await self.request("GET", f"/messages/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchStatus:
        return _status(await self.request("POST", f"/messages/batches/{batch_id}/cancel"))

    async def batches(self) -> AsyncGenerator[BatchStatus, None]:
        async for item in self.pages("/messages/batches", "after_id"):
            yield _status(item)

    async def results(self, status: BatchStatus) -> AsyncIterator[LineResult]:
        if status.output_file:
            async for line in self.lines(status.output_file):
                yield read_line(line)


def to_anthropic(messages: list[dict[str, Any]], call: dict[str, Any]) -> dict[str, Any]:
    """Chat messages and a forced tool (framekit's ``tool`` mode) as Messages API params."""
    system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system")
    params: dict[str, Any] = {
        "messages": [
            {"role": m["role"], "content": m.get("content") or ""}
            for m in messages
            if m.get("role") != "system"
        ]
    }
    if system:
        params["system"] = system
    tools = call.get("tools") or []
    if tools:
        fn = tools[0]["function"]
        params["tools"] = [
            {
                "name": fn["name"],
                "description": fn.get("description", ""),
                "input_schema": fn["parameters"],
            }
        ]
        params["tool_choice"] = {"type": "tool", "name": fn["name"]}
    return params


def _status(data: dict[str, Any]) -> BatchStatus:
    counts = data.get("request_counts") or {}
    done = int(counts.get("succeeded") or 0)
    failed = sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))
    total = done + failed + int(counts.get("processing") or 0)
    raw = str(data.get("processing_status") or "unknown")
    return BatchStatus(
        id=str(data["id"]),
        state=_STATES.get(raw, raw),
        completed=done,
        failed=failed,
        total=total,
        output_file=data.get("results_url"),
        created_at=None,
    )


def read_line(line: bytes) -> LineResult:
    """One results line: ``succeeded`` (a message), ``errored``, ``canceled`` or ``expired``."""
    try:
        data = load_json(line)
        custom_id = str(data["custom_id"])
        result = data["result"]
        kind = result["type"]
    except (ValueError, KeyError, TypeError):
        return LineResult("", Fault("transient", "unreadable line in the batch results"))
    if kind != "succeeded":
        error = (result.get("error") or {}).get("error") or result.get("error") or {}
        etype = error.get("type") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        retryable = kind in ("expired", "canceled") or etype in (
            "api_error",
            "overloaded_error",
            "rate_limit_error",
        )
        reason = one_line(f"batch line {kind}: {etype or ''} {message or ''}".strip(), 200)
        return LineResult(custom_id, Fault("transient" if retryable else "fatal", reason))
    message = result.get("message") or {}
    text: str | None = None
    for block in message.get("content") or []:
        if block.get("type") == "tool_use":
            text = json.dumps(block.get("input"))
            break
        if block.get("type") == "text":
            text = (text or "") + str(block.get("text") or "")
    usage = read_usage(message.get("usage"))
    return LineResult(
        custom_id,
        RawReply(
            text=text,
            refusal=None,
            prompt_tokens=usage.prompt,
            completion_tokens=usage.completion,
            cost_usd=None,
            latency_s=0.0,
            cached_tokens=usage.cached,
            written_tokens=usage.written,
        ),
    )
