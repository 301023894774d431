"""The HTML report in a real browser: headless Chromium renders it at two widths, and its
filter, preset through the page address, hides exactly the rows it should.

Skipped when Chromium is absent (Debian: ``apt-get install chromium``); the structural
tests in test_report_provenance.py always run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from framekit.analysis import write_html_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)"
)


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        # A throwaway profile, no sandbox (tests may run as root), nothing from the network.
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={cwd / 'profile'}",
            "--no-first-run",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def report(tmp_path: Path) -> Path:
    n = 60
    frame = pl.DataFrame(
        {
            "id": [f"row{i:03d}" for i in range(n)],
            "strategy": ["bm25", "dense"] * (n // 2),
            "question": [f"question number {i}" for i in range(n)],
            "rr_score": [None if i % 10 == 0 else (i % 7) / 6 for i in range(n)],
            "rr_label": [
                None if i % 10 == 0 else ("relevant" if i % 7 > 3 else "irrelevant")
                for i in range(n)
            ],
            "rr_passed": [None if i % 10 == 0 else i % 7 > 3 for i in range(n)],
            "rr_explanation": ["because"] * n,
            "rr_error": ["judge timed out" if i % 10 == 0 else None for i in range(n)],
        }
    )
    return write_html_report(frame, tmp_path / "report.html", by="strategy")


def shown_rows(dom: str) -> list[str]:
    rows = re.findall(r'<tr data-evaluator="rr"[^>]*>', dom)
    return [r for r in rows if "hidden" not in r]


def test_filter_from_the_address_hides_the_other_rows(report: Path) -> None:
    everything = chromium("--dump-dom", report.as_uri(), cwd=report.parent)
    assert everything.returncode == 0, everything.stderr
    all_rows = shown_rows(everything.stdout)
    assert len(all_rows) == 6 + 20  # 6 failed rows, then the 20 lowest scored
    assert "26 of 26 rows shown" in everything.stdout  # the script ran

    errors = chromium("--dump-dom", report.as_uri() + "#status=error", cwd=report.parent)
    shown = shown_rows(errors.stdout)
    assert len(shown) == 6 and all('data-status="error"' in r for r in shown)
    assert "6 of 26 rows shown" in errors.stdout

    text = chromium("--dump-dom", report.as_uri() + "#q=row020", cwd=report.parent)
    (row,) = re.findall(r'<tr data-evaluator="rr" [^h>]*>(?:(?!</tr>).)*', text.stdout)
    assert "row020" in row and "1 of 26 rows shown" in text.stdout


@pytest.mark.parametrize("width", [1400, 390])
def test_report_renders_at_desktop_and_phone_width(report: Path, width: int) -> None:
    shot = report.parent / f"report-{width}.png"
    result = chromium(
        f"--window-size={width},2000", f"--screenshot={shot}", report.as_uri(), cwd=report.parent
    )
    assert result.returncode == 0, result.stderr
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == width  # the page laid out at that width


def test_a_filter_value_in_the_address_that_matches_no_option_is_shown_not_dropped(
    report: Path,
) -> None:
    # "failed" was the rows table's word for "below threshold": an old link still says it.
    address = report.as_uri() + "#status=failed&evaluator=nope"
    old = chromium("--dump-dom", address, cwd=report.parent)
    assert old.returncode == 0, old.stderr
    (note,) = re.findall(r'<p id="f-note" class="note"( hidden="")?>([^<]*)</p>', old.stdout)
    assert note == (
        "",
        'The address asks for evaluator "nope" and status "failed", which matches no option: '
        "showing all instead.",
    )
    assert "26 of 26 rows shown" in old.stdout and len(shown_rows(old.stdout)) == 26

    below = chromium("--dump-dom", report.as_uri() + "#status=below+threshold", cwd=report.parent)
    shown = shown_rows(below.stdout)
    assert shown and all('data-status="below threshold"' in r for r in shown)
    assert '<p id="f-note" class="note" hidden="">' in below.stdout  # nothing to say
