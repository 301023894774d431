"""The providers framekit knows: how a model string names one, where its key comes from.

One table serves every part that needs a provider's facts: the credential check before
a run (a provider whose clients refuse to send without a key), the HTTP transport and the
batch clients (the key and base-URL variables litellm reads, the public endpoint), and
the choice of transport (which providers speak OpenAI's chat completions). Models of
providers not listed (``ollama/``...) are sent as they are and never checked: they may
run without a key, and a server that wants one answers 401, which stops the run at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from framekit import _secrets

#: The variable framekit itself reads for a judge's key, before any provider's (named in
#: the redaction layer, which masks its value whatever its length).
FRAMEKIT_KEY_VAR = _secrets.FRAMEKIT_KEY_VAR
#: The variable framekit reads for a judge's endpoint when none is given.
FRAMEKIT_BASE_VAR = "FRAMEKIT_API_BASE"

BatchProtocol = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Provider:
    """What framekit knows of one provider prefix of a litellm model string."""

    name: str
    #: Variables litellm reads for the key (any one suffices).
    key_vars: tuple[str, ...] = ()
    #: Variables litellm reads for the base URL.
    base_vars: tuple[str, ...] = ()
    #: The provider's own endpoint (where list prices and batch APIs are).
    public_base: str | None = None
    #: litellm's clients refuse to send without a key: checked before any call.
    key_required: bool = True
    #: Its endpoints speak OpenAI's chat completions (the HTTP transport's wire format).
    speaks_openai: bool = False


#: Provider prefix -> what framekit knows of it.
PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            "openai",
            ("OPENAI_API_KEY",),
            ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
            "https://api.openai.com/v1",
            speaks_openai=True,
        ),
        Provider(
            "anthropic",
            ("ANTHROPIC_API_KEY",),
            ("ANTHROPIC_API_BASE",),
            "https://api.anthropic.com/v1",
        ),
        Provider("azure", ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_AD_TOKEN")),
        Provider("gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
        Provider("mistral", ("MISTRAL_API_KEY",)),
        Provider("groq", ("GROQ_API_KEY",)),
        Provider("cohere", ("COHERE_API_KEY", "CO_API_KEY")),
        Provider("deepseek", ("DEEPSEEK_API_KEY",)),
        Provider("openrouter", ("OPENROUTER_API_KEY", "OR_API_KEY")),
        Provider("together_ai", ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "TOGETHER_AI_API_KEY")),
        Provider(
            "fireworks_ai", ("FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY", "FIREWORKSAI_API_KEY")
        ),
        Provider("xai", ("XAI_API_KEY",)),
        Provider("perplexity", ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY")),
        # A self-hosted vLLM server may take no key: read when set, never required.
        Provider(
            "hosted_vllm",
            ("HOSTED_VLLM_API_KEY",),
            ("HOSTED_VLLM_API_BASE",),
            key_required=False,
            speaks_openai=True,
        ),
    )
}
#: Model names litellm sends to a provider without a prefix.
_BARE_MODELS = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
                ("chatgpt-", "openai"), ("claude-", "anthropic"))  # fmt: skip


def provider_of(model: str) -> str | None:
    """The provider litellm would send ``model`` to, when framekit can tell.

    Examples
    --------
    >>> provider_of("openai/gpt-4o-mini"), provider_of("claude-3-5-haiku"), provider_of("x")
    ('openai', 'anthropic', None)
    """
    prefix, sep, _ = model.partition("/")
    if sep:
        return prefix.lower()
    for start, provider in _BARE_MODELS:
        if model.lower().startswith(start):
            return provider
    return None


def provider(model: str) -> Provider | None:
    """The table's entry for ``model``'s provider (``None``: one framekit does not know)."""
    return PROVIDERS.get(provider_of(model) or "")


def openai_speaker(model: str) -> Provider | None:
    """The provider that ``model``'s prefix names, when it speaks OpenAI's chat
    completions (``openai/...``, ``hosted_vllm/...``): the HTTP transport's providers.

    Examples
    --------
    >>> openai_speaker("hosted_vllm/qwen").name, openai_speaker("gpt-4o") is None
    ('hosted_vllm', True)
    """
    prefix, sep, _ = model.partition("/")
    found = PROVIDERS.get(prefix) if sep else None
    return found if found is not None and found.speaks_openai else None


def batch_provider(model: str) -> Provider:
    """Whose batch API a batch judge of ``model`` speaks to: Anthropic's Message Batches
    for Anthropic models; OpenAI's Batch API for every other model, at the model's
    provider when it speaks OpenAI's protocol (a vLLM server), else at OpenAI's."""
    found = provider(model)
    if found is not None and (found.name == "anthropic" or found.speaks_openai):
        return found
    return PROVIDERS["openai"]


def batch_protocol(name: str) -> BatchProtocol:
    """The batch protocol of a provider: ``"anthropic"`` or ``"openai"``."""
    return "anthropic" if name == "anthropic" else "openai"


def first_set(names: Iterable[str]) -> str | None:
    """The value of the first of ``names`` set (non-empty) in the environment."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)
