"""Claims on requests in flight, shared by every process using one cache directory.

Two processes scoring the same rows into one cache used to pay for most rows twice: each
asked the cache, found nothing (the other's call was still in flight) and sent its own
(759 requests for 400 rows with the second run started 1.5 s after the first). Now a
process claims a request before sending it, and a process that finds it claimed waits
for the answer to reach the cache instead of asking again.

- A claim is a row of ``claims.db`` beside the cache's database (a file of its own, so
  claiming never waits on the cache writer's lock): the request's cache key, the
  claiming process (:data:`OWNER`: host, pid and a random token) and an expiry.
- Claims are taken in bulk, one transaction for the few keys a run is about to send
  (:meth:`Claims.take`), and given up in bulk once their answers are written
  (:meth:`Claims.release`, called from the cache writer's thread).
- A claim is a *lease*: it expires :data:`LEASE_S` seconds after it was taken or last
  renewed, and a thread of the claiming process renews all its claims every
  :data:`RENEW_S` seconds while it lives. A process killed mid-run (``kill -9``) stops
  renewing, so its claims lapse and another process takes them over: nothing is waited
  for forever and nothing is lost.
- A run alone pays one small transaction per few keys sent and never waits: waiting
  (:meth:`Claims.held_elsewhere`, polled every :data:`POLL_S` seconds) happens only for
  keys another live process holds.

A claims file that cannot be used (a read-only directory, a full disk, corruption) only
switches claims off for the run: the run goes on as before, paying for what the other
process is paying for.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable
from pathlib import Path

#: Seconds a claim lives without renewal: how long a killed process's requests are
#: waited for before another process asks them itself.
LEASE_S = 10.0
#: Seconds between renewals of a process's claims (a few per lease, so a renewal late
#: by a busy machine's second or two does not let a live claim lapse).
RENEW_S = 2.5
#: Seconds between two looks of a waiting run at a key another process holds: the cache
#: for its answer, the claims for whether it was given up or lapsed.
POLL_S = 0.1
#: Seconds a claims transaction waits for another process's (they last microseconds).
LOCK_WAIT_S = 10.0
#: This process as a claimant (a forked child makes its own: see :func:`_owner`).
OWNER = ""
#: Keys per statement (SQLite takes 999 parameters at least).
KEYS_PER_QUERY = 900

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims ("
    "key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID"
)
# Who has claimed in this cache, and when last: a run asks the cache again before it sends
# only when another process has been at work meanwhile (see Claims.others_since).
_OWNERS = (
    "CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, seen REAL NOT NULL) WITHOUT ROWID"
)
_SEEN = (
    "INSERT INTO owners(owner, seen) VALUES (?, ?)"
    " ON CONFLICT(owner) DO UPDATE SET seen = excluded.seen"
)
# Take each key that is free, lapsed or already this owner's (then renewed).
_TAKE = (
    "INSERT INTO claims(key, owner, expires) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE"
    " SET owner = excluded.owner, expires = excluded.expires"
    " WHERE claims.owner = excluded.owner OR claims.expires < ?"
)


def _owner() -> str:
    """This process's claimant name, made again after a fork (the parent's is not the
    child's: its claims would be renewed by a thread that does not exist there)."""
    global OWNER, _owner_pid
    if _owner_pid != os.getpid():
        OWNER = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        _owner_pid = os.getpid()
    return OWNER


_owner_pid = -1
_books: dict[str, Claims] = {}
_books_lock = threading.Lock()


def claims_for(directory: Path) -> Claims | None:
    """The claims of the cache at ``directory`` (one object per directory and process);
    ``None`` when they cannot be kept there (the run goes on without)."""
    path = os.path.realpath(directory / "claims.db")
    with _books_lock:
        book = _books.get(path)
        if book is None or book.pid != os.getpid():
            try:
                book = _books[path] = _opened(Path(path))
            except (sqlite3.Error, OSError):
                return None
        return book if book.usable else None


def _opened(path: Path) -> Claims:
    """The claims file at ``path``; a corrupt one is started afresh (a claim is worth
    nothing after the lease it was taken for: there is nothing in it to keep)."""
    try:
        return Claims(path)
    except sqlite3.DatabaseError as exc:
        if "not a database" not in str(exc) and "malformed" not in str(exc):
            raise
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    return Claims(path)


