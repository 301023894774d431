"""What the simulator answers with: a decided reply and an OpenAI-style error body.

Apart from :mod:`framekit.testing._sim_http` so that the protocol modules it serves
(``_sim_batch``) build replies without importing the server back (no import cycle).
"""

from __future__ import annotations

import json

_ERRORS: dict[int, tuple[str, str, str | None]] = {
    400: ("Simulated invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    404: ("Unknown endpoint.", "invalid_request_error", None),
    405: ("Method not allowed.", "invalid_request_error", None),
    429: ("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None),
    503: ("The server is overloaded or not ready yet.", "server_error", None),
}
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class Reply:
    """One decided response: what to send, after how long, and how (normal/drop/trickle)."""

    __slots__ = ("status", "body", "headers", "delay", "mode", "api", "tokens", "prefixes", "done")

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        delay: float = 0.0,
        mode: str = "normal",
        api: bool = True,
        tokens: tuple[int, ...] = (0, 0, 0, 0),
        prefixes: tuple[bytes, ...] = (),
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers
        self.delay = delay
        self.mode = mode
        self.api = api
        #: Prompt, completion, cached and cache-written prompt tokens.
        self.tokens = (*tokens, 0, 0, 0, 0)[:4]
        #: The prompt's cacheable prefixes, cached once the reply is sent.
        self.prefixes = prefixes
        self.done = False

    def head(self, keep_alive: bool) -> bytes:
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Error')}",
            "content-type: application/json",
            f"content-length: {len(self.body)}",
        ]
        lines.extend(f"{name}: {value}" for name, value in self.headers)
        if not keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def error_body(status: int, message: str | None = None, param: str | None = None) -> bytes:
    """An OpenAI-style ``{"error": {...}}`` body."""
    default, kind, code = _ERRORS.get(status, ("Simulated error.", "server_error", None))
    error = {"message": message or default, "type": kind, "param": param, "code": code}
    return json.dumps({"error": error}).encode()
