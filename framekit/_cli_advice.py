"""Error messages said in the command line's words.

The library explains a missing field as ``mapping={'input': <column>}`` and a non-Parquet
input with polars code; a shell user needs ``--map input=<column>`` and ``--sql``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_MAPPING = re.compile(r"mapping=\{'(\w+)': <column>\}")
_NOT_PARQUET = re.compile(r"'([^']+)' is not a Parquet file")


def advise(message: str) -> str:
    """``message`` with Python-syntax advice replaced by the equivalent options.

    Examples
    --------
    >>> advise("map it with mapping={'input': <column>}. Available columns: 'q'")
    "map it with --map input=<column>. Available columns: 'q'"
    """
    message = _MAPPING.sub(lambda m: f"--map {m.group(1)}=<column>", message)
    found = _NOT_PARQUET.search(message)
    if found:
        path = found.group(1)
        if os.path.isabs(path) and Path(path).is_relative_to(Path.cwd()):
            path = os.path.relpath(path)  # as the user typed it, most likely
        reader = "read_json_auto" if path.endswith((".json", ".jsonl", ".ndjson")) else None
        query = f"select * from {reader}('{path}')" if reader else f"select * from '{path}'"
        message = re.sub(r"convert it first, e\.g\. .*$", "", message).rstrip("; ")
        message += f'; score it through DuckDB instead: framekit evaluate --sql "{query}" ...'
    return message
