"""A group of values written straight into diskcache's ``Cache`` table, a few statements
for the whole group.

``diskcache.Cache.set`` runs three statements per value inside a transaction (look the
key up, insert or update its row, evict expired rows), which made saving a cold run's
answers a fifth of its CPU. :class:`RowWriter` writes a group in one transaction: one
look-up per 900 keys, one ``executemany`` insert for the new keys and one for the keys
already present, one eviction of expired rows. Each row is what ``set()`` would write:

- the key and value are encoded by the store's own :class:`diskcache.Disk` (``put`` and
  ``store``: a pickle in the row, raw text or bytes, or a file beside the database for a
  large value), with ``store_time`` and ``access_time`` now, ``access_count`` 0, no tag
  and no expiry, so ``Cache.get`` and framekit's own table reader read it back alike;
- the entry count and total size in the ``Settings`` table are kept by diskcache's own
  triggers, which fire for these statements as for ``set()``'s;
- a key already present is updated in place, and the value file it had is removed once
  the group is committed, as ``set()`` removes it;
- expired rows are evicted as ``set()`` evicts them, at most ``cull_limit`` per value
  written (so a group of ``n`` values evicts at most ``n * cull_limit``), their files
  removed after the commit. Eviction by policy (by size) is not done here: the writer is
  used only for stores whose policy is ``"none"`` (framekit opens its caches so), where
  ``set()`` never evicts by size either (:func:`writes_plainly`).

The connection is this module's own, with the ``sqlite_*`` settings diskcache applies to
each of its own (synchronous, a page cap a test sets...) and its 60-second wait for a
lock, except two that only decide how much memory it holds (:data:`WRITER_MEMORY`): it
reads the file into a small page cache of its own rather than mapping it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import diskcache

#: Keys per look-up of the keys already present (SQLite takes 999 parameters at least).
KEYS_PER_QUERY = 900
#: Seconds a write waits for another writer's lock, as a diskcache connection waits.
LOCK_WAIT_S = 60.0
#: The writer connection's memory settings, set after diskcache's (whose 64 MB map and
#: 32 MB page cache are for reading): no map of the file, and sqlite's default 2 MB page
#: cache. Every page a mapping touches counts in the process's RSS, and framekit's
#: table reader maps the same file too (``engine/cache_table.py``), so a cold fill of
#: 100,000 rows peaked 16 MB higher with diskcache's settings here (285 vs 269 MB, the
#: network-free run; its CPU per row the same within the noise). Neither setting
#: changes what is written, or the file.
WRITER_MEMORY = {"mmap_size": 0, "cache_size": -2000}

_COLUMNS = "store_time, expire_time, access_time, access_count, tag, size, mode, filename, value"
_INSERT = f"INSERT INTO Cache(key, raw, {_COLUMNS}) VALUES (?, ?, ?, NULL, ?, 0, NULL, ?, ?, ?, ?)"
_UPDATE = (
    "UPDATE Cache SET store_time = ?, expire_time = NULL, access_time = ?, access_count = 0,"
    " tag = NULL, size = ?, mode = ?, filename = ?, value = ? WHERE rowid = ?"
)
_EXPIRED = (
    "SELECT {} FROM Cache WHERE expire_time IS NOT NULL AND expire_time < ?"
    " ORDER BY expire_time LIMIT ?"
)


def writes_plainly(store: diskcache.Cache) -> bool:
    """Whether a group written by :class:`RowWriter` is what ``store.set()`` of each value
    would leave: diskcache's own ``Disk``, and no eviction by size."""
    return type(store.disk) is diskcache.Disk and store.eviction_policy == "none"


