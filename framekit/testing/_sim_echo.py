"""The simulator as a careless endpoint: it echoes what the client sent.

Real gateways and proxies have been seen to quote the request's headers (the
``Authorization`` header among them) in an error body, and a model behind a logging proxy
can be made to repeat them in its answer. ``SimulatorConfig(echo_headers=...)`` does
that, so tests can prove that no credential a judge sends comes back out of framekit:

- ``"error"``: every chat request gets a 400 whose message quotes the request;
- ``"error_500"``: the same as a 500 (retried first, then the row's error);
- ``"answer"``: a normal answer whose ``explanation`` quotes the request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

ECHO_MODES = (None, "error", "error_500", "answer")


def echo_text(method: str, path: str, query: str, headers: Mapping[str, str]) -> str:
    """The request line and every header, as an indiscreet server would quote them."""
    target = f"{path}?{query}" if query else path
    # Credentials first, as a server complaining about them would quote them (and so
    # that a client cutting the message short still shows them).
    ordered = sorted(headers.items(), key=lambda kv: not ("auth" in kv[0] or "key" in kv[0]))
    shown = ", ".join(f"{name}: {value}" for name, value in ordered)
    return f"you sent {method} {target} with headers {shown}"


def echo_error(
    mode: str | None, method: str, path: str, query: str, headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """``(status, message)`` of an error that quotes the request, for the error modes."""
    status = {"error": 400, "error_500": 500}.get(mode or "")
    if status is None:
        return None
    return status, echo_text(method, path, query, headers)


def inject(completion: dict[str, Any], echo: str) -> dict[str, Any]:
    """Put ``echo`` into the explanation of a ``chat.completion`` answer (in place)."""
    message = completion["choices"][0]["message"]
    calls = message.get("tool_calls")
    holder, field = (calls[0]["function"], "arguments") if calls else (message, "content")
    try:
        value = json.loads(holder[field])
    except (TypeError, ValueError):
        return completion
    if isinstance(value, dict):
        value["explanation"] = f"{value.get('explanation', '')} {echo}".strip()
        holder[field] = json.dumps(value)
    return completion
