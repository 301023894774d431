"""The record of every submitted batch, kept in the cache directory.

One JSON file per batch under ``<cache>/batches/``: provider, endpoint, model, batch id,
file ids, the cache keys it carries, its spool (the uploaded body, kept until the batch
is collected, for follow-ups) and its state. A run that finds a batch for its keys
resumes it instead of paying again; ``framekit batches`` lists and cancels them.

Files are replaced atomically (write, then rename), so a kill -9 leaves either the old
record or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Local states: ``uploading`` (spool written, batch not yet created), ``submitted``
#: (created; the provider is working), ``collected`` (every answer read),
#: ``failed`` (rejected as a whole), ``cancelled``.
OPEN_STATES = frozenset({"uploading", "submitted"})


@dataclass
class Manifest:
    """One batch as framekit submitted it."""

    local_id: str
    provider: str
    endpoint: str
    model: str
    keys: list[str]
    spool: str
    state: str = "uploading"
    batch_id: str | None = None
    input_file_id: str | None = None
    provider_state: str | None = None
    completed: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    round: int = 0
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    reason: str | None = None
    #: Requests carried; kept when ``keys`` is emptied after collection (every run
    #: reads the open manifests, so finished ones should be small).
    count: int = 0
    #: The structured-output mode the lines were written in (json_schema, tool, prompt).
    mode: str = "json_schema"

    @property
    def requests(self) -> int:
        return self.count or len(self.keys)


class ManifestStore:
    """The ``batches/`` directory of a cache."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def of_cache(cls, cache_path: Path | None) -> ManifestStore:
        """Beside the cache's database; without a cache, in a per-user directory."""
        if cache_path is None or str(cache_path) == os.devnull:
            from framekit.engine.cache import default_cache_dir

            return cls(default_cache_dir() / "batches")
        return cls(Path(cache_path) / "batches")

    def new(self, provider: str, endpoint: str, model: str, round_: int = 0) -> Manifest:
        self.root.mkdir(parents=True, exist_ok=True)
        local = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        spool = str(self.root / f"{local}.jsonl")
        return Manifest(local, provider, endpoint, model, [], spool, round=round_)

    def save(self, manifest: Manifest) -> None:
        manifest.updated = time.time()
        path = self.root / f"{manifest.local_id}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(manifest)))
        os.replace(tmp, path)

    def all(self) -> Iterator[Manifest]:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*.json")):
            try:
                data: dict[str, Any] = json.loads(path.read_text())
                yield Manifest(**data)
            except (OSError, ValueError, TypeError):
                continue  # a foreign or damaged file is not ours to act on

    def open_for(
        self, provider: str, endpoint: str, keys: set[str] | dict[str, Any]
    ) -> list[Manifest]:
        """Unfinished batches at this endpoint that carry any of ``keys``."""
        return [
            m
            for m in self.all()
            if m.state in OPEN_STATES
            and m.provider == provider
            and m.endpoint == endpoint
            and any(k in keys for k in m.keys)
        ]

    def find(self, batch_id: str) -> Manifest | None:
        """A manifest by provider batch id or local id."""
        return next((m for m in self.all() if batch_id in (m.batch_id, m.local_id)), None)

    def drop_spool(self, manifest: Manifest) -> None:
        with contextlib.suppress(OSError):
            Path(manifest.spool).unlink()
