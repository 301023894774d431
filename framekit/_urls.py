"""Joining an API path onto a base URL that may carry a query string.

A base URL such as ``https://host/openai/v1?api-version=2024-06-01`` (Azure-style gateways)
or ``http://collector:4318?sig=...`` (a signed endpoint) keeps its query on every call;
appending the path to the whole string put it after the query (``...?api-version=...
/chat/completions``), and every call went to the base path with a mangled parameter.
The judge's HTTP transport, the batch clients and the trace exporters all join here.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def join_path(base: str, path: str) -> str:
    """``base`` with ``path`` appended to its path; the queries of both are kept, base first.

    Examples
    --------
    >>> join_path("https://host/v1?api-version=2024-06-01", "/chat/completions")
    'https://host/v1/chat/completions?api-version=2024-06-01'
    >>> join_path("http://127.0.0.1:8000/v1/", "batches?limit=100")
    'http://127.0.0.1:8000/v1/batches?limit=100'
    >>> join_path("http://h/v1?a=1", "/batches?limit=100")
    'http://h/v1/batches?a=1&limit=100'
    """
    tail, _, extra = path.partition("?")
    if "?" not in base and "#" not in base:
        joined = base.rstrip("/") + "/" + tail.lstrip("/")
        return f"{joined}?{extra}" if extra else joined
    parts = urlsplit(base)
    query = "&".join(q for q in (parts.query, extra) if q)
    new_path = parts.path.rstrip("/") + "/" + tail.lstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, new_path, query, parts.fragment))


__all__ = ["join_path"]
