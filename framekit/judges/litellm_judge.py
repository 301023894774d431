"""``fk.Judge``: one litellm endpoint, its limits, and one attempt at a structured answer.

The retry loop, pacing and caching live in :mod:`framekit.engine.executor`; a judge only
knows how to make *one* call, here or in its worker processes
(:mod:`framekit.judges.workers`).
"""

from __future__ import annotations

import copy
import inspect
import os
from types import TracebackType
from typing import Any, Literal

from framekit import _secrets
from framekit._errors import InputError, JudgeConfigurationError
from framekit.judges import _litellm, _model_names, _settings
from framekit.judges.base import ChatRequest
from framekit.judges.faults import Fault
from framekit.judges.litellm_call import call_litellm
from framekit.judges.litellm_transport import LitellmTransport
from framekit.judges.transport import (
    Mode,
    RawReply,
    Transport,
    TransportName,
    choose_transport,
)

__all__ = ["Judge", "Mode", "RawReply", "call_litellm"]

# Keyword arguments that never enter a cache key or a repr.
_SECRET_KWARGS = _secrets.SECRET_KWARGS
# Keyword arguments that change where a call goes, not what the model answers.
_ROUTING_KWARGS = {"api_base", "base_url", "api_version", "extra_headers", "timeout"}


class Judge:
    """One LLM judge endpoint reached through litellm, with its limits.

    Parameters
    ----------
    model
        A litellm model string, e.g. ``"openai/gpt-4o-mini"``. A string litellm cannot
        route (``"gpt4o"``, ``"openai:gpt-4o-mini"``) raises
        :class:`~framekit.JudgeConfigurationError` here, naming the string meant (checked
        offline: :mod:`framekit.judges._model_names`).
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
        Only the litellm transport has worker processes.
    transport
        How calls travel. ``"http"``: straight to an OpenAI-compatible
        ``/chat/completions`` over aiohttp (well under 1 ms of CPU per call);
        ``"litellm"``: through litellm, for every provider it speaks; ``"auto"``
        (default): ``"http"`` for ``openai/...`` (with or without ``api_base``) and
        ``hosted_vllm/...`` models, ``"litellm"`` for every other provider or when
        ``processes > 1``. :attr:`transport` says which one is in use.
    **litellm_kwargs
        Passed to ``litellm.acompletion`` (e.g. ``seed``); part of the cache key unless
        they only route the call.

    Examples
    --------
    >>> judge = Judge("openai/gpt-4o-mini", api_key="sk-secret", rpm=500)
    >>> judge
    Judge('openai/gpt-4o-mini', concurrency=16, rpm=500, tpm=None, transport='http', api_key='***')
    >>> judge.transport
    'http'
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
        transport: str = "auto",
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
        typo = _settings.check_kwargs(litellm_kwargs, _own_params(type(self)))
        if typo:
            raise InputError(typo)
        self.model = model
        self.api_base = api_base or os.environ.get("FRAMEKIT_API_BASE") or None
        self._api_key = api_key or os.environ.get("FRAMEKIT_API_KEY") or None
        self._key_source = "api_key=" if api_key else "$FRAMEKIT_API_KEY"
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
        self._secrets = self._collect_secrets()
        chosen = choose_transport(model, transport, processes, self.api_base)
        if chosen == "litellm":
            # Checked now, offline: a string litellm cannot route fails every call
            # (the http transport sends the name as it is, to the server that knows it).
            unroutable = _model_names.model_problem(model, self.api_base, litellm_kwargs)
            if unroutable:
                raise JudgeConfigurationError(unroutable)
        self._transport: Transport = self._make_transport(chosen)

    # -- identity -------------------------------------------------------------------
    @property
    def secrets(self) -> list[str]:
        """Strings that must never leave the process (redacted from every message): the
        key from any source, credential headers, credentials in ``api_base``
        (see :mod:`framekit._secrets`). Refreshed at the start of every run."""
        return list(self._secrets)

    def _collect_secrets(self) -> tuple[str, ...]:
        found = _secrets.collect_secrets(self._api_key, self.api_base, self.litellm_kwargs)
        _secrets.register(found)  # log records redact them from now on
        return found

    def configuration_problem(self) -> str | None:
        """Why no call of this judge could succeed (a missing or malformed key, an
        ``api_base`` the HTTP client refuses), or ``None``; checked before a run's first
        call, and by the dry run."""
        return _settings.credential_problem(
            self.model,
            self.api_base,
            self._api_key,
            self._key_source,
            self.litellm_kwargs,
            requires_key=self._transport.requires_key,
        )

    def cache_identity(self) -> dict[str, Any]:
        """What about this judge decides an answer: model and decoding parameters."""
        params = {
            k: v
            for k, v in sorted(self.litellm_kwargs.items())
            if k not in _SECRET_KWARGS and k not in _ROUTING_KWARGS
        }
        ident = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "params": params,
        }
        # Two self-hosted servers may both call their model "openai/default": the
        # endpoint (without credentials) tells their answers apart.
        endpoint = _settings.endpoint_identity(self.api_base or self.litellm_kwargs.get("base_url"))
        if endpoint is not None:
            ident["endpoint"] = endpoint
        return ident

    def __repr__(self) -> str:
        key = ", api_key='***'" if self._api_key else ""
        workers = f", processes={self.processes}" if self.processes > 1 else ""
        return (
            f"Judge({self.model!r}, concurrency={self.concurrency}, rpm={self.rpm}, "
            f"tpm={self.tpm}{workers}, transport={self.transport!r}{key})"
        )

    def __copy__(self) -> Judge:
        # The transport points back at its judge: a shallow copy that shared it would
        # send with the original's key and settings. The copy gets its own.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._transport = clone._make_transport(self.transport)
        return clone

    def without_key(self) -> Judge:
        """A copy holding no API key, nor anything derived from it (its redaction list
        included): it looks for one again where it runs, when a run starts
        (``$FRAMEKIT_API_KEY``, the provider's variable). For a judge sent to other
        processes or machines, whose environment holds the key.

        Examples
        --------
        >>> Judge("openai/gpt-4o-mini", api_key="sk-secret-123").without_key()
        Judge('openai/gpt-4o-mini', concurrency=16, rpm=None, tpm=None, transport='http')
        """
        clone = copy.copy(self)
        clone._api_key = None
        clone._secrets = ()
        return clone

    # -- the transport ---------------------------------------------------------------
    @property
    def transport(self) -> TransportName:
        """``"http"`` or ``"litellm"``: how this judge's calls travel."""
        return self._transport.name

    def _make_transport(self, name: TransportName) -> Transport:
        if name == "http":
            from framekit.judges.http import HttpTransport

            return HttpTransport(self)
        return LitellmTransport(self)

    async def prepare(self) -> None:
        """Get ready to send from the running event loop: import litellm (seconds, so off
        the loop) or start its worker processes; or open the HTTP connection pool. A judge
        that cannot work as configured raises :class:`~framekit.JudgeConfigurationError`
        here, before any call."""
        self._secrets = self._collect_secrets()  # the environment may have changed
        problem = self.configuration_problem()
        if problem:
            raise JudgeConfigurationError(problem)
        await self._transport.open()

    async def call(
        self, request: ChatRequest, messages: list[dict[str, Any]], mode: Mode
    ) -> RawReply | Fault:
        """One call asking for ``request.schema`` in ``mode``: the raw reply, or the
        :class:`~framekit.judges.faults.Fault` the transport classified."""
        return await self._transport.call(request, messages, mode)

    async def release(self) -> None:
        """The run that called :meth:`prepare` is over."""
        await self._transport.release()

    def close(self) -> None:
        """Stop the worker processes (if any); a later run starts new ones."""
        self._transport.close()

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


def _own_params(cls: type) -> list[str]:
    """The judge's own keyword parameters (a near miss of one is a typo)."""
    names = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return [n for n, p in names.items() if p.kind is p.KEYWORD_ONLY or n == "model"]
