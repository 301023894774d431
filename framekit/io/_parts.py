"""The parts directory beside the destination: finished slices, manifest, lock, resume.

``.<name>.framekit-parts/`` holds one ``part-00000.parquet`` per finished slice (its
result columns only, written under a temporary name and renamed when complete) and a
``manifest.json`` saying what the parts belong to. A lock keeps two runs from writing
the same destination at once.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from framekit._errors import InputError

_MANIFEST_FORMAT = 1


class _Parts:
    """The hidden directory of finished slices, its manifest and its lock."""

    def __init__(self, destination: Path) -> None:
        self.destination = destination
        self.dir = destination.with_name(f".{destination.name}.framekit-parts")
        self._lock: Any = None

    def open(self, manifest: dict[str, Any]) -> set[int]:
        """Lock the directory, start over if the manifest differs; return finished slices."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._acquire()
        path = self.dir / "manifest.json"
        try:
            previous = json.loads(path.read_text())
        except (OSError, ValueError):
            previous = None
        if previous != manifest:
            for child in self.dir.iterdir():
                if child.name != ".lock":
                    child.unlink()
            tmp = self.dir / "manifest.json.tmp"
            tmp.write_text(json.dumps(manifest))
            os.replace(tmp, path)
            return set()
        done = set()
        for i, (_, length) in enumerate(manifest["slices"]):
            part = self.part(i)
            if part.exists() and _parquet_rows(part) == length:
                done.add(i)
        return done

    def _acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock, runs must not overlap
            return
        self._lock = open(self.dir / ".lock", "a")  # noqa: SIM115 (held for the whole run)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise InputError(
                f"another framekit run is writing {str(self.destination)!r}; wait for it to finish"
            ) from None

    def part(self, index: int) -> Path:
        return self.dir / f"part-{index:05d}.parquet"

    def write(self, index: int, results: pl.DataFrame) -> None:
        import pyarrow.parquet as pq

        tmp = self.dir / f"part-{index:05d}.parquet.tmp"
        # Written by pyarrow as plain large_string/double/bool, like every other part, so
        # that the assembly appends columns of one type (polars' string views are not).
        try:
            pq.write_table(results.to_arrow(compat_level=pl.CompatLevel.oldest()), tmp)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: give the space back
            raise
        os.replace(tmp, self.part(index))

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def close(self, remove_if_empty: bool = False) -> None:
        """Release the lock; with ``remove_if_empty``, first remove the directory when it
        holds no finished slice (it would only say that a run once started)."""
        if remove_if_empty and self.dir.is_dir() and not any(self.dir.glob("part-*.parquet")):
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(path).num_rows)
    except Exception:
        return -1
