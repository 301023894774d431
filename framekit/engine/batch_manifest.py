"""The record of every submitted batch, kept in the cache directory.

One JSON file per batch under ``<cache>/batches/``: provider, endpoint, model, batch id,
file ids, the cache keys it carries, its spool (the uploaded body, kept until the batch
is collected, for follow-ups) and its state. A run that finds a batch for its keys
resumes it instead of paying again; ``framekit batches`` lists and cancels them.

A manifest is input, not code: caches are shared and copied between jobs, so whoever
can write one can write a manifest. Each is checked against :data:`SCHEMA` (types, known
states and providers), its spool must be ``<local_id>.jsonl`` in this very ``batches/``
directory (after resolving symlinks) and its file a regular file. One that fails is
reported in one line and left as it is: never rewritten, never deleted, its spool never
read, uploaded or deleted, no request made for it. Which endpoint a manifest may be
followed at is the caller's check (:meth:`ManifestStore.open_for`, ``framekit batches``):
the endpoint the user gave, never the one in the file.

Files are replaced atomically (write, then rename), so a kill -9 leaves either the old
record or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args

import orjson

from framekit.engine import notice
from framekit.judges.providers import BatchProtocol

#: Local states: ``uploading`` (spool written, batch not yet created), ``submitted``
#: (created; the provider is working), ``collected`` (every answer read),
#: ``failed`` (rejected as a whole), ``cancelled``.
STATES = ("uploading", "submitted", "collected", "failed", "cancelled")
OPEN_STATES = frozenset({"uploading", "submitted"})
#: A manifest of 100,000 keys is about 7 MB; anything far larger is not one of ours.
MAX_BYTES = 64 * 1024 * 1024

# Ids end up in request paths (``/batches/{id}``): no slash, no query, no leading dot.
_ID = r"^[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,255}$"
_COUNT = {"type": "integer", "minimum": 0}
_TIME = {"type": "number", "minimum": 0}
#: What a manifest file must be. ``keys`` items are checked by :data:`_KEY` instead: a
#: compiled pattern is ten times faster than the validator on 50,000 keys.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["local_id", "provider", "endpoint", "model", "keys", "spool", "state"],
    "properties": {
        "local_id": {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,64}$"},
        "provider": {"enum": list(get_args(BatchProtocol))},
        # http(s), and nothing a terminal would act on (control characters) when printed.
        "endpoint": {
            "type": "string",
            "maxLength": 2048,
            "pattern": r"^https?://[^\x00-\x20\x7f-\x9f]+$",
        },
        "model": {"type": "string", "minLength": 1, "maxLength": 512},
        "keys": {"type": "array"},
        "spool": {"type": "string", "minLength": 1, "maxLength": 4096},
        "state": {"enum": list(STATES)},
        "batch_id": {"type": ["string", "null"], "pattern": _ID},
        "input_file_id": {"type": ["string", "null"], "pattern": _ID},
        "provider_state": {"type": ["string", "null"], "maxLength": 256},
        "completed": _COUNT,
        "failed": _COUNT,
        "count": _COUNT,
        "round": _COUNT,
        "cost_usd": {"type": "number", "minimum": 0},
        "created": _TIME,
        "updated": _TIME,
        "reason": {"type": ["string", "null"]},
        "mode": {"enum": ["json_schema", "tool", "prompt"]},
    },
}
_KEY = re.compile(r"chat:[0-9a-f]{64}")


@dataclass
class Manifest:
    """One batch as framekit submitted it."""

    local_id: str
    provider: str
    endpoint: str
    model: str
    keys: list[str]
    #: The spool's file name, ``<local_id>.jsonl`` beside the manifest (older manifests:
    #: its absolute path). Read it through :meth:`ManifestStore.spool_of`.
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
    """The ``batches/`` directory of a cache.

    ``warn`` is told, in one line each, about every manifest that is not used; by
    default a one-line ``RuntimeWarning``.
    """

    def __init__(self, root: Path, warn: Callable[[str], None] = notice.warn) -> None:
        self.root = Path(root)
        self.warn = warn
        self._warned: set[str] = set()

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
        return Manifest(local, provider, endpoint, model, [], f"{local}.jsonl", round=round_)

    def path_of(self, manifest: Manifest) -> Path:
        return self.root / f"{manifest.local_id}.json"

    def spool_of(self, manifest: Manifest) -> Path:
        """The spool of a manifest: always ``<local_id>.jsonl`` in this directory."""
        return self.root / f"{manifest.local_id}.jsonl"

    def save(self, manifest: Manifest) -> None:
        manifest.updated = time.time()
        path = self.path_of(manifest)
        tmp = path.with_suffix(".json.tmp")
        # Its fields are flat: no deep copy of 50,000 keys (asdict's) to write them; orjson
        # writes 50,000 keys in a tenth of the standard library's time (saved thrice a batch).
        tmp.write_bytes(orjson.dumps({f.name: getattr(manifest, f.name) for f in fields(manifest)}))
        os.replace(tmp, path)

    def all(self) -> Iterator[Manifest]:
        """Every valid manifest; each invalid one is reported (once per store) and skipped."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*.json")):
            manifest = self._read(path)
            if isinstance(manifest, Manifest):
                yield manifest
            else:
                self.reject(path, manifest)

    def reject(self, path: Path, problem: str) -> None:
        """Say once that the manifest at ``path`` is not used, and why."""
        if str(path) not in self._warned:
            self._warned.add(str(path))
            self.warn(f"batch manifest {printable(str(path))} ignored (left as it is): {problem}")

    def _read(self, path: Path) -> Manifest | str:
        """The manifest in ``path``, or what is wrong with it. Reasons never quote the
        file's values: a manifest may be a link to a file the user never meant to show."""
        try:
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                return "not a regular file (a symbolic link?)"
            if info.st_size > MAX_BYTES:
                return f"larger than {MAX_BYTES >> 20} MB"
            data = json.loads(path.read_bytes(), parse_constant=_no_constant)
        except OSError as exc:
            return f"unreadable ({type(exc).__name__})"
        except UnicodeDecodeError:
            return "not UTF-8 text"
        except (ValueError, RecursionError) as exc:  # the parser's position, not the text
            return f"not a JSON document ({exc})"
        problem = _schema_problem(data)
        if problem is not None:
            return problem
        if data["local_id"] != path.stem:
            return "local_id: differs from the file name"
        if not all(isinstance(k, str) and _KEY.fullmatch(k) for k in data["keys"]):
            return "keys: not all framekit cache keys"
        recorded = Path(data["spool"])
        spool = recorded if recorded.is_absolute() else self.root / recorded
        own = os.path.join(os.path.realpath(self.root), f"{data['local_id']}.jsonl")
        if os.path.realpath(spool) != own:
            return "spool: not <local_id>.jsonl beside the manifest (symlinks resolved)"
        return Manifest(**data)

    def open_for(
        self, provider: str, endpoint: str, keys: set[str] | dict[str, Any]
    ) -> list[Manifest]:
        """Unfinished batches at this endpoint that carry any of ``keys``.

        One at another endpoint that carries these keys (a cache key includes the
        endpoint, so a batch of ours cannot be elsewhere) is reported and left alone.
        """
        mine = []
        for m in self.all():
            if m.state not in OPEN_STATES or not any(k in keys for k in m.keys):
                continue
            if (m.provider, m.endpoint) != (provider, endpoint):
                self.reject(
                    self.path_of(m),
                    f"it names {m.provider} at {m.endpoint}, not this judge's endpoint",
                )
                continue
            mine.append(m)
        return mine

    def find(self, batch_id: str) -> Manifest | None:
        """A manifest by provider batch id or local id."""
        return next((m for m in self.all() if batch_id in (m.batch_id, m.local_id)), None)

    def drop_spool(self, manifest: Manifest) -> None:
        with contextlib.suppress(OSError):
            self.spool_of(manifest).unlink()

    def discard(self, manifest: Manifest) -> None:
        """Remove a batch that never reached the provider: its manifest and its spool."""
        self.drop_spool(manifest)
        with contextlib.suppress(OSError):
            self.path_of(manifest).unlink()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _schema_problem(data: Any) -> str | None:
    """The first way ``data`` fails :data:`SCHEMA`, naming the field, not its value."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the record"
    kind, expected = error.validator, error.validator_value
    if kind == "type":
        types = expected if isinstance(expected, list) else [expected]
        return f"{where}: not of type {' or '.join(types)}"
    if kind == "enum":
        return f"{where}: not one of {', '.join(map(str, expected))}"
    if kind == "required":
        return f"{where}: {error.message}"  # names the missing field (from the schema)
    if kind == "additionalProperties":
        return f"{where}: fields framekit does not write"
    return f"{where}: malformed ({kind})"


@functools.cache
def _validator() -> Any:
    import jsonschema  # only where manifests are read (about 0.1 s to import)

    return jsonschema.Draft202012Validator(SCHEMA)


def printable(text: str) -> str:
    """``text`` with anything a terminal would act on (escape sequences) shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text)
