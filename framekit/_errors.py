"""One exception hierarchy for framekit.

``FramekitError`` is the single base. Input errors are raised *before* any judge call
(a bad mapping, an unknown evaluator option); judge errors describe a failed call and are
normally recorded per row in ``<name>_error`` rather than raised.
"""

from __future__ import annotations

from collections.abc import Iterable


class FramekitError(Exception):
    """Base class of every error framekit raises."""


class InputError(FramekitError, ValueError):
    """The frame, mapping or options cannot be evaluated; raised before any judge call."""


class MappingError(InputError):
    """A mapping names a missing column, or an evaluator lacks a required field."""


class JudgeSpecError(InputError, TypeError):
    """``judge=`` is neither a model string, ``"local"``, a judge object nor ``None``.

    Also a ``TypeError``, which is what it was before it was an :class:`InputError`.
    """


class RecordError(FramekitError, ValueError):
    """One record cannot be evaluated (a null or empty field); recorded for that row only."""


class JudgeError(FramekitError):
    """A judge call failed; ``str(error)`` is the one-line reason recorded for the row."""


class JudgeAuthenticationError(JudgeError):
    """The endpoint rejected the credentials (HTTP 401/403): the whole run stops."""


class BatchPending(FramekitError):
    """A provider batch goes on after the run returned (``wait=False``, or the judge's
    ``batch_timeout`` passed). Nothing is lost: run the same call again to collect the
    answers. ``batch_ids`` names the provider's batches."""

    def __init__(self, message: str, batch_ids: list[str]) -> None:
        super().__init__(message)
        self.batch_ids = batch_ids


class JudgeConfigurationError(InputError, JudgeError):
    """The judge cannot work as configured (credentials missing or malformed, an
    ``api_base`` the HTTP client refuses): raised before or at the first call, never
    retried, and never mistaken for an outage."""


class LocalModelError(JudgeConfigurationError, RuntimeError):
    """The offline embedding model is missing or does not match its pinned checksum.

    A configuration error: every evaluation that needs the model would fail the same way,
    so the run stops at the first one (exit 2 in the command line), its message holding
    the whole fix. Also a ``RuntimeError``, which it was first.
    """


class OutputWriteError(FramekitError, OSError):
    """The finished results could not be written (a full disk, a destination gone):
    the work itself is kept (the answers in the cache, the finished slices beside the
    destination) and the message says how to get the output without paying again."""


class RunInterrupted(FramekitError, KeyboardInterrupt):
    """The run was interrupted; every response received so far is in the cache."""


__all__ = [
    "BatchPending",
    "FramekitError",
    "InputError",
    "JudgeAuthenticationError",
    "JudgeConfigurationError",
    "JudgeError",
    "JudgeSpecError",
    "LocalModelError",
    "MappingError",
    "OutputWriteError",
    "RecordError",
    "RunInterrupted",
]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``choices`` to a mistyped name, else ``""``."""
    import difflib

    options = list(choices)
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if not close:
        lowered = {o.lower(): o for o in options}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    return f" Did you mean {close[0]!r}?" if close else ""
