"""Every secret a judge can send, and one way to take them out of any text.

A judge's credentials come from many places: ``api_key=``, ``$FRAMEKIT_API_KEY``, the
provider variables litellm reads on its own (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``...),
secret keyword arguments (``azure_ad_token``...), credential headers in ``extra_headers``
and credentials written into ``api_base`` (``user:pass@``, ``?key=...``). An endpoint may
echo any of them back, in an error body or inside an answer; :func:`collect_secrets`
gathers them all and :func:`redact` removes them (and the forms they take on the wire:
a bearer token, HTTP basic auth, URL-encoding) from errors, answers, logs and reprs.

Log records are redacted where they are created (:func:`install_log_redaction`), not by a
``logging.Filter``: a filter on a logger never sees the records of its child loggers
(``openai._base_client``, ``httpcore.http11``...), while the record factory sees them all.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

#: Environment variables framekit itself reads for the key.
FRAMEKIT_KEY_VAR = "FRAMEKIT_API_KEY"
#: Environment variable names that hold credentials litellm may send (matched by suffix,
#: so a provider added to litellm later is covered too).
_SECRET_VAR = re.compile(
    r"(_API_KEY|_APIKEY|_KEY_ID|_SECRET|_SECRET_KEY|_SECRET_ACCESS_KEY|_TOKEN|_AD_TOKEN|"
    r"_SESSION_TOKEN|_PASSWORD|_ACCESS_KEY|_CREDENTIALS)$",
    re.IGNORECASE,
)
#: Variables named like secrets that are not (flags and paths litellm and tools read).
_NOT_SECRET_VARS = frozenset({"LITELLM_LOCAL_MODEL_COST_MAP", "GOOGLE_APPLICATION_CREDENTIALS"})
#: Keyword arguments of a judge call that are secrets.
SECRET_KWARGS = frozenset(
    {
        "api_key",
        "azure_ad_token",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_access_key_id",
        "vertex_credentials",
        "client_secret",
        "password",
        "token",
    }
)
#: Header names whose values are credentials (lower-case; matched as substrings too).
_SECRET_HEADER_PARTS = ("auth", "key", "token", "secret", "cookie", "password", "signature",
                        "credential", "session")  # fmt: skip
#: How providers' API keys begin (OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``,
#: Google ``AIza``, Groq ``gsk_``, xAI, Hugging Face, Replicate, Perplexity, GitHub,
#: NVIDIA, Fireworks, AWS access key ids, GitLab, Cerebras).
_KEY_PREFIXES = ("sk-", "sk_", "AIza", "gsk_", "xai-", "hf_", "r8_", "pplx-", "ghp_", "gho_",
                 "github_pat_", "nvapi-", "fw_", "AKIA", "ASIA", "glpat-", "csk-")  # fmt: skip
#: A run of key characters long enough to be one (split on anything else: "/", ".", " ").
_KEY_TOKEN = re.compile(r"[A-Za-z0-9_-]{20,}")
#: URL query parameters whose values are credentials.
_SECRET_QUERY_PARTS = ("key", "token", "secret", "sig", "signature", "password", "auth", "code")
#: Shorter values are not treated as secrets: replacing "1" or "true" everywhere would
#: mangle text without protecting anything.
MIN_SECRET_LENGTH = 6
#: Environment values must be longer still (flags such as ``*_TOKEN=false`` are common).
_MIN_ENV_SECRET_LENGTH = 12

MASK = "***"

# Forms a credential takes inside text whatever its value: URL userinfo (up to the last
# "@" of the authority: a password may hold one), credential query parameters, bearer and
# basic tokens. Backslashes and quotes end a match: the text may be JSON (an answer), whose
# escapes must survive.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s?#\\\"'<>]+@")
_QUERY_PARAM = re.compile(r"(?P<lead>[?&](?P<name>[^=&#?/\s\\\"'<>]+)=)(?P<value>[^&#\s\\\"'<>]+)")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def _secret_header(name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_HEADER_PARTS)


def key_shaped(token: str) -> bool:
    """Whether ``token`` looks like an API key: a provider's key prefix and a digit, or a
    long mixed-case random run. Model names are words, sizes and dates
    (``gpt-4o-mini-2024-07-18``), which neither rule takes.

    Examples
    --------
    >>> key_shaped("sk-proj-Ab12Cd34Ef56Gh78Ij90"), key_shaped("gpt-4o-mini-2024-07-18")
    (True, False)
    """
    if not _KEY_TOKEN.fullmatch(token):
        return False
    if token.startswith(_KEY_PREFIXES) and any(c.isdigit() for c in token):
        return True
    counts = [sum(test(c) for c in token) for test in (str.isdigit, str.isupper, str.islower)]
    return len(token) >= 32 and min(counts) >= 4


def key_shaped_tokens(text: str) -> list[str]:
    """The key-shaped runs of ``text`` (see :func:`key_shaped`): an API key pasted into a
    header of any name (``User-Agent: app/1.0 sk-...``) or given as the model string."""
    return [token for token in _KEY_TOKEN.findall(text) if key_shaped(token)]


def mask_keys(text: str) -> str:
    """``text`` with every key-shaped run replaced by ``***``: how a model string is shown
    (``repr(Judge)``, the ``_judge`` column, the run record), in case it is a key.

    Examples
    --------
    >>> mask_keys("openai/sk-proj-Ab12Cd34Ef56Gh78Ij90"), mask_keys("openai/gpt-4o-mini")
    ('openai/***', 'openai/gpt-4o-mini')
    """
    return _KEY_TOKEN.sub(lambda m: MASK if key_shaped(m.group()) else m.group(), text)


def secret_query(name: str) -> bool:
    """Whether a URL query parameter of this name holds a credential."""
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_QUERY_PARTS)


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables named like credentials (``*_API_KEY``, ``*_TOKEN``...)."""
    env = os.environ if environ is None else environ
    found = []
    for name, value in env.items():
        if name.upper() in _NOT_SECRET_VARS or not _SECRET_VAR.search(name):
            continue
        value = value.strip()
        if len(value) >= _MIN_ENV_SECRET_LENGTH or (name == FRAMEKIT_KEY_VAR and value):
            found.append(value)
    return found


