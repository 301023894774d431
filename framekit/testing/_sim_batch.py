"""The simulator's batch APIs: OpenAI-compatible ``/v1/files`` + ``/v1/batches`` and
Anthropic ``/v1/messages/batches``.

A batch's lines are answered by the same rule as ``/v1/chat/completions``
(``_sim_answers.chat_completion``), so a batch answer equals the direct answer to the
same request. Time drives the state: ``validating`` -> ``in_progress`` (counts rising)
-> ``finalizing`` -> ``completed`` over ``batch_seconds``; the output is produced when a
client first sees the batch done. ``batch_failed_rate`` and ``batch_expired_rate`` fail
or expire that fraction of lines; ``batch_validation_error`` rejects every batch as a
whole. Loop-thread only, like :class:`~framekit.testing._sim_http.SimApp`.
"""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any, Protocol

from framekit.testing import _sim_answers as answers
from framekit.testing import _sim_cache
from framekit.testing._sim_config import SimulatorConfig
from framekit.testing._sim_reply import Reply, error_body

_PREFIXES = ("/v1/files", "/files", "/v1/batches", "/batches", "/v1/messages/batches")
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_EXPIRED = "This request could not be executed before the completion window expired."


def owns(path: str) -> bool:
    """Whether ``path`` is a batch-API path."""
    return path.startswith(_PREFIXES)


class BatchHost(Protocol):
    """What the batch APIs use of the server that routes to them
    (:class:`~framekit.testing._sim_http.SimApp`): its settings, its random numbers, and
    the rules and counters its chat answers share with batch lines."""

    config: SimulatorConfig
    rng: random.Random
    #: The prompt cache chat answers and batch lines share (``config.prompt_cache``).
    prompt_cache: _sim_cache.PromptCache

    def marker_fault(self, markers: dict[str, Any], payload: dict[str, Any]) -> str | None:
        """The fault a prompt's ``@sim(fault=...)`` marker asks of this request."""

    def count_model(self, model: Any) -> None:
        """One more request (or batch line) for ``model``."""


