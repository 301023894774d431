"""Checking a destination before any paid work: a run that cannot write its result
must say so in one line before it sends a request, not with a traceback after."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from framekit._errors import InputError


def check_writable(
    path: str | os.PathLike[str], what: str = "output", *, missing_dirs: bool = False
) -> Path:
    """Raise :class:`InputError` unless a file can be created at ``path``.

    ``path`` must not be a directory. Its directory must exist and accept a new file;
    with ``missing_dirs=True`` (a writer that creates its directory) the nearest existing
    ancestor must be a directory that does. Nothing is left behind by the check.

    Examples
    --------
    >>> check_writable("/no/such/dir/out.parquet", "-o")
    Traceback (most recent call last):
    ...
    framekit.InputError: -o /no/such/dir/out.parquet: directory /no/such/dir does not exist
    """
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        raise InputError(f"{what} {target}: is a directory; give a file name")
    if not parent.exists():
        ancestor = next((p for p in parent.parents if p.exists()), Path("."))
        if not ancestor.is_dir():
            raise InputError(f"{what} {target}: {ancestor} is a file, not a directory")
        if not missing_dirs:
            raise InputError(f"{what} {target}: directory {parent} does not exist")
        parent = ancestor
    if not parent.is_dir():
        raise InputError(f"{what} {target}: {parent} is a file, not a directory")
    try:
        # The result is written next to its destination first, then renamed: probe that.
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".framekit-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"{what} {target}: cannot write in {parent} ({reason})") from None
    return target
