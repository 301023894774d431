"""``fk.Judge``: one litellm endpoint, its limits, and one attempt at a structured answer.

The retry loop, pacing and caching live in :mod:`framekit.engine.executor`; a judge only
knows how to make *one* call, here or in its worker processes
(:mod:`framekit.judges.workers`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from framekit._errors import InputError, JudgeError
from framekit.judges import _litellm
from framekit.judges.base import ChatRequest
from framekit.judges.structured import build_call_kwargs

if TYPE_CHECKING:
    from framekit.judges.workers import WorkerPool

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
    batch, batch_followup, wait, batch_timeout, batch_poll
        Send through the provider's batch API at half price (answers within 24 h;
        resumable: see :mod:`framekit.engine.batch`). ``batch_followup``: lines that
        failed or expired go to a follow-up ``"batch"`` or are sent ``"direct"``.
        ``wait=False`` submits and returns at once (raising
        :class:`~framekit.BatchPending` with the batch ids; run again to
        collect). ``batch_timeout``: hours to wait; ``batch_poll``: first poll interval
        in seconds (backing off to 60 s).
    processes
        Worker processes that make the calls. litellm spends 3.5-4 ms of CPU on each
        call, so one process tops out near 250 calls/s; against an endpoint that could
        answer faster (high ``concurrency``, low latency), ``processes=2`` uses a second
        core. Workers start on the first run (a few seconds: each imports litellm), serve
        every later run of this judge, and stop at :meth:`close`, on exit, or when the
        judge is garbage-collected. ``1`` (default): calls are made in this process.
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
        processes: int = 1,
        batch: bool = False,
        batch_followup: Literal["batch", "direct"] = "batch",
        wait: bool = True,
        batch_timeout: float = 24.0,
        batch_poll: float = 1.0,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("Judge(model=...) needs a litellm model string")
        if concurrency < 1:
            raise InputError(f"concurrency must be >= 1, got {concurrency}")
        if not isinstance(processes, int) or processes < 1:
            raise InputError(f"processes must be an integer >= 1, got {processes!r}")
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
        self.processes = processes
        self.litellm_kwargs = litellm_kwargs
        if batch_followup not in ("batch", "direct"):
            raise InputError(f"batch_followup must be 'batch' or 'direct', got {batch_followup!r}")
        if batch_timeout <= 0 or batch_poll <= 0:
            raise InputError("batch_timeout and batch_poll must be positive")
        self.batch, self.batch_followup, self.wait = bool(batch), batch_followup, bool(wait)
        self.batch_timeout, self.batch_poll = float(batch_timeout), float(batch_poll)
        # Downgraded for the judge's lifetime when the endpoint rejects a structured mode.
        self.mode: Mode = "json_schema"
        self._pool: WorkerPool | None = None
        self._stop_pool: weakref.finalize[Any, Any] | None = None
        self._pool_lock = threading.Lock()

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
        workers = f", processes={self.processes}" if self.processes > 1 else ""
        return (
            f"Judge({self.model!r}, concurrency={self.concurrency}, rpm={self.rpm}, "
            f"tpm={self.tpm}{workers}{key})"
        )

    # -- worker processes -----------------------------------------------------------
    async def prepare(self) -> None:
        """Get ready to send: import litellm (seconds, so off the event loop), or start
        the worker processes and wait until each has."""
        if self.processes == 1:
            await asyncio.to_thread(_litellm.litellm)
            return
        with self._pool_lock:
            if self._pool is None:
                from framekit.judges.workers import WorkerPool

                self._pool = WorkerPool(self.processes, self.secrets)
                # Stops the workers when the judge is collected or the interpreter exits.
                self._stop_pool = weakref.finalize(self, self._pool.close)
            pool = self._pool
        try:
            await pool.started()
        except JudgeError:
            self.close()  # the next run tries afresh (after the environment is mended)
            raise

    def __getstate__(self) -> dict[str, Any]:
        # A copy (pickle, copy.deepcopy) starts its own workers when it first runs.
        state = dict(self.__dict__)
        state.update(_pool=None, _stop_pool=None, _pool_lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        """Stop the worker processes (if any); a later run starts new ones."""
        with self._pool_lock:
            stop, self._stop_pool, self._pool = self._stop_pool, None, None
        if stop is not None:
            stop()

    def __enter__(self) -> Judge:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

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

    def _call_params(self) -> dict[str, Any]:
        """Everything ``litellm.acompletion`` gets besides the messages and answer format."""
        return {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            **self._endpoint_kwargs(),
        }

    async def attempt(self, request: ChatRequest, messages: list[dict[str, Any]]) -> RawReply:
        """Send one chat request in the judge's current structured mode."""
        call = build_call_kwargs(request, messages, self.mode)
        pool = self._pool
        if pool is not None:
            reply: RawReply = await pool.call(self._call_params(), call, self.secrets)
            return reply
        return await call_litellm(self._call_params(), call)

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
    return RawReply(
        text=text,
        refusal=getattr(message, "refusal", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=_litellm.response_cost(response),
        latency_s=latency,
    )
