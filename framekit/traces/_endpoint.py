"""Where an export goes: its URL checked before anything is sent, shown and redacted one way.

An export URL may carry credentials: user info (``http://user:KEY@host``, which both
HTTP clients send as basic auth, as a proxy in front of Phoenix or a collector may ask)
and query parameters (``?api_key=``, a signed ``?sig=``). They are needed on the wire and
never shown: every message, log line and result names the URL through
:func:`framekit._secrets.safe_url`, and every text from the server or the HTTP client is
redacted of every credential the export sends (URL, headers, key) and their encodings
(URL-encoded, base64 basic auth, decoded ``user:password``).

User info is refused (before anything is sent) only next to an ``Authorization`` header
from elsewhere (``PHOENIX_API_KEY``, an OTLP header): the client would replace one
credential with the other without a word.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from framekit import _secrets
from framekit._errors import InputError
from framekit._urls import join_path


@dataclass(frozen=True)
class Destination:
    """An export URL and every secret sent with it (registered for log redaction)."""

    url: str
    secrets: tuple[str, ...]

    @classmethod
    def checked(
        cls, url: str, what: str, headers: Mapping[str, str], key: str | None, header_source: str
    ) -> Destination:
        """The destination, or :class:`InputError` (URL shown masked) when it cannot work.

        ``what`` names the URL in messages ("the Phoenix URL"); ``header_source`` names
        where an ``Authorization`` header in ``headers`` comes from.
        """
        problem = _secrets.url_problem(url, what)
        if problem:
            raise InputError(problem)
        if _secrets.has_userinfo(url) and any(k.lower() == "authorization" for k in headers):
            raise InputError(
                f"{what} {_secrets.safe_url(url)!r} carries credentials (user:password@) and "
                f"{header_source} sends an Authorization header too: the URL's would silently "
                "replace it; give one of them"
            )
        secrets = _secrets.collect_secrets(key, url, {"extra_headers": dict(headers)})
        _secrets.register(secrets)  # log lines of httpx, urllib3 and the SDK are redacted
        return cls(url, secrets)

    @property
    def shown(self) -> str:
        """The URL fit to print."""
        return _secrets.safe_url(self.url) or ""

    def at(self, path: str) -> str:
        """The URL of ``path`` under this destination (its query kept last)."""
        return join_path(self.url, path)

    def message(self, text: str) -> str:
        """``text`` on one line, every credential of this destination masked."""
        return _secrets.redact(" ".join(text.split()), self.secrets)


__all__ = ["Destination"]
