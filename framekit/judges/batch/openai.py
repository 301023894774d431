"""OpenAI-compatible Batch API: ``/v1/files`` and ``/v1/batches`` (OpenAI, vLLM and
other servers that implement it)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from framekit._errors import one_line
from framekit.judges.batch.base import (
    BatchClient,
    BatchStatus,
    LineEncoder,
    LineResult,
    template_encoder,
)
from framekit.judges.faults import Fault
from framekit.judges.http import read_completion
from framekit.judges.request import dump_json, load_json
from framekit.judges.transport import LOGPROBS_REQUEST

CHAT_URL = "/v1/chat/completions"
#: Line errors that asking again can fix.
_RETRYABLE_CODES = {"batch_expired", "batch_cancelled", "server_error", "rate_limit_exceeded"}


class OpenAIBatchClient(BatchClient):
    """``POST /files`` (purpose ``batch``), ``POST /batches``, then the output and error
    files, read line by line."""

    provider = "openai"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def logprobs_request(self) -> dict[str, Any]:
        return {} if "logprobs" in self.params else dict(LOGPROBS_REQUEST)

    def encode(self, custom_id: str, messages: list[dict[str, Any]], call: dict[str, Any]) -> bytes:
        body = {**self.params, "model": self.model, **call, "messages": messages}
        line = {"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body}
        return dump_json(line) + b"\n"

    def line_encoder(self, call: dict[str, Any]) -> LineEncoder:
        # The line is fixed text around the id and the messages (the body's other keys
        # are the same on every line): cut once, filled in per line.
        return template_encoder(self.encode, call) or super().line_encoder(call)

    def decode(self, line: bytes) -> tuple[str, list[dict[str, Any]]] | None:
        data = load_json(line)
        return str(data["custom_id"]), list(data["body"]["messages"])

    async def submit(self, spool: Path, count: int, metadata: dict[str, str]) -> tuple[str, str]:
        with spool.open("rb") as handle:
            form = aiohttp.FormData()
            form.add_field("purpose", "batch")
            form.add_field("file", handle, filename=spool.name, content_type="application/jsonl")
            uploaded = await self.request("POST", "/files", data=form)
        file_id = str(uploaded["id"])
        created = await self.request(
            "POST",
            "/batches",
            json={
                "input_file_id": file_id,
                "endpoint": CHAT_URL,
                "completion_window": "24h",
                "metadata": metadata,
            },
        )
        return str(created["id"]), file_id

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return _status(await self.request("GET", f"/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchStatus:
        return _status(await self.request("POST", f"/batches/{batch_id}/cancel"))

    async def batches(self) -> AsyncGenerator[BatchStatus, None]:
        async for item in self.pages("/batches", "after"):
            yield _status(item)

    async def results(self, status: BatchStatus) -> AsyncIterator[LineResult]:
        for file_id in (status.output_file, status.error_file):
            if not file_id:
                continue
            async for line in self.lines(self.url(f"/files/{file_id}/content")):
                yield read_line(line)


def _status(data: dict[str, Any]) -> BatchStatus:
    counts = data.get("request_counts") or {}
    errors = (data.get("errors") or {}).get("data") or []
    reason = "; ".join(
        one_line(f"{e.get('code') or 'error'}: {e.get('message') or ''}", 160)
        + (f" (line {e['line']})" if e.get("line") else "")
        for e in errors[:3]
    )
    return BatchStatus(
        id=str(data["id"]),
        state=str(data.get("status") or "unknown"),
        completed=int(counts.get("completed") or 0),
        failed=int(counts.get("failed") or 0),
        total=int(counts.get("total") or 0),
        output_file=data.get("output_file_id"),
        error_file=data.get("error_file_id"),
        reason=reason or None,
        created_at=data.get("created_at"),
        tag=(data.get("metadata") or {}).get("framekit"),
    )


def read_line(line: bytes) -> LineResult:
    """One line of an output or error file: an answer, or that request's fault."""
    try:
        data = load_json(line)
        custom_id = str(data["custom_id"])
    except (ValueError, KeyError, TypeError):
        return LineResult("", Fault("transient", "unreadable line in the batch output"))
    response = data.get("response") or {}
    error = data.get("error")
    status = int(response.get("status_code") or 0)
    body = response.get("body") or {}
    if error or status != 200:
        code = (error or {}).get("code") or (body.get("error") or {}).get("type")
        message = (error or {}).get("message") or (body.get("error") or {}).get("message")
        where = f"HTTP {status}" if status else str(code or "error")
        text = one_line(f"batch line failed: {where}: {message or code or 'no reason given'}", 200)
        if status == 400 and (body.get("error") or {}).get("param") == "response_format":
            return LineResult(custom_id, Fault("mode", text, status=status))
        retryable = code in _RETRYABLE_CODES or status == 429 or status >= 500 or status == 0
        return LineResult(custom_id, Fault("transient" if retryable else "fatal", text))
    reply = read_completion(body)
    if reply is None:
        return LineResult(custom_id, Fault("transient", "batch answer has no message"))
    return LineResult(custom_id, reply)
