"""Provider batch APIs (half price, answered within 24 hours) behind one small client.

Why aiohttp and not litellm's batch functions: litellm's ``acreate_batch`` and
``afile_content`` return a file's whole content at once (an output file may be
hundreds of MB), and litellm cannot create Anthropic batches at all (it only retrieves
them). Two protocols, spoken directly, cost a few hundred lines and keep downloads
streaming.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framekit._errors import JudgeConfigurationError
from framekit.judges.batch.anthropic import AnthropicBatchClient
from framekit.judges.batch.base import TERMINAL, BatchClient, BatchStatus, LineResult
from framekit.judges.batch.openai import OpenAIBatchClient
from framekit.judges.http import resolve_endpoint
from framekit.judges.providers import (
    FRAMEKIT_KEY_VAR,
    PROVIDERS,
    batch_protocol,
    batch_provider,
    first_set,
)

if TYPE_CHECKING:
    from framekit.judges.judge import Judge

__all__ = [
    "TERMINAL",
    "AnthropicBatchClient",
    "BatchClient",
    "BatchStatus",
    "LineResult",
    "OpenAIBatchClient",
    "client_for",
    "endpoint_of",
    "make_client",
]


def wire_model(model: str) -> str:
    """The model name the provider expects: litellm's ``provider/`` prefix dropped."""
    return model.split("/", 1)[1] if "/" in model else model


def make_client(
    provider: str,
    api_base: str | None,
    api_key: str | None,
    model: str,
    secrets: tuple[str, ...] = (),
    **params: object,
) -> BatchClient:
    """A client for ``provider``'s batch protocol at ``api_base`` (its public endpoint
    when ``None``); ``secrets`` are redacted from every error it raises (the key always
    is). Without ``api_key``, the key is ``$FRAMEKIT_API_KEY``, else the provider's."""
    protocol = batch_protocol(provider)
    cls = AnthropicBatchClient if protocol == "anthropic" else OpenAIBatchClient
    known = PROVIDERS[protocol]
    key = api_key or first_set((FRAMEKIT_KEY_VAR, *known.key_vars))
    hidden = tuple(dict.fromkeys([*secrets, *([key] if key else [])]))
    base = api_base or known.public_base or ""
    client = cls(base, key, wire_model(model), dict(params))
    client.secrets = hidden
    return client


def endpoint_of(judge: Judge) -> tuple[str | None, str | None]:
    """``(api_base, key)`` a batch client for ``judge`` uses: the judge's own, else the
    variables of the provider whose batch API it speaks (see
    :func:`~framekit.judges.providers.batch_provider`); ``api_base`` is ``None`` for the
    provider's public endpoint."""
    return resolve_endpoint(judge.endpoint, batch_provider(judge.model))


def client_for(judge: Judge) -> BatchClient:
    """The batch client speaking to ``judge``'s endpoint with its decoding parameters.

    Endpoint and key are resolved as the HTTP transport resolves them (the judge's own,
    else the provider's variables), and a judge that cannot work as configured (no key
    for a provider's public endpoint, a malformed key or ``api_base``) raises
    :class:`~framekit.JudgeConfigurationError` here, before anything is written or
    uploaded.
    """
    speaks = batch_provider(judge.model)
    problem = judge.configuration_problem()
    if problem:
        raise JudgeConfigurationError(problem)
    base, key = endpoint_of(judge)
    if key is None and base is None:
        # The provider's public endpoint always needs a key (a self-hosted one may not).
        known = PROVIDERS[batch_protocol(speaks.name)]
        raise JudgeConfigurationError(
            f"no API key for {judge.model!r}: set {FRAMEKIT_KEY_VAR} or "
            f"{known.key_vars[0]}, or pass api_key=..."
        )
    params: dict[str, object] = {"max_tokens": judge.max_tokens, **judge.decoding.params}
    params["temperature"] = judge.temperature
    return make_client(speaks.name, base, key, judge.model, tuple(judge.secrets), **params)
