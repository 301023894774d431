"""Every exception framekit raises, in one hierarchy with one base.

``FramekitError`` is the base. Input errors are raised *before* any judge call (a bad
mapping, an unknown option, a span export that cannot be read); judge errors describe a
failed call and are normally recorded per row in ``<name>_error`` rather than raised;
the rest say how a run ended (interrupted, still waiting for a batch, some rows failed)
or what it could not do (a missing optional package, a file it could not write, an
export the receiver refused). Where a class also derives from a built-in exception, it
is what that error was before framekit had a class of its own, so old ``except``
clauses still catch it::

    FramekitError
    ├── InputError (ValueError)              before any judge call
    │   ├── MappingError                     a missing column or unmapped field
    │   ├── JudgeSpecError (TypeError)       judge= of the wrong type
    │   ├── UnknownOptionError (TypeError)   an evaluator keyword it does not take
    │   ├── TraceFormatError                 a span export that cannot be read
    │   │   ├── SpanExportNotFound (FileNotFoundError)
    │   │   └── GenAIFormatError             a gen_ai.* attribute of the wrong shape
    │   └── JudgeConfigurationError ──┐      also a JudgeError: every call would fail
    │       └── LocalModelError (RuntimeError)   the offline model missing or altered
    ├── JudgeError ◄──────────────────┘      a judge call failed
    │   ├── JudgeAuthenticationError         HTTP 401/403: the run stops
    │   ├── FaultRaised                      a failure already classified (a Fault)
    │   └── ParseFailure                     a reply that is not the requested answer
    ├── RecordError (ValueError)             one record cannot be evaluated
    ├── EvaluationFailed                     on_error="raise" and some rows failed
    ├── BatchPending                         a provider batch goes on after the run
    ├── RunInterrupted (KeyboardInterrupt)   Ctrl-C; every answer so far is cached
    ├── MissingDependency (ModuleNotFoundError)   an optional extra is not installed
    ├── OutputWriteError (OSError)           the results could not be written
    ├── PhoenixError                         Phoenix refused the annotations
    └── OTLPExportError                      the OTLP endpoint refused events
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from framekit._fault import Fault


class FramekitError(Exception):
    """Base class of every error framekit raises."""


class InputError(FramekitError, ValueError):
    """The frame, mapping or options cannot be evaluated; raised before any judge call."""


class MappingError(InputError):
    """A mapping names a missing column, or an evaluator lacks a required field."""


class UnknownOptionError(InputError, TypeError):
    """An evaluator keyword that is neither its own nor a decoding option.

    Also a ``TypeError``, as Python's own for an unexpected keyword argument (what it
    was before it was an :class:`InputError`).
    """


class JudgeSpecError(InputError, TypeError):
    """``judge=`` is neither a model string, ``"local"``, a judge object nor ``None``.

    Also a ``TypeError``, which is what it was before it was an :class:`InputError`.
    """


class TraceFormatError(InputError):
    """A span export that cannot be read: names the file and what is missing or malformed."""

    __module__ = "framekit.traces"  # its public home, as in tracebacks and the docs


class SpanExportNotFound(TraceFormatError, FileNotFoundError):
    """A named span export does not exist: an input error, and a ``FileNotFoundError``."""


class GenAIFormatError(TraceFormatError):
    """A ``gen_ai.*`` attribute that does not hold what the conventions say it holds."""


class RecordError(FramekitError, ValueError):
    """One record cannot be evaluated (a null or empty field); recorded for that row only."""


class JudgeError(FramekitError):
    """A judge call failed; ``str(error)`` is the one-line reason recorded for the row."""


class JudgeAuthenticationError(JudgeError):
    """The endpoint rejected the credentials (HTTP 401/403): the whole run stops."""


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


class FaultRaised(JudgeError):
    """A call that failed and was already classified where it was made (a transport, a
    judge worker process, a batch client): only the verdict, a
    :class:`~framekit._fault.Fault`, crosses over, never the client's exception."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.reason)
        self.fault = fault


class ParseFailure(JudgeError):
    """The reply could not be read as the requested answer; ``kind`` says how
    (``"refusal"``, ``"null"``, ``"malformed"``, ``"label"``, ``"schema"``: a list of
    objects, such as a claim list, that does not match its schema; ``"ambiguous"``: two
    different verdicts in one reply; ``"quoted"``: the only verdict is quoted from the
    evaluated text; see :mod:`framekit.judges.verdict`)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class EvaluationFailed(FramekitError):
    """``on_error="raise"`` and at least one row failed; ``.frame`` holds every result."""

    def __init__(self, message: str, frame: Any) -> None:
        super().__init__(message)
        self.frame = frame


class BatchPending(FramekitError):
    """A provider batch goes on after the run returned (``wait=False``, or the judge's
    ``batch_timeout`` passed). Nothing is lost: run the same call again to collect the
    answers. ``batch_ids`` names the provider's batches."""

    def __init__(self, message: str, batch_ids: list[str]) -> None:
        super().__init__(message)
        self.batch_ids = batch_ids


class RunInterrupted(FramekitError, KeyboardInterrupt):
    """The run was interrupted; every response received so far is in the cache."""


class MissingDependency(FramekitError, ModuleNotFoundError):
    """An optional extra is not installed; the message holds the exact install command
    (see :mod:`framekit._dependencies`). Also a ``ModuleNotFoundError``, which it was."""


class OutputWriteError(FramekitError, OSError):
    """The finished results could not be written (a full disk, a destination gone):
    the work itself is kept (the answers in the cache, the finished slices beside the
    destination) and the message says how to get the output without paying again."""


class PhoenixError(FramekitError):
    """Phoenix refused or could not take the annotations (the message never holds a key)."""

    __module__ = "framekit.traces"


class OTLPExportError(FramekitError):
    """The OTLP endpoint did not accept every event."""

    __module__ = "framekit.traces"


__all__ = [
    "BatchPending",
    "EvaluationFailed",
    "FaultRaised",
    "FramekitError",
    "GenAIFormatError",
    "InputError",
    "JudgeAuthenticationError",
    "JudgeConfigurationError",
    "JudgeError",
    "JudgeSpecError",
    "LocalModelError",
    "MappingError",
    "MissingDependency",
    "OTLPExportError",
    "OutputWriteError",
    "ParseFailure",
    "PhoenixError",
    "RecordError",
    "RunInterrupted",
    "SpanExportNotFound",
    "TraceFormatError",
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


def one_line(text: str, limit: int) -> str:
    """``text`` as one line of at most ``limit`` characters, as a row's error shows it.

    Examples
    --------
    >>> one_line("a  long\\nreason", 8)
    'a long …'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _public_module() -> None:
    """Name each exception ``fk`` exports by its public home: a traceback reads
    ``framekit.JudgeConfigurationError: ...``, not the private ``framekit._errors``
    (``framekit.X`` resolves to the same class, so pickling still finds it)."""
    public = (
        FramekitError, InputError, MappingError, RecordError, JudgeError,
        JudgeAuthenticationError, JudgeConfigurationError, LocalModelError, EvaluationFailed,
        BatchPending, RunInterrupted, MissingDependency,
    )  # fmt: skip
    for cls in public:
        cls.__module__ = "framekit"


_public_module()
