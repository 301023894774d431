"""``fk.Judge``: one litellm endpoint, its limits, and one attempt at a structured answer.

The retry loop, pacing and caching live in :mod:`framekit.engine.executor`; a judge only
knows how to make *one* call and classify what came back.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Literal

from framekit._errors import InputError
from framekit.judges import _litellm
from framekit.judges.base import ChatRequest
from framekit.judges.structured import build_call_kwargs

Mode = Literal["json_schema", "tool", "prompt"]

# Keyword arguments that never enter a cache key or a repr.
_SECRET_KWARGS = {"api_key", "azure_ad_token", "aws_secret_access_key", "aws_session_token"}
# Keyword arguments that change where a call goes, not what the model answers.
_ROUTING_KWARGS = {"api_base", "base_url", "api_version", "extra_headers", "timeout"}


@dataclass
class RawReply:
    """What one call returned, before parsing."""

    text: str | None
    refusal: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Judge:
    """One LLM judge endpoint reached through litellm, with its limits.

    Parameters
    ----------
    model
        A litellm model string, e.g. ``"openai/gpt-4o-mini"``.
    api_base, api_key
        Endpoint and credentials; default to ``$FRAMEKIT_API_BASE`` / ``$FRAMEKIT_API_KEY``,
        else litellm's own provider variables (``OPENAI_API_KEY``...). The key is never
        cached, logged, shown in a repr or written to the output.
    concurrency
        Requests in flight at once.
    rpm, tpm
        Requests and tokens per minute to stay under (``None``: unlimited).
    timeout
        Seconds for one attempt.
    max_retries
        Retries of one request after 429, 5xx, timeouts and connection errors.
    temperature, max_tokens
        Decoding parameters (part of the cache key).
    context_window
        The model's context window in tokens, for a model litellm does not know (e.g.
        self-hosted): a record longer than it allows is cut to fit, with a note in its
        explanation. ``None``: litellm's figure for the model, else 128,000.
    **litellm_kwargs
        Passed to ``litellm.acompletion`` (e.g. ``seed``); part of the cache key unless
        they only route the call.

    Examples
    --------
    >>> judge = Judge("openai/gpt-4o-mini", api_key="sk-secret", rpm=500)
    >>> judge
    Judge('openai/gpt-4o-mini', concurrency=16, rpm=500, tpm=None, api_key='***')
    """

    kind = "llm"

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        concurrency: int = 16,
        rpm: float | None = None,
        tpm: float | None = None,
        timeout: float = 60.0,
        max_retries: int = 6,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        context_window: int | None = None,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("Judge(model=...) needs a litellm model string")
        if concurrency < 1:
            raise InputError(f"concurrency must be >= 1, got {concurrency}")
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and value <= 0:
                raise InputError(f"{name} must be positive or None, got {value}")
        self.model = model
        self.api_base = api_base or os.environ.get("FRAMEKIT_API_BASE") or None
        self._api_key = api_key or os.environ.get("FRAMEKIT_API_KEY") or None
        self.concurrency = int(concurrency)
        self.rpm = rpm
        self.tpm = tpm
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.context_window = context_window
        self.litellm_kwargs = litellm_kwargs
        # Downgraded for the judge's lifetime when the endpoint rejects a structured mode.
        self.mode: Mode = "json_schema"

    # -- identity -------------------------------------------------------------------
    @property
    def secrets(self) -> list[str]:
        """Strings that must never leave the process (redacted from every message)."""
        found = [self._api_key] if self._api_key else []
        found += [str(v) for k, v in self.litellm_kwargs.items() if k in _SECRET_KWARGS and v]
        return found

    def cache_identity(self) -> dict[str, Any]:
        """What about this judge decides an answer: model and decoding parameters."""
        params = {
            k: v
            for k, v in sorted(self.litellm_kwargs.items())
            if k not in _SECRET_KWARGS and k not in _ROUTING_KWARGS
        }
        return {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "params": params,
        }

    def __repr__(self) -> str:
        key = ", api_key='***'" if self._api_key else ""
        return (
            f"Judge({self.model!r}, concurrency={self.concurrency}, rpm={self.rpm}, "
            f"tpm={self.tpm}{key})"
        )

    # -- one attempt ----------------------------------------------------------------
    def _endpoint_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(self.litellm_kwargs)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        # Retries are ours (429s must reach the shared limiter), never the SDK's.
        kwargs["num_retries"] = 0
        kwargs["max_retries"] = 0
        kwargs["timeout"] = self.timeout
        return kwargs

    async def attempt(self, request: ChatRequest, messages: list[dict[str, Any]]) -> RawReply:
        """Send one chat request in the judge's current structured mode."""
        lm = _litellm.litellm()
        call = build_call_kwargs(request, messages, self.mode)
        started = time.perf_counter()
        response = await lm.acompletion(
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **call,
            **self._endpoint_kwargs(),
        )
        latency = time.perf_counter() - started
        choice = response.choices[0]
        message = choice.message
        text = message.content
        tool_calls = getattr(message, "tool_calls", None)
        if tool_calls and not text:
            text = tool_calls[0].function.arguments
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return RawReply(
            text=text,
            refusal=getattr(message, "refusal", None),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_litellm.response_cost(response),
            latency_s=latency,
        )

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """Embed texts with a litellm embedding model on this judge's endpoint.

        Only the endpoint travels with the call: decoding arguments such as ``seed`` mean
        nothing to an embedding model and some providers reject them.
        """
        lm = _litellm.litellm()
        kwargs: dict[str, Any] = {"timeout": self.timeout, "max_retries": 0}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        response = await lm.aembedding(model=model, input=texts, **kwargs)
        return [item["embedding"] for item in response.data]