class BatchSim:
    """Files and batches of both protocols, and their counters."""

    def __init__(self, app: BatchHost) -> None:
        self.app = app
        self.reset()

    def reset(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.counts = {
            "files_uploaded": 0,
            "files_downloaded": 0,
            "batches_created": 0,
            "batches_cancelled": 0,
            "batches_rejected": 0,
            "lines": 0,
            "lines_failed": 0,
            "lines_expired": 0,
            "retrieves": 0,
            "lists": 0,
            # Tokens of the lines answered (prompt, answer, prompt tokens found cached).
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
        }
        self.seq = 0

    def stats(self) -> dict[str, int]:
        return dict(self.counts)

    def _id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq:06d}"

    # -- routing ------------------------------------------------------------------------
    def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> Reply:
        path = path.removeprefix("/v1")
        parts = [p for p in path.split("/") if p]
        try:
            if parts[:2] == ["messages", "batches"]:
                return self._anthropic(method, parts[2:], query, headers, body)
            if parts[0] == "files":
                return self._files(method, parts[1:], headers, body)
            if parts[0] == "batches":
                return self._openai(method, parts[1:], query, body)
        except KeyError as exc:
            return Reply(404, error_body(404, f"No such object: {exc.args[0]}"))
        except ValueError as exc:
            return Reply(400, error_body(400, str(exc)))
        return Reply(404, error_body(404, f"Unknown endpoint {path}."))

    # -- files ----------------------------------------------------------------------------
    def _files(self, method: str, rest: list[str], headers: dict[str, str], body: bytes) -> Reply:
        if method == "POST" and not rest:
            fields = _multipart(headers.get("content-type", ""), body)
            if "file" not in fields:
                raise ValueError("multipart form needs a 'file' field")
            file_id = self._id("file-sim")
            self.files[file_id] = {
                "purpose": fields.get("purpose", b"").decode(),
                "data": fields["file"],
            }
            self.counts["files_uploaded"] += 1
            return _ok(self._file_object(file_id))
        if method == "GET" and len(rest) == 1:
            return _ok(self._file_object(rest[0]))
        if method == "GET" and len(rest) == 2 and rest[1] == "content":
            self.counts["files_downloaded"] += 1
            return Reply(200, self.files[rest[0]]["data"])
        raise ValueError(f"unsupported files call {method} {'/'.join(rest)}")

    def _file_object(self, file_id: str) -> dict[str, Any]:
        f = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(f["data"]), "purpose": f["purpose"]}

    def _new_file(self, lines: list[bytes], purpose: str) -> str | None:
        if not lines:
            return None
        file_id = self._id("file-sim")
        self.files[file_id] = {"purpose": purpose, "data": b"".join(lines)}
        return file_id

    # -- OpenAI batches ---------------------------------------------------------------------
    def _openai(self, method: str, rest: list[str], query: str, body: bytes) -> Reply:
        if method == "POST" and not rest:
            return _ok(self._create_openai(json.loads(body or b"{}")))
        if method == "GET" and not rest:
            return _ok(self._page("openai", _query(query), "after", self._view))
        batch = self.batches[rest[0]]
        if method == "GET" and len(rest) == 1:
            self.counts["retrieves"] += 1
            return _ok(self._view(batch))
        if method == "POST" and rest[1:] == ["cancel"]:
            self._cancel(batch)
            return _ok(self._view(batch))
        raise ValueError(f"unsupported batches call {method} {'/'.join(rest)}")

    def _create_openai(self, payload: dict[str, Any]) -> dict[str, Any]:
        file_id = payload.get("input_file_id")
        if file_id not in self.files:
            raise ValueError(f"input_file_id {file_id!r} is not an uploaded file")
        endpoint = payload.get("endpoint")
        if endpoint != "/v1/chat/completions":
            raise ValueError(f"endpoint {endpoint!r} is not supported; use /v1/chat/completions")
        lines = [ln for ln in self.files[file_id]["data"].split(b"\n") if ln.strip()]
        errors = self._validate_openai(lines, endpoint)
        batch = self._new("openai", "batch_sim", lines, errors)
        batch.update(input_file_id=file_id, endpoint=endpoint, metadata=payload.get("metadata"))
        return self._view(batch)

    def _validate_openai(self, lines: list[bytes], endpoint: str) -> list[dict[str, Any]]:
        reason = self.app.config.batch_validation_error
        if reason:
            return [{"code": "invalid_batch", "message": reason, "line": None}]
        seen: set[str] = set()
        for number, raw in enumerate(lines, 1):
            try:
                line = json.loads(raw)
                cid = line["custom_id"]
                ok = line.get("method") == "POST" and line.get("url") == endpoint
                ok = ok and isinstance(line.get("body"), dict) and cid not in seen
            except (ValueError, KeyError, TypeError):
                ok, cid = False, None
            if not ok:
                message = "duplicate custom_id" if cid in seen else "invalid request line"
                return [{"code": "invalid_request", "message": message, "line": number}]
            seen.add(cid)
        return []

    # -- Anthropic batches ------------------------------------------------------------------
    def _anthropic(
        self, method: str, rest: list[str], query: str, headers: dict[str, str], body: bytes
    ) -> Reply:
        host = headers.get("host", "127.0.0.1")
        if method == "POST" and not rest:
            reason = self.app.config.batch_validation_error
            payload = json.loads(body or b"{}")
            requests = payload.get("requests") if isinstance(payload, dict) else None
            if not reason:
                reason = _check_anthropic(requests)
            if reason:
                self.counts["batches_rejected"] += 1
                return Reply(400, error_body(400, reason))
            lines = [json.dumps(r).encode() for r in requests or []]
            return _ok(
                self._anthropic_view(self._new("anthropic", "msgbatch_sim", lines, []), host)
            )
        if method == "GET" and not rest:
            page = self._page(
                "anthropic", _query(query), "after_id", lambda b: self._anthropic_view(b, host)
            )
            return _ok(page)
        batch = self.batches[rest[0]]
        if method == "GET" and len(rest) == 1:
            self.counts["retrieves"] += 1
            return _ok(self._anthropic_view(batch, host))
        if method == "GET" and rest[1:] == ["results"]:
            self._advance(batch)
            if batch["status"] not in ("completed", "cancelled"):
                raise ValueError("results are available once the batch has ended")
            self.counts["files_downloaded"] += 1
            return Reply(200, b"".join(batch["results"]))
        if method == "POST" and rest[1:] == ["cancel"]:
            self._cancel(batch)
            return _ok(self._anthropic_view(batch, host))
        raise ValueError(f"unsupported messages/batches call {method} {'/'.join(rest)}")

    def _anthropic_view(self, batch: dict[str, Any], host: str) -> dict[str, Any]:
        self._advance(batch)
        status = batch["status"]
        ended = status in ("completed", "cancelled", "failed")
        n = len(batch["lines"])
        c = batch["counts"]
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": "ended"
            if ended
            else "canceling"
            if status == "cancelling"
            else "in_progress",
            "request_counts": {
                "processing": 0 if ended else n - batch["progress"],
                "succeeded": c["completed"] if ended else batch["progress"],
                "errored": c["failed"] if ended else 0,
                "canceled": c["cancelled"] if ended else 0,
                "expired": c["expired"] if ended else 0,
            },
            "created_at": _iso(batch["created"]),
            "ended_at": _iso(batch["ended"]) if batch["ended"] else None,
            "results_url": f"http://{host}/v1/messages/batches/{batch['id']}/results"
            if ended
            else None,
        }

    # -- the shared list and state machine ------------------------------------------------------
    def _page(self, kind: str, query: dict[str, str], cursor: str, view: Any) -> dict[str, Any]:
        """One page of the batch list, newest first, as both APIs page it: at most
        ``limit`` (default 20, at most 100) after the batch named by ``cursor``."""
        self.counts["lists"] += 1
        limit = min(100, int(query.get("limit", "20")))
        ids = [b["id"] for b in list(self.batches.values())[::-1] if b["kind"] == kind]
        start = ids.index(query[cursor]) + 1 if query.get(cursor) in ids else 0
        page = ids[start : start + limit]
        return {
            "object": "list",
            "data": [view(self.batches[i]) for i in page],
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
            "has_more": start + limit < len(ids),
        }

    # -- the shared state machine -------------------------------------------------------------
    def _new(
        self, kind: str, prefix: str, lines: list[bytes], errors: list[dict[str, Any]]
    ) -> dict[str, Any]:
        batch_id = self._id(prefix)
        batch = {
            "id": batch_id,
            "kind": kind,
            "lines": lines,
            "errors": errors,
            "created": time.time(),
            "status": "validating",
            "progress": 0,
            "counts": {"completed": 0, "failed": 0, "expired": 0, "cancelled": 0},
            "output_file_id": None,
            "error_file_id": None,
            "results": [],
            "ended": None,
        }
        self.batches[batch_id] = batch
        self.counts["batches_created"] += 1
        return batch

    def _advance(self, batch: dict[str, Any]) -> None:
        """Move a batch along by the clock; produce its output when it is done."""
        if batch["status"] in ("completed", "failed", "cancelled"):
            return
        if batch["status"] == "cancelling":
            self._finish(batch, upto=batch["progress"], final="cancelled")
            return
        seconds = self.app.config.batch_seconds
        share = 1.0 if seconds <= 0 else (time.time() - batch["created"]) / seconds
        if batch["errors"]:
            if share >= 0.1:
                batch["status"], batch["ended"] = "failed", time.time()
                self.counts["batches_rejected"] += 1
            return
        n = len(batch["lines"])
        if share < 0.1:
            batch["status"] = "validating"
        elif share < 0.9:
            batch["status"] = "in_progress"
            batch["progress"] = min(n, int(n * (share - 0.1) / 0.8))
        elif share < 1.0:
            batch["status"], batch["progress"] = "finalizing", n
        else:
            self._finish(batch, upto=n, final="completed")

    def _finish(self, batch: dict[str, Any], upto: int, final: str) -> None:
        cfg, rng = self.app.config, self.app.rng
        out: list[bytes] = []
        err: list[bytes] = []
        c = batch["counts"]
        for number, raw in enumerate(batch["lines"][:upto]):
            line = json.loads(raw)
            cid = line["custom_id"]
            draw = rng.random()
            self.counts["lines"] += 1
            if draw < cfg.batch_failed_rate:
                c["failed"] += 1
                self.counts["lines_failed"] += 1
                err.append(self._failed_line(batch, cid, number))
            elif draw < cfg.batch_failed_rate + cfg.batch_expired_rate:
                c["expired"] += 1
                self.counts["lines_expired"] += 1
                err.append(self._expired_line(batch, cid, number))
            elif batch["kind"] == "openai" and _rejects_format(cfg, line["body"]):
                c["failed"] += 1
                self.counts["lines_failed"] += 1
                err.append(self._format_rejected_line(cid, number))
            else:
                c["completed"] += 1
                out.append(self._answer_line(batch, line, number))
        c["cancelled"] = len(batch["lines"]) - upto
        if batch["kind"] == "anthropic":
            batch["results"] = out + err
        else:
            batch["output_file_id"] = self._new_file(out, "batch_output")
            batch["error_file_id"] = self._new_file(err, "batch_output")
        batch["status"], batch["progress"], batch["ended"] = final, upto, time.time()

    def _answer_line(self, batch: dict[str, Any], line: dict[str, Any], number: int) -> bytes:
        cid = line["custom_id"]
        if batch["kind"] == "anthropic":
            params = line["params"]
            body = openai_payload(params)
        else:
            body = line["body"]
        markers = answers.parse_markers(body["messages"])
        fault = self.app.marker_fault(markers, body)
        created = int(time.time())
        self.app.count_model(body.get("model"))
        completion = answers.chat_completion(
            body,
            markers,
            fault,
            f"chatcmpl-{batch['id']}-{number}",
            created,
            template=self.app.config.reply_template,
            noisy=self.app.config.noisy_judge(body.get("model")),
            pairwise=self.app.config.pairwise_judge(body.get("model")),
        )
        cached, written = self._cache(batch["kind"], body, completion)
        if batch["kind"] == "anthropic":
            message = anthropic_message(completion, body, cached, written)
            result = {"type": "succeeded", "message": message}
            return json.dumps({"custom_id": cid, "result": result}).encode() + b"\n"
        response = {"status_code": 200, "request_id": f"req_{number}", "body": completion}
        row = {"id": f"batch_req_{number}", "custom_id": cid, "response": response, "error": None}
        return json.dumps(row).encode() + b"\n"

    def _cache(
        self, kind: str, body: dict[str, Any], completion: dict[str, Any]
    ) -> tuple[int, int]:
        """Count a line's tokens, with the prompt cache's rule as for direct requests: the
        lines of a batch are answered in order, each caching its prefixes for the next."""
        app = self.app
        usage = completion["usage"]
        cached = written = 0
        style = app.config.prompt_cache
        if style is not None:
            cached, written, prefixes = app.prompt_cache.look_up(body)
            app.prompt_cache.store(prefixes)
            # Anthropic's batches report cache writes; OpenAI's format, for other models, not.
            anthropic = kind == "anthropic" or _sim_cache.anthropic_style(style, body.get("model"))
            written = written if anthropic else 0
            completion["usage"] = _sim_cache.with_cache_usage(
                usage, cached, written, anthropic=anthropic
            )
        self.counts["prompt_tokens"] += usage["prompt_tokens"]
        self.counts["completion_tokens"] += usage["completion_tokens"]
        self.counts["cached_tokens"] += cached
        self.counts["cache_write_tokens"] += written
        return cached, written

    def _failed_line(self, batch: dict[str, Any], cid: str, number: int) -> bytes:
        if batch["kind"] == "anthropic":
            error = {
                "type": "error",
                "error": {"type": "api_error", "message": "Internal server error"},
            }
            return (
                json.dumps(
                    {"custom_id": cid, "result": {"type": "errored", "error": error}}
                ).encode()
                + b"\n"
            )
        body = {
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
            }
        }
        response = {"status_code": 500, "request_id": f"req_{number}", "body": body}
        return (
            json.dumps(
                {"id": f"batch_req_{number}", "custom_id": cid, "response": response, "error": None}
            ).encode()
            + b"\n"
        )

    def _format_rejected_line(self, cid: str, number: int) -> bytes:
        message = "response_format json_schema is not supported by this model."
        error = {"message": message, "type": "invalid_request_error", "param": "response_format"}
        response = {"status_code": 400, "request_id": f"req_{number}", "body": {"error": error}}
        row = {"id": f"batch_req_{number}", "custom_id": cid, "response": response, "error": None}
        return json.dumps(row).encode() + b"\n"

    def _expired_line(self, batch: dict[str, Any], cid: str, number: int) -> bytes:
        if batch["kind"] == "anthropic":
            return json.dumps({"custom_id": cid, "result": {"type": "expired"}}).encode() + b"\n"
        error = {"code": "batch_expired", "message": _EXPIRED}
        return (
            json.dumps(
                {"id": f"batch_req_{number}", "custom_id": cid, "response": None, "error": error}
            ).encode()
            + b"\n"
        )

    def _cancel(self, batch: dict[str, Any]) -> None:
        self._advance(batch)
        if batch["status"] in ("validating", "in_progress", "finalizing"):
            batch["status"] = "cancelling"
            self.counts["batches_cancelled"] += 1

    def _view(self, batch: dict[str, Any]) -> dict[str, Any]:
        self._advance(batch)
        c = batch["counts"]
        done = batch["status"] in ("completed", "cancelled")
        return {
            "id": batch["id"],
            "object": "batch",
            "endpoint": batch.get("endpoint"),
            "errors": {"object": "list", "data": batch["errors"]} if batch["errors"] else None,
            "input_file_id": batch.get("input_file_id"),
            "completion_window": "24h",
            "status": batch["status"],
            "output_file_id": batch["output_file_id"],
            "error_file_id": batch["error_file_id"],
            "created_at": int(batch["created"]),
            "metadata": batch.get("metadata"),
            "request_counts": {
                "total": len(batch["lines"]),
                "completed": c["completed"] if done else batch["progress"],
                "failed": c["failed"] + c["expired"] if done else 0,
            },
        }


