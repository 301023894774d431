"""The on-disk response cache (diskcache), shared by every judge and evaluator.

Keys are sha256 digests over what determines a response (model, messages, decoding
parameters, template version) and never include an API key. Values are plain JSON-able
dicts (judge responses) or raw float32 bytes (embeddings).

A cache that cannot be used (read-only directory, full disk, corrupt database) must not
cost the user their run: the problem is reported once and the run continues uncached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import diskcache

_ENV_DIR = "FRAMEKIT_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$FRAMEKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/framekit``, else ``~/.cache/framekit``."""
    if os.environ.get(_ENV_DIR):
        return Path(os.environ[_ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "framekit"


def digest(payload: Any) -> str:
    """A stable sha256 hex digest of a JSON-able payload (keys sorted)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# Problems that make a cache unusable without making the run wrong.
_CACHE_ERRORS = (sqlite3.Error, OSError, diskcache.Timeout)


def _is_corrupt(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "file is encrypted" in text
    )


class Cache:
    """A persistent response cache in a directory, safe across threads and processes.

    A cache that cannot be used never costs the run: a read-only or full directory is
    reported once (a ``RuntimeWarning``) and the run continues uncached; a corrupt database
    is moved aside (kept for inspection as ``<dir>.corrupt-<time>``) and a fresh one used.

    Parameters
    ----------
    path
        Directory of the cache; created when missing.

    Examples
    --------
    >>> import tempfile
    >>> cache = Cache(tempfile.mkdtemp())
    >>> cache.set("k", {"label": "relevant"})
    >>> cache.get_many(["k", "missing"])
    {'k': {'label': 'relevant'}}
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._store: diskcache.Cache | None = None
        self._disabled_reason: str | None = None
        self._moved_aside = False
        #: Values written by this object so far (what an interrupted run kept).
        self.saved = 0
        self._open()

    def _connect(self) -> diskcache.Cache:
        self.path.mkdir(parents=True, exist_ok=True)
        store = diskcache.Cache(str(self.path), size_limit=2**40, eviction_policy="none")
        store.get("__framekit_probe__")
        return store

    def _open(self) -> None:
        try:
            self._store = self._connect()
        except _CACHE_ERRORS as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        """One place decides: move a corrupt database aside (once), else stop caching."""
        if _is_corrupt(exc) and not self._moved_aside:
            self._moved_aside = True
            self._move_aside(exc)
        else:
            self._disable(exc)

    def _move_aside(self, exc: BaseException) -> None:
        # A corrupt database is kept for inspection, not deleted, and a fresh one started.
        if self._store is not None:
            with contextlib.suppress(*_CACHE_ERRORS):
                self._store.close()
            self._store = None
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            shutil.move(str(self.path), str(aside))
            self._store = self._connect()
        except (*_CACHE_ERRORS, shutil.Error) as exc2:
            self._disable(exc2)
            return
        warnings.warn(
            f"framekit cache at {self.path} was corrupt ({type(exc).__name__}: {exc}); "
            f"moved it to {aside} and started a new one",
            RuntimeWarning,
            stacklevel=4,
        )

    def _disable(self, exc: BaseException) -> None:
        if self._disabled_reason is None:
            self._disabled_reason = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"framekit cache at {self.path} is unusable ({self._disabled_reason}); "
                "continuing without caching",
                RuntimeWarning,
                stacklevel=4,
            )
        self._store = None

    @property
    def enabled(self) -> bool:
        """False once the cache has been found unusable for this session."""
        return self._store is not None

    def get(self, key: str) -> Any:
        """One value, or ``None`` when absent (or the cache is unusable)."""
        store = self._store
        if store is None:
            return None
        try:
            return store.get(key)
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return None

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """Look up many keys at once; returns only the hits."""
        store = self._store
        if store is None:
            return {}
        hits: dict[str, Any] = {}
        try:
            for key in keys:
                value = store.get(key)
                if value is not None:
                    hits[key] = value
        except _CACHE_ERRORS as exc:
            self._failed(exc)
        return hits

    def _gone(self) -> bool:
        """Whether the directory was deleted under an open cache, and then reopen it.

        SQLite keeps writing into the deleted file, so every later answer would be lost
        without a word: say so once and start a fresh cache at the same path.
        """
        if self.path.is_dir():
            return False
        warnings.warn(
            f"framekit cache directory {self.path} was deleted during the run; answers "
            "written to it before are lost, later ones go to a new cache at that path",
            RuntimeWarning,
            stacklevel=4,
        )
        if self._store is not None:
            with contextlib.suppress(*_CACHE_ERRORS):
                self._store.close()
        self._store = None
        self._open()
        return True

    def set(self, key: str, value: Any) -> None:
        """Store one value; a failing write disables the cache with one warning."""
        store = self._store
        if store is None:
            return
        if self._gone():
            store = self._store
            if store is None:
                return
        try:
            store.set(key, value)
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return
        self.saved += 1

    def set_many(self, items: Iterable[tuple[str, Any]]) -> None:
        """Store many values in one transaction."""
        store = self._store
        if store is None:
            return
        if self._gone():
            store = self._store
            if store is None:
                return
        written = 0
        try:
            with store.transact():
                for key, value in items:
                    store.set(key, value)
                    written += 1
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return
        self.saved += written

    def __len__(self) -> int:
        store = self._store
        if store is None:
            return 0
        try:
            return len(store)
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return 0

    def clear(self) -> None:
        """Remove every entry."""
        if self._store is not None:
            self._store.clear()

    def close(self) -> None:
        """Close the underlying database (reopened lazily by diskcache on next use)."""
        if self._store is not None:
            self._store.close()

    def __repr__(self) -> str:
        state = "" if self.enabled else f", disabled={self._disabled_reason!r}"
        return f"Cache({str(self.path)!r}{state})"


class NullCache(Cache):
    """``cache=False``: nothing is read or written."""

    def __init__(self) -> None:
        self.path = Path(os.devnull)
        self._store = None
        self._disabled_reason = "caching disabled"
        self._moved_aside = True
        self.saved = 0

    def __repr__(self) -> str:
        return "NullCache()"


def resolve_cache(cache: Cache | str | os.PathLike[str] | bool | None) -> Cache:
    """Turn the ``cache=`` argument into a :class:`Cache`."""
    if cache is False:
        return NullCache()
    if isinstance(cache, Cache):
        return cache
    if cache is None or cache is True:
        return Cache(default_cache_dir())
    return Cache(cache)
