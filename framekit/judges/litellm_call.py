"""One ``litellm.acompletion`` call, reduced to a :class:`~framekit.judges.transport.RawReply`.

Its own module because both sides of the litellm transport make it: the transport in
this process and the worker processes (:mod:`framekit.judges.workers`), which must not
import the transport that starts them.
"""

from __future__ import annotations

import time
from typing import Any

from framekit.judges import _litellm
from framekit.judges.transport import RawReply, keep_headers

__all__ = ["call_litellm"]


async def call_litellm(params: dict[str, Any], call: dict[str, Any]) -> RawReply:
    """One ``litellm.acompletion`` call, reduced to what the engine reads from it."""
    lm = _litellm.litellm()
    started = time.perf_counter()
    response = await lm.acompletion(**params, **call)
    latency = time.perf_counter() - started
    message = response.choices[0].message
    text = message.content
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls and not text:
        text = tool_calls[0].function.arguments
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None) or {}
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    return RawReply(
        text=text,
        refusal=getattr(message, "refusal", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=_litellm.response_cost(response),
        latency_s=latency,
        headers=keep_headers(headers) if isinstance(headers, dict) else {},
    )