def url_secrets(url: str | None) -> list[str]:
    """Credentials written into a URL: user, password, and secret query values."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
        query = parse_qsl(parts.query, keep_blank_values=False)
    except ValueError:
        return []
    found = [v for v in (username, password) if v]
    if username and password:
        # The HTTP client turns user:pass into a basic-auth header.
        pair = f"{unquote(username)}:{unquote(password)}"
        found += [pair, base64.b64encode(pair.encode()).decode()]
    found += [value for name, value in query if secret_query(name)]
    return found


def header_secrets(headers: Any) -> list[str]:
    """Credential values in a header mapping (``extra_headers``), with and without scheme;
    a basic-auth value also decoded (``user:password``, the password), as a server may
    quote it either way. A header of any other name gives its key-shaped runs (a key
    pasted into ``User-Agent``), since an endpoint may echo every header it received."""
    if not isinstance(headers, Mapping):
        return []
    found = []
    for name, value in headers.items():
        if value is None:
            continue
        if not _secret_header(str(name)):
            found += key_shaped_tokens(str(value))
            continue
        text = str(value).strip()
        found.append(text)
        scheme, _, token = text.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token", "key"):
            found.append(token.strip())
        if scheme.lower() == "basic":
            found += _basic_decoded(token.strip())
    return found


def _basic_decoded(token: str) -> list[str]:
    """``user:password`` and its parts, from a basic-auth token (nothing if it is not one)."""
    try:
        pair = base64.b64decode(token, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return []
    user, sep, password = pair.partition(":")
    return [pair, user, password] if sep else []


def collect_secrets(
    api_key: str | None = None,
    api_base: str | None = None,
    kwargs: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Every secret a judge with these settings can send, longest first.

    Examples
    --------
    >>> collect_secrets("sk-explicit-key", "http://me:hunter22@host/v1",
    ...                 {"extra_headers": {"x-api-key": "hdr-secret-1"}}, environ={})
    ('bWU6aHVudGVyMjI=', 'sk-explicit-key', 'hdr-secret-1', 'me:hunter22', 'hunter22')
    """
    kwargs = kwargs or {}
    found: list[str] = [api_key] if api_key else []
    found += env_secrets(environ)
    found += url_secrets(api_base)
    for name, value in kwargs.items():
        if name in SECRET_KWARGS and value:
            found.append(str(value))
        elif name in ("api_base", "base_url"):
            found += url_secrets(str(value))
    found += header_secrets(kwargs.get("extra_headers"))
    found += header_secrets(kwargs.get("headers"))
    unique = {s for s in found if len(s) >= MIN_SECRET_LENGTH}
    return tuple(sorted(unique, key=lambda s: (-len(s), s)))


