"""Shared bits of the benchmark scripts: machine description and writing results."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d"),
    }


def write_results(name: str, figures: dict[str, Any]) -> Path:
    """Print the figures and save them as benchmarks/results/<name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), **figures}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(json.dumps(payload, indent=2))
    return path


def before_tree(commit: str, destination: Path) -> dict[str, str]:
    """The ``framekit`` package of ``commit``, unpacked into ``destination`` (put it first
    on ``PYTHONPATH`` to run the code of before a change beside today's)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "framekit"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
    return {"before_commit": git("rev-parse", commit), "after_commit": git("rev-parse", "HEAD")}
