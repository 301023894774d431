"""What went wrong with a judge call, as a verdict the engine can act on.

Each client classifies its own failures into a :class:`Fault` at its boundary (as
httpx maps httpcore's errors in one table), so the engine never imports a client
library: litellm's exceptions in :mod:`framekit.judges.litellm.call`, aiohttp's and
every HTTP status in :mod:`framekit.judges.http` (the HTTP transport and the batch
clients alike; a batch client raises nothing but a
:class:`~framekit._errors.FaultRaised`). The verdict itself, :class:`Fault`, is a shared
basic (:mod:`framekit._fault`, below the errors that carry it); this module holds what the
clients share besides and what a verdict means for the run: only transient failures (429, 5xx, timeouts, dropped
connections) are retried (:attr:`Fault.retryable`); deterministic ones (400, context
too long, refusals) fail the row at once; rejected credentials and a judge that cannot
work as configured stop the run (:func:`raise_for_run`), because every other row would
fail the same way.
"""

from __future__ import annotations

from framekit._errors import JudgeAuthenticationError, JudgeConfigurationError, one_line
from framekit._fault import RETRYABLE, Fault, Kind, parse_retry_after, retry_after_from

__all__ = [
    "RETRYABLE",
    "TIMEOUT",
    "Fault",
    "Kind",
    "chain",
    "connect_cause",
    "never_connected",
    "parse_retry_after",
    "raise_for_run",
    "refused_by_client",
    "retry_after_from",
]


def raise_for_run(fault: Fault) -> None:
    """Raise the run's one error when ``fault`` means no row could succeed: rejected
    credentials (:class:`~framekit.JudgeAuthenticationError`) or a judge that cannot
    work as configured (:class:`~framekit.JudgeConfigurationError`). Chat calls, batch
    API calls and embedding calls all stop on these, and only on these, at once."""
    if fault.kind == "auth":
        raise JudgeAuthenticationError(fault.reason) from None
    if fault.kind == "config":
        raise JudgeConfigurationError(fault.reason) from None


TIMEOUT = "Timeout: no answer within the judge's timeout"

# Exceptions (by class name, so no client library needs importing) that mean the TCP
# connection was never established: httpx, aiohttp and the standard library spell it so.
_CONNECT_ERRORS = frozenset(
    {
        "ConnectError",
        "ClientConnectorError",
        "ClientConnectorDNSError",
        "ConnectionRefusedError",
        "gaierror",
    }
)


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes/contexts, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 12:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def never_connected(exc: BaseException) -> bool:
    """Whether the call failed before a TCP connection existed."""
    return any(type(e).__name__ in _CONNECT_ERRORS for e in chain(exc))


def connect_cause(exc: BaseException) -> str:
    """The innermost connection error of ``exc``, as ``Name: detail``."""
    for e in reversed(chain(exc)):
        if type(e).__name__ in _CONNECT_ERRORS or isinstance(e, OSError):
            return f"{type(e).__name__}: {one_line(str(e) or 'no detail', 100)}"
    return type(exc).__name__


# Exception class names, anywhere in the chain, meaning the client refused the URL itself.
_URL_REFUSED = frozenset({"InvalidURL", "InvalidUrlClientError", "UnsupportedProtocol"})


def refused_by_client(exc: BaseException) -> str | None:
    """The reason when a call failed because the HTTP client refused the endpoint URL or
    its credentials (a configuration error, not an outage), else ``None``."""
    for current in chain(exc):
        text = str(current)
        if type(current).__name__ in _URL_REFUSED:
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
    return None
