"""The immutable values a :class:`~framekit.Judge` hands its transport.

As httpx's client turns its keyword arguments into ``Timeout`` and ``Limits`` values, a
judge turns its own into three frozen values, and its transport is built from them
alone: it never holds the judge, so nothing of the judge's can change under it and a
copy of a judge needs no transport of its own.

- :class:`Endpoint`: where calls go and as whom (model, ``api_base``, provider,
  :class:`~framekit.judges.credentials.Credentials`, the keyword arguments that only
  route a call);
- :class:`Limits`: concurrency, RPM, TPM, the timeout of one attempt, retries;
- :class:`Decoding`: what decides an answer besides the prompt (temperature,
  ``max_tokens``, other body parameters); with the model and the endpoint's identity it
  is the judge's part of every cache key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from framekit import _secrets
from framekit.judges.credentials import Credentials
from framekit.judges.providers import Provider, provider

#: Keyword arguments that change where a call goes, not what the model answers.
ROUTING_KWARGS = frozenset(
    {"api_base", "base_url", "api_version", "extra_headers", "headers", "timeout"}
)


@dataclass(frozen=True)
class Endpoint:
    """Where a judge's calls go, and as whom."""

    model: str
    api_base: str | None = None
    credentials: Credentials = field(default_factory=Credentials)
    #: litellm keyword arguments that route a call or carry credentials (``api_version``,
    #: ``extra_headers``, ``base_url``, ``azure_ad_token``...): never in a cache key.
    routing: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def provider(self) -> Provider | None:
        """The provider table's entry for the model (``None``: one framekit does not know)."""
        return provider(self.model)

    @property
    def base(self) -> str | None:
        """The base URL given, as ``api_base`` or litellm's ``base_url``."""
        return self.api_base or self.routing.get("base_url")

    def secrets(self) -> tuple[str, ...]:
        """Every secret a call to this endpoint can carry, as of now (see
        :func:`framekit._secrets.collect_secrets`)."""
        key, _ = self.credentials.own()
        found = _secrets.collect_secrets(key, self.api_base, self.routing)
        # An API key given as the model string is sent in every body, and may come back.
        pasted = [t for t in _secrets.key_shaped_tokens(self.model) if t not in found]
        return (*pasted, *found) if pasted else found

    def identity(self) -> str | None:
        """The endpoint as it enters the cache key (see :func:`endpoint_identity`)."""
        return endpoint_identity(self.base)


@dataclass(frozen=True)
class Limits:
    """How hard a judge's endpoint may be pushed."""

    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    #: Seconds for one attempt, the whole answer included.
    timeout: float = 60.0
    max_retries: int = 6


@dataclass(frozen=True)
class Decoding:
    """What decides an answer besides the prompt: part of every cache key."""

    temperature: float = 0.0
    max_tokens: int = 1024
    #: Other request parameters (``seed``, ``top_p``, ``extra_body``...).
    params: Mapping[str, Any] = field(default_factory=dict)
    #: Answers asked per request (self-consistency: the majority label stands, the share
    #: of samples that agree with it is its confidence); 1 asks once.
    samples: int = 1


def split_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A judge's extra keyword arguments as (routing and credentials, decoding parameters).

    Examples
    --------
    >>> split_kwargs({"seed": 7, "api_version": "2024-06-01", "azure_ad_token": "t"})
    ({'api_version': '2024-06-01', 'azure_ad_token': 't'}, {'seed': 7})
    """
    routing: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for name, value in kwargs.items():
        side = routing if name in ROUTING_KWARGS or name in _secrets.SECRET_KWARGS else params
        side[name] = value
    return routing, params


def endpoint_identity(api_base: str | None) -> str | None:
    """The endpoint as it enters the cache key: scheme, host, port and path, without
    credentials (a new key must not empty the cache), ``None`` for the provider default.

    Two self-hosted servers may both call their model ``openai/default``: the endpoint
    tells their answers apart.

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
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not _secrets.secret_query(k)])
    path = parts.path.rstrip("/")
    host = (parts.hostname or "").lower()
    return f"{parts.scheme.lower()}://{host}{port}{path}" + (f"?{query}" if query else "")