def _rejects_format(cfg: Any, body: dict[str, Any]) -> bool:
    """``reject_response_format`` applies to batch lines as to direct calls."""
    response_format = body.get("response_format")
    return bool(
        cfg.reject_response_format
        and isinstance(response_format, dict)
        and response_format.get("type") == "json_schema"
    )


def _ok(value: Any) -> Reply:
    return Reply(200, json.dumps(value).encode())


def _query(query: str) -> dict[str, str]:
    return dict(p.partition("=")[::2] for p in query.split("&") if p)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _multipart(content_type: str, body: bytes) -> dict[str, bytes]:
    """The fields of a ``multipart/form-data`` body, by name."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        raise ValueError("expected a multipart/form-data body with a boundary")
    fields: dict[str, bytes] = {}
    for part in body.split(b"--" + match.group(1).encode())[1:]:
        head, sep, content = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]+)"', head)
        if sep and name:
            fields[name.group(1).decode()] = content.removesuffix(b"\r\n")
    return fields


def _check_anthropic(requests: Any) -> str | None:
    if not isinstance(requests, list) or not requests:
        return "requests: must be a non-empty list"
    seen: set[str] = set()
    for i, r in enumerate(requests):
        cid = r.get("custom_id") if isinstance(r, dict) else None
        params = r.get("params") if isinstance(r, dict) else None
        if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
            return f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
        if cid in seen:
            return f"requests.{i}.custom_id: duplicate custom_id {cid!r}"
        seen.add(cid)
        if not isinstance(params, dict) or not all(
            k in params for k in ("model", "max_tokens", "messages")
        ):
            return f"requests.{i}.params: model, max_tokens and messages are required"
    return None


def openai_payload(params: dict[str, Any]) -> dict[str, Any]:
    """A Messages API request as the chat-completions payload the answer rule reads."""
    messages = list(params.get("messages") or [])
    if params.get("system"):
        messages = [{"role": "system", "content": params["system"]}, *messages]
    body: dict[str, Any] = {"model": params.get("model"), "messages": messages}
    tools = params.get("tools") or []
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t["name"], "parameters": t.get("input_schema")},
            }
            for t in tools
        ]
        choice = params.get("tool_choice") or {}
        if choice.get("type") == "tool":
            body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    return body


def anthropic_message(
    completion: dict[str, Any], body: dict[str, Any], cached: int = 0, written: int = 0
) -> dict[str, Any]:
    message = completion["choices"][0]["message"]
    content: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        try:
            args = json.loads(fn["arguments"])
        except ValueError:  # a malformed answer (fault injection) stays text
            content.append({"type": "text", "text": fn["arguments"]})
            continue
        content.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": args})
    if not content:
        content.append(
            {"type": "text", "text": message.get("content") or message.get("refusal") or ""}
        )
    usage = completion["usage"]
    return {
        "id": completion["id"].replace("chatcmpl", "msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
        "usage": _sim_cache.messages_usage(usage, cached, written),
    }
