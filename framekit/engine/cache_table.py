"""diskcache's ``Cache`` table read straight with sqlite3, many keys per statement.

``diskcache.Cache.get`` runs one query per key. A run asks for thousands of keys at once,
so :class:`TableReader` reads them the way that costs least for how many are asked:

- a few (fewer than :data:`SCAN_SHARE` of the table's rows): one query per
  :data:`LOOKUP_CHUNK` keys (``WHERE key IN (...)``), each key found through the table's
  index;
- many: the whole table read once, in order, each row kept when its key is asked. On a
  cache of 1,000,000 answers this read cost 1.7 µs a row against 6.2 µs a key found
  through the index (the index's pages are visited in random order, the table's in file
  order), so it wins once a third of the rows are asked, as in a re-run of the same
  frame.

Either way each value is decoded by the store's :class:`diskcache.Disk` as ``get()``
decodes it, and JSON text is read as :func:`~framekit.engine.cache_values.loaded` reads
it, so a reader gives exactly what :meth:`Cache.get <framekit.engine.cache.Cache.get>`
would. :class:`ReadOnlyStore` serves a cache directory this process may not write through
the same reader.
"""

from __future__ import annotations

import pickle
import sqlite3
import threading
import time
from collections.abc import Collection, Container, Iterator
from pathlib import Path
from typing import Any

import diskcache
import orjson

from framekit.engine.cache_values import loaded

#: Keys per SQL query of a chunked lookup (SQLite takes 999 parameters at least).
LOOKUP_CHUNK = 900

#: A lookup of at least this share of the table's rows reads the whole table instead of
#: looking each key up (see the module's docstring for the measured costs).
SCAN_SHARE = 0.3

#: Rows taken from sqlite at a time while reading the whole table: the hits of each are
#: decoded and handed on before the next are read, so memory holds one such batch.
SCAN_ROWS = 10_000

#: How much of the database file a reader maps into memory (sqlite's ``mmap_size``), so
#: that reading a page is no system call: the file of a million cached answers is
#: ~330 MB, and mapping all of it made a chunked lookup ~2 µs a key (a quarter) cheaper
#: there; diskcache's own 64 MB mapping gained nothing. The pages are the operating
#: system's file cache (shared, dropped under memory pressure), though the process's RSS
#: counts those it has read.
READ_MAP_BYTES = 1 << 30

#: What decoding a value can raise besides a missing value file: a corrupt or foreign
#: pickle. Such an entry is a miss (it will be asked again and overwritten), never a
#: crash of the run.
UNREADABLE = (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError,
              TypeError, ValueError, UnicodeDecodeError)  # fmt: skip

# What get() reads: a key stored as it is (diskcache pickles other keys), not expired.
_UNEXPIRED = "(expire_time IS NULL OR expire_time > ?)"
_LIVE = f"raw = 1 AND {_UNEXPIRED}"


def reads_whole_table(asked: int, rows: int) -> bool:
    """Whether finding ``asked`` keys in a table of ``rows`` rows costs less by reading
    the whole table than by looking each key up (:data:`SCAN_SHARE`).

    Examples
    --------
    >>> reads_whole_table(30_000, 30_000), reads_whole_table(1_000, 1_000_000)
    (True, False)
    """
    return asked >= SCAN_SHARE * rows


