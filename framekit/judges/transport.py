"""The judge boundary: what the engine asks of a chat judge, and what it gets back (and,
in :class:`EmbeddingBackend`, what it asks of an embedder).

A :class:`Transport` makes one call and returns the raw reply or a :class:`Fault` it
classified itself. It is built from a judge's immutable values (endpoint, limits,
decoding: :mod:`framekit.judges.endpoint`) and holds nothing of the judge. The engine
paces, retries, re-asks and caches; it never imports a client library and never asks
which transport it is talking to. Two transports exist: ``"http"``
(:mod:`framekit.judges.http`, aiohttp straight to an OpenAI-compatible endpoint) and
``"litellm"`` (:mod:`framekit.judges.litellm.transport`, every provider).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from framekit._errors import InputError
from framekit.judges.faults import Fault
from framekit.judges.providers import openai_speaker
from framekit.judges.request import ChatRequest, Mode
from framekit.judges.usage import Price

if TYPE_CHECKING:
    import numpy as np

TransportName = Literal["http", "litellm"]

#: What a transport asks of an endpoint that reports token log-probabilities: at least ten
#: alternatives per token, so the rubric's other labels are among them (OpenAI allows 20).
LOGPROBS_REQUEST: dict[str, Any] = {"logprobs": True, "top_logprobs": 10}

#: Response headers a transport keeps (lower-case prefixes): those pacing reads.
KEPT_HEADERS = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after")


@dataclass
class RawReply:
    """What one call returned, before parsing.

    ``headers`` holds the answer's rate-limit headers (lower-case names; see
    :data:`KEPT_HEADERS`), read by the pacing. ``logprobs`` is the answer's
    ``choices[0].logprobs.content`` as JSON dicts (``None``: the endpoint sent none), read
    into label probabilities (:mod:`framekit.judges.logprobs`) and then dropped: the tokens
    are never cached.
    """

    text: str | None
    refusal: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    headers: Mapping[str, str] = field(default_factory=dict)
    logprobs: list[dict[str, Any]] | None = None
    #: Of ``prompt_tokens``, those the provider read from its prompt cache (billed at the
    #: cached-input rate) and those it wrote to it (Anthropic's cache writes).
    cached_tokens: int = 0
    written_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def cost_at(self, price: Price | None) -> float | None:
        """What this reply cost at ``price`` (its cached and cache-written prompt tokens at
        their rates); ``None`` without a price."""
        if price is None:
            return None
        return price.cost(
            self.prompt_tokens, self.completion_tokens, self.cached_tokens, self.written_tokens
        )


class Transport(Protocol):
    """One way of reaching a chat judge: one call in, a reply or a classified fault out.

    ``call`` never raises for a failed call (it returns a :class:`Fault`); it raises only
    :class:`asyncio.CancelledError` and :class:`~framekit.JudgeError` (the transport
    itself cannot work, e.g. its worker processes did not start). It bounds the whole
    answer, not each read, by the judge's timeout. Its replies' text is as the endpoint
    sent it: redaction is the reader's (:func:`framekit.judges.request.read_reply`).

    Not a user extension point: ``fk.Judge(transport=)`` takes the names of the two
    transports framekit ships. Every member below is required of them.
    """

    name: TransportName

    @property
    def requires_key(self) -> bool:
        """Whether a call of a provider that wants a key cannot go out without one
        (litellm's clients refuse; the HTTP transport needs one only for OpenAI's own
        endpoint, a self-hosted server may take none)."""

    async def open(self) -> None:
        """Get ready to call from the running event loop (once per run)."""

    async def call(
        self, request: ChatRequest, messages: list[dict[str, object]], mode: Mode
    ) -> RawReply | Fault:
        """Send ``messages`` asking for ``request.schema`` in ``mode``."""

    async def release(self) -> None:
        """The run that called :meth:`open` is over (connections may be closed)."""

    def close(self) -> None:
        """Free what outlives runs (worker processes); a later run reopens."""


class EmbeddingBackend(Protocol):
    """One way of embedding texts (the offline judge's model, an embedding endpoint, or
    a user's own object given as ``AnswerRelevancy(embedding_model=...)``): a batch of
    texts in, one vector per text out.

    Required members
    ----------------
    ``model_id``
        A string naming the model; it enters every cached vector's key.
    ``embed(texts)``
        ``list[str]`` in, a 2-D array (one row per text) out. ``async def`` or a plain
        ``def``: a plain one runs in a worker thread, off the event loop.

    Optional members (the engine's default when absent)
    ---------------------------------------------------
    ``batch_size``
        How many texts one ``embed`` call gets (default :data:`DEFAULT_EMBED_BATCH`).
    ``prepare()``
        Get ready (load a model) before a run pays for answers that will need it
        (default: nothing to prepare).
    ``classify(exc)``
        What a failed ``embed`` means, as a :class:`~framekit.judges.faults.Fault`
        (``None``: not a call that may pass). Default: every failure is ``None``, so it
        fails the rows that needed the vectors, each with a one-line error, and the run
        goes on.

    A user's object is wrapped by :func:`as_embedding_backend`, which checks the required
    members (an :class:`~framekit.InputError` naming the missing one, before any call)
    and fills in the optional ones.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def batch_size(self) -> int: ...

    async def prepare(self) -> None:
        """Get ready (load a model) before a run pays for answers that will need it."""

    async def embed(self, texts: list[str]) -> np.ndarray: ...

    def classify(self, exc: BaseException) -> Fault | None:
        """What a failed :meth:`embed` means (``None``: not a call that may pass)."""


#: Texts per ``embed`` call for a backend that does not say (``batch_size``).
DEFAULT_EMBED_BATCH = 64

#: The members every embedding backend must have; the others have defaults.
EMBEDDING_REQUIRED = ("model_id", "embed")


class _UserEmbeddings:
    """A user's embedding object completed to :class:`EmbeddingBackend`: its own members
    where it has them, the documented defaults where it has not."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = str(inner.model_id)
        size = getattr(inner, "batch_size", DEFAULT_EMBED_BATCH)
        self.batch_size = size if isinstance(size, int) and size >= 1 else DEFAULT_EMBED_BATCH

    async def prepare(self) -> None:
        prepare = getattr(self.inner, "prepare", None)
        if prepare is not None:
            done = prepare()
            if inspect.isawaitable(done):
                await done

    async def embed(self, texts: list[str]) -> np.ndarray:
        embed = self.inner.embed
        if inspect.iscoroutinefunction(embed):
            return await embed(texts)
        # A plain function may compute for seconds: it must not hold up the event loop.
        out = await asyncio.to_thread(embed, texts)
        return await out if inspect.isawaitable(out) else out

    def classify(self, exc: BaseException) -> Fault | None:
        classify = getattr(self.inner, "classify", None)
        return None if classify is None else classify(exc)


def as_embedding_backend(obj: Any, owner: str) -> EmbeddingBackend:
    """``obj`` as an :class:`EmbeddingBackend`: checked for the required members and
    completed with the optional ones' defaults. ``owner`` names who was given it.

    Examples
    --------
    >>> class Mine:
    ...     model_id = "mine"
    ...     def embed(self, texts): ...
    >>> as_embedding_backend(Mine(), "answer_relevancy").batch_size
    64
    >>> as_embedding_backend(object(), "answer_relevancy")
    Traceback (most recent call last):
    ...
    framekit.InputError: answer_relevancy: embedding_model object has no 'model_id': an embedding backend needs model_id and embed(texts) (batch_size, prepare() and classify(exc) are optional)
    """
    if isinstance(obj, _UserEmbeddings):
        return obj
    for member in EMBEDDING_REQUIRED:
        if not hasattr(obj, member):
            raise InputError(
                f"{owner}: embedding_model object has no {member!r}: an embedding backend "
                "needs model_id and embed(texts) (batch_size, prepare() and classify(exc) "
                "are optional)"
            )
    if not callable(obj.embed):
        raise InputError(f"{owner}: embedding_model's embed must be a method, not {obj.embed!r}")
    return _UserEmbeddings(obj)


def keep_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The pacing-relevant subset of ``headers``, with lower-case names."""
    kept: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low.startswith("llm_provider-"):  # litellm's spelling of a provider header
            low = low[len("llm_provider-") :]
        if low.startswith(KEPT_HEADERS):
            kept[low] = str(value)
    return kept


def choose_transport(
    model: str, transport: str, processes: int, api_base: str | None
) -> TransportName:
    """Resolve ``Judge(transport=...)``: ``"auto"`` picks ``"http"`` for ``openai/...``
    and ``hosted_vllm/...`` models (``processes=1``), ``"litellm"`` otherwise.

    Examples
    --------
    >>> choose_transport("openai/gpt-4o-mini", "auto", 1, None)
    'http'
    >>> choose_transport("anthropic/claude-3-5-haiku", "auto", 1, None)
    'litellm'
    """
    if transport not in ("auto", "http", "litellm"):
        raise InputError(f"transport must be 'auto', 'http' or 'litellm', not {transport!r}")
    if transport == "litellm":
        return "litellm"
    speaks_openai = openai_speaker(model) is not None
    if transport == "auto":
        return "http" if speaks_openai and processes == 1 else "litellm"
    if processes > 1:
        raise InputError(
            "processes > 1 is for the litellm transport; the http transport needs only "
            "one process (use transport='litellm' or processes=1)"
        )
    if not speaks_openai and not api_base:
        raise InputError(
            f"transport='http' speaks OpenAI's chat completions: {model!r} needs an "
            "api_base of an OpenAI-compatible server (or use transport='litellm')"
        )
    return "http"
