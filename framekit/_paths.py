"""Checking a destination before any paid work: a run that cannot write its result
must say so in one line before it sends a request, not with a traceback after.

framekit writes a result under a temporary name and renames it onto the destination, so
whatever the destination was is replaced. That is right for a regular file (or a new
path) and wrong for anything else that has a name: a FIFO, a character or block device
(``/dev/null``: as root, renaming onto it destroys the device node) or a socket. Those are
refused by :func:`check_regular_or_new`, which every writer calls.
"""

from __future__ import annotations

import os
import stat
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
    check_utf8_name(target, what)
    check_regular_or_new(target, what)
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


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` fit to print: the bytes of a file name that are not UTF-8 shown escaped
    (``caf\\xe9.parquet``), never as the surrogates Python holds them in."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def check_utf8_name(path: str | os.PathLike[str], what: str = "file") -> None:
    """Raise :class:`InputError` when ``path`` is not valid UTF-8 (a name written under
    another encoding, such as Latin-1): polars and pyarrow take paths as UTF-8 text and
    fail on it with messages that name neither the path nor the reason.

    Examples
    --------
    >>> check_utf8_name(os.fsdecode(bytes([99, 97, 102, 0xE9])), "-o")
    Traceback (most recent call last):
    ...
    framekit.InputError: -o caf...: the name is not valid UTF-8 (written under another ...
    """
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"{what} {shown_path(path)}: the name is not valid UTF-8 (written under another "
            "encoding), which polars and pyarrow cannot open; rename it"
        ) from None


#: What an existing destination that is not a regular file is, by its file type.
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular_or_new(path: str | os.PathLike[str], what: str = "output") -> None:
    """Raise :class:`InputError` when ``path`` exists and is not a regular file (or a
    directory, which the writers refuse in their own words).

    A symbolic link is judged by what it points to: a link to ``/dev/null`` is refused,
    a dangling link is a new path.

    Examples
    --------
    >>> check_regular_or_new("/dev/null", "-o")
    Traceback (most recent call last):
    ...
    framekit.InputError: -o /dev/null: is a character device, not a regular file; ...
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # a new path (or one the directory checks explain)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"{what} {os.fspath(path)}: cannot look at it ({reason})") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    raise InputError(
        f"{what} {os.fspath(path)}: is {kind}, not a regular file; framekit replaces its "
        "destination, so it writes only to a regular file or a new path"
    )
