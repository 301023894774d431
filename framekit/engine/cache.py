"""The on-disk response cache (diskcache), shared by every judge and evaluator.

Keys are sha256 digests over what determines a response (model, messages, decoding
parameters, template version) and never include an API key. Values are plain JSON-able
dicts (judge responses) or raw float32 bytes (embeddings).

A cache that cannot be used (read-only directory, full disk, corrupt database) must not
cost the user their run: the problem is reported once and the run continues uncached.
"""

from __future__ import annotations

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


class Cache:
    """A persistent response cache in a directory, safe across threads and processes.

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
        self._open()

    def _open(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._store = diskcache.Cache(str(self.path), size_limit=2**40, eviction_policy="none")
            self._store.get("__framekit_probe__")
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):
                self._move_aside(exc)
            else:
                self._disable(exc)
        except OSError as exc:
            self._disable(exc)

    def _move_aside(self, exc: Exception) -> None:
        # A corrupt database is kept for inspection, not deleted, and a fresh one started.
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        shutil.move(str(self.path), str(aside))
        warnings.warn(
            f"framekit cache at {self.path} was corrupt ({type(exc).__name__}); "
            f"moved it to {aside} and started a new one",
            RuntimeWarning,
            stacklevel=3,
        )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._store = diskcache.Cache(str(self.path), size_limit=2**40, eviction_policy="none")
        except (OSError, sqlite3.Error) as exc2:
            self._disable(exc2)

    def _disable(self, exc: BaseException) -> None:
        if self._disabled_reason is None:
            self._disabled_reason = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"framekit cache at {self.path} is unusable ({self._disabled_reason}); "
                "continuing without caching",
                RuntimeWarning,
                stacklevel=3,
            )
        self._store = None

    @property
    def enabled(self) -> bool:
        """False once the cache has been found unusable for this session."""
        return self._store is not None

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
        except (sqlite3.Error, OSError) as exc:
            self._disable(exc)
        return hits

    def set(self, key: str, value: Any) -> None:
        """Store one value; a failing write disables the cache with one warning."""
        store = self._store
        if store is None:
            return
        try:
            store.set(key, value)
        except (sqlite3.Error, OSError) as exc:
            self._disable(exc)

    def set_many(self, items: Iterable[tuple[str, Any]]) -> None:
        """Store many values in one transaction."""
        store = self._store
        if store is None:
            return
        try:
            with store.transact():
                for key, value in items:
                    store.set(key, value)
        except (sqlite3.Error, OSError) as exc:
            self._disable(exc)

    def __len__(self) -> int:
        return 0 if self._store is None else len(self._store)

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
