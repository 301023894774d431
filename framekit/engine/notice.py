"""Warnings that Python prints on one line.

``warnings.warn`` attributes a warning to a line of source and prints that line under
the message. For a warning raised inside framekit the line is framekit's own (a reader
saw ``self._open()`` under the read-only cache warning), which tells the user nothing.
Attributed to no source file, the message is printed alone, on one line; it is still an
ordinary warning that ``warnings`` filters and ``catch_warnings`` see.
"""

from __future__ import annotations

import warnings


def warn(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Issue ``message`` as a one-line warning of ``category``.

    Examples
    --------
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("framekit cache at /c is read-only")
    >>> w = caught[0]
    >>> warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line)
    'framekit:0: RuntimeWarning: framekit cache at /c is read-only\\n'
    """
    # Line 0 of no file: linecache finds no source line to print under the message.
    warnings.warn_explicit(message, category, filename="framekit", lineno=0, module="framekit")