class Claims:
    """The claims file of one cache directory, as this process uses it.

    Examples
    --------
    >>> import tempfile
    >>> claims = Claims(Path(tempfile.mkdtemp()) / "claims.db")
    >>> claims.take(["k1", "k2"])  # nobody else holds them: both ours, none elsewhere
    set()
    >>> claims.held_elsewhere(["k1"])
    set()
    >>> claims.release(["k1", "k2"])
    >>> claims.close()
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = os.getpid()
        self.owner = _owner()
        self.usable = True
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None
        self._held = 0  # claims taken and not yet released (what the renewer renews)
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()
        with self._lock:
            self._connection()

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            con = sqlite3.connect(
                self.path, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False
            )
            try:
                # WAL: readers never wait for a writer; a claim is worthless after a
                # crash of the machine (its lease lapses), so commits need not be synced.
                con.execute("PRAGMA journal_mode = WAL").fetchall()
                con.execute("PRAGMA synchronous = OFF")
                con.execute(_SCHEMA)
                con.execute(_OWNERS)
            except sqlite3.Error:
                con.close()
                raise
            self._con = con
        return self._con

    def _failed(self, exc: BaseException) -> None:
        """Claims off for this process's runs on this cache: they go on as without."""
        self.usable = False
        self._stop.set()

    def take(self, keys: Collection[str]) -> set[str]:
        """Claim ``keys`` for this process in one transaction (free and lapsed ones are
        taken, this process's own renewed); the keys another live process holds."""
        if not keys or not self.usable:
            return set()
        now = time.time()
        expires = now + LEASE_S
        owner = self.owner
        elsewhere: set[str] = set()
        try:
            with self._lock:
                con = self._connection()
                con.execute("BEGIN IMMEDIATE")
                try:
                    con.executemany(_TAKE, [(key, owner, expires, now) for key in keys])
                    con.execute(_SEEN, (owner, now))
                    elsewhere = self._others(con, list(keys))
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise
                self._held += len(keys) - len(elsewhere)
                self._ensure_renewer()
        except sqlite3.Error as exc:
            self._failed(exc)
            return set()
        return elsewhere

    def _others(self, con: sqlite3.Connection, keys: list[str]) -> set[str]:
        """Which of ``keys`` a live claim of another process holds."""
        found: set[str] = set()
        now = time.time()
        for start in range(0, len(keys), KEYS_PER_QUERY):
            chunk = keys[start : start + KEYS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            rows = con.execute(
                f"SELECT key FROM claims WHERE key IN ({marks}) AND owner != ? AND expires >= ?",
                (*chunk, self.owner, now),
            )
            found.update(key for (key,) in rows)
        return found

    def others_since(self, since: float) -> bool:
        """Whether another process has claimed in this cache at or after ``since`` (a
        ``time.time()``), or held claims then: only then can an answer have reached the
        cache from elsewhere after this run looked. (A process holding claims is seen at
        each renewal too; two renewals of slack cover a busy machine's late one.)"""
        if not self.usable:
            return True  # not known: look, as every run did before claims
        try:
            with self._lock:
                row = (
                    self._connection()
                    .execute(
                        "SELECT 1 FROM owners WHERE owner != ? AND seen >= ? LIMIT 1",
                        (self.owner, since - 2 * RENEW_S),
                    )
                    .fetchone()
                )
        except sqlite3.Error as exc:
            self._failed(exc)
            return True  # not known: look, as every run did before claims
        return row is not None

    def held_elsewhere(self, keys: Collection[str]) -> set[str]:
        """Which of ``keys`` another live process still holds (a read: nothing taken)."""
        if not keys or not self.usable:
            return set()
        try:
            with self._lock:
                return self._others(self._connection(), list(keys))
        except sqlite3.Error as exc:
            self._failed(exc)
            return set()

    def release(self, keys: Iterable[str]) -> None:
        """Give up this process's claims on ``keys`` (answered and written, or failed)."""
        keys = list(keys)
        if not keys or not self.usable:
            return
        try:
            with self._lock:
                con = self._connection()
                con.execute("BEGIN IMMEDIATE")
                try:
                    released = 0
                    for start in range(0, len(keys), KEYS_PER_QUERY):
                        chunk = keys[start : start + KEYS_PER_QUERY]
                        marks = ",".join("?" * len(chunk))
                        released += con.execute(
                            f"DELETE FROM claims WHERE key IN ({marks}) AND owner = ?",
                            (*chunk, self.owner),
                        ).rowcount
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise
                self._held = max(0, self._held - released)
        except sqlite3.Error as exc:
            self._failed(exc)

    def _ensure_renewer(self) -> None:
        """Start the renewer thread unless it runs (called holding the lock, as
        :meth:`renew` decides under it that the thread ends: no claim is left unrenewed)."""
        if self._renewer is None:
            self._stop.clear()
            self._renewer = threading.Thread(
                target=self._renew_while_held, name="framekit-claims", daemon=True
            )
            self._renewer.start()

    def _renew_while_held(self) -> None:
        """The renewer thread: renews every :data:`RENEW_S` seconds while claims are
        held, then ends (the next :meth:`take` starts another)."""
        while True:
            self._stop.wait(RENEW_S)
            if not self.renew():
                return

    def renew(self) -> bool:
        """Extend every claim of this process by a lease; whether any is left to renew
        (``False`` ends the renewer thread)."""
        with self._lock:
            if self._held > 0 and self.usable:
                try:
                    con = self._connection()
                    now = time.time()
                    self._held = con.execute(
                        "UPDATE claims SET expires = ? WHERE owner = ?",
                        (now + LEASE_S, self.owner),
                    ).rowcount
                    con.execute(_SEEN, (self.owner, now))
                except sqlite3.Error as exc:
                    self._failed(exc)
            if self._held > 0 and self.usable and not self._stop.is_set():
                return True
            self._renewer = None
            return False

    def close(self) -> None:
        """Stop renewing and close the file (claims still held lapse with their lease)."""
        self._stop.set()
        with self._lock:
            self._renewer = None
            if self._con is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._con.close()
                self._con = None