class RowWriter:
    """Writes groups of ``(key, value)`` into the ``Cache`` table of the diskcache store
    at ``path`` (see the module docstring). Safe to share between threads (one write at a
    time); the connection is opened on the first write and after :meth:`close`.
    """

    def __init__(self, path: Path, disk: diskcache.Disk, cull_limit: int) -> None:
        self._path = path / "cache.db"
        self.disk = disk
        self.cull_limit = cull_limit
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None
        self._pid = os.getpid()

    def _connection(self) -> sqlite3.Connection:
        if self._con is not None and self._pid != os.getpid():
            self._con = None  # a forked child: the parent's connection is not its to use
        if self._con is None:
            con = sqlite3.connect(
                self._path, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False
            )
            try:
                for key, value in con.execute("SELECT key, value FROM Settings").fetchall():
                    if isinstance(key, str) and key.startswith("sqlite_"):
                        _apply(con, key[len("sqlite_") :], value)
                for pragma, value in WRITER_MEMORY.items():
                    _apply(con, pragma, value)
            except sqlite3.Error:
                con.close()
                raise
            self._con, self._pid = con, os.getpid()
        return self._con

    def write(self, items: Iterable[tuple[str, Any]]) -> int:
        """Write ``items`` in one transaction (a key given twice keeps its last value;
        keys are text, bytes or numbers, which diskcache stores as they are, and every key
        of framekit's is text: ``TypeError`` for another kind);
        returns how many were given. Raises what sqlite raises (nothing is written then,
        and the value files this call made are removed)."""
        latest: dict[str, Any] = {}
        given = 0
        for key, value in items:
            latest[key] = value
            given += 1
        if not latest:
            return 0
        now = time.time()
        disk = self.disk
        encoded: list[tuple[Any, Any, int, int, str | None, Any]] = []
        made: list[str] = []
        try:
            for key, value in latest.items():
                db_key, raw = disk.put(key)
                if not raw:  # framekit's keys are text; diskcache pickles other kinds
                    raise TypeError(f"cache keys are text or numbers, got {type(key).__name__}")
                size, mode, filename, db_value = disk.store(value, False, key=key)
                if filename is not None:
                    made.append(filename)
                encoded.append((db_key, raw, size, mode, filename, db_value))
            with self._lock:
                removed = self._commit(encoded, now)
        except BaseException:
            for filename in made:
                disk.remove(filename)
            raise
        for filename in removed:
            disk.remove(filename)
        return given

    def _commit(
        self, encoded: list[tuple[Any, Any, int, int, str | None, Any]], now: float
    ) -> list[str]:
        """Insert or update ``encoded`` rows and evict expired ones in one transaction;
        the value files to remove once it is committed."""
        con = self._connection()
        con.execute("BEGIN IMMEDIATE")
        try:
            present = self._present(con, [row[0] for row in encoded])
            inserts, updates, removed = [], [], []
            for db_key, raw, size, mode, filename, db_value in encoded:
                found = present.get(db_key)
                if found is None:
                    inserts.append((db_key, raw, now, now, size, mode, filename, db_value))
                else:
                    rowid, old_filename = found
                    if old_filename is not None:
                        removed.append(old_filename)
                    updates.append((now, now, size, mode, filename, db_value, rowid))
            if updates:
                con.executemany(_UPDATE, updates)
            if inserts:
                con.executemany(_INSERT, inserts)
            removed.extend(self._evict_expired(con, now, len(encoded)))
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return removed

    @staticmethod
    def _present(con: sqlite3.Connection, keys: list[Any]) -> dict[Any, tuple[int, str | None]]:
        """Rowid and value file of each of ``keys`` (stored raw) already in the table."""
        found: dict[Any, tuple[int, str | None]] = {}
        for start in range(0, len(keys), KEYS_PER_QUERY):
            chunk = keys[start : start + KEYS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key, rowid, filename FROM Cache WHERE raw = 1 AND key IN ({marks})"
            for key, rowid, filename in con.execute(query, chunk):
                found[key] = (rowid, filename)
        return found

    def _evict_expired(self, con: sqlite3.Connection, now: float, written: int) -> list[str]:
        """Delete the expired rows ``written`` calls of ``set()`` would have deleted at
        most; their value files."""
        limit = self.cull_limit * written
        if limit <= 0:
            return []
        files = [name for (name,) in con.execute(_EXPIRED.format("filename"), (now, limit))]
        if files:
            delete = f"DELETE FROM Cache WHERE rowid IN ({_EXPIRED.format('rowid')})"
            con.execute(delete, (now, limit))
        return [name for name in files if name is not None]

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def _apply(con: sqlite3.Connection, pragma: str, value: Any) -> None:
    """Set one of diskcache's ``sqlite_*`` settings on ``con`` as diskcache sets it on each
    of its connections: only when it differs (the journal mode and auto-vacuum are the
    file's, and setting them again can be slow)."""
    rows = con.execute(f"PRAGMA {pragma}").fetchall()
    if len(rows) != 1 or rows[0][0] != value:
        con.execute(f"PRAGMA {pragma} = {value}").fetchall()