class TableReader:
    """diskcache's ``Cache`` table read with sqlite3 (never written), each value decoded
    by the store's :class:`diskcache.Disk` as ``diskcache.Cache.get`` does: string keys
    are stored as they are (``raw = 1``), a value as raw text or bytes, a pickle in the
    row, or a file beside the database.
    """

    def __init__(self, path: Path, disk: diskcache.Disk, uri: str | None = None) -> None:
        self._uri = uri or f"{(path / 'cache.db').absolute().as_uri()}?mode=ro"
        self.disk = disk
        self._lock = threading.Lock()  # one connection, shared by the run's threads
        self._con: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
        try:
            con.execute(f"PRAGMA mmap_size = {READ_MAP_BYTES}").fetchall()
            con.execute("SELECT rowid FROM Cache LIMIT 1").fetchall()
        except sqlite3.Error:
            con.close()
            raise
        return con

    def connection(self) -> sqlite3.Connection:
        """The open connection; (re)opened on first use, and after :meth:`close`."""
        if self._con is None:
            self._con = self._connect()
        return self._con

    def find(self, keys: Collection[Any]) -> Iterator[dict[str, Any]]:
        """The hits among ``keys`` (a list, or a set or dict of them: a whole-table read
        then tests its rows against it as it is), a dict at a time (per chunk of keys, or
        per :data:`SCAN_ROWS` rows of a whole-table read): each can be used and let go
        before the next is read."""
        text = [k for k in keys if type(k) is str]
        if len(text) < len(keys):  # other keys are pickled by diskcache: one by one
            odd = ((key, self.get(key)) for key in keys if type(key) is not str)
            yield {key: value for key, value in odd if value is not None}
        if len(text) > LOOKUP_CHUNK and reads_whole_table(len(text), self.count()):
            keyed = isinstance(keys, (set, frozenset, dict)) and len(text) == len(keys)
            yield from self._scan(keys if keyed else set(text))  # type: ignore[arg-type]
            return
        for start in range(0, len(text), LOOKUP_CHUNK):
            yield self.get_many(text[start : start + LOOKUP_CHUNK])

    def count(self) -> int:
        """The rows of the table, expired or not (what a whole-table read goes through)."""
        with self._lock:
            return int(self.connection().execute("SELECT count(*) FROM Cache").fetchone()[0])

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        """The hits among ``keys``, text keys, at most 999 of them."""
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        with self._lock:
            rows = (
                self.connection()
                .execute(
                    f"SELECT key, mode, filename, value FROM Cache WHERE key IN ({marks})"
                    f" AND {_LIVE}",
                    (*keys, time.time()),
                )
                .fetchall()
            )
        return self._decoded(rows)

    def _scan(self, wanted: Container[str]) -> Iterator[dict[str, Any]]:
        # A connection of its own, outside the lock: the caller works between batches,
        # and may look a key up meanwhile. The read is one snapshot of the table.
        con = self._connect()
        try:
            rows = con.execute(
                f"SELECT key, mode, filename, value FROM Cache WHERE {_LIVE}", (time.time(),)
            )
            while batch := rows.fetchmany(SCAN_ROWS):
                hits = self._decoded(batch, wanted)
                if hits:
                    yield hits
        finally:
            con.close()

    def _decoded(
        self, rows: list[tuple[str, int, str | None, Any]], wanted: Container[str] | None = None
    ) -> dict[str, Any]:
        """The values of ``rows`` (those whose key is ``wanted``, when given) by key."""
        hits: dict[str, Any] = {}
        fetch = self.disk.fetch
        # Text in the row is JSON (framekit.engine.cache_values), read by orjson here rather
        # than through fetch() and loaded(), which cost 1.3-1.8 µs a row against 1.1-1.4;
        # a pickle in the row (an older cache's answer) is what diskcache's own Disk reads
        # with pickle.load over a BytesIO, unpickled straight from the bytes. Decoding is
        # most of a lookup's time.
        inline = type(self.disk) is diskcache.Disk
        unpickle, in_row = pickle.loads, diskcache.core.MODE_PICKLE
        json, raw = orjson.loads, diskcache.core.MODE_RAW
        for key, mode, filename, value in rows:
            if wanted is not None and key not in wanted:
                continue
            try:
                if mode == raw and type(value) is str:  # loaded() spelled out: the hot path
                    hits[key] = json(value)
                elif inline and mode == in_row and value is not None:
                    hits[key] = unpickle(value)
                else:
                    hits[key] = loaded(fetch(mode, filename, value, False))
            except orjson.JSONDecodeError:  # text no framekit wrote: kept as it is
                hits[key] = value
            except OSError:  # its value file is gone: a miss, as for diskcache
                continue
            except UNREADABLE:
                continue
        return hits

    def get(self, key: Any) -> Any:
        """One value, or ``None`` (a miss, or an entry that cannot be decoded)."""
        db_key, raw = self.disk.put(key)
        with self._lock:
            rows = (
                self.connection()
                .execute(
                    "SELECT key, mode, filename, value FROM Cache WHERE key = ? AND raw = ?"
                    f" AND {_UNEXPIRED}",
                    (db_key, raw, time.time()),
                )
                .fetchall()
            )
        return next(iter(self._decoded(rows).values()), None)  # (a key has one row)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


class ReadOnlyStore:
    """A diskcache directory read in place, for a process that may not write it.

    ``diskcache.Cache`` cannot open such a directory (it creates its tables and sets its
    settings on open), so its table is read by a :class:`TableReader` with the
    :class:`diskcache.Disk` its settings describe. Opened ``mode=ro`` when SQLite can use
    the WAL index beside it; else (no ``-shm`` file, and none may be created: a cache
    closed cleanly) as an ``immutable`` file, which is what the database file holds
    (answers left only in a ``-wal`` file would be missed).
    """

    def __init__(self, path: Path) -> None:
        if not (path / "cache.db").is_file():
            raise sqlite3.OperationalError("unable to open database file")
        uri = (path / "cache.db").absolute().as_uri()
        disk = diskcache.Disk(str(path))
        try:
            table = TableReader(path, disk, f"{uri}?mode=ro")
            con = table.connection()
        except sqlite3.OperationalError:
            table = TableReader(path, disk, f"{uri}?immutable=1")
            con = table.connection()
        settings = dict(con.execute("SELECT key, value FROM Settings").fetchall())
        options = {k[5:]: v for k, v in settings.items() if str(k).startswith("disk_")}
        table.disk = diskcache.Disk(str(path), **options)
        self.table = table
        self._count = int(settings.get("count") or 0)

    def __len__(self) -> int:
        return self._count

    def close(self) -> None:
        self.table.close()
