"""Spans grouped into traces in bounded memory: a large export is spilled to disk by trace.

A trace's spans can be anywhere in an export (exporters flush in batches, services
export separately), so grouping needs them all. Up to ``_IN_MEMORY`` spans are grouped in
memory as they come; past that, spans are appended to ``_PARTITIONS`` temporary files by a
hash of their trace id, and each file is grouped on its own: the memory held is one
partition's spans, not the export's.
"""

from __future__ import annotations

import pickle
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from framekit.traces._assemble import _group
from framekit.traces._read import _Span

_IN_MEMORY = 100_000
_PARTITIONS = 64


def grouped(spans: Iterable[_Span], in_memory: int | None = None) -> Iterator[list[list[_Span]]]:
    """Batches of whole traces; each trace's spans sorted, duplicates dropped.

    Batches come in no particular order: callers sort the rows they build.
    """
    in_memory = _IN_MEMORY if in_memory is None else in_memory
    it = iter(spans)
    buffer: list[_Span] = []
    for span in it:
        buffer.append(span)
        if len(buffer) > in_memory:
            break
    else:
        yield _group(buffer)
        return
    with tempfile.TemporaryDirectory(prefix="framekit-spans-") as tmp:
        paths = [Path(tmp) / f"part-{i:02d}.pickle" for i in range(_PARTITIONS)]
        files: list[IO[bytes]] = [p.open("wb") for p in paths]
        try:
            for span in buffer:
                _spill(span, files)
            buffer.clear()
            for span in it:
                _spill(span, files)
        finally:
            for f in files:
                f.close()
        for path in paths:
            yield _group(list(_load(path)))
            path.unlink()


def _spill(span: _Span, files: list[IO[bytes]]) -> None:
    # crc32, not hash(): stable across processes, so a rerun spills the same way
    part = zlib.crc32(span.trace_id.encode()) % len(files)
    pickle.dump(span, files[part], protocol=pickle.HIGHEST_PROTOCOL)


def _load(path: Path) -> Iterator[_Span]:
    with path.open("rb") as f:
        while True:
            try:
                yield pickle.load(f)
            except EOFError:
                return
