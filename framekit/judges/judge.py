"""``fk.Judge``: one LLM judge endpoint and its limits, whichever transport reaches it.

A judge turns its keyword arguments into immutable values (:mod:`framekit.judges.endpoint`)
and builds its transport from them: the HTTP transport (:mod:`framekit.judges.http`) or
litellm's (:mod:`framekit.judges.litellm`). The transport never holds the judge. The
retry loop, pacing and caching live in the engine (:mod:`framekit.engine.executor`),
which sends through the transport :meth:`Judge.open` hands it. :func:`resolve_judge`
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Literal

from framekit import _secrets
from framekit._errors import InputError, JudgeConfigurationError
from framekit.judges.credentials import Credentials, credential_problem
from framekit.judges.endpoint import Decoding, Endpoint, Limits, split_kwargs
from framekit.judges.pricing import Price, judge_price, per_million, price_from
from framekit.judges.providers import FRAMEKIT_BASE_VAR
from framekit.judges.transport import Transport, TransportName, choose_transport

#: Context window assumed for a model litellm does not know (tokens).
DEFAULT_CONTEXT_TOKENS = 128_000
#: Characters per token when turning a window into a character budget. English runs at
#: about 4; 3 leaves room for code, numbers and other scripts.
CHARS_PER_TOKEN = 3
#: Tokens kept for the template, instructions and answer schema around the fields.
PROMPT_RESERVE_TOKENS = 1_000
#: The smallest budget, however small the window: a judge needs something to read.
_MIN_BUDGET = 1_000
#: Keyword arguments framekit sets on every call itself.
_OWNED_KWARGS = frozenset({"messages", "stream", "num_retries", "response_format", "tools",
                           "tool_choice", "n"})  # fmt: skip


@dataclass(frozen=True)
class Batching:
    """How a batch judge (``Judge(batch=True)``) follows its provider batches."""

    #: Lines that failed or expired go to a follow-up ``"batch"`` or are sent ``"direct"``.
    followup: Literal["batch", "direct"] = "batch"
    #: ``False``: submit and return at once (:class:`~framekit.BatchPending`).
    wait: bool = True
    #: Hours to wait for a batch.
    timeout_h: float = 24.0
    #: Seconds before the first poll (backing off to 60 s).
    poll_s: float = 1.0


class Judge:
    """One LLM judge endpoint, with its limits, over the HTTP or the litellm transport.

    Parameters
    ----------
    model
        A litellm model string, e.g. ``"openai/gpt-4o-mini"``. A string litellm cannot
        route (``"gpt4o"``, ``"openai:gpt-4o-mini"``) raises
        :class:`~framekit.JudgeConfigurationError` here, naming the string meant (checked
        offline: :mod:`framekit.judges.litellm.model_names`).
    api_base, api_key
        Endpoint and credentials; default to ``$FRAMEKIT_API_BASE`` / ``$FRAMEKIT_API_KEY``,
        else the provider's variables litellm reads (``OPENAI_API_KEY``...). The key is
        read when a run starts, never cached, logged, shown in a repr or written to the
        output.
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
    samples
        Self-consistency for judges that report no token logprobs (Anthropic's, say):
        each request is asked ``samples`` times at ``temperature`` (which must then be
        above 0), each answer cached on its own; the majority label stands and the share
        of samples that agree with it is the row's confidence. 1 (default) asks once.
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
        in seconds (backing off to 60 s). Kept in :attr:`batching`.
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
    price
        What the endpoint charges, in US dollars per million tokens: ``{"input": 2.0,
        "output": 8.0}``, with ``"cached_input"`` (prompt tokens read from the provider's
        prompt cache; default the input rate) and ``"cache_write"`` (written to it, as
        Anthropic bills; default the input rate). ``None`` (default): litellm's list price
        where the calls go to the model's provider, else unknown (a custom ``api_base``).
        Batch lines cost half of it. Never part of the cache key.
    **litellm_kwargs
        Passed to ``litellm.acompletion`` (e.g. ``seed``); part of the cache key unless
        they only route the call (``api_version``, ``extra_headers``...). On the HTTP
        transport they are fields of the request body, so a name OpenAI's chat
        completions do not know is an :class:`~framekit.InputError` (a server's own
        fields go in ``extra_body={...}``).

    Attributes
    ----------
    endpoint, limits, decoding
        The immutable values the transport is built from
        (:class:`~framekit.judges.endpoint.Endpoint`, ``Limits``, ``Decoding``).

    Examples
    --------
    >>> judge = Judge("openai/gpt-4o-mini", api_key="sk-secret", rpm=500)
    >>> judge
    Judge('openai/gpt-4o-mini', concurrency=16, rpm=500, tpm=None, transport='http', api_key='***')
    >>> judge.transport, judge.limits.rpm
    ('http', 500)
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
        samples: int = 1,
        price: Mapping[str, float] | None = None,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("Judge(model=...) needs a litellm model string")
        provider, slash, name = model.partition("/")
        if slash and not name.strip():  # "openai/": a provider and no model
            raise InputError(
                f"model {_secrets.mask_keys(model)!r} names the provider {provider!r} but no "
                f"model after it; give one: {provider}/<model name>"
            )
        if concurrency < 1:
            raise InputError(f"concurrency must be >= 1, got {concurrency}")
        if not isinstance(processes, int) or processes < 1:
            raise InputError(f"processes must be an integer >= 1, got {processes!r}")
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and value <= 0:
                raise InputError(f"{name} must be positive or None, got {value}")
        typo = _check_kwargs(litellm_kwargs, _own_params(type(self)))
        if typo:
            raise InputError(typo)
        if batch_followup not in ("batch", "direct"):
            raise InputError(f"batch_followup must be 'batch' or 'direct', got {batch_followup!r}")
        if batch_timeout <= 0 or batch_poll <= 0:
            raise InputError("batch_timeout and batch_poll must be positive")
        _check_samples(samples, temperature, batch)
        routing, params = split_kwargs(litellm_kwargs)
        endpoint = Endpoint(
            model,
            api_base or os.environ.get(FRAMEKIT_BASE_VAR) or None,
            Credentials(api_key or None),
            routing,
            None if price is None else price_from(price),
        )
        chosen = choose_transport(model, transport, processes, endpoint.api_base)
        if chosen == "http":
            from framekit.judges.http import unknown_body_fields

            unknown = unknown_body_fields(params)
            if unknown:
                raise InputError(
                    f"Judge got an unknown keyword argument {unknown[0]!r}: the http "
                    "transport sends keyword arguments as fields of OpenAI's chat "
                    "completions, which has none of that name (a server's own fields go in "
                    "extra_body={...}; transport='litellm' passes keywords to litellm)"
                )
        if chosen == "litellm":
            # Checked now, offline: a string litellm cannot route fails every call
            # (the http transport sends the name as it is, to the server that knows it).
            from framekit.judges.litellm.model_names import model_problem

            unroutable = model_problem(model, endpoint.api_base, litellm_kwargs)
            if unroutable:
                raise JudgeConfigurationError(unroutable)
        self._assemble(
            _Values(
                endpoint,
                Limits(int(concurrency), rpm, tpm, float(timeout), int(max_retries)),
                Decoding(temperature, max_tokens, params, samples),
                context_window,
                processes,
                bool(batch),
                Batching(batch_followup, bool(wait), float(batch_timeout), float(batch_poll)),
                chosen,
            )
        )

    def _assemble(self, values: _Values) -> None:
        self.endpoint: Endpoint = values.endpoint
        self.limits: Limits = values.limits
        self.decoding: Decoding = values.decoding
        #: Tokens of the model's context window (``None``: litellm's figure, else 128k).
        self.context_window: int | None = values.context_window
        self.batch: bool = values.batch
        self.batching: Batching = values.batching
        self._processes = values.processes
        self._transport = _make_transport(values)
        self._secrets = self._collect_secrets()

    def _values(self) -> _Values:
        return _Values(
            self.endpoint,
            self.limits,
            self.decoding,
            self.context_window,
            self._processes,
            self.batch,
            self.batching,
            self.transport,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # A judge copies and pickles as its values; the copy builds its own transport
        # (its own connection pool and worker processes) where it is used.
        return (_restore, (self._values(),))

    def __setstate__(self, values: _Values) -> None:
        # How a judge built from its values (a copy, an unpickled one) is assembled.
        self._assemble(values)

    # -- what the judge is ------------------------------------------------------------
    @property
    def model(self) -> str:
        return self.endpoint.model

    @property
    def api_base(self) -> str | None:
        return self.endpoint.api_base

    @property
    def concurrency(self) -> int:
        return self.limits.concurrency

    @property
    def rpm(self) -> float | None:
        return self.limits.rpm

    @property
    def tpm(self) -> float | None:
        return self.limits.tpm

    @property
    def timeout(self) -> float:
        return self.limits.timeout

    @property
    def max_retries(self) -> int:
        return self.limits.max_retries

    @property
    def temperature(self) -> float:
        return self.decoding.temperature

    @property
    def samples(self) -> int:
        """Answers asked per request (``samples=``; 1: one)."""
        return self.decoding.samples

    # -- what the engine asks of every kind of judge ------------------------------------
    #: Whether its verdicts follow embeddings it makes itself (the offline judge's).
    embeds_locally = False

    @property
    def chat_endpoint(self) -> Judge:
        """The LLM endpoint its requests go to: itself (``None`` on the other kinds)."""
        return self

    @property
    def offline(self) -> None:
        """The offline judge it is: none."""
        return None

    @property
    def cascade(self) -> None:
        """The cascade it is: none."""
        return None

    def stages(self) -> tuple[Judge]:
        """The judges asked in turn, cheapest first: this one."""
        return (self,)

    def scores_likelihood(self, evaluator: Any) -> bool:
        """Whether it reads ``evaluator`` with the offline likelihood scorer: never."""
        return False

    @property
    def confidence_method(self) -> str:
        """How it gives a row's confidence, as the run record says it: the agreement of
        ``samples=k`` answers, else the label's token log-probabilities."""
        return f"self-consistency k={self.samples}" if self.samples > 1 else "logprobs"

    @property
    def max_tokens(self) -> int:
        return self.decoding.max_tokens

    @property
    def price(self) -> dict[str, float] | None:
        """The price given (``price=``, US dollars per million tokens), or ``None``."""
        given = self.endpoint.price
        return None if given is None else per_million(given)

    def pricing(self, *, batch: bool | None = None) -> Price | None:
        """What this judge's calls cost per token (its batch lines' with ``batch``, by
        default whether it is a batch judge): :func:`framekit.judges.pricing.judge_price`,
        the one rule for every path; ``None`` when unknown. May import litellm.

        Examples
        --------
        >>> judge = Judge("openai/my-model", api_base="http://127.0.0.1:8000/v1",
        ...               price={"input": 2.0, "output": 8.0, "cached_input": 0.5})
        >>> judge.pricing().cost(1_000_000, 0, cached=1_000_000)
        0.5
        >>> judge.pricing(batch=True).cost(1_000_000, 1_000_000)
        5.0
        """
        return judge_price(
            self.endpoint,
            transport=self.transport,
            batch=self.batch if batch is None else batch,
        )

    @property
    def processes(self) -> int:
        """Worker processes making the calls (the litellm transport's; 1: this process)."""
        return self._processes

    @property
    def litellm_kwargs(self) -> dict[str, Any]:
        """The extra keyword arguments the judge was given (routing and decoding)."""
        return {**self.endpoint.routing, **self.decoding.params}

    @property
    def transport(self) -> TransportName:
        """``"http"`` or ``"litellm"``: how this judge's calls travel."""
        return self._transport.name

    @property
    def secrets(self) -> list[str]:
        """Strings that must never leave the process (redacted from every message): the
        key from any source, credential headers, credentials in ``api_base``
        (see :mod:`framekit._secrets`). Refreshed at the start of every run."""
        return list(self._secrets)

    def _collect_secrets(self) -> tuple[str, ...]:
        found = self.endpoint.secrets()
        _secrets.register(found)  # log records redact them from now on
        return found

    def configuration_problem(self) -> str | None:
        """Why no call of this judge could succeed (a missing or malformed key, an
        ``api_base`` the HTTP client refuses), or ``None``; checked before a run's first
        call, and by the dry run."""
        endpoint = self.endpoint
        return credential_problem(
            endpoint.model,
            endpoint.provider,
            endpoint.api_base,
            endpoint.credentials,
            endpoint.routing,
            requires_key=self._transport.requires_key,
        )

    def context_tokens(self) -> int:
        """The model's context window in tokens: :attr:`context_window` if set, else what
        litellm knows of the model (imports litellm), else :data:`DEFAULT_CONTEXT_TOKENS`."""
        if self.context_window:
            return int(self.context_window)
        from framekit.judges.litellm import litellm_module

        try:
            info = litellm_module().get_model_info(self.model)
        except Exception:  # litellm raises for models it has no entry for
            return DEFAULT_CONTEXT_TOKENS
        known = info.get("max_input_tokens") or info.get("max_tokens")
        return int(known or DEFAULT_CONTEXT_TOKENS)

    def char_budget(self) -> int:
        """Characters of field text one prompt may carry: the window, less the answer and
        the template around the fields, at :data:`CHARS_PER_TOKEN` characters a token.

        Examples
        --------
        >>> judge = Judge("openai/my-model", max_tokens=1000, context_window=8_000)
        >>> judge.char_budget()
        18000
        """
        spare = self.context_tokens() - self.max_tokens - PROMPT_RESERVE_TOKENS
        return max(_MIN_BUDGET, spare * CHARS_PER_TOKEN)

    def cache_identity(self) -> dict[str, Any]:
        """What about this judge decides an answer: model and decoding parameters, and
        the endpoint without credentials (two self-hosted servers may both serve
        ``openai/default``)."""
        ident: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "params": dict(sorted(self.decoding.params.items())),
        }
        if self.decoding.samples > 1:  # a sampled judge's answers are its samples' majority
            ident["samples"] = self.decoding.samples
        endpoint = self.endpoint.identity()
        if endpoint is not None:
            ident["endpoint"] = endpoint
        return ident

    def __repr__(self) -> str:
        key = ", api_key='***'" if self.endpoint.credentials.own()[0] else ""
        workers = f", processes={self.processes}" if self.processes > 1 else ""
        return (
            f"Judge({_secrets.mask_keys(self.model)!r}, concurrency={self.concurrency}, "
            f"rpm={self.rpm}, "
            f"tpm={self.tpm}{workers}, transport={self.transport!r}{key})"
        )

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
        keyless = replace(self.endpoint, credentials=Credentials())
        return _restore(replace(self._values(), endpoint=keyless))

    def copy_with(self, *, decoding: Decoding) -> Judge:
        """A copy that decides its answers with ``decoding`` (an evaluator's ``temperature=``
        and the like: :mod:`framekit.judges.decoding`); it has its own transport and
        limits, as every judge built apart does."""
        return _restore(replace(self._values(), decoding=decoding))

    # -- a run's use of the transport --------------------------------------------------
    async def open(self) -> Transport:
        """Get ready to send from the running event loop and return the transport to send
        with: import litellm (seconds, so off the loop) or start its worker processes; or
        open the HTTP connection pool. A judge that cannot work as configured raises
        :class:`~framekit.JudgeConfigurationError` here, before any call."""
        self._secrets = self._collect_secrets()  # the environment may have changed
        problem = self.configuration_problem()
        if problem:
            raise JudgeConfigurationError(problem)
        await self._transport.open()
        return self._transport

    async def release(self) -> None:
        """The run that called :meth:`open` is over."""
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


@dataclass(frozen=True)
class _Values:
    """Everything a judge is made of: what it pickles as."""

    endpoint: Endpoint
    limits: Limits
    decoding: Decoding
    context_window: int | None
    processes: int
    batch: bool
    batching: Batching
    transport: TransportName


def _check_samples(samples: Any, temperature: float, batch: bool) -> None:
    """Raise :class:`InputError` for a ``samples=`` that cannot give a confidence."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InputError(f"samples must be an integer >= 1, got {samples!r}")
    if samples > 1 and not temperature > 0:
        raise InputError(
            f"samples={samples} at temperature={temperature} would agree by construction: "
            "give a temperature above 0 (e.g. temperature=0.7) so that the samples can differ"
        )
    if samples > 1 and batch:
        raise InputError(
            "samples > 1 is not supported with batch=True yet: send the samples directly "
            "(batch=False), or score in batch mode without a confidence"
        )


def _restore(values: _Values) -> Judge:
    judge = Judge.__new__(Judge)
    judge.__setstate__(values)
    return judge


def _make_transport(values: _Values) -> Transport:
    if values.transport == "http":
        from framekit.judges.http import HttpTransport

        return HttpTransport(values.endpoint, values.limits, values.decoding)
    from framekit.judges.litellm.transport import LitellmTransport

    pricing = functools.partial(judge_price, values.endpoint, transport="litellm", batch=False)
    return LitellmTransport(
        values.endpoint, values.limits, values.decoding, values.processes, pricing
    )


def _own_params(cls: type) -> list[str]:
    """The judge's own keyword parameters (a near miss of one is a typo)."""
    names = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return [n for n, p in names.items() if p.kind is p.KEYWORD_ONLY or n == "model"]


def _check_kwargs(kwargs: dict[str, Any], params: list[str]) -> str | None:
    """Why extra keyword arguments cannot be right, or ``None``.

    A name close to one of the judge's own parameters is a typo (``concurency=64``
    would otherwise reach the provider as a request field); other names go to litellm,
    which takes many provider-specific ones, unchecked.
    """
    import difflib

    for name in kwargs:
        if name in _OWNED_KWARGS:
            return f"Judge(..., {name}=...): framekit sets {name!r} on every call itself"
        close = difflib.get_close_matches(name, params, n=1, cutoff=0.75)
        if close:
            return (
                f"Judge got an unknown keyword argument {name!r}; did you mean {close[0]!r}? "
                "(keyword arguments unlike the judge's own go to litellm unchecked)"
            )
    return None
