"""A judge's settings checked before any call: typos, credentials, the endpoint URL.

A missing or malformed key, or an ``api_base`` the HTTP client refuses, fails every call
the same way; retried as if the endpoint were down it cost a minute and read as an
outage. These checks turn them into one :class:`~framekit.JudgeConfigurationError`.

The credential rule: a judge with a key (``api_key=``, ``$FRAMEKIT_API_KEY``, a secret
keyword such as ``azure_ad_token``, or the provider's variable litellm reads) is checked
for a malformed key (whitespace, control or non-ASCII characters). A judge of a provider
in :data:`PROVIDER_KEYS` with no key at all is missing its credentials when its transport
cannot send without one: on the litellm transport even with an ``api_base`` (litellm's
clients for these providers refuse to send without a key, so a keyless self-hosted
server there still needs a placeholder, ``api_key="none"``); on the HTTP transport only
for OpenAI's own endpoint (no ``api_base``), since a self-hosted server may take no key.
Models of other providers (``ollama/``, ``hosted_vllm/``...) are
not checked: they may run without a key, and a server that wants one answers 401, which
stops the run at once.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from framekit._secrets import SECRET_KWARGS, has_userinfo, safe_url, secret_query, url_problem

#: Provider prefix of a litellm model string -> the variables litellm reads for its key
#: (any one suffices). Models of other providers are not checked.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "azure": ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_AD_TOKEN"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cohere": ("COHERE_API_KEY", "CO_API_KEY"),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY", "OR_API_KEY"),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "TOGETHER_AI_API_KEY"),
    "fireworks_ai": ("FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY", "FIREWORKSAI_API_KEY"),
    "xai": ("XAI_API_KEY",),
    "perplexity": ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"),
}
#: Model names litellm sends to a provider without a prefix.
_BARE_MODELS = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
                ("chatgpt-", "openai"), ("claude-", "anthropic"))  # fmt: skip
#: Keyword arguments framekit sets on every call itself.
_OWNED_KWARGS = frozenset({"messages", "stream", "num_retries", "response_format", "tools",
                           "tool_choice", "n"})  # fmt: skip


def provider_of(model: str) -> str | None:
    """The provider litellm would send ``model`` to, when framekit can tell."""
    prefix, sep, _ = model.partition("/")
    if sep:
        return prefix.lower()
    for start, provider in _BARE_MODELS:
        if model.lower().startswith(start):
            return provider
    return None


def check_kwargs(kwargs: Mapping[str, Any], params: Iterable[str]) -> str | None:
    """Why extra keyword arguments cannot be right, or ``None``.

    A name close to one of the judge's own parameters is a typo (``concurency=64``
    would otherwise reach the provider as a request field); other names go to litellm,
    which takes many provider-specific ones, unchecked.
    """
    own = list(params)
    for name in kwargs:
        if name in _OWNED_KWARGS:
            return f"Judge(..., {name}=...): framekit sets {name!r} on every call itself"
        close = difflib.get_close_matches(name, own, n=1, cutoff=0.75)
        if close:
            return (
                f"Judge got an unknown keyword argument {name!r}; did you mean {close[0]!r}? "
                "(keyword arguments unlike the judge's own go to litellm unchecked)"
            )
    return None


def key_problem(key: str, source: str) -> str | None:
    """Why a key cannot be sent in an HTTP header, or ``None``."""
    if key != key.strip():
        return (
            f"the API key from {source} has leading or trailing whitespace (a newline "
            "read from a file?); remove it"
        )
    if any(not 33 <= ord(c) <= 126 for c in key):
        return (
            f"the API key from {source} contains characters an HTTP header cannot carry "
            "(spaces, control or non-ASCII characters); check that it was copied whole"
        )
    return None


def api_base_problem(api_base: str) -> str | None:
    """Why the HTTP client would refuse ``api_base``, or ``None``."""
    problem = url_problem(api_base, "api_base")
    if problem:
        return problem
    if has_userinfo(api_base):
        return (
            f"api_base {safe_url(api_base)!r} carries credentials (user:password@host), "
            "which the HTTP client refuses next to the API key; pass the key as api_key= or "
            "FRAMEKIT_API_KEY, or a header in extra_headers"
        )
    return None


def credential_problem(
    model: str,
    api_base: str | None,
    api_key: str | None,
    key_source: str,
    kwargs: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    requires_key: bool = True,
) -> str | None:
    """Why no call of this judge can succeed, or ``None`` (see the module's rule).

    ``requires_key=False`` (the HTTP transport to a self-hosted ``api_base``): a missing
    key is not a problem, the server may take none.
    """
    env = os.environ if environ is None else environ
    if api_base:
        problem = api_base_problem(api_base)
        if problem:
            return problem
    if api_key:
        return key_problem(api_key, key_source)
    if any(kwargs.get(name) for name in SECRET_KWARGS):
        return None
    provider = provider_of(model)
    names = PROVIDER_KEYS.get(provider or "", ())
    for name in names:
        value = env.get(name)
        if value:
            return key_problem(value, f"${name}")
    if not names or not requires_key:
        return None
    where = (
        " (on the litellm transport a server that needs no key still needs a "
        "placeholder, e.g. api_key='none')"
        if api_base
        else ""
    )
    return (
        f"no API key for {model!r}: set FRAMEKIT_API_KEY or {names[0]}, or pass api_key=...{where}"
    )


# Exception class names, anywhere in the chain, meaning the client refused the URL itself.
_URL_REFUSED = frozenset({"InvalidURL", "InvalidUrlClientError", "UnsupportedProtocol"})


def refused_by_client(exc: BaseException) -> str | None:
    """The reason when a call failed because the HTTP client refused the endpoint URL or
    its credentials (a configuration error, not an outage), else ``None``."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 12:
        seen.append(current)
        name = type(current).__name__
        text = str(current)
        if name in _URL_REFUSED:
            return "the HTTP client refused the judge's URL (check api_base)"
        if isinstance(current, ValueError) and "credentials encoded in URL" in text:
            return (
                "the HTTP client refused credentials written into api_base next to the "
                "API key; pass the key as api_key= or FRAMEKIT_API_KEY instead"
            )
        if "Missing credentials" in text or "api_key client option must be set" in text:
            return (
                "the client found no API key: set FRAMEKIT_API_KEY or the provider's "
                "variable, or pass api_key=... (a placeholder for a server that needs none)"
            )
        current = current.__cause__ or current.__context__
    return None


def endpoint_identity(api_base: str | None) -> str | None:
    """The endpoint as it enters the cache key: scheme, host, port and path, without
    credentials (a new key must not empty the cache), ``None`` for the provider default.

    Examples
    --------
    >>> endpoint_identity("HTTP://me:pw@LocalHost:8000/v1/?key=abc123456&api-version=2")
    'http://localhost:8000/v1?api-version=2'
    """
    if not api_base:
        return None
    try:
        parts = urlsplit(api_base.strip())
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return api_base.strip()
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not secret_query(k)])
    path = parts.path.rstrip("/")
    host = (parts.hostname or "").lower()
    return f"{parts.scheme.lower()}://{host}{port}{path}" + (f"?{query}" if query else "")