@functools.lru_cache(maxsize=256)
def _variants(secret: str) -> tuple[str, ...]:
    # Asked for every secret of every answer read (redact): worked out once per secret.
    forms = [secret]
    encoded = quote(secret, safe="")
    if encoded != secret:
        forms.append(encoded)
    if len(secret) > 12:
        # A key's tail identifies it as surely as the key ("...6789" in a masked log).
        forms.append(secret[-8:])
    return tuple(forms)


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret (its URL-encoded form and its last 8 characters), credentials
    in URLs and bearer/basic tokens with ``***``.

    Examples
    --------
    >>> redact("401: bad key sk-abc123456789XYZ in http://u:p@h/v1", ["sk-abc123456789XYZ"])
    '401: bad key *** in http://***@h/v1'
    """
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_LENGTH:
            for form in _variants(secret):
                if form in text:
                    text = text.replace(form, MASK)
    text = mask_urls(text)
    if text.isascii() and "bearer" not in (low := text.lower()) and "basic" not in low:
        return text  # no token to mask (an ASCII text is what IGNORECASE matches plainly)
    return _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)


def mask_urls(text: str) -> str:
    """The one rule for URLs shown anywhere: user info and the values of credential query
    parameters (``key``, ``token``, ``sig``... see :func:`secret_query`) become ``***``,
    in a URL alone or in any text (a log line, an error body, a request line).

    Examples
    --------
    >>> mask_urls("POST http://me:pw@h:1/v1/logs?sig=abc123&x=1 failed")
    'POST http://***@h:1/v1/logs?sig=***&x=1 failed'
    """
    if "://" in text:
        text = _URL_USERINFO.sub(r"\g<scheme>" + MASK + "@", text)
    if "=" in text:
        text = _QUERY_PARAM.sub(
            lambda m: m.group("lead") + MASK if secret_query(m.group("name")) else m.group(), text
        )
    return text


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """:func:`redact` applied to every string inside a JSON-like value (an answer)."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, secrets) for v in value]
    return value


def safe_url(url: str | None) -> str | None:
    """A URL fit to print: user, password and secret query values masked.

    Examples
    --------
    >>> safe_url("http://user:pw@host:8000/v1?key=abc123456&x=1")
    'http://***@host:8000/v1?key=***&x=1'
    """
    return mask_urls(url) if url else url


def url_problem(url: str, what: str) -> str | None:
    """Why ``url`` cannot be an ``http(s)://`` endpoint, or ``None``; ``what`` names it in
    the message, where the URL is shown masked.

    Examples
    --------
    >>> url_problem("127.0.0.1:6006", "the Phoenix URL")
    "the Phoenix URL '127.0.0.1:6006' is not an http:// or https:// URL with a host"
    """
    shown = safe_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"{what} {shown!r} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{what} {shown!r} is not an http:// or https:// URL with a host"
    return None


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries ``user:password@`` (an unparsable URL: no)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.username is not None or parts.password is not None


# -- logs ----------------------------------------------------------------------------

# Longest first, so that a secret containing another is masked whole. Kept sorted when
# it changes (every judge run registers its secrets), not on each log record read.
_registered: tuple[str, ...] = ()
_registry_lock = threading.Lock()
_installed = False


def register(secrets: Iterable[str]) -> None:
    """Make every log record of this process redact these secrets from now on."""
    global _registered
    new = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH} - set(_registered)
    if not new:
        return
    with _registry_lock:
        merged = set(_registered) | new
        _registered = tuple(sorted(merged, key=lambda s: (-len(s), s)))
    install_log_redaction()


def registered() -> tuple[str, ...]:
    """The secrets registered so far, longest first."""
    return _registered


def _redact_record(record: logging.LogRecord) -> None:
    secrets = registered()
    if not secrets:
        return
    try:
        message = record.getMessage()
    except Exception:  # a record whose args do not fit its format: leave it to logging
        return
    record.msg, record.args = redact(message, secrets), None
    if record.exc_info and not record.exc_text:
        # Formatted now, redacted, and cached where every Formatter looks first.
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info), secrets)


def install_log_redaction() -> None:
    """Wrap the log record factory (once) so every record is redacted at birth."""
    global _installed
    with _registry_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


__all__ = [
    "MASK",
    "SECRET_KWARGS",
    "collect_secrets",
    "env_secrets",
    "has_userinfo",
    "header_secrets",
    "install_log_redaction",
    "key_shaped",
    "key_shaped_tokens",
    "mask_keys",
    "mask_urls",
    "redact",
    "redact_value",
    "register",
    "safe_url",
    "secret_query",
    "url_problem",
    "url_secrets",
]
