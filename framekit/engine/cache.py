"""The on-disk response cache (diskcache), shared by every judge and evaluator.

Keys are sha256 digests over what determines a response (model, messages, decoding
parameters, template version) and never include an API key. Values are judge responses
(dicts), kept as JSON text where JSON gives them back exactly
(:mod:`framekit.engine.cache_values`), or raw float32 bytes (embeddings).

A cache that cannot be used (full disk, corrupt database) must not cost the user their
run: the problem is reported once, in one line, and the run continues uncached. A
read-only cache is still read: its answers are served, nothing new is saved.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

import diskcache

from framekit.engine.cache_rows import RowWriter, writes_plainly
from framekit.engine.cache_table import LOOKUP_CHUNK, UNREADABLE, ReadOnlyStore, TableReader
from framekit.engine.cache_values import loaded, stored
from framekit.engine.notice import warn

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


#: What recovery from a corrupt database leaves in place: the batch records
#: (``engine.batch_manifest``), which name batches already submitted and paid for.
_KEPT = frozenset({"batches"})


def _is_read_only(exc: BaseException) -> bool:
    """Whether opening failed because this process may not write the directory."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and (
        "readonly" in text or "unable to open" in text
    )


def _is_corrupt(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "file is encrypted" in text
    )


class Cache:
    """A persistent response cache in a directory, safe across threads and processes.

    A cache that cannot be used never costs the run: a full disk is reported once (a
    one-line ``RuntimeWarning``) and the run continues uncached; a corrupt database is
    moved aside (kept for inspection in ``<dir>.corrupt-<time>``; the batch records in
    ``<dir>/batches`` stay) and a fresh one used. A directory this process may not write
    is read in place: its answers are served, with one warning that nothing new is saved.

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
        self._store: diskcache.Cache | ReadOnlyStore | None = None
        self._disabled_reason: str | None = None
        self._moved_aside = False
        #: Values written by this object so far (what an interrupted run kept).
        self.saved = 0
        self._table: TableReader | None = None
        self._table_store: object = None
        self._rows: RowWriter | None = None
        self._rows_store: object = None
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
            if _is_corrupt(exc) or not _is_read_only(exc) or not self._open_read_only(exc):
                self._failed(exc)

    def _open_read_only(self, exc: BaseException) -> bool:
        """Serve the answers of a cache this process may not write (shared, mounted
        read-only, another user's), saying once that nothing new will be saved."""
        try:
            store = ReadOnlyStore(self.path)
            count = len(store)
        except (*_CACHE_ERRORS, ValueError, TypeError):
            return False  # nothing to read either: uncached, as for any unusable cache
        self._store = store
        warn(
            f"framekit cache at {self.path} is read-only ({type(exc).__name__}: {exc}): "
            f"its {count} entries are used, nothing new will be saved"
        )
        return True

    def _failed(self, exc: BaseException) -> None:
        """One place decides: move a corrupt database aside (once), else stop caching."""
        # A read-only cache is never moved: it is not this process's to move.
        read_only = isinstance(self._store, ReadOnlyStore)
        if _is_corrupt(exc) and not self._moved_aside and not read_only:
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
            aside.mkdir()
            # The database and its value files, not the batch records beside them: those
            # name batches already paid for, which the next run must find and collect.
            for entry in sorted(self.path.iterdir()):
                if entry.name not in _KEPT:
                    shutil.move(str(entry), str(aside / entry.name))
            self._store = self._connect()
        except (*_CACHE_ERRORS, shutil.Error) as exc2:
            self._disable(exc2)
            return
        warn(
            f"framekit cache at {self.path} was corrupt ({type(exc).__name__}: {exc}); "
            f"moved its database to {aside} and started a new one"
        )

    def _disable(self, exc: BaseException) -> None:
        if self._disabled_reason is None:
            self._disabled_reason = f"{type(exc).__name__}: {exc}"
            warn(
                f"framekit cache at {self.path} is unusable ({self._disabled_reason}); "
                "continuing without caching"
            )
        self._store = None

    @property
    def enabled(self) -> bool:
        """False once the cache has been found unusable for this session."""
        return self._store is not None

    @property
    def writable(self) -> bool:
        """Whether answers are saved (False for a read-only cache, which is still read)."""
        return self._store is not None and not isinstance(self._store, ReadOnlyStore)

    def get(self, key: str) -> Any:
        """One value, or ``None`` when absent (or the cache is unusable)."""
        store = self._store
        if store is None:
            return None
        try:
            table = self._table_of(store)  # read as lookup() reads it
            return table.get(key) if table is not None else _get(store, key)
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return None

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """Look up many keys at once; returns only the hits (:meth:`lookup`, merged)."""
        hits: dict[str, Any] = {}
        for found in self.lookup(keys):
            hits.update(found)
        return hits

    def lookup(self, keys: Iterable[str]) -> Iterator[dict[str, Any]]:
        """The hits among ``keys`` (a set or dict of keys is read as it is), a dict at a
        time, so that a caller can use each batch of answers and let it go before the next
        is read (a million cached answers decoded at once would be gigabytes).

        diskcache's ``Cache`` table is read straight with sqlite3
        (:meth:`TableReader.find <framekit.engine.cache_table.TableReader.find>`: one query
        per chunk of keys, or the whole table once when many of its rows are asked),
        decoded as diskcache's own ``Disk`` decodes, which is what ``get()`` returns key by
        key; a store whose settings make ``get()`` more than a read (statistics, a
        least-recently-used policy) is read key by key instead, a chunk of
        :data:`~framekit.engine.cache_table.LOOKUP_CHUNK` keys per dict.
        """
        store = self._store
        if store is None:
            return
        try:
            table = self._table_of(store)
            if table is not None:
                yield from table.find(keys if isinstance(keys, Collection) else list(keys))
                return
            keys = keys if isinstance(keys, list) else list(keys)
            for start in range(0, len(keys), LOOKUP_CHUNK):
                found = {}
                for key in keys[start : start + LOOKUP_CHUNK]:
                    value = _get(store, key)
                    if value is not None:
                        found[key] = value
                yield found
        except _CACHE_ERRORS as exc:
            self._failed(exc)

    def _table_of(self, store: diskcache.Cache | ReadOnlyStore) -> TableReader | None:
        """The table reader of ``store``, when reading its rows is all ``get()`` does."""
        if isinstance(store, ReadOnlyStore):
            return store.table
        if store is not self._table_store:  # first use, or a store reopened since
            if self._table is not None:
                self._table.close()
            self._table_store, self._table = store, None
            if _plain_reads(store):
                self._table = TableReader(Path(store.directory), store.disk)
        return self._table

    def _gone(self) -> bool:
        """Whether the directory was deleted under an open cache, and then reopen it.

        SQLite keeps writing into the deleted file, so every later answer would be lost
        without a word: say so once and start a fresh cache at the same path.
        """
        if self.path.is_dir():
            return False
        warn(
            f"framekit cache directory {self.path} was deleted during the run; answers "
            "written to it before are lost, later ones go to a new cache at that path"
        )
        if self._store is not None:
            with contextlib.suppress(*_CACHE_ERRORS):
                self._store.close()
        self._store = None
        self._open()
        return True

    def _writer(self) -> diskcache.Cache | None:
        """The database to write to: ``None`` when uncached or read-only (said once, at
        open); reopened first when the directory was deleted under it."""
        if not self.writable:
            return None
        self._gone()
        store = self._store
        return store if isinstance(store, diskcache.Cache) else None

    def set(self, key: str, value: Any) -> None:
        """Store one value; a failing write disables the cache with one warning."""
        store = self._writer()
        if store is None:
            return
        try:
            store.set(key, stored(value))
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return
        self.saved += 1

    def set_many(self, items: Iterable[tuple[str, Any]]) -> None:
        """Store many values in one transaction: rows written straight into diskcache's
        table, a few statements for the whole group (:mod:`framekit.engine.cache_rows`),
        or ``set()`` for each value when the store's settings make ``set()`` more than that.
        """
        store = self._writer()
        if store is None:
            return
        written = 0
        items = ((key, stored(value)) for key, value in items)
        try:
            rows = self._rows_of(store)
            if rows is not None:
                written = rows.write(items)
            else:
                with store.transact():
                    for key, value in items:
                        store.set(key, value)
                        written += 1
        except _CACHE_ERRORS as exc:
            self._failed(exc)
            return
        self.saved += written

    def _rows_of(self, store: diskcache.Cache) -> RowWriter | None:
        """The group writer of ``store``, when its rows are all ``set()`` would write."""
        if store is not self._rows_store:  # first use, or a store reopened since
            if self._rows is not None:
                self._rows.close()
            self._rows_store, self._rows = store, None
            if writes_plainly(store):
                self._rows = RowWriter(Path(store.directory), store.disk, store.cull_limit)
        return self._rows

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
        """Remove every entry (of a cache this process may write)."""
        store = self._writer()
        if store is not None:
            store.clear()

    def close(self) -> None:
        """Close the underlying database (reopened lazily by diskcache on next use)."""
        if self._table is not None:
            self._table.close()
        if self._rows is not None:
            self._rows.close()
        if self._store is not None:
            self._store.close()

    def __repr__(self) -> str:
        state = "" if self.enabled else f", disabled={self._disabled_reason!r}"
        return f"Cache({str(self.path)!r}{state})"


def _get(store: diskcache.Cache, key: str) -> Any:
    """``store.get(key)`` as the value stored (JSON text read by
    :func:`~framekit.engine.cache_values.loaded`), an entry that cannot be decoded being a
    miss: a store that has no table reader (:meth:`Cache._table_of`)."""
    try:
        return loaded(store.get(key))
    except UNREADABLE:
        return None


def _plain_reads(store: diskcache.Cache) -> bool:
    """Whether ``store.get()`` only reads (so reading its table is the same): no hit
    counters, no access time or count written by the eviction policy, diskcache's own
    key and value encoding."""
    policy = diskcache.core.EVICTION_POLICY.get(store.eviction_policy, {"get": "?"})
    return not store.statistics and policy["get"] is None and type(store.disk) is diskcache.Disk


class NullCache(Cache):
    """``cache=False``: nothing is read or written."""

    def __init__(self) -> None:
        self.path = Path(os.devnull)
        self._store = None
        self._disabled_reason = "caching disabled"
        self._moved_aside = True
        self.saved = 0
        self._table = None
        self._table_store = None
        self._rows = None
        self._rows_store = None

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


#: The most answers one write group holds, and the most a run keeps waiting for the disk:
#: an answer is queued only when fewer than this many are unwritten, so a killed run
#: loses its calls in flight and at most this many answers.
WRITE_GROUP_MAX = 1024
#: Seconds the writer waits for a group to fill before it writes fewer answers than
#: :data:`WRITE_FILL`, and that number. A commit costs about as much as writing 40
#: answers (measured here: 72 µs of CPU an answer written alone, 36 in groups of 8, 31
#: in groups of 32, 20 in groups of 1,024, at 20,000 entries); at 0 ms latency a run's
#: groups averaged 15 answers without the wait. A kill loses at most this long's answers
#: more, still at most :data:`WRITE_GROUP_MAX` of them.
WRITE_LINGER_S = 0.05
WRITE_FILL = 128


class GroupWriter:
    """Saves a run's answers from a thread of its own, as many per transaction as wait
    (group commit), so the event loop never waits on sqlite.

    :meth:`put` queues an answer and returns at once. The thread takes everything queued
    (at most ``limit``) and writes it in one transaction (:meth:`Cache.set_many`), then
    takes what arrived meanwhile. Fewer than ``fill`` answers wait up to ``linger``
    seconds for more (:data:`WRITE_LINGER_S`): under light load an answer is written
    within that time, under heavy load the groups grow and each answer costs sqlite less
    (one commit per group). A group is one sqlite transaction, so an answer is in the
    cache completely or not at all. ``written`` is called in the thread with each group's keys
    once the group is written (or given up: a cache that fails is disabled, with one
    warning, as for any write). :meth:`close` writes what is queued and stops the thread.

    Examples
    --------
    >>> import tempfile
    >>> cache = Cache(tempfile.mkdtemp())
    >>> writer = GroupWriter(cache)
    >>> writer.put("k", {"label": "relevant"})
    >>> writer.close()
    >>> cache.get("k")
    {'label': 'relevant'}
    """

    def __init__(
        self,
        cache: Cache,
        written: Callable[[list[str]], None] | None = None,
        limit: int | None = None,
        linger: float = WRITE_LINGER_S,
    ) -> None:
        self.cache = cache
        self.limit = limit or WRITE_GROUP_MAX
        self.linger = linger
        self.fill = min(WRITE_FILL, self.limit)
        self._written = written
        self._cond = threading.Condition()
        self._queue: list[tuple[str, Any]] = []
        self._unwritten = 0  # queued plus being written
        self._closing = False
        self._idle = False  # the thread waits for answers (else it finds them unwoken)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def unwritten(self) -> int:
        """Answers queued or being written. A caller that can wait should, before it
        queues past ``limit``: that keeps what a kill can lose to ``limit`` answers."""
        return self._unwritten

    def put(self, key: str, value: Any) -> None:
        """Queue one answer for the writer thread (started on the first answer)."""
        self.put_many([(key, value)])

    def put_many(self, items: list[tuple[str, Any]]) -> None:
        """Queue answers for the writer thread, waking it once."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the cache writer is closed: nothing queued now is written")
            self._queue.extend(items)
            self._unwritten += len(items)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="framekit-cache-writer", daemon=True
                )
                self._thread.start()
            elif self._idle and (len(self._queue) >= self.fill or len(items) == len(self._queue)):
                self._cond.notify()  # a full group, or the first answer of one

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._waits()
                if not self._queue:
                    return  # closing, and everything is written
                deadline = time.monotonic() + self.linger
                while len(self._queue) < self.fill and not self._closing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._waits(left)
                group = self._queue[: self.limit]
                del self._queue[: self.limit]
            try:
                self.cache.set_many(group)
            except Exception as exc:  # not a cache error (set_many handles those): a bug
                self._error = exc
            finally:
                with self._cond:
                    self._unwritten -= len(group)
            if self._written is not None:
                try:
                    self._written([key for key, _ in group])
                except Exception as exc:  # the thread goes on writing whatever happens
                    self._error = exc

    def _waits(self, seconds: float | None = None) -> None:
        """Wait (holding the condition) to be woken by :meth:`put_many` or :meth:`close`."""
        self._idle = True
        self._cond.wait(seconds)
        self._idle = False

    def close(self) -> None:
        """Write everything queued, then stop the thread (safe to call again, and from
        several threads at once)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
