"""A judge's credentials: where its key is read from, and the checks before any call.

The key is read when it is needed (when a run starts, and by each call), never copied
into anything else: ``api_key=`` if given, else ``$FRAMEKIT_API_KEY``, else the
variable litellm reads for the provider. So a judge sent to another process or machine
carries only a key it was given, and finds one in its new environment otherwise. No
repr, cache key, log line or error shows it.

A missing or malformed key, or an ``api_base`` the HTTP client refuses, fails every call
the same way; retried as if the endpoint were down it cost a minute and read as an
outage. :func:`credential_problem` turns them into one
:class:`~framekit.JudgeConfigurationError` before the first call. The rule: a judge
with a key (``api_key=``, ``$FRAMEKIT_API_KEY``, a secret keyword such as
``azure_ad_token``, or the provider's variable) is checked for a malformed key
(whitespace, control or non-ASCII characters). A judge of a provider whose clients need
a key (:attr:`Provider.key_required <framekit.judges.providers.Provider.key_required>`)
with no key at all is missing its credentials when its transport cannot send without
one: on the litellm transport even with an ``api_base`` (litellm's clients for these
providers refuse to send without a key, so a keyless self-hosted server there still
needs a placeholder, ``api_key="none"``); on the HTTP transport only for OpenAI's own
endpoint (no ``api_base``), since a self-hosted server may take no key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from framekit._secrets import SECRET_KWARGS, has_userinfo, safe_url, url_problem
from framekit.judges.providers import FRAMEKIT_KEY_VAR, Provider, first_set


@dataclass(frozen=True)
class Credentials:
    """Where a judge's key comes from; read each time it is asked for.

    Examples
    --------
    >>> Credentials("sk-secret-123")
    Credentials(api_key='***')
    >>> Credentials().own(environ={})
    (None, '$FRAMEKIT_API_KEY')
    """

    #: The key given as ``api_key=`` (``None``: read from the environment).
    given: str | None = field(default=None, repr=False)

    def own(self, environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
        """framekit's own key and where it came from: ``api_key=``, else
        ``$FRAMEKIT_API_KEY`` (provider variables are litellm's to read)."""
        if self.given:
            return self.given, "api_key="
        env = os.environ if environ is None else environ
        return env.get(FRAMEKIT_KEY_VAR) or None, f"${FRAMEKIT_KEY_VAR}"

    def key(self, via: Provider | None = None) -> str | None:
        """The key a client of ``via``'s wire format sends: framekit's own, else the
        variable litellm reads for ``via`` (``None``: framekit's own only)."""
        own, _ = self.own()
        return own or (first_set(via.key_vars) if via is not None else None)

    def __repr__(self) -> str:
        return "Credentials(api_key='***')" if self.given else "Credentials()"


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
    provider: Provider | None,
    api_base: str | None,
    credentials: Credentials,
    routing: Mapping[str, Any],
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
    key, source = credentials.own(env)
    if key:
        return key_problem(key, source)
    if any(routing.get(name) for name in SECRET_KWARGS):
        return None
    names = provider.key_vars if provider is not None and provider.key_required else ()
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
        f"no API key for {model!r}: set {FRAMEKIT_KEY_VAR} or {names[0]}, "
        f"or pass api_key=...{where}"
    )
